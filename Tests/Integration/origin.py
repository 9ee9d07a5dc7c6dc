#!/usr/bin/env python3
"""A scriptable HTTP/1.1 origin server for Larder's integration tests.

Run as ``python3 origin.py --port 0 --log FILE``.  Once listening it prints
``origin listening on 127.0.0.1:PORT (gates on 127.0.0.1:PORT)`` on stdout,
then appends one JSON line per received request to FILE (written after the
request body has been read and before the response is sent, so a client that
has its response can read the log line).

The behaviour is chosen by the request path:

  /bytes/N            N deterministic bytes (see pattern()), Content-Length
  /chunked/N          the same bytes, chunked, with chunks of varying sizes
  /close/N            HTTP/1.0 response without length; the connection closes
  /echo               JSON of what was received (see record())
  /status/NNN         status NNN, body "status NNN\\n" (none for 1xx/204/304)
  /early-hints        103 Early Hints, then 200 "final body\\n"
  /slow/N?seconds=S   N bytes with Content-Length, spread over S seconds
  /reset/N            promise N bytes, send N/10, close (?rst=1: RST,
                      ?chunked=1: chunked framing, never the last chunk)
  /hang               read the request, never answer (until the peer closes)
  /drop               read the request, close without any answer
  /upgrade            101 Switching Protocols, then echo bytes until EOF,
                      then send "[eof after N bytes]" and close
  /headers?a=b&c=d    200 with the given response fields
  /hop                200 with hop-by-hop fields in the response
  /bighead/N          200 with a response head of more than N bytes
  /res/NAME           a resource scripted by the test: the JSON file res-NAME.json
                      next to the log ({"status", "headers": [[n, v]...], "body",
                      "conditional": answer 304 to matching If-None-Match /
                      If-Modified-Since, "chunked": chunked framing, "body_bytes":
                      N pattern bytes instead of "body", "reset_after": close
                      after that many body bytes, "pause_after" and "pause": send
                      that many body bytes, sleep that many seconds, send the
                      rest, or with "pause_until": NAME instead of "pause", wait
                      for gate NAME (see Gates), "close_delimited": no length, the
                      connection closes after "body", "hold_at": [[OFFSET, NAME], ...]:
                      wait for gate NAME once OFFSET body bytes are sent}, "rate":
                      send the body at that many bytes a second, "ranges": answer one
                      `bytes` Range with a 206 unless If-Range names another ETag,
                      "ignore_if_range": send the range whatever If-Range says);
                      HEAD gets the head only

Query parameters understood everywhere: ``delay=S`` (sleep before answering), ``hold=NAME``
(wait before answering until the test opens gate NAME; see Gates).
With ``--report-sleeps`` (and ``--notify``) every sleep of a slow peer's pace is reported on
stdout as ``slept SECONDS WHERE``, for the suite's report of fixed waits.
Keep-alive, pipelining, Content-Length and chunked request bodies and
``Expect: 100-continue`` are handled.  The process exits on SIGTERM/SIGINT
and when its parent process goes away.
"""

import argparse
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http import HTTPStatus

from registry_origin import byte_range

# ---------------------------------------------------------------------------
# Deterministic body pattern, shared with the tests (conftest imports it).

BLOCK_LEN = 65521  # prime, so misplaced or duplicated slices show up in hashes


def _make_block():
    out = bytearray()
    seed = b"larder-origin-pattern"
    counter = 0
    while len(out) < BLOCK_LEN:
        out += hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        counter += 1
    return bytes(out[:BLOCK_LEN])


BLOCK = _make_block()
_WINDOW = 256 * 1024
# BLOCK repeated so that any window of _WINDOW bytes at any phase is a slice.
_BIG = BLOCK * ((_WINDOW // BLOCK_LEN) + 2)


def pattern_slice(offset, length):
    """Bytes [offset, offset+length) of the infinite pattern; length <= 256 KiB."""
    assert length <= _WINDOW
    start = offset % BLOCK_LEN
    return _BIG[start:start + length]


def pattern_chunks(total, piece=_WINDOW):
    """Yield the first ``total`` pattern bytes in pieces of at most ``piece``."""
    offset = 0
    while offset < total:
        n = min(piece, total - offset)
        yield pattern_slice(offset, n)
        offset += n


def unique_body(n, size):
    """SIZE bytes derived from N alone, so a body served for the wrong URL or cut short shows."""
    seed = hashlib.sha256(str(n).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def pattern(total):
    return b"".join(pattern_chunks(total))


def pattern_sha256(total):
    h = hashlib.sha256()
    for c in pattern_chunks(total):
        h.update(c)
    return h.hexdigest()


# ---------------------------------------------------------------------------

MAX_HEAD = 1024 * 1024
IO_TIMEOUT = 30.0
HANG_LIMIT = 30.0


class BadRequest(Exception):
    pass


class PeerGone(Exception):
    pass


class Conn:
    """Buffered reader over a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.eof = False

    def _fill(self):
        if self.eof:
            return False
        try:
            data = self.sock.recv(256 * 1024)
        except (ConnectionResetError, socket.timeout, OSError):
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_head(self):
        """Bytes of one message head (without the final CRLFCRLF) or None at clean EOF."""
        # Tolerate empty lines before a request line (RFC 9112 §2.2).
        while True:
            while self.buf.startswith(b"\r\n"):
                del self.buf[:2]
            idx = self.buf.find(b"\r\n\r\n")
            if idx >= 0:
                head = bytes(self.buf[:idx])
                del self.buf[:idx + 4]
                return head
            if len(self.buf) > MAX_HEAD:
                raise BadRequest("head too large")
            if not self._fill():
                if self.buf.strip():
                    raise PeerGone("EOF inside a head")
                return None

    def readline(self):
        while True:
            idx = self.buf.find(b"\r\n")
            if idx >= 0:
                line = bytes(self.buf[:idx])
                del self.buf[:idx + 2]
                return line
            if len(self.buf) > MAX_HEAD:
                raise BadRequest("line too long")
            if not self._fill():
                raise PeerGone("EOF inside a line")

    def read_exact_into(self, n, sink):
        """Read exactly n bytes, handing them to sink(bytes) piecewise."""
        while n > 0:
            if not self.buf and not self._fill():
                raise PeerGone("EOF inside a body")
            take = min(n, len(self.buf))
            sink(bytes(self.buf[:take]))
            del self.buf[:take]
            n -= take

    def read_until_eof(self, sink):
        while True:
            if self.buf:
                sink(bytes(self.buf))
                self.buf.clear()
            if not self._fill():
                return


class BodySink:
    KEEP = 64 * 1024

    def __init__(self):
        self.h = hashlib.sha256()
        self.length = 0
        self.kept = bytearray()

    def __call__(self, data):
        self.h.update(data)
        self.length += len(data)
        if len(self.kept) <= self.KEEP:
            self.kept += data[: self.KEEP + 1 - len(self.kept)]


REPORT_SLEEPS = False
_NOTE_LOCK = threading.Lock()


class Gates:
    """Named gates, shut until the test opens them: a request with ``hold=NAME`` waits at gate NAME
    before it is answered, a scripted resource with ``"pause_until": NAME`` (or ``"hold_at"``) in its
    body. The test sets a gate on a port of its own (``gates on 127.0.0.1:PORT`` on the first line;
    connections there are neither counted nor logged), a line ``NAME open`` (every request waiting
    at it and every later one goes on), ``NAME N`` (the next N only, then it is shut again) or
    ``NAME shut``, answered ``ok``. A wait ends after HANG_LIMIT seconds whatever happens, so a
    test that never opens its gate cannot hang."""

    def __init__(self):
        self.cond = threading.Condition()
        self.passes = {}  # name -> how many may go on (float("inf"): open)

    def wait(self, name):
        with self.cond:
            if self.cond.wait_for(lambda: self.passes.get(name, 0) > 0, HANG_LIMIT):
                self.passes[name] -= 1

    def set(self, name, passes):
        with self.cond:
            self.passes[name] = passes
            self.cond.notify_all()

    def serve(self, srv):
        """Takes the test's gate lines on the listening socket ``srv``."""
        while True:
            try:
                sock, _ = srv.accept()
            except OSError:
                return
            with sock:
                try:
                    sock.settimeout(IO_TIMEOUT)
                    line = b""
                    while not line.endswith(b"\n"):
                        data = sock.recv(256)
                        if not data:
                            break
                        line += data
                    name, how = line.decode().split()
                    self.set(name, {"open": float("inf"), "shut": 0}.get(how) if how in ("open", "shut")
                             else int(how))
                    sock.sendall(b"ok\n")
                except (OSError, ValueError):
                    pass


def note(line):
    """One line on stdout for the test (--notify), whole even when threads write at once."""
    with _NOTE_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def pace(seconds, where):
    """Sleeps ``seconds``: the pace of a slow origin (reported with --report-sleeps)."""
    began = time.monotonic()
    time.sleep(seconds)
    if REPORT_SLEEPS:
        note(f"slept {time.monotonic() - began:.6f} origin.py:{where}")


class Origin:
    def __init__(self, log_path, quiet=False, notify=False):
        self.log_path = log_path
        self.quiet = quiet
        self.notify = notify
        self.log_lock = threading.Lock()
        self.gates = Gates()
        self.conn_counter = 0
        self.counter_lock = threading.Lock()

    def now(self):
        """The time, moved like the proxy's when the test moves its clock (the TestClock writes
        ``clock.offset`` next to the log: 8 bytes, little-endian nanoseconds)."""
        try:
            with open(os.path.join(os.path.dirname(os.path.abspath(self.log_path)), "clock.offset"), "rb") as f:
                data = f.read(8)
        except OSError:
            return time.time()
        return time.time() + (int.from_bytes(data, "little", signed=True) / 1e9 if len(data) == 8 else 0)

    def log(self, record):
        if self.quiet:
            return
        line = json.dumps(record, sort_keys=True) + "\n"
        with self.log_lock:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
            if self.notify:
                # After the line is in the file: the test's waits wake and read it.
                note("logged")

    # -- connection handling ------------------------------------------------

    def handle_connection(self, sock, peer):
        with self.counter_lock:
            self.conn_counter += 1
            conn_id = self.conn_counter
        sock.settimeout(IO_TIMEOUT)
        conn = Conn(sock)
        seq = 0
        how = "done"
        try:
            while True:
                try:
                    head = conn.read_head()
                except BadRequest:
                    send_simple(sock, 400, b"bad request\n", close=True)
                    return
                if head is None:
                    return
                seq += 1
                keep = self.handle_request(sock, conn, head, peer, conn_id, seq)
                if not keep:
                    return
        except (PeerGone, BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
            how = "peer-gone"
            return
        finally:
            try:
                sock.close()
            except OSError:
                pass
            if self.notify:
                note(f"ended {conn_id} {how}")

    def handle_request(self, sock, conn, head, peer, conn_id, seq):
        lines = head.split(b"\r\n")
        try:
            method, target, version = lines[0].decode("latin-1").split(" ", 2)
        except ValueError:
            send_simple(sock, 400, b"bad request line\n", close=True)
            return False
        headers = []
        for raw in lines[1:]:
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep:
                send_simple(sock, 400, b"bad header line\n", close=True)
                return False
            headers.append([name, value.strip(" \t")])

        def get(name):
            vals = [v for n, v in headers if n.lower() == name.lower()]
            return vals

        # Path and query: accept absolute-form too.
        path_part = target
        if "://" in target:
            split = urllib.parse.urlsplit(target)
            path_part = split.path or "/"
            if split.query:
                path_part += "?" + split.query
        path, _, query = path_part.partition("?")
        params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        param_list = urllib.parse.parse_qsl(query, keep_blank_values=True)

        conn_tokens = set()
        for v in get("Connection"):
            conn_tokens.update(t.strip().lower() for t in v.split(","))
        if version == "HTTP/1.0":
            keep_alive = "keep-alive" in conn_tokens
        else:
            keep_alive = "close" not in conn_tokens

        # Request body.
        sink = BodySink()
        te = ",".join(get("Transfer-Encoding")).lower()
        cls = get("Content-Length")
        trailers = []
        expects_body = bool(te) or (cls and cls[0].strip() not in ("", "0"))
        if any(v.lower() == "100-continue" for v in get("Expect")) and expects_body:
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        if te:
            if te.split(",")[-1].strip() != "chunked":
                send_simple(sock, 400, b"unsupported transfer-encoding\n", close=True)
                return False
            while True:
                size_line = conn.readline()
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        t = conn.readline()
                        if not t:
                            break
                        n, _, v = t.decode("latin-1").partition(":")
                        trailers.append([n, v.strip()])
                    break
                conn.read_exact_into(size, sink)
                if conn.readline() != b"":
                    raise BadRequest("missing CRLF after chunk")
        elif cls:
            try:
                n = int(cls[0].strip())
            except ValueError:
                send_simple(sock, 400, b"bad content-length\n", close=True)
                return False
            conn.read_exact_into(n, sink)

        record = {
            "method": method,
            "target": target,
            "path": path,
            "query": query,
            "version": version,
            "headers": headers,
            "trailers": trailers,
            "body_len": sink.length,
            "body_sha256": sink.h.hexdigest(),
            "body": bytes(sink.kept).decode("latin-1") if sink.length <= BodySink.KEEP else None,
            "peer_port": peer[1],
            "conn": conn_id,
            "seq": seq,
            "time": time.time(),
        }
        self.log(record)

        delay = float(params.get("delay", "0") or 0)
        if delay > 0:
            pace(min(delay, 30.0), "delay")
        if params.get("hold"):
            self.gates.wait(params["hold"])

        head_only = method == "HEAD"
        return route(self, sock, conn, method, path, params, param_list, record, keep_alive, head_only, headers)


def reason_for(code):
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Custom Status"


def build_head(code, fields, version="HTTP/1.1", reason=None):
    out = [f"{version} {code} {reason if reason is not None else reason_for(code)}"]
    for n, v in fields:
        out.append(f"{n}: {v}")
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")


def send_simple(sock, code, body, close=False, fields=(), head_only=False, ctype="text/plain"):
    f = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
    f.extend(fields)
    if close:
        f.append(("Connection", "close"))
    sock.sendall(build_head(code, f) + (b"" if head_only else body))


def conn_fields(keep_alive):
    return [] if keep_alive else [("Connection", "close")]


def _header(headers, name):
    for n, v in headers:
        if n.lower() == name:
            return v
    return None


def scripted_resource(origin, sock, name, keep_alive, head_only, req_headers):
    state_path = os.path.join(os.path.dirname(os.path.abspath(origin.log_path)), f"res-{name}.json")
    try:
        with open(state_path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError):
        send_simple(sock, 404, b"no such scripted resource\n", close=not keep_alive, head_only=head_only)
        return keep_alive
    status = int(spec.get("status", 200))
    fields = [(n, v) for n, v in spec.get("headers", [])]
    if not any(n.lower() == "date" for n, _ in fields):
        fields.append(("Date", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(origin.now()))))
    if "body_bytes" in spec:
        total = int(spec["body_bytes"])
    else:
        text = spec.get("body", "").encode()
        total = len(text)

    def pieces(start, end):
        """The body's bytes [start, end), in pieces (pattern bodies are never held whole)."""
        if "body_bytes" not in spec:
            if start < end:
                yield text[start:end]
            return
        while start < end:
            n = min(_WINDOW, end - start)
            yield pattern_slice(start, n)
            start += n

    rate = spec.get("rate")
    began = time.monotonic()

    def send_body(start, end, lead=b""):
        """Sends the body's bytes [start, end); ``lead`` (the head) goes in the same write as the
        first of them: a small head in a write of its own would wait for the proxy's delayed ACK
        (Nagle) before the body could follow, 40 ms for every response on a kept-alive connection."""
        sent_here = 0
        for piece in pieces(start, end):
            if rate:
                if lead:  # the head is not paced
                    sock.sendall(lead)
                    lead = b""
                # Paced: each 64 KiB goes out when the rate says it is due.
                for i in range(0, len(piece), 65536):
                    due = began + (start + sent_here) / float(rate)
                    wait = due - time.monotonic()
                    if wait > 0:
                        pace(wait, "rate")
                    part = piece[i:i + 65536]
                    sock.sendall(part)
                    sent_here += len(part)
            else:
                sock.sendall(lead + piece if lead else piece)
                lead = b""
                sent_here += len(piece)
        if lead:
            sock.sendall(lead)
    etag = _header(fields, "etag")
    lm = _header(fields, "last-modified")
    if spec.get("conditional"):
        inm = _header(req_headers, "if-none-match")
        ims = _header(req_headers, "if-modified-since")
        if (inm is not None and etag is not None and etag in [t.strip() for t in inm.split(",")]) or \
                (inm is None and ims is not None and lm is not None and ims == lm):
            keep = [(n, v) for n, v in fields if n.lower() in ("etag", "cache-control", "expires", "date",
                                                                 "vary", "last-modified", "x-version")]
            sock.sendall(build_head(304, keep + conn_fields(keep_alive)))
            return keep_alive
    if spec.get("ranges") and status == 200:
        # One `bytes` range answered with a 206, unless If-Range names another version (then the
        # whole, RFC 9110 §13.1.5); `ignore_if_range`: a broken origin that sends the range anyway.
        asked = _header(req_headers, "range")
        if_range = _header(req_headers, "if-range")
        if asked is not None and (if_range is None or if_range == etag or spec.get("ignore_if_range")):
            span = byte_range(asked.strip(), total)
            if span == "unsatisfiable":
                sock.sendall(build_head(416, [("Content-Range", f"bytes */{total}"), ("Content-Length", "0")]
                                        + conn_fields(keep_alive)))
                return keep_alive
            if span is not None:
                start, end = span
                head = build_head(206, fields + [("Content-Range", f"bytes {start}-{end}/{total}"),
                                                 ("Content-Length", str(end - start + 1))] + conn_fields(keep_alive))
                if head_only:
                    sock.sendall(head)
                else:
                    send_body(start, end + 1, head)
                return keep_alive
    if spec.get("close_delimited"):
        # No length and no chunked coding: the body ends when the connection closes.
        sock.sendall(build_head(status, fields + [("Connection", "close")]) + (b"" if head_only else text))
        sock.shutdown(socket.SHUT_RDWR)
        return False
    if spec.get("chunked"):
        sock.sendall(build_head(status, fields + [("Transfer-Encoding", "chunked")] + conn_fields(keep_alive)))
        if not head_only:
            for big in pieces(0, total):
                for i in range(0, len(big), 1000):
                    piece = big[i:i + 1000]
                    sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        return keep_alive
    head = build_head(status, fields + [("Content-Length", str(total))] + conn_fields(keep_alive))
    if head_only:
        sock.sendall(head)
        return keep_alive
    cut = spec.get("reset_after")
    end = total if cut is None else min(total, int(cut))
    sent = 0
    pause_at = spec.get("pause_after")
    if pause_at is not None:
        sent = min(int(pause_at), end)
        send_body(0, sent, head)
        head = b""
        if spec.get("pause_until"):
            origin.gates.wait(spec["pause_until"])
        else:
            pace(min(float(spec.get("pause", 1)), 30.0), "pause")
    for at, gate in sorted((int(at), gate) for at, gate in spec.get("hold_at", [])):
        if sent < at < end:
            send_body(sent, at, head)
            head = b""
            sent = at
            origin.gates.wait(gate)
    send_body(sent, end, head)
    if cut is not None:
        sock.shutdown(socket.SHUT_RDWR)
        return False
    return keep_alive


def route(origin, sock, conn, method, path, params, param_list, record, keep_alive, head_only, headers):
    parts = path.strip("/").split("/")
    first = parts[0] if parts else ""

    def num(i, default=0):
        try:
            return int(parts[i])
        except (IndexError, ValueError):
            return default

    if first == "res":
        return scripted_resource(origin, sock, parts[1] if len(parts) > 1 else "", keep_alive, head_only, headers)

    if first == "bytes":
        n = num(1)
        head = build_head(200, [("Content-Type", "application/octet-stream"),
                                ("Content-Length", str(n))] + conn_fields(keep_alive))
        if head_only or n == 0:
            sock.sendall(head)
            return keep_alive
        for piece in pattern_chunks(n):
            sock.sendall(head + piece if head else piece)  # the head with the first piece (see send_body)
            head = b""
        return keep_alive

    if first == "chunked":
        n = num(1)
        sock.sendall(build_head(200, [("Content-Type", "application/octet-stream"),
                                      ("Transfer-Encoding", "chunked")] + conn_fields(keep_alive)))
        if head_only:
            return keep_alive
        sizes = [1, 7, 100, 4096, 65536, 3, 200000]
        offset = 0
        i = 0
        while offset < n:
            size = min(sizes[i % len(sizes)], n - offset)
            i += 1
            data = bytearray()
            pos = offset
            while pos < offset + size:
                take = min(_WINDOW, offset + size - pos)
                data += pattern_slice(pos, take)
                pos += take
            ext = ";ext=1" if i % 3 == 0 else ""
            sock.sendall(b"%x%s\r\n" % (size, ext.encode()) + bytes(data) + b"\r\n")
            offset += size
        sock.sendall(b"0\r\n\r\n")
        return keep_alive

    if first == "close":
        n = num(1)
        sock.sendall(build_head(200, [("Content-Type", "application/octet-stream")], version="HTTP/1.0"))
        if not head_only:
            for piece in pattern_chunks(n, 32 * 1024):
                sock.sendall(piece)
        sock.shutdown(socket.SHUT_WR)
        return False

    if first == "echo":
        body = json.dumps(record, sort_keys=True).encode()
        send_simple(sock, 200, body, close=not keep_alive, head_only=head_only, ctype="application/json")
        return keep_alive

    if first == "unique":
        # /unique/N/SIZE: a cacheable body of SIZE bytes that only N has (unique_body).
        body = unique_body(num(1), num(2, 1024))
        head = build_head(200, [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(body))),
                                ("Cache-Control", "max-age=3600")] + conn_fields(keep_alive))
        # One write: a separate small head would wait on Nagle and delayed ACKs (40 ms a request).
        sock.sendall(head if head_only else head + body)
        return keep_alive

    if first == "status":
        code = num(1, 200)
        if code < 200 or code in (204, 304):
            sock.sendall(build_head(code, conn_fields(keep_alive)))
        else:
            send_simple(sock, code, f"status {code}\n".encode(), close=not keep_alive, head_only=head_only)
        return keep_alive

    if first == "early-hints":
        count = int(params.get("count", "1"))
        for _ in range(count):
            sock.sendall(build_head(103, [("Link", "</style.css>; rel=preload; as=style")]))
            pace(0.05, "early-hints")
        send_simple(sock, 200, b"final body\n", close=not keep_alive, head_only=head_only)
        return keep_alive

    if first == "slow":
        n = num(1)
        seconds = float(params.get("seconds", "1"))
        steps = 50
        sock.sendall(build_head(200, [("Content-Type", "application/octet-stream"),
                                      ("Content-Length", str(n))] + conn_fields(keep_alive)))
        if head_only:
            return keep_alive
        per = -(-n // steps)
        sent = 0
        while sent < n:
            take = min(per, n - sent)
            pos = sent
            while pos < sent + take:
                t = min(_WINDOW, sent + take - pos)
                sock.sendall(pattern_slice(pos, t))
                pos += t
            sent += take
            if sent < n:
                pace(seconds / steps, "slow")
        return keep_alive

    if first == "reset":
        n = num(1)
        part = n // 10
        chunked = params.get("chunked") == "1"
        fields = [("Content-Type", "application/octet-stream")]
        fields.append(("Transfer-Encoding", "chunked") if chunked else ("Content-Length", str(n)))
        sock.sendall(build_head(200, fields))
        if chunked:
            sent = 0
            for piece in pattern_chunks(part, 16 * 1024):
                sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                sent += len(piece)
        else:
            for piece in pattern_chunks(part, 16 * 1024):
                sock.sendall(piece)
        if params.get("rst") == "1":
            # A reset discards what the proxy has not read yet: it gets a moment to read it first.
            pace(0.2, "reset")
            import struct
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        return False

    if first == "hang":
        # Never answer; wait (bounded) until the peer goes away.
        deadline = time.monotonic() + HANG_LIMIT
        sock.settimeout(0.5)
        while time.monotonic() < deadline:
            try:
                if not sock.recv(65536):
                    break
            except socket.timeout:
                continue
            except OSError:
                break
        return False

    if first == "drop":
        return False

    if first == "upgrade":
        upgrade = [v for n, v in headers if n.lower() == "upgrade"]
        if not upgrade:
            send_simple(sock, 426, b"upgrade required\n", close=not keep_alive,
                        fields=[("Upgrade", "websocket")])
            return keep_alive
        fields = [("Upgrade", upgrade[0]), ("Connection", "Upgrade")]
        key = [v for n, v in headers if n.lower() == "sec-websocket-key"]
        if key:
            import base64
            acc = base64.b64encode(hashlib.sha1(
                (key[0] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            fields.append(("Sec-WebSocket-Accept", acc))
        sock.sendall(build_head(101, fields))
        total = [0]

        def echo(data):
            total[0] += len(data)
            sock.sendall(data)

        conn.read_until_eof(echo)
        sock.sendall(f"[eof after {total[0]} bytes]".encode())
        return False

    if first == "headers":
        fields = [(k, v) for k, v in param_list if k != "delay"]
        send_simple(sock, 200, b"headers\n", close=not keep_alive, fields=fields, head_only=head_only)
        return keep_alive

    if first == "hop":
        body = b"hop\n"
        fields = [
            ("Content-Type", "text/plain"),
            ("Content-Length", str(len(body))),
            ("Connection", "X-Origin-Hop, keep-alive"),
            ("X-Origin-Hop", "secret"),
            ("Keep-Alive", "timeout=5, max=100"),
            ("Proxy-Connection", "keep-alive"),
            ("Trailer", "X-Never"),
            ("Upgrade", "h2c"),
            ("X-End-To-End", "kept"),
        ]
        sock.sendall(build_head(200, fields) + (b"" if head_only else body))
        return keep_alive

    if first == "bighead":
        n = num(1, 100000)
        send_simple(sock, 200, b"big head\n", close=not keep_alive,
                    fields=[("X-Big", "b" * n)], head_only=head_only)
        return keep_alive

    send_simple(sock, 404, f"no route for {path}\n".encode(), close=not keep_alive, head_only=head_only)
    return keep_alive


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", required=True)
    ap.add_argument("--quiet", action="store_true", help="record nothing (scripted resources still live next to --log)")
    ap.add_argument("--notify", action="store_true", help="write a line to stdout after each request logged")
    ap.add_argument("--report-sleeps", action="store_true", help="write a line to stdout after each pause")
    args = ap.parse_args()
    global REPORT_SLEEPS
    REPORT_SLEEPS = args.report_sleeps

    origin = Origin(args.log, quiet=args.quiet, notify=args.notify)
    open(args.log, "a").close()

    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", args.port))
    srv.listen(128)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]

    stop = threading.Event()

    def on_signal(signum, frame):
        # Every log line is already flushed; in-flight handlers need no goodbye.
        os._exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    gates = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    gates.bind(("127.0.0.1", 0))
    gates.listen(16)
    threading.Thread(target=origin.gates.serve, args=(gates,), daemon=True).start()

    print(f"origin listening on 127.0.0.1:{port} (gates on 127.0.0.1:{gates.getsockname()[1]})", flush=True)
    parent = os.getppid()
    while not stop.is_set():
        if os.getppid() != parent:
            break
        try:
            sock, peer = srv.accept()
        except socket.timeout:
            continue
        except OSError:
            if stop.is_set():
                break
            raise
        t = threading.Thread(target=origin.handle_connection, args=(sock, peer), daemon=True)
        t.start()
    srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
