"""A scripted FTP server, in the test process, for the behaviours no well-kept server shows: passive
replies naming another host, data connections that never end, endless listings and replies,
commands it never answers. It serves ``files`` (path -> bytes) to any login and records every
command line it receives (``lines``), every data connection accepted (``data_connections``), and
every connection to the other host a PASV reply named (``trap_connections``).

Behaviours (keyword arguments):

* ``pasv_host``: the address PASV names (default the control connection's, 127.0.0.1);
* ``no_epsv``: EPSV is answered 502, so a client falls back to PASV;
* ``greeting``: ``"endless"`` sends ``220-`` lines forever instead of a greeting;
* ``retr``: ``"silent"`` never answers RETR; ``"stall"`` sends half of the file, then nothing,
  with the data connection left open;
* ``listing``: ``"endless"`` sends listing lines on the data connection until the client goes;
* ``retr="slow"``: the file in 8 KiB pieces ``slow_interval`` seconds apart;
* ``flood_size``: SIZE is answered with ``150`` replies without end;
* ``epsv_port``: the port EPSV names, whatever it listens on (another service of the host);
* ``close_on_reuse``: a session's second SIZE closes the connection unanswered, as a server that
  timed the idle connection out just as it was reused.
"""

import socket
import threading
import time

LOCALHOST = "127.0.0.1"


class ScriptedFTPServer:
    def __init__(self, files=None, pasv_host=LOCALHOST, no_epsv=False, greeting="normal", retr="normal",
                 listing="normal", mdtm="20240102030405", close_on_reuse=False, slow_interval=0.25,
                 flood_size=False, epsv_port=None):
        self.files = dict(files or {})
        self.pasv_host = pasv_host
        self.no_epsv = no_epsv
        self.greeting = greeting
        self.retr = retr
        self.listing = listing
        self.mdtm = mdtm
        self.close_on_reuse = close_on_reuse
        self.slow_interval = slow_interval
        self.flood_size = flood_size
        self.epsv_port = epsv_port
        self.lines = []
        self.data_connections = []
        self.trap_connections = []
        self.connections = []  # control connections, ended by close()
        self.lock = threading.RLock()  # wait_for holds it while its predicate reads commands()
        self.cond = threading.Condition(self.lock)
        self.stopping = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((LOCALHOST, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def url(self, path):
        return f"ftp://{LOCALHOST}:{self.port}{path}"

    def commands(self):
        with self.lock:
            return [line.split(" ", 1)[0].upper() for line in self.lines]

    def wait_for(self, predicate, timeout=10.0):
        """Waits until ``predicate(self)`` holds (woken by each command) or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def close(self):
        self.stopping.set()
        for s in [self.sock] + self.connections:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the control connection ---------------------------------------------------------------

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()

    def _serve(self, conn):
        conn.settimeout(30)
        session = {"listener": None, "rest": 0, "sizes": 0}
        try:
            if self.greeting == "endless":
                while not self.stopping.is_set():
                    conn.sendall(b"220-" + b"x" * 200 + b"\r\n")
            conn.sendall(b"220 scripted server ready\r\n")
            buf = b""
            while not self.stopping.is_set():
                data = conn.recv(4096)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    text = line.rstrip(b"\r").decode("latin-1")
                    with self.cond:
                        self.lines.append(text)
                        self.cond.notify_all()
                    if not self._command(conn, text, session):
                        return
        except OSError:
            return
        finally:
            if session["listener"] is not None:
                session["listener"].close()
            conn.close()

    def _command(self, conn, text, session):
        verb, _, arg = text.partition(" ")
        verb = verb.upper()
        reply = lambda s: conn.sendall(s.encode("latin-1") + b"\r\n")
        if verb == "USER":
            reply("331 password please")
        elif verb == "PASS":
            reply("230 logged in")
        elif verb == "TYPE":
            reply("200 type set")
        elif verb == "SIZE":
            session["sizes"] += 1
            if self.close_on_reuse and session["sizes"] == 2:
                return False
            if self.flood_size:
                while not self.stopping.is_set():
                    conn.sendall(b"150 wait\r\n" * 64)
            body = self._file(arg)
            reply(f"213 {len(body)}" if body is not None else "550 no such file")
        elif verb == "MDTM":
            reply(f"213 {self.mdtm}" if self._file(arg) is not None else "550 no such file")
        elif verb == "CWD":
            folder = "/" + arg.strip("/")
            reply("250 ok" if folder == "/" or any(p.startswith(folder + "/") for p in self.files)
                  else "550 not a directory")
        elif verb == "EPSV":
            if self.no_epsv:
                reply("502 not implemented")
            else:
                port = self._listen(session)
                reply(f"229 Entering Extended Passive Mode (|||{self.epsv_port or port}|)")
        elif verb == "PASV":
            port = self._listen(session)
            h = self.pasv_host.replace(".", ",")
            reply(f"227 Entering Passive Mode ({h},{port >> 8},{port & 255})")
        elif verb == "REST":
            session["rest"] = int(arg)
            reply("350 restarting")
        elif verb == "RETR":
            body = self._file(arg)
            if body is None:
                reply("550 no such file")
            elif self.retr == "silent":
                pass
            else:
                reply("150 opening data connection")
                data = self._data(session)
                if data is None:
                    reply("425 no data connection")
                    return True
                if self.retr == "slow":
                    rest = body[session["rest"]:]
                    for i in range(0, len(rest), 8192):
                        data.sendall(rest[i:i + 8192])
                        if self.stopping.wait(self.slow_interval):
                            break
                    data.close()
                    reply("226 done")
                    session["rest"] = 0
                    return True
                if self.retr == "stall":
                    data.sendall(body[: len(body) // 2])
                    self.stopping.wait(60)
                    data.close()
                    return False
                data.sendall(body[session["rest"]:])
                data.close()
                reply("226 done")
            session["rest"] = 0
        elif verb in ("MLSD", "LIST", "NLST"):
            reply("150 listing")
            data = self._data(session)
            if data is None:
                reply("425 no data connection")
                return True
            try:
                if self.listing == "endless":
                    n = 0
                    while not self.stopping.is_set():
                        data.sendall(f"type=file;size=1; file{n}.txt\r\n".encode()
                                     if verb == "MLSD" else
                                     f"-rw-r--r-- 1 a a 1 Jan 01 2024 file{n}.txt\r\n".encode())
                        n += 1
                else:
                    for path, body in self.files.items():
                        name = path.rsplit("/", 1)[-1]
                        data.sendall(f"type=file;size={len(body)};modify={self.mdtm}; {name}\r\n".encode()
                                     if verb == "MLSD" else
                                     f"-rw-r--r-- 1 a a {len(body)} Jan 02 2024 {name}\r\n".encode())
            except OSError:
                return False
            data.close()
            reply("226 done")
        elif verb == "QUIT":
            reply("221 bye")
            return False
        else:
            reply("502 not implemented")
        return True

    def _file(self, arg):
        path = arg if arg.startswith("/") else "/" + arg
        return self.files.get(path)

    def _listen(self, session):
        if session["listener"] is not None:
            session["listener"].close()
        s = socket.socket()
        s.bind((LOCALHOST, 0))
        s.listen(1)
        s.settimeout(10)
        session["listener"] = s
        port = s.getsockname()[1]
        if self.pasv_host != LOCALHOST:
            # The address the PASV reply names listens on the same port: a client that trusted
            # the reply would connect here.
            trap = socket.socket()
            trap.bind((self.pasv_host, port))
            trap.listen(1)
            threading.Thread(target=self._trap, args=(trap,), daemon=True).start()
        return port

    def _trap(self, trap):
        trap.settimeout(15)
        try:
            conn, peer = trap.accept()
            with self.cond:
                self.trap_connections.append(peer)
                self.cond.notify_all()
            conn.close()
        except OSError:
            pass
        finally:
            trap.close()

    def _data(self, session):
        listener = session["listener"]
        session["listener"] = None
        if listener is None:
            return None
        try:
            data, peer = listener.accept()
        except OSError:
            return None
        finally:
            listener.close()
        with self.cond:
            self.data_connections.append(peer)
            self.cond.notify_all()
        return data
