"""A small HTTP/2 client for the tests, over Python's ``h2`` (and its ``hyperframe`` and ``hpack``):
well-behaved requests on many streams, and the raw frames of hostile ones (header blocks h2 would
refuse to send, CONTINUATION floods, resets, pings, settings), over plain TCP or TLS with ALPN."""

import socket
import ssl
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import hpack
import hyperframe.frame as hf

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class StreamResult:
    def __init__(self):
        self.headers = None
        self.body = bytearray()
        self.ended = False
        self.reset = None  # error code of a RST_STREAM

    @property
    def status(self):
        for n, v in self.headers or []:
            if n == b":status":
                return int(v)
        return None

    def header(self, name):
        name = name.encode() if isinstance(name, str) else name
        for n, v in self.headers or []:
            if n == name:
                return v.decode("latin-1")
        return None

    def __repr__(self):
        return f"<stream status={self.status} body={len(self.body)} ended={self.ended} reset={self.reset}>"


class H2Client:
    """One HTTP/2 connection. ``tls_ca`` (a CA file): TLS with ALPN h2 to ``server_name``."""

    def __init__(self, port, timeout=10.0, tls_ca=None, server_name="localhost", validate=True,
                 initial_window=None, receive_buffer=None):
        if receive_buffer is None:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        else:  # set before connecting, so that the window the kernel offers is small from the start
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.sock.settimeout(timeout)
            self.sock.connect(("127.0.0.1", port))
        if tls_ca is not None:
            ctx = ssl.create_default_context(cafile=str(tls_ca))
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(self.sock, server_hostname=server_name)
            assert self.sock.selected_alpn_protocol() == "h2", self.sock.selected_alpn_protocol()
        config = h2.config.H2Configuration(client_side=True, validate_outbound_headers=validate,
                                           normalize_outbound_headers=validate, validate_inbound_headers=False)
        self.conn = h2.connection.H2Connection(config=config)
        if initial_window is not None:
            self.conn.local_settings = h2.settings.Settings(client=True, initial_values={
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: initial_window})
        self.conn.initiate_connection()
        self.streams = {}
        self.goaway = None  # error code
        self.closed = False
        self.auto_window = True
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_raw(self, data):
        self.sock.sendall(data)

    def request(self, method, authority, path, headers=(), body=None, scheme="http", end=True):
        sid = self.conn.get_next_available_stream_id()
        fields = [(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)]
        fields += list(headers)
        self.streams[sid] = StreamResult()
        self.conn.send_headers(sid, fields, end_stream=(body is None and end))
        if body is not None:
            self.conn.send_data(sid, body, end_stream=end)
        self.flush()
        return sid

    def connect(self, authority):
        sid = self.conn.get_next_available_stream_id()
        self.streams[sid] = StreamResult()
        self.conn.send_headers(sid, [(":method", "CONNECT"), (":authority", authority)])
        self.flush()
        return sid

    def raw_headers(self, sid, fields, end_stream=True):
        """A HEADERS frame with ``fields`` encoded as given (no checks, no lower-casing)."""
        self.streams.setdefault(sid, StreamResult())
        block = hpack.Encoder().encode([(n.encode() if isinstance(n, str) else n,
                                         v.encode() if isinstance(v, str) else v) for n, v in fields])
        f = hf.HeadersFrame(sid)
        f.data = block
        f.flags.add("END_HEADERS")
        if end_stream:
            f.flags.add("END_STREAM")
        self.send_raw(f.serialize())

    def pump(self, until, timeout=10.0):
        """Reads and handles frames until ``until()`` is true (or the connection ends); returns
        whether it became true."""
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return until()
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return until()
            except (ConnectionResetError, ssl.SSLError, OSError):
                data = b""
            if not data:
                self.closed = True
                return until()
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.closed = True
                return until()
            for e in events:
                self.handle(e)
            try:
                self.flush()
            except OSError:
                self.closed = True
        return True

    def handle(self, e):
        sid = getattr(e, "stream_id", None)
        s = self.streams.get(sid)
        if isinstance(e, h2.events.ResponseReceived) and s is not None:
            s.headers = e.headers
        elif isinstance(e, h2.events.DataReceived) and s is not None:
            s.body += e.data
            if self.auto_window:
                self.conn.acknowledge_received_data(e.flow_controlled_length, sid)
        elif isinstance(e, h2.events.StreamEnded) and s is not None:
            s.ended = True
        elif isinstance(e, h2.events.StreamReset) and s is not None:
            s.reset = e.error_code
        elif isinstance(e, h2.events.ConnectionTerminated):
            self.goaway = e.error_code

    def wait(self, sid, timeout=10.0):
        s = self.streams[sid]
        self.pump(lambda: s.ended or s.reset is not None, timeout)
        return s

    def wait_closed(self, timeout=10.0):
        """Until the server ends the connection (GOAWAY and EOF, or EOF)."""
        self.pump(lambda: self.closed, timeout)
        return self.closed

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def frame(f):
    return f.serialize()


class RawH2:
    """Frames written and read by hand, for what no well-behaved client library sends: the
    server's answers are decoded with hyperframe and hpack, whatever stream they are on."""

    def __init__(self, port, timeout=10.0, initial_window=1 << 24):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.decoder.max_allowed_table_size = 65536
        self.buf = b""
        self.streams = {}
        self.goaway = None
        self.closed = False
        self.server_settings = {}
        self.frames_seen = []  # the type of every frame read, in order
        settings = hf.SettingsFrame(0)
        settings.settings = {hf.SettingsFrame.INITIAL_WINDOW_SIZE: initial_window}
        self.send(PREFACE + settings.serialize())
        self.auto_window = initial_window > 0
        if self.auto_window:
            win = hf.WindowUpdateFrame(0)
            win.window_increment = (1 << 30)
            self.send(win.serialize())
        # The server's windows for what this client sends: its SETTINGS and WINDOW_UPDATEs.
        self.send_connection_window = 65535
        self.send_initial = 65535
        self.send_stream_windows = {}

    def send(self, data):
        self.sock.sendall(data)

    def headers(self, sid, fields, end_stream=True, encoder=None):
        self.streams.setdefault(sid, StreamResult())
        block = (encoder or self.encoder).encode([(n.encode() if isinstance(n, str) else n,
                                                  v.encode() if isinstance(v, str) else v) for n, v in fields])
        f = hf.HeadersFrame(sid)
        f.data = block
        f.flags.add("END_HEADERS")
        if end_stream:
            f.flags.add("END_STREAM")
        self.send(f.serialize())

    def window(self, sid):
        """What this client may still send on ``sid`` (the stream's and the connection's window)."""
        return min(self.send_connection_window, self.send_stream_windows.get(sid, self.send_initial))

    def data(self, sid, payload, end_stream=True):
        self.send_connection_window -= len(payload)
        self.send_stream_windows[sid] = self.send_stream_windows.get(sid, self.send_initial) - len(payload)
        f = hf.DataFrame(sid)
        f.data = payload
        if end_stream:
            f.flags.add("END_STREAM")
        self.send(f.serialize())

    def rst(self, sid, code=0x8):
        f = hf.RstStreamFrame(sid)
        f.error_code = code
        self.send(f.serialize())

    def _frames(self):
        while len(self.buf) >= 9:
            f, length = hf.Frame.parse_frame_header(memoryview(self.buf[:9]))
            if len(self.buf) < 9 + length:
                return
            f.parse_body(memoryview(self.buf[9:9 + length]))
            self.buf = self.buf[9 + length:]
            yield f

    def _handle(self, f):
        self.frames_seen.append(type(f).__name__)
        s = (self.streams.setdefault(f.stream_id, StreamResult())
             if f.stream_id and not isinstance(f, hf.WindowUpdateFrame) else None)
        if isinstance(f, hf.HeadersFrame):
            fields = self.decoder.decode(bytes(f.data), raw=True)
            if s.headers is None:
                s.headers = fields
            if "END_STREAM" in f.flags:
                s.ended = True
        elif isinstance(f, hf.DataFrame):
            s.body += f.data
            if "END_STREAM" in f.flags:
                s.ended = True
            if f.flow_controlled_length and self.auto_window:
                for sid in (0, f.stream_id):
                    w = hf.WindowUpdateFrame(sid)
                    w.window_increment = f.flow_controlled_length
                    try:
                        self.send(w.serialize())
                    except OSError:
                        pass
        elif isinstance(f, hf.RstStreamFrame):
            s.reset = f.error_code
        elif isinstance(f, hf.WindowUpdateFrame):
            if f.stream_id == 0:
                self.send_connection_window += f.window_increment
            else:
                self.send_stream_windows[f.stream_id] = (self.send_stream_windows.get(f.stream_id, self.send_initial)
                                                         + f.window_increment)
        elif isinstance(f, hf.GoAwayFrame):
            self.goaway = f.error_code
        elif isinstance(f, hf.SettingsFrame) and "ACK" not in f.flags:
            self.server_settings.update(f.settings)
            if hf.SettingsFrame.INITIAL_WINDOW_SIZE in f.settings:
                self.send_initial = f.settings[hf.SettingsFrame.INITIAL_WINDOW_SIZE]
            ack = hf.SettingsFrame(0)
            ack.flags.add("ACK")
            try:
                self.send(ack.serialize())
            except OSError:
                pass

    def pump(self, until, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return until()
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return until()
            except OSError:
                data = b""
            if not data:
                self.closed = True
                return until()
            self.buf += data
            for f in self._frames():
                self._handle(f)
        return True

    def wait(self, sid, timeout=10.0):
        s = self.streams.setdefault(sid, StreamResult())
        self.pump(lambda: s.ended or s.reset is not None or self.goaway not in (None, 0), timeout)
        return s

    def wait_closed(self, timeout=10.0):
        self.pump(lambda: self.closed, timeout)
        return self.closed

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
