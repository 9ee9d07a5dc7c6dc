"""Differential check of Larder's HTTP/1.1 parsing against a second, independent parser: h11.

Every input of a corpus is given to h11 (as a server for request bytes, as a client for response
bytes) and to the real Larder over a real socket, and the two verdicts are compared:

* Requests go to a Larder in reverse mode whose origin (in this process) parses what Larder
  forwards with h11 and answers with what it saw (method, target, a digest of the body). Larder
  accepted a request when the client gets that answer; it rejected it when it answers 4xx/5xx itself
  (and closes). h11's verdict is the sequence of requests it reads before an error, the end of the
  input (with or without a partial message: "waits for more bytes", which for Larder is silence), or
  a message after which the connection cannot persist. Inputs run concurrently, one connection each.
* Responses come from a raw origin that sends the bytes of the case and closes; Larder either relays
  a response (compared with h11's status and decoded body) or answers 502 / cuts the connection.

Every disagreement must be on ALLOWED (the deliberate differences, with the reason: mostly Larder
being stricter than h11 where RFC 9112 lets a recipient choose, and a few places where h11 is
stricter than the RFCs), or on KNOWN_BUGS (Larder bugs outside HTTPWire, until fixed), or the test
fails and prints it. Besides, what Larder forwards must be a request h11 accepts, and a response
Larder relays must parse with h11 (unless h11 refused the original for the same reason).

The corpus is built systematically (framing, versions, targets, field syntax, chunked bodies,
pipelining) and seeded from Tests/Fuzz/corpus with a fixed number of deterministic mutations.
scripts/differential.py runs the same comparison on a much larger random corpus.
"""

import concurrent.futures
import hashlib
import random
import re
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import h11
import pytest

from helpers import note_sleep

REPO = Path(__file__).resolve().parent.parent.parent
FUZZ_CORPUS = REPO / "Tests" / "Fuzz" / "corpus"
LOCALHOST = "127.0.0.1"

# Larder's limits in this test (its defaults), and h11's incomplete-event limit set to match the head limit.
MAX_HEAD = 64 * 1024
MAX_URI = 8 * 1024
MAX_FIELDS = 100
MAX_CHUNK_LINE = 4096
MAX_TRAILER = 16 * 1024
MAX_BODY = 1 << 30
IO_TIMEOUT = 5.0
# Larder's answers to requests it could not read: the connection must close after them. Policy
# refusals (403, 407) of a well-formed request may leave it open.
CLOSING_STATUSES = {400, 408, 413, 414, 431, 501, 505}
MUTATIONS_IN_SUITE = 400


def h11_version_ok():
    parts = tuple(int(p) for p in re.findall(r"\d+", h11.__version__)[:2])
    return parts >= (0, 16)


# ---------------------------------------------------------------------------
# Outcomes


@dataclass
class Msg:
    """One request as a parser understood it."""
    method: bytes
    target: bytes
    body: str  # "sha256-prefix:length" of the decoded body
    local: bool = False  # Larder answered it itself (OPTIONS *, Max-Forwards: 0)

    def same(self, other):
        if self.local or other.local:
            return self.method == other.method or not self.method or not other.method
        if self.method != other.method or self.body != other.body:
            return False
        # Larder forwards origin-form targets as they are; absolute-form ones become origin-form.
        if self.target.startswith(b"/") and other.target.startswith(b"/"):
            return self.target == other.target
        return True


@dataclass
class Outcome:
    messages: list = field(default_factory=list)
    end: str = "closed"  # closed | reject | reject-open | timeout | invalid-output | error
    detail: str = ""
    stop: bool = False  # h11: the connection cannot persist after the last message
    rest: bytes = b""  # h11: the bytes where the message it refused began
    # Larder: its connection and reader, still open, while whether more comes is decided for many
    # connections at once (settle_pending); the number of answers h11 expects; whether the silence
    # was seen by settle_pending (after every other input had run: no mere slowness).
    pending: object = None
    expect: int = 0
    settled: bool = False

    def __str__(self):
        msgs = " ".join(f"[{m.method.decode('latin-1')} {m.target[:40].decode('latin-1')} {m.body[:8]}]"
                        + ("(local)" if m.local else "") for m in self.messages)
        return f"{msgs} {self.end}{' (stop)' if self.stop else ''}: {self.detail[:160]}".strip()


@dataclass
class RespOutcome:
    ok: bool
    status: int = 0
    body: bytes = b""
    detail: str = ""

    def __str__(self):
        if self.ok:
            return (f"relayed {self.status} body={len(self.body)}B {hashlib.sha256(self.body).hexdigest()[:8]}"
                    + (f" ({self.detail})" if self.detail else ""))
        return f"rejected: {self.detail[:160]}"


# ---------------------------------------------------------------------------
# h11's reading


def h11_request(data):
    """What h11, as a server, reads from `data` when no more bytes follow (no EOF either: a partial
    message ends as "closed", as Larder's silence does)."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    conn.receive_data(data)
    out = Outcome()
    cur = None
    start = data
    while True:
        try:
            ev = conn.next_event()
        except h11.RemoteProtocolError as e:
            out.end, out.detail, out.rest = "reject", str(e), start[:64]
            return out
        if ev is h11.NEED_DATA:
            out.detail = "needs more bytes" if conn.trailing_data[0] else "end of input"
            return out
        if ev is h11.PAUSED:
            out.detail, out.stop = "paused (protocol switch)", True
            return out
        if isinstance(ev, h11.Request):
            cur = [ev.method, ev.target, hashlib.sha256(), 0]
        elif isinstance(ev, h11.Data):
            cur[2].update(ev.data)
            cur[3] += len(ev.data)
        elif isinstance(ev, h11.EndOfMessage):
            out.messages.append(Msg(bytes(cur[0]), bytes(cur[1]), f"{cur[2].hexdigest()[:16]}:{cur[3]}"))
            try:
                conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                conn.send(h11.EndOfMessage())
            except h11.LocalProtocolError as e:
                out.detail, out.stop = f"cannot answer: {e}", True
                return out
            if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                conn.start_next_cycle()
                start = conn.trailing_data[0]
            else:
                out.detail, out.stop = f"not persistent ({conn.their_state})", True
                return out
        elif isinstance(ev, h11.ConnectionClosed):
            return out


def h11_response(data, method="GET"):
    """What h11, as a client that sent `method`, reads from `data` followed by EOF."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "origin")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    conn.receive_data(b"")
    status, body = None, bytearray()
    while True:
        try:
            ev = conn.next_event()
        except h11.RemoteProtocolError as e:
            return RespOutcome(False, detail=str(e))
        if isinstance(ev, h11.InformationalResponse):
            if ev.status_code == 101:
                return RespOutcome(False, detail="101 without an Upgrade request")
            continue
        if isinstance(ev, h11.Response):
            status = ev.status_code
        elif isinstance(ev, h11.Data):
            body += ev.data
        elif isinstance(ev, h11.EndOfMessage):
            return RespOutcome(True, status, bytes(body))
        elif ev is h11.PAUSED:
            return RespOutcome(False, detail="paused")
        elif isinstance(ev, h11.ConnectionClosed):
            return RespOutcome(False, detail="closed before a response")


# ---------------------------------------------------------------------------
# The servers Larder talks to


class _Server:
    def __init__(self):
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind((LOCALHOST, 0))
        self.srv.listen(256)
        self.srv.settimeout(0.2)
        self.port = self.srv.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                sock, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            sock.settimeout(15)
            threading.Thread(target=self._guard, args=(sock,), daemon=True).start()

    def _guard(self, sock):
        try:
            self.handle(sock)
        except OSError:
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def stop(self):
        self.stopping.set()
        try:
            self.srv.close()
        except OSError:
            pass
        self.thread.join(2)


class EchoOrigin(_Server):
    """Parses what Larder forwards with h11 and answers with what it read, in X-Diff-* fields."""

    def handle(self, sock):
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=1 << 20)
        cur = None
        while True:
            try:
                ev = conn.next_event()
            except h11.RemoteProtocolError as e:
                if conn.trailing_data[1]:
                    return  # Larder gave up mid-request (its client went away or sent a bad body)
                # Larder forwarded something h11 cannot read: the client sees this answer.
                msg = re.sub(r"[^\x20-\x7e]", "?", str(e))[:200]
                sock.sendall(b"HTTP/1.1 500 Bad Forward\r\nX-Diff-Origin-Error: " + msg.encode()
                             + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if ev is h11.NEED_DATA:
                data = sock.recv(65536)
                conn.receive_data(data)
                if not data and conn.their_state is h11.IDLE:
                    return
                continue
            if ev is h11.PAUSED or isinstance(ev, h11.ConnectionClosed):
                return
            if isinstance(ev, h11.Request):
                cur = [ev.method, ev.target, hashlib.sha256(), 0]
            elif isinstance(ev, h11.Data):
                cur[2].update(ev.data)
                cur[3] += len(ev.data)
            elif isinstance(ev, h11.EndOfMessage):
                sock.sendall(conn.send(h11.Response(status_code=200, headers=[
                    ("X-Diff-Origin", "1"),
                    ("X-Diff-Method", cur[0]),
                    ("X-Diff-Target", cur[1].hex()),
                    ("X-Diff-Body", f"{cur[2].hexdigest()[:16]}:{cur[3]}"),
                    ("Content-Length", "0")])))
                sock.sendall(conn.send(h11.EndOfMessage()))
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()


class RawOrigin(_Server):
    """Answers GET /r/N with the bytes of response case N, then closes."""

    NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    def __init__(self, responses):
        self.responses = responses
        super().__init__()

    def handle(self, sock):
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = sock.recv(65536)
            if not data:
                return
            buf += data
        target = buf.split(b" ", 2)[1]
        m = re.search(rb"/r/(\d+)$", target)
        raw = self.responses.get(int(m.group(1))) if m else None
        sock.sendall(raw if raw is not None else self.NOT_FOUND)
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


# ---------------------------------------------------------------------------
# Larder's reading


class _Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.eof = False
        self.reset = False

    def fill(self):
        if self.eof:
            return False
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            self.reset = True
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def line(self):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                out = bytes(self.buf[:i + 1])
                del self.buf[:i + 1]
                return out
            if not self.fill():
                return None

    def exact(self, n):
        while len(self.buf) < n:
            if not self.fill():
                return None
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


def _read_larder_response(r):
    """(status, fields dict lowercased, body) of the next final response, or None at EOF."""
    while True:
        line = r.line()
        if line is None:
            return None
        m = re.match(rb"HTTP/1\.[01] (\d{3})", line)
        if not m:
            raise ValueError(f"Larder sent a bad status line {line[:80]!r}")
        status = int(m.group(1))
        fields = {}
        while True:
            fl = r.line()
            if fl is None:
                raise ValueError("EOF inside a response head from Larder")
            if fl in (b"\r\n", b"\n"):
                break
            n, _, v = fl.decode("latin-1").partition(":")
            fields.setdefault(n.strip().lower(), v.strip())
        if 100 <= status < 200:
            continue
        n = int(fields.get("content-length", "0"))
        body = r.exact(n) if n else b""
        return status, fields, body if body is not None else b""


def larder_request(port, data, expect, quiet=0.05, defer=False):
    """Send `data` to Larder and read its answers: `expect` of them (what h11 read), then whatever
    else comes within `quiet` seconds. The connection is not half-closed: Larder drops a queued
    response when the client half-closes before it was flushed (a ProxyServer bug, see
    test_half_close_after_a_request_still_gets_the_response), so "Larder waits for more bytes" is
    silence instead. With `defer`, the silence is not waited for: the outcome keeps the connection
    open (`pending`) for settle_pending, which waits once for all such connections."""
    out = Outcome(expect=expect)
    try:
        sock = socket.create_connection((LOCALHOST, port), timeout=IO_TIMEOUT)
    except OSError as e:
        out.end, out.detail = "error", f"connect: {e}"
        return out
    sock.settimeout(IO_TIMEOUT)
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # Larder stopped reading after a rejection; its answer is still there to read
    except OSError as e:
        sock.close()
        out.end, out.detail = "error", f"send: {e}"
        return out
    return _read_answers(out, sock, _Reader(sock), quiet, defer)


def settle_pending(outcomes, quiet):
    """One quiet window of `quiet` seconds for every outcome still `pending`, all at once: those
    whose connection stays silent wait for more bytes (and are closed); the others are read on
    (`_read_answers`, each with a quiet window of its own)."""
    waiting = {o.pending[0]: o for o in outcomes if o.pending is not None}
    began = time.monotonic()
    deadline = began + quiet
    spoke = []
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select(list(waiting), [], [], left)
        spoke += [waiting.pop(s) for s in ready]
    if waiting:
        note_sleep(time.monotonic() - began, "quiet window at test_differential.py:settle_pending")
    for out in waiting.values():
        sock, _ = out.pending
        out.pending = None
        out.detail = "waits for more bytes"
        out.settled = True
        sock.close()
    # Those that said more are read on, and wait for silence again all together, until none is left.
    for out in spoke:
        sock, r = out.pending
        out.pending = None
        _read_answers(out, sock, r, quiet, defer=True, settled=True, spoke=True)
    if spoke:
        settle_pending(spoke, quiet)


def _read_answers(out, sock, r, quiet, defer=False, settled=False, spoke=False):
    """Larder's answers on `sock` into `out` (see larder_request); closes the socket, unless it is
    left `pending`. `settled`: Larder has had every other input's time to answer, so a silence
    now is not slowness. `spoke`: the socket has something to read, which is read first."""
    expect = out.expect
    try:
        while True:
            began = time.monotonic()
            if spoke:
                spoke = False
            elif len(out.messages) >= expect and not r.buf:
                if defer:
                    out.pending = (sock, r)
                    return out
                sock.settimeout(quiet)
            try:
                got = _read_larder_response(r)
            except socket.timeout:
                if len(out.messages) >= expect:
                    note_sleep(time.monotonic() - began, "quiet window at test_differential.py:larder_request")
                    out.detail = "waits for more bytes"
                    out.settled = settled
                    return out
                raise
            finally:
                sock.settimeout(IO_TIMEOUT)
            if got is None:
                out.detail = "reset" if r.reset else "closed"
                return out
            status, fields, body = got
            if "x-diff-origin" in fields:
                out.messages.append(Msg(fields["x-diff-method"].encode("latin-1"),
                                        bytes.fromhex(fields["x-diff-target"]), fields["x-diff-body"]))
            elif "x-diff-origin-error" in fields:
                out.end = "invalid-output"
                out.detail = f"h11 cannot read what Larder forwarded: {fields['x-diff-origin-error']}"
                return out
            elif status < 400:
                out.messages.append(Msg(b"", b"", "", local=True))
            else:
                out.end = "reject"
                out.detail = f"{status} {body.decode('latin-1').strip()}"
                if status in CLOSING_STATUSES:  # the connection must close (others may stay open)
                    sock.settimeout(2.0)
                    began = time.monotonic()
                    try:
                        more = r.buf or r.fill()
                    except socket.timeout:
                        note_sleep(time.monotonic() - began,
                                   "open after a rejection at test_differential.py:larder_request")
                        more = True
                    if more:
                        out.detail += " (NOT CLOSED after the rejection)"
                        out.end = "reject-open"
                return out
    except socket.timeout:
        out.end, out.detail = "timeout", f"no answer within {IO_TIMEOUT} s"
        return out
    except ValueError as e:
        out.end, out.detail = "invalid-output", str(e)
        return out
    finally:
        if out.pending is None:
            sock.close()


def larder_response(port, raw_port, case_id, method="GET"):
    """Ask Larder for response case `case_id`; parse what it relays with h11 as its client."""
    try:
        sock = socket.create_connection((LOCALHOST, port), timeout=IO_TIMEOUT)
    except OSError as e:
        return RespOutcome(False, detail=f"connect: {e}"), "error"
    sock.settimeout(IO_TIMEOUT)
    url = f"http://{LOCALHOST}:{raw_port}/r/{case_id}"
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=1 << 20)
    req = conn.send(h11.Request(method=method, target=url, headers=[
        ("Host", f"{LOCALHOST}:{raw_port}"), ("Connection", "close"), ("Cache-Control", "no-store")]))
    req += conn.send(h11.EndOfMessage())
    status, body, fields = None, bytearray(), {}
    cut = False
    raw = bytearray()
    try:
        sock.sendall(req)
        while True:
            try:
                ev = conn.next_event()
            except h11.RemoteProtocolError as e:
                # The head was relayed, then the connection was cut (the origin's body was broken):
                # the honest signal for a response Larder could not relay whole.
                if cut or "peer" in str(e):
                    return RespOutcome(False, detail=f"cut after {status}: {e}"), "rejected"
                if relayed_length_list(raw):
                    return RespOutcome(False, detail=relayed_length_list(raw)), "invalid-output"
                return RespOutcome(False, detail=f"h11 cannot read Larder's response: {e}"), "invalid-output"
            if ev is h11.NEED_DATA:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:
                    data, cut = b"", True
                conn.receive_data(data)
                if len(raw) < MAX_HEAD:
                    raw += data
                continue
            if isinstance(ev, h11.Response):
                status = ev.status_code
                fields = {bytes(n).decode("latin-1"): bytes(v) for n, v in ev.headers}
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                break
            elif isinstance(ev, h11.ConnectionClosed):
                return RespOutcome(False, detail="closed before a response"), "rejected"
    except socket.timeout:
        return RespOutcome(False, detail=f"no answer within {IO_TIMEOUT} s"), "timeout"
    finally:
        sock.close()
    if status == 502 and b"upstream" in body and fields.get("cache-control") == b"no-store":
        return RespOutcome(False, detail=f"502 {bytes(body).decode('latin-1').strip()}"), "rejected"
    if relayed_length_list(raw):
        return RespOutcome(True, status, bytes(body), detail=relayed_length_list(raw)), "invalid-output"
    return RespOutcome(True, status, bytes(body)), "relayed"


def relayed_length_list(raw):
    """RFC 9110 §8.6: a sender MUST NOT forward a Content-Length that is not 1*DIGIT (a recipient of
    "42, 42" may only reject it or replace it with one "42"). A description when Larder did."""
    lengths = re.findall(rb"(?im)^content-length[ \t]*:[ \t]*([^\r\n]*?)[ \t]*\r?$", final_head(raw))
    if len(lengths) > 1 or any(not v.isdigit() for v in lengths):
        return f"relayed Content-Length {lengths!r}"
    return ""


def final_head(raw):
    """The head of the final response in `raw` (after any 1xx heads)."""
    pos = 0
    while True:
        end = raw.find(b"\r\n\r\n", pos)
        if end < 0:
            return bytes(raw[pos:])
        head = bytes(raw[pos:end])
        if not re.match(rb"HTTP/1\.[01] 1\d\d", head):
            return head
        pos = end + 4


# ---------------------------------------------------------------------------
# The corpus


@dataclass
class Case:
    name: str
    data: bytes
    method: str = "GET"  # responses: the method of the request they answer


def build_request_corpus(origin_port):
    """Systematic request inputs (origin-form targets: Larder runs in reverse mode)."""
    cases = []
    hostport = f"{LOCALHOST}:{origin_port}".encode()

    def add(name, data):
        cases.append(Case(name, data if isinstance(data, bytes) else data.encode("latin-1")))

    H = "Host: o\r\n"

    def req(fields="", line="GET /d HTTP/1.1", body=""):
        return f"{line}\r\n{fields}\r\n{body}"

    # Valid basics.
    for m in ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND", "M-SEARCH", "get",
              "!#$%&'*+-.^_`|~09AZaz", "X" * 200]:
        add(f"method {m[:20]}", req(H, f"{m} /m HTTP/1.1"))
    add("OPTIONS *", req(H, "OPTIONS * HTTP/1.1"))
    add("TRACE Max-Forwards 0", req(H + "Max-Forwards: 0\r\n", "TRACE /t HTTP/1.1"))
    for t in ["/", "/a/b/c", "/q?x=1&y=%20z", "/a-._~!$&'()*+,;=:@/?q=%20[]{}|\\^`\"<>#", "//double", "/%00",
              "/#frag", "/" + "p" * 2000, "/\x7e"]:
        add(f"target {t[:30]!r}", req(H, f"GET {t} HTTP/1.1"))
    add("absolute-form to the origin", req(H, f"GET http://{hostport.decode()}/abs?x HTTP/1.1"))
    add("absolute-form, uppercase scheme", req(H, f"GET HTTP://{hostport.decode()}/abs HTTP/1.1"))
    add("absolute-form without path", req(H, f"GET http://{hostport.decode()} HTTP/1.1"))
    add("absolute-form, query without path", req(H, f"GET http://{hostport.decode()}?q HTTP/1.1"))
    for t in ["*", "d", "?x", "ftp://x/", "http://u@127.0.0.1/", f"{LOCALHOST}:{origin_port}", "http:///x",
              "http://127.0.0.1:0/", "http://127.0.0.1:99999/", "http://[::1/", "http://a b/"]:
        add(f"odd target {t!r}", req(H, f"GET {t} HTTP/1.1"))
    add("HTTP/1.0 without Host", req("", "GET /v HTTP/1.0"))
    add("HTTP/1.0 with Host", req(H, "GET /v HTTP/1.0"))
    add("HTTP/1.0 keep-alive", req(H + "Connection: keep-alive\r\n", "GET /v HTTP/1.0"))
    add("Connection: close", req(H + "Connection: close\r\n"))
    add("Expect: 100-continue with body", req(H + "Expect: 100-continue\r\nContent-Length: 3\r\n", "POST /e HTTP/1.1", "abc"))
    # Smuggling through the Connection list: the body stays this request's, never a second one.
    inner = "GET /smuggled HTTP/1.1\r\nHost: o\r\n\r\n"
    add("Connection names Content-Length",
        req(H + f"Connection: Content-Length\r\nContent-Length: {len(inner)}\r\n", "POST /s HTTP/1.1", inner))
    add("Connection names Transfer-Encoding",
        req(H + "Connection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n", "POST /s HTTP/1.1",
            f"{len(inner):x}\r\n{inner}\r\n0\r\n\r\n"))
    add("GET with a body that is a request", req(H + f"Content-Length: {len(inner)}\r\n", "GET /fat HTTP/1.1", inner))
    add("Host with a trailing dot", req("Host: o.\r\n"))
    add("Upgrade request", req(H + "Connection: Upgrade\r\nUpgrade: websocket\r\n"))
    add("many fields", req(H + "".join(f"X-F{i}: v{i}\r\n" for i in range(90))))
    add("empty field value", req(H + "X-Empty:\r\nX-Blank:   \r\n"))
    add("no OWS after colon", req("Host:o\r\nX-A:b\r\n"))
    add("OWS around value", req(H + "X-A: \t a b \t \r\n"))
    add("HTAB inside value", req(H + "X-T: a\tb\r\n"))
    add("obs-text in value", req(H + "X-N: Jos\xe9 \xff\x80\r\n"))
    add("colon in value", req(H + "X-U: http://a:1/\r\n"))
    add("field name of every tchar", req(H + "!#$%&'*+-.^_`|~09AZaz: v\r\n"))
    add("header value 10 KiB", req(H + "X-Big: " + "b" * 10240 + "\r\n"))

    # Request line.
    for name, line in [
        ("double SP after method", "GET  /d HTTP/1.1"), ("double SP before version", "GET /d  HTTP/1.1"),
        ("HTAB separators", "GET\t/d\tHTTP/1.1"), ("missing version", "GET /d"), ("missing target", "GET HTTP/1.1"),
        ("trailing SP", "GET /d HTTP/1.1 "), ("leading SP", " GET /d HTTP/1.1"), ("lowercase http", "GET /d http/1.1"),
        ("method with (", "GE(T /d HTTP/1.1"), ("method with /", "GE/T /d HTTP/1.1"), ("method with {", "G{ /d HTTP/1.1"),
        ("method with obs-text", "G\xc9T /d HTTP/1.1"), ("method with DEL", "GE\x7fT /d HTTP/1.1"),
        ("empty line only", ""), ("target with DEL", "GET /a\x7fb HTTP/1.1"), ("target with obs-text", "GET /\xe9 HTTP/1.1"),
        ("target with HTAB", "GET /a\tb HTTP/1.1"), ("target with ctl", "GET /a\x01b HTTP/1.1"),
        ("target with NUL", "GET /a\x00b HTTP/1.1"), ("NUL in method", "G\x00T /d HTTP/1.1"),
        ("NUL in version", "GET /d HTTP/1.\x001"), ("bare CR in request line", "GET /d\rHTTP/1.1"),
    ]:
        add(f"request line: {name}", req(H, line))
    for v in ["HTTP/1.0", "HTTP/1.1", "HTTP/1.2", "HTTP/1.9", "HTTP/2.0", "HTTP/3.0", "HTTP/0.9", "HTTP/9.9",
              "HTTP/01.1", "HTTP/1.01", "HTTP/1", "HTTP/2", "HTTP/11", "HTTP/1.x", "HTTP/ 1.1", "HTTP1.1", "HTTPS/1.1",
              "HTtP/1.1"]:
        add(f"version {v}", req(H, f"GET /v {v}"))

    # Field lines.
    for name, fields in [
        ("SP before colon", "X-Bad : 1\r\n"), ("HTAB before colon", "X-Bad\t: 1\r\n"), ("empty name", ": x\r\n"),
        ("no colon", "NoColon\r\n"), ("SP in name", "X Y: 1\r\n"), ("( in name", "X(Y: 1\r\n"), ("@ in name", "X@Y: 1\r\n"),
        ("/ in name", "X/Y: 1\r\n"), ("DEL in name", "X\x7fY: 1\r\n"), ("obs-text in name", "X\xe9Y: 1\r\n"),
        ("NUL in name", "X\x00Y: 1\r\n"), ("ctl in name", "X\x01Y: 1\r\n"), ("obs-fold", "X-F: a\r\n b\r\n"),
        ("obs-fold with HTAB", "X-F: a\r\n\tb\r\n"), ("obs-fold empty continuation", "X-F: a\r\n \r\n"),
        ("line starting with SP first", " X-F: a\r\n"), ("bare CR in value", "X-C: a\rb\r\n"),
        ("CR CR LF", "X-C: a\r\r\n"), ("bare CR ending the line", "X-C: a\rX-D: b\r\n"),
        ("value with VT", "X-C: a\x0bb\r\n"), ("value with FF", "X-C: a\x0cb\r\n"), ("value ends with FF", "X-C: a\x0c\r\n"),
        ("colon only", ":\r\n"), ("name only with colon", "X-A:\r\n"),
    ]:
        add(f"field: {name}", req(H + fields))
    for b in list(range(0x00, 0x20)) + [0x7F]:
        if b in (0x09, 0x0A, 0x0D):
            continue
        add(f"field value with byte {b:#04x}", req(H + f"X-C: a{chr(b)}b\r\n"))
    add("field value starting with byte 0x01", req(H + "X-C: \x01\r\n"))
    for name, data in [
        ("bare LF ends the request line", "GET /d HTTP/1.1\nHost: o\r\n\r\n"),
        ("bare LF ends a field line", "GET /d HTTP/1.1\r\nHost: o\n\r\n"),
        ("bare LF ends the head", "GET /d HTTP/1.1\r\nHost: o\r\n\n"),
        ("bare LF everywhere", "GET /d HTTP/1.1\nHost: o\n\n"),
        ("LF CR LF", "GET /d HTTP/1.1\r\nHost: o\n\r\n"),
        ("one leading CRLF", "\r\nGET /d HTTP/1.1\r\nHost: o\r\n\r\n"),
        ("eight leading CRLFs", "\r\n" * 8 + "GET /d HTTP/1.1\r\nHost: o\r\n\r\n"),
        ("nine leading CRLFs", "\r\n" * 9 + "GET /d HTTP/1.1\r\nHost: o\r\n\r\n"),
        ("leading bare LF", "\nGET /d HTTP/1.1\r\nHost: o\r\n\r\n"),
        ("leading SP line", " \r\nGET /d HTTP/1.1\r\nHost: o\r\n\r\n"),
        ("head without the final CRLF", "GET /d HTTP/1.1\r\nHost: o\r\n"),
        ("head cut in the request line", "GET /d HT"),
        ("head cut after a CR", "GET /d HTTP/1.1\r\nHost: o\r\n\r"),
    ]:
        add(f"line ends: {name}", data)

    # Host.
    add("no Host, HTTP/1.1", req(""))
    add("two Host fields", req("Host: a\r\nHost: b\r\n"))
    add("two identical Host fields", req("Host: a\r\nHost: a\r\n"))
    add("empty Host", req("Host:\r\n"))
    add("Host with a list", req("Host: a, b\r\n"))
    add("Host with userinfo", req("Host: u@a\r\n"))
    add("Host IPv6 literal", req("Host: [::1]:80\r\n"))
    add("host field any case", req("hOsT: o\r\n"))
    for v in ["a/b", "a b", "a?b", "[::1", "[]", "a:8x", "a:1:2", "a%zz", "\"a\"", "ex\xe4mple", "a:", "a%41",
              "x-._~!$&'()*+,;=", "127.0.0.1:8080", "example.com."]:
        add(f"Host value {v!r}", req(f"Host: {v}\r\n"))

    # Content-Length.
    def post(fields, body=""):
        return req(H + fields, "POST /p HTTP/1.1", body)

    for name, fields, body in [
        ("0", "Content-Length: 0\r\n", ""), ("5", "Content-Length: 5\r\n", "hello"),
        ("leading zeros", "Content-Length: 005\r\n", "hello"), ("OWS around", "Content-Length: \t 5 \t\r\n", "hello"),
        ("+5", "Content-Length: +5\r\n", "hello"), ("-5", "Content-Length: -5\r\n", "hello"),
        ("0x5", "Content-Length: 0x5\r\n", "hello"), ("5a", "Content-Length: 5a\r\n", "hello"),
        ("5 5", "Content-Length: 5 5\r\n", "hello"), ("empty", "Content-Length:\r\n", "hello"),
        ("list 5,5", "Content-Length: 5,5\r\n", "hello"), ("list 5, 5", "Content-Length: 5, 5\r\n", "hello"),
        ("list 5,6", "Content-Length: 5,6\r\n", "hello!"), ("list 5,", "Content-Length: 5,\r\n", "hello"),
        ("two equal fields", "Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
        ("two different fields", "Content-Length: 5\r\nContent-Length: 6\r\n", "hello!"),
        ("20 digits with leading zeros", "Content-Length: 00000000000000000005\r\n", "hello"),
        ("21 digits with leading zeros", "Content-Length: 000000000000000000005\r\n", "hello"),
        ("1 GiB + 1", f"Content-Length: {MAX_BODY + 1}\r\n", "x"),
        ("2^62", f"Content-Length: {1 << 62}\r\n", "x"), ("2^63", f"Content-Length: {1 << 63}\r\n", "x"),
        ("20 nines", "Content-Length: 99999999999999999999\r\n", "x"),
        ("shorter body than announced", "Content-Length: 10\r\n", "hello"),
        ("unicode digit", "Content-Length: \xb9\r\n", "h"),
        ("name any case", "cOnTeNt-LeNgTh: 5\r\n", "hello"),
    ]:
        add(f"Content-Length {name}", post(fields, body))
    add("GET with a body", req(H + "Content-Length: 3\r\n", "GET /g HTTP/1.1", "abc"))

    # Transfer-Encoding.
    chunked_body = "5\r\nhello\r\n0\r\n\r\n"
    for name, fields in [
        ("chunked", "Transfer-Encoding: chunked\r\n"), ("Chunked", "Transfer-Encoding: Chunked\r\n"),
        ("CHUNKED", "Transfer-Encoding: CHUNKED\r\n"), (" chunked (leading SP)", "Transfer-Encoding:  chunked\r\n"),
        ("chunked + trailing SP", "Transfer-Encoding: chunked \r\n"), ("HTAB chunked", "Transfer-Encoding:\tchunked\r\n"),
        ("no OWS", "Transfer-Encoding:chunked\r\n"),
        ("chunked, gzip", "Transfer-Encoding: chunked, gzip\r\n"), ("gzip, chunked", "Transfer-Encoding: gzip, chunked\r\n"),
        ("gzip", "Transfer-Encoding: gzip\r\n"), ("identity", "Transfer-Encoding: identity\r\n"),
        ("chunked, chunked", "Transfer-Encoding: chunked, chunked\r\n"),
        ("two fields chunked", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
        ("chunked then an empty field", "Transfer-Encoding: chunked\r\nTransfer-Encoding:\r\n"),
        ("gzip then chunked fields", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
        ("chunked,", "Transfer-Encoding: chunked,\r\n"), (",chunked", "Transfer-Encoding: ,chunked\r\n"),
        (", chunked ,", "Transfer-Encoding: , chunked ,\r\n"), ("xchunked", "Transfer-Encoding: xchunked\r\n"),
        ("quoted", "Transfer-Encoding: \"chunked\"\r\n"), ("chunked;q=1", "Transfer-Encoding: chunked;q=1\r\n"),
        ("empty", "Transfer-Encoding:\r\n"), ("chun ked", "Transfer-Encoding: chun ked\r\n"),
        ("obs-fold", "Transfer-Encoding:\r\n chunked\r\n"), ("SP before colon", "Transfer-Encoding : chunked\r\n"),
        ("VT before chunked", "Transfer-Encoding: \x0bchunked\r\n"), ("NBSP after", "Transfer-Encoding: chunked\xa0\r\n"),
        ("CL then TE", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"),
        ("TE then CL", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"),
        ("CL 0 and TE", "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n"),
        ("CL and TE gzip", "Content-Length: 5\r\nTransfer-Encoding: gzip\r\n"),
    ]:
        add(f"Transfer-Encoding {name}", post(fields, chunked_body))
    add("Transfer-Encoding chunked in HTTP/1.0",
        req(H + "Transfer-Encoding: chunked\r\n", "POST /p HTTP/1.0", chunked_body))

    # Chunked bodies.
    TE = "Transfer-Encoding: chunked\r\n"
    for name, body in [
        ("one chunk", "5\r\nhello\r\n0\r\n\r\n"), ("empty body", "0\r\n\r\n"),
        ("several chunks", "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n"),
        ("uppercase hex", "A\r\n0123456789\r\n0\r\n\r\n"), ("lowercase hex", "a\r\n0123456789\r\n0\r\n\r\n"),
        ("leading zeros", "0005\r\nhello\r\n000\r\n\r\n"),
        ("20 hex digits with leading zeros", "0" * 19 + "5\r\nhello\r\n0\r\n\r\n"),
        ("21 hex digits with leading zeros", "0" * 20 + "5\r\nhello\r\n0\r\n\r\n"),
        ("ext without value", "5;flag\r\nhello\r\n0\r\n\r\n"), ("ext token value", "5;a=b\r\nhello\r\n0\r\n\r\n"),
        ("ext quoted value", "5;a=\"x y\"\r\nhello\r\n0\r\n\r\n"), ("several exts", "5;a=1;b;c=x\r\nhello\r\n0\r\n\r\n"),
        ("ext after semicolon SP", "5; a=1\r\nhello\r\n0\r\n\r\n"), ("ext SP before semicolon", "5 ;a=1\r\nhello\r\n0\r\n\r\n"),
        ("ext SP around =", "5;a = 1\r\nhello\r\n0\r\n\r\n"), ("ext on the last chunk", "5\r\nhello\r\n0;end\r\n\r\n"),
        ("empty ext", "5;\r\nhello\r\n0\r\n\r\n"), ("ext =", "5;=\r\nhello\r\n0\r\n\r\n"),
        ("ext without value after =", "5;a=\r\nhello\r\n0\r\n\r\n"), ("ext unterminated quote", "5;a=\"x\r\nhello\r\n0\r\n\r\n"),
        ("ext with ctl", "5;a\x01\r\nhello\r\n0\r\n\r\n"), ("ext with NUL", "5;a\x00\r\nhello\r\n0\r\n\r\n"),
        ("ext with obs-text", "5;a=\xe9\r\nhello\r\n0\r\n\r\n"), ("ext 5000 bytes", "5;" + "e" * 5000 + "\r\nhello\r\n0\r\n\r\n"),
        ("size then SP", "5 \r\nhello\r\n0\r\n\r\n"), ("size then HTAB", "5\t\r\nhello\r\n0\r\n\r\n"),
        ("SP then size", " 5\r\nhello\r\n0\r\n\r\n"), ("0x5", "0x5\r\nhello\r\n0\r\n\r\n"), ("-5", "-5\r\nhello\r\n0\r\n\r\n"),
        ("+5", "+5\r\nhello\r\n0\r\n\r\n"), ("empty size line", "\r\nhello\r\n0\r\n\r\n"), ("not hex", "g\r\nhello\r\n0\r\n\r\n"),
        ("size with bare LF", "5\nhello\r\n0\r\n\r\n"), ("size with bare CR", "5\rhello\r\n0\r\n\r\n"),
        ("data then bare LF", "5\r\nhello\n0\r\n\r\n"), ("data without CRLF", "5\r\nhello0\r\n\r\n"),
        ("data too long", "5\r\nhello!\r\n0\r\n\r\n"), ("data too short", "5\r\nhell\r\n0\r\n\r\n"),
        ("missing last chunk", "5\r\nhello\r\n"), ("last chunk without final CRLF", "5\r\nhello\r\n0\r\n"),
        ("last chunk then CR", "5\r\nhello\r\n0\r\n\r"), ("final bare LF", "5\r\nhello\r\n0\r\n\n"),
        ("size 15 F", "F" * 15 + "\r\nx"), ("size 2^62-1", "3" + "F" * 15 + "\r\nx"), ("size 2^62", "4" + "0" * 15 + "\r\nx"),
        ("size 16 F", "F" * 16 + "\r\nx"), ("size 17 hex digits", "1" + "0" * 16 + "\r\nx"),
        ("size 20 F", "F" * 20 + "\r\nx"), ("size 21 F", "F" * 21 + "\r\nx"),
        ("size 1 GiB + 1 with data", f"{MAX_BODY + 1:x}\r\n" + "x" * 64),
        ("trailer", "5\r\nhello\r\n0\r\nX-T: v\r\n\r\n"), ("two trailers", "0\r\nA: 1\r\nB:2\r\n\r\n"),
        ("trailer Content-Length", "5\r\nhello\r\n0\r\nContent-Length: 99\r\n\r\n"),
        ("trailer obs-fold", "0\r\nA: x\r\n y\r\n\r\n"), ("trailer bare LF", "0\r\nA: x\n\r\n"),
        ("trailer SP before colon", "0\r\nA : x\r\n\r\n"), ("trailer no colon", "0\r\nNoColon\r\n\r\n"),
        ("trailer ctl", "0\r\nA: \x01\r\n\r\n"), ("trailer NUL", "0\r\nA: x\x00\r\n\r\n"),
        ("trailer empty name", "0\r\n: x\r\n\r\n"), ("trailer bare CR", "0\r\nA: x\ry\r\n\r\n"),
        ("trailer 20 KiB", "0\r\n" + "".join(f"T{i}: {'t' * 1000}\r\n" for i in range(20)) + "\r\n"),
        ("trailer line 5000 bytes", "0\r\nT: " + "t" * 5000 + "\r\n\r\n"),
        ("chunk data with CRLFs", "7\r\n\r\n0\r\n\r\n\r\n0\r\n\r\n"),
    ]:
        add(f"chunked: {name}", post(TE, body))

    # Pipelining and smuggling shapes.
    g1 = "GET /one HTTP/1.1\r\nHost: o\r\n\r\n"
    g2 = "GET /two HTTP/1.1\r\nHost: o\r\n\r\n"
    for name, data in [
        ("two GETs", g1 + g2), ("GET, POST with CL, GET", g1 + "POST /p HTTP/1.1\r\nHost: o\r\nContent-Length: 3\r\n\r\nabc" + g2),
        ("chunked POST then GET", "POST /p HTTP/1.1\r\nHost: o\r\n" + TE + "\r\n3\r\nabc\r\n0\r\n\r\n" + g2),
        ("CL.TE smuggle", "POST /p HTTP/1.1\r\nHost: o\r\nContent-Length: 6\r\n" + TE + "\r\n0\r\n\r\nG" + g2),
        ("TE.CL smuggle", "POST /p HTTP/1.1\r\nHost: o\r\n" + TE + "Content-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n" + g2),
        ("CL shorter than body", "POST /p HTTP/1.1\r\nHost: o\r\nContent-Length: 2\r\n\r\nabc" + g2),
        ("after Connection: close", "GET /one HTTP/1.1\r\nHost: o\r\nConnection: close\r\n\r\n" + g2),
        ("after HTTP/1.0", "GET /one HTTP/1.0\r\n\r\n" + g2),
        ("CRLF between requests", g1 + "\r\n" + g2), ("garbage after a request", g1 + "garbage\r\n\r\n"),
        ("GET with body then GET", "GET /one HTTP/1.1\r\nHost: o\r\nContent-Length: 5\r\n\r\nhello" + g2),
        ("bare LF smuggle", "GET /one HTTP/1.1\r\nHost: o\r\nX: y\nContent-Length: 5\r\n\r\nhello" + g2),
        ("duplicate CL smuggle", "POST /p HTTP/1.1\r\nHost: o\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n" + g2),
        ("TE obs-fold smuggle",
         "POST /p HTTP/1.1\r\nHost: o\r\nTransfer-Encoding: x\r\n chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n" + g2),
        ("chunk ext smuggle", "POST /p HTTP/1.1\r\nHost: o\r\n" + TE + "\r\n2;\n" + "xx\r\n45\r\n0\r\n\r\n" + g2),
    ]:
        add(f"pipeline: {name}", data)

    # Long lines.
    add("URI 9 KiB", req(H, "GET /" + "u" * 9 * 1024 + " HTTP/1.1"))
    add("URI 7 KiB", req(H, "GET /" + "u" * 7 * 1024 + " HTTP/1.1"))
    add("header 60 KiB", req(H + "X-Big: " + "b" * 60 * 1024 + "\r\n"))
    add("header 100 KiB", req(H + "X-Big: " + "b" * 100 * 1024 + "\r\n"))
    add("150 fields", req(H + "".join(f"X-F{i}: {i}\r\n" for i in range(150))))
    add("long field name", req(H + "X" * 5000 + ": v\r\n"))

    # Seeds from the fuzzing corpus.
    cases.extend(fuzz_seed_requests(origin_port))
    return cases


def _localize(data, origin_port):
    """Point absolute-form and authority-form targets at the test origin (never another host)."""
    hp = f"{LOCALHOST}:{origin_port}".encode()
    data = re.sub(rb"(?i)(https?://)(\[[^\]\s/]*\]|[^/\s?#]*)", lambda m: b"http://" + hp, data)
    data = re.sub(rb"^CONNECT [^\s]+", b"CONNECT " + hp, data, flags=re.M)
    return data


CHUNKED_PREFIX = b"POST /c HTTP/1.1\r\nHost: o\r\nTransfer-Encoding: chunked\r\n\r\n"


def fuzz_seeds():
    """(kind, bytes, method) for each seed: request, response or chunked body."""
    out = []
    if not FUZZ_CORPUS.is_dir():
        return out
    for p in sorted(FUZZ_CORPUS.iterdir()):
        raw = p.read_bytes()
        if not raw:
            continue
        sel, body = raw[0], raw[1:]
        if sel % 3 == 0:
            out.append((p.name, "request", body, "GET"))
        elif sel % 3 == 1:
            out.append((p.name, "response", body, ["GET", "HEAD", "CONNECT", "POST"][(sel // 3) % 4]))
        else:
            out.append((p.name, "chunked", body, "POST"))
    return out


def fuzz_seed_requests(origin_port):
    cases = []
    for name, kind, body, _ in fuzz_seeds():
        if kind == "request":
            cases.append(Case(f"seed {name}", _localize(body, origin_port)))
        elif kind == "chunked":
            cases.append(Case(f"seed {name} (as a request body)", CHUNKED_PREFIX + body))
    return cases


_MUTATION_TOKENS = [b"\r\n", b"\n", b"\r", b" ", b"\t", b"\x00", b"\x01", b"\x7f", b"\xff", b":", b";", b",", b"=",
                    b"\"", b"0", b"F", b"00", b"-", b"+", b"chunked", b"Content-Length: 5\r\n",
                    b"Transfer-Encoding: chunked\r\n", b"Host: o\r\n", b"\r\n ", b"HTTP/1.1", b"0\r\n\r\n"]


def mutate(data, rng):
    """One to three byte-level edits: flip, insert, delete, duplicate or splice a token."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[pos:pos] = rng.choice(_MUTATION_TOKENS)
        elif op == 2 and data:
            del data[pos:pos + rng.randint(1, 4)]
        elif op == 3 and data:
            end = min(len(data), pos + rng.randint(1, 16))
            data[pos:pos] = data[pos:end]
        elif op == 4:
            # Replace a byte by a similar-looking one.
            if data:
                i = min(pos, len(data) - 1)
                data[i] = rng.choice(b"\r\n \t:;,0aAfF\x00\x0b\x0c\x80")
        else:
            data[pos:pos] = bytes([rng.randrange(256)])
    return bytes(data)


def mutated_requests(origin_port, count, seed):
    rng = random.Random(seed)
    bases = [c.data for c in fuzz_seed_requests(origin_port)]
    bases += [b"GET /m HTTP/1.1\r\nHost: o\r\n\r\n",
              b"POST /m HTTP/1.1\r\nHost: o\r\nContent-Length: 5\r\n\r\nhello",
              CHUNKED_PREFIX + b"5;e=1\r\nhello\r\n0\r\nT: v\r\n\r\n"]
    out = []
    for i in range(count):
        data = _localize(mutate(rng.choice(bases), rng), origin_port)
        out.append(Case(f"mutation #{i} (seed {seed})", data))
    return out


def build_response_corpus():
    cases = []

    def add(name, data, method="GET"):
        cases.append(Case(name, data if isinstance(data, bytes) else data.encode("latin-1"), method))

    def resp(fields="Content-Length: 2\r\n", line="HTTP/1.1 200 OK", body="ok"):
        return f"{line}\r\n{fields}\r\n{body}"

    # Status lines.
    for name, line in [
        ("200 OK", "HTTP/1.1 200 OK"), ("no reason", "HTTP/1.1 200"), ("empty reason", "HTTP/1.1 200 "),
        ("reason with spaces", "HTTP/1.1 200 All  Fine Here"), ("reason with HTAB", "HTTP/1.1 200 a\tb"),
        ("reason obs-text", "HTTP/1.1 200 Tr\xe8s bien"), ("reason ctl", "HTTP/1.1 200 O\x01K"),
        ("reason DEL", "HTTP/1.1 200 O\x7fK"), ("reason NUL", "HTTP/1.1 200 O\x00K"), ("reason VT", "HTTP/1.1 200 O\x0bK"),
        ("HTTP/1.0", "HTTP/1.0 200 OK"), ("HTTP/1.2", "HTTP/1.2 200 OK"), ("HTTP/2.0", "HTTP/2.0 200 OK"),
        ("HTTP/0.9", "HTTP/0.9 200 OK"), ("HTTP/01.1", "HTTP/01.1 200 OK"), ("HTTP/1", "HTTP/1 200 OK"),
        ("lowercase http", "http/1.1 200 OK"), ("status 2000", "HTTP/1.1 2000 OK"), ("status 20", "HTTP/1.1 20 OK"),
        ("status 099", "HTTP/1.1 099 Low"), ("status 600", "HTTP/1.1 600 High"), ("status 999", "HTTP/1.1 999 Odd"),
        ("status 299", "HTTP/1.1 299 Whatever"), ("status 404", "HTTP/1.1 404 Not Found"), ("status 2OO", "HTTP/1.1 2OO OK"),
        ("double SP", "HTTP/1.1  200 OK"), ("HTAB separator", "HTTP/1.1\t200 OK"), ("leading SP", " HTTP/1.1 200 OK"),
        ("status then HTAB", "HTTP/1.1 200\tOK"), ("garbage", "SSH-2.0-OpenSSH_9.2p1"),
    ]:
        add(f"status line: {name}", resp(line=line))
    add("HTTP/0.9 body", "<html>hello</html>\n")
    add("empty response", "")

    # Framing.
    for name, fields, body in [
        ("Content-Length", "Content-Length: 5\r\n", "hello"), ("Content-Length 0", "Content-Length: 0\r\n", ""),
        ("until close", "Server: x\r\n", "hello until close"),
        ("chunked", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        ("Chunked", "Transfer-Encoding: Chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        ("gzip, chunked", "Transfer-Encoding: gzip, chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        ("chunked, gzip", "Transfer-Encoding: chunked, gzip\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        ("gzip", "Transfer-Encoding: gzip\r\n", "raw bytes"),
        ("two TE fields", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        ("chunked,", "Transfer-Encoding: chunked,\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        ("CL and TE", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        ("two equal CL", "Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
        ("CL list 5, 5", "Content-Length: 5, 5\r\n", "hello"), ("CL list 5, 05", "Content-Length: 5, 05\r\n", "hello"),
        ("two different CL", "Content-Length: 5\r\nContent-Length: 6\r\n", "hello!"),
        ("CL +5", "Content-Length: +5\r\n", "hello"), ("CL -1", "Content-Length: -1\r\n", ""),
        ("CL 5 5", "Content-Length: 5 5\r\n", "hello"), ("CL empty", "Content-Length:\r\n", "hello"),
        ("CL leading zeros", "Content-Length: 0005\r\n", "hello"),
        ("CL 21 digits with leading zeros", "Content-Length: 000000000000000000005\r\n", "hello"),
        ("CL shorter than body", "Content-Length: 3\r\n", "hello"), ("CL longer than body", "Content-Length: 10\r\n", "hello"),
        ("CL 2^63", f"Content-Length: {1 << 63}\r\n", "hello"),
    ]:
        add(f"framing: {name}", resp(fields, body=body))
    add("204 with CL 0", resp("Content-Length: 0\r\n", "HTTP/1.1 204 No Content", ""))
    add("204 with a body", resp("", "HTTP/1.1 204 No Content", "junk"))
    add("304 with CL", resp("Content-Length: 10\r\n", "HTTP/1.1 304 Not Modified", ""))
    add("103 then 200", "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    add("two 103 then 200", "HTTP/1.1 103 A\r\n\r\nHTTP/1.1 103 B\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    add("100 then 200", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    add("1xx only", "HTTP/1.1 103 Early Hints\r\n\r\n")
    add("HEAD answer with CL", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", "HEAD")
    add("HEAD answer chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "HEAD")
    add("HTTP/1.0 keep-alive", resp("Content-Length: 2\r\nConnection: keep-alive\r\n", "HTTP/1.0 200 OK"))

    # Field lines.
    for name, fields in [
        ("SP before colon", "X-Bad : 1\r\n"), ("empty name", ": x\r\n"), ("no colon", "NoColon\r\n"),
        ("SP in name", "X Y: 1\r\n"),
        ("obs-text in name", "X\xe9: 1\r\n"), ("obs-fold", "X-F: a\r\n b\r\n"), ("obs-fold first line", " X-F: a\r\n"),
        ("bare CR", "X-C: a\rb\r\n"), ("NUL in value", "X-C: a\x00b\r\n"), ("ctl in value", "X-C: a\x01b\r\n"),
        ("DEL in value", "X-C: a\x7fb\r\n"), ("VT in value", "X-C: a\x0bb\r\n"), ("obs-text value", "X-C: \xe9\xff\r\n"),
        ("CR CR LF", "X-C: a\r\r\n"),
    ]:
        add(f"field: {name}", resp("Content-Length: 2\r\n" + fields))
    add("bare LF line ends", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok")
    add("bare LF head end", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok")
    add("LF CR LF", "HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok")
    add("head without end", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
    add("150 fields", resp("Content-Length: 2\r\n" + "".join(f"X-F{i}: {i}\r\n" for i in range(150))))
    add("head 70 KiB", resp("Content-Length: 2\r\nX-Big: " + "b" * 70 * 1024 + "\r\n"))

    # Chunked bodies.
    TE = "Transfer-Encoding: chunked\r\n"
    for name, body in [
        ("leading zeros", "0005\r\nhello\r\n000\r\n\r\n"), ("uppercase hex", "A\r\n0123456789\r\n0\r\n\r\n"),
        ("21 hex digits with leading zeros", "0" * 20 + "5\r\nhello\r\n0\r\n\r\n"),
        ("ext", "5;a=b;c\r\nhello\r\n0\r\n\r\n"), ("ext SP before semicolon", "5 ;a\r\nhello\r\n0\r\n\r\n"),
        ("ext garbage", "5;\x01\x02\r\nhello\r\n0\r\n\r\n"), ("size then SP", "5 \r\nhello\r\n0\r\n\r\n"),
        ("not hex", "zz\r\nhello\r\n0\r\n\r\n"), ("data without CRLF", "5\r\nhelloXX0\r\n\r\n"),
        ("missing last chunk", "5\r\nhello\r\n"), ("no final CRLF", "5\r\nhello\r\n0\r\n"),
        ("size overflow", "F" * 17 + "\r\nhello\r\n0\r\n\r\n"), ("size 2^62", "4" + "0" * 15 + "\r\nhello"),
        ("trailer", "5\r\nhello\r\n0\r\nX-T: v\r\n\r\n"), ("trailer obs-fold", "0\r\nA: x\r\n y\r\n\r\n"),
        ("trailer bare LF", "0\r\nA: x\n\r\n"), ("trailer SP before colon", "0\r\nA : x\r\n\r\n"),
        ("trailer ctl", "0\r\nA: \x01\r\n\r\n"), ("size bare LF", "5\nhello\r\n0\r\n\r\n"),
        ("final bare LF", "5\r\nhello\r\n0\r\n\n"), ("data after the end", "0\r\n\r\nEXTRA"),
    ]:
        add(f"chunked: {name}", resp(TE, body=body))

    for name, kind, body, method in fuzz_seeds():
        if kind == "response" and method in ("GET", "HEAD"):
            add(f"seed {name}", body, method)
        elif kind == "chunked":
            add(f"seed {name} (as a response body)", b"HTTP/1.1 200 OK\r\n" + TE.encode() + b"\r\n" + body)
    return cases


def mutated_responses(count, seed):
    rng = random.Random(seed)
    bases = [c.data for c in build_response_corpus() if c.method == "GET"][:12]
    bases += [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
              b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: v\r\n\r\n"]
    return [Case(f"response mutation #{i} (seed {seed})", mutate(rng.choice(bases), rng)) for i in range(count)]


# ---------------------------------------------------------------------------
# Deliberate differences


def _lines(data):
    return re.split(rb"\r?\n", data)


def _heads(data):
    """Rough message heads: the blocks before each empty line (enough to look for features)."""
    return [h for h in re.split(rb"\r?\n\r?\n", data) if h.strip()]


def has_obs_fold(data):
    """A field line that starts with whitespace (continuing the previous one, or cut there)."""
    return re.search(rb"[^\r\n]\r?\n[ \t]+(?:[^\s]|\r?\n|$)", data) is not None


def has_framing_field_in_trailers(data):
    """Content-Length or Transfer-Encoding among trailer fields: h11 validates them as if they framed
    the message; RFC 9112 §7.1.2 has a recipient ignore what it does not understand in trailers
    (Larder checks their syntax and drops them)."""
    return re.search(rb"(?:^|\n)0+(?:[;\t ][^\r\n]*)?\r\n(?:[^\r\n]+\r\n)*(?i:content-length|transfer-encoding)[ \t]*:",
                     data) is not None


def has_bare_lf(data):
    return re.search(rb"(?<!\r)\n", data) is not None


def has_lenient_ctl(data):
    # Bytes h11 allows in field values (it refuses only NUL and whitespace) and RFC 9110 §5.5 does not.
    return re.search(rb"[\x01-\x08\x0e-\x1f\x7f]", data) is not None


def has_other_version(data, response=False):
    if response:
        return re.match(rb"HTTP/(?!1\.)\d\.\d ", data) is not None
    return re.search(rb"(?m) HTTP/(?!1\.[01]\r?$)\d\.\d\r?$", data) is not None


def has_repeated_cl(data):
    for head in _heads(data):
        values = re.findall(rb"(?im)^content-length[ \t]*:([^\r\n]*)", head)
        if len(values) > 1 or any(b"," in v for v in values):
            return True
    return False


def has_cl_and_te(data):
    return any(re.search(rb"(?im)^content-length[ \t]*:", h) and re.search(rb"(?im)^transfer-encoding[ \t]*:", h)
               for h in _heads(data))


def has_non_routable_target(data, origin_port):
    """A request line whose target Larder cannot route: not origin-form, and not an http URL of the
    test origin (h11 accepts any visible characters and does not look at the target)."""
    ok_abs = re.compile(rb"(?i)http://" + re.escape(f"{LOCALHOST}:{origin_port}".encode()) + rb"(?:[/?][\x21-\x7e]*)?")
    for line in _lines(data):
        m = re.match(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+ ([\x21-\x7e]+) HTTP/\d\.\d$", line)
        if m:
            t = m.group(1)
            if not (t.startswith(b"/") or ok_abs.fullmatch(t) or (t == b"*" and line.startswith(b"OPTIONS "))):
                return True
    return False


def has_connect(data):
    return re.search(rb"(?m)^CONNECT ", data) is not None


def over_limits(data):
    for line in _lines(data):
        if re.match(rb"[\x21-\x7e]+ [\x21-\x7e]+ ", line) and len(line) + 2 > MAX_URI:
            return True
    for head in _heads(data):
        if len(_lines(head)) - 1 > MAX_FIELDS:
            return True
    for m in re.finditer(rb"(?im)^content-length[ \t]*:[ \t]*(\d+)", data):
        if int(m.group(1)) > MAX_BODY:
            return True
    if any(len(line) > MAX_CHUNK_LINE for line in _lines(data)):
        return True
    last_chunk = None
    for last_chunk in re.finditer(rb"(?:^|\n)0+(?:[ \t;][^\r\n]*)?\r?\n", data):
        pass
    if last_chunk is not None and len(data) - last_chunk.end() > MAX_TRAILER:
        return True
    return False


_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = rb"\"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*\""
# RFC 9112 §7.1.1: chunk-size *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
_STRICT_CHUNK_LINE = re.compile(rb"[0-9A-Fa-f]+(?:[ \t]*;[ \t]*" + _TOKEN + rb"(?:[ \t]*=[ \t]*(?:" + _TOKEN
                                + rb"|" + _QUOTED + rb"))?)*")
_H11_CHUNK_LINE = re.compile(rb"[0-9A-Fa-f]{1,20}(?:;.*)?[ \t]*")


def has_h11_lenient_chunk_line(data):
    """A chunk-size line h11 reads (it ignores what follows ';' and allows trailing whitespace) that
    RFC 9112 §7.1 / §7.1.1 does not allow."""
    return any(_H11_CHUNK_LINE.fullmatch(line) and not _STRICT_CHUNK_LINE.fullmatch(line)
               for line in data.split(b"\r\n"))


def has_h11_strict_chunk_line(data):
    """A chunk-size line RFC 9112 allows that h11 refuses (BWS before ';', more than 20 hex digits)."""
    return any(_STRICT_CHUNK_LINE.fullmatch(line) and not _H11_CHUNK_LINE.fullmatch(line)
               for line in data.split(b"\r\n"))


def has_huge_chunk_size(data):
    for line in data.split(b"\r\n"):
        m = re.match(rb"([0-9A-Fa-f]{1,20})(?:[; \t]|$)", line)
        if m and int(m.group(1), 16) >= 1 << 62:
            return True
        if m and int(m.group(1), 16) > MAX_BODY:
            return True
    return False


def starts_with_empty_line(case, ctx):
    """h11 refused a request that begins with an empty line (or its CR)."""
    h = ctx.get("h")
    return h is not None and h.end == "reject" and h.rest.startswith(b"\r")


def has_te_list_with_empty_elements(data):
    """A Transfer-Encoding list that is `chunked` once its empty elements (RFC 9110 §5.6.1), or empty
    field lines (§5.3: field lines combine into one list), are dropped."""
    for head in _heads(data):
        values = re.findall(rb"(?im)^transfer-encoding[ \t]*:([^\r\n]*)", head)
        elements = [e.strip(b" \t") for v in values for e in v.split(b",")]
        if len([e for e in elements if e]) == 1 and len(elements) > 1:
            return True
    return False


_HOST = re.compile(rb"(?:\[[A-Za-z0-9\-._~!$&'()*+,;=:]+\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?")


def has_invalid_host(data):
    return any(not _HOST.fullmatch(v.strip(b" \t"))
               for v in re.findall(rb"(?im)^host[ \t]*:([^\r\n]*)", data))


def has_cl_over_20_digits(data):
    return re.search(rb"(?im)^content-length[ \t]*:[ \t]*\d{21,}", data) is not None


def has_fragment_in_target(data):
    line = data.split(b"\r\n", 1)[0].split(b" ")
    return len(line) >= 2 and b"#" in line[1]


def has_unroutable_host(data):
    head = _heads(data)[0] if _heads(data) else b""
    values = re.findall(rb"(?im)^host[ \t]*:[ \t]*([^\r\n]*?)[ \t]*$", head)
    name = rb"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(:[0-9]*)?$"
    return any(v and not re.match(name, v) for v in values)


def has_response_te_not_only_chunked(data):
    head = _heads(data)[0] if _heads(data) else b""
    values = re.findall(rb"(?im)^transfer-encoding[ \t]*:([^\r\n]*)", head)
    return len(values) > 1 or any(v.strip().lower() != b"chunked" for v in values)


def rejected_once_complete(case, ctx):
    """h11 waits for the rest of a head whose bytes so far already break the grammar; completing the
    head makes h11 refuse it too (at the same message)."""
    h = ctx.get("h")
    if ctx["response"] or h is None or h.end != "closed" or h.detail != "needs more bytes":
        return False
    done = h11_request(case.data + b"\r\n\r\n")
    return done.end == "reject" and len(done.messages) == len(h.messages)


@dataclass
class Rule:
    name: str
    reason: str
    kind: str  # the disagreement it covers: larder-stricter | h11-stricter | larder-fault
    applies: object  # (case, ctx) -> bool


# Deliberate differences. `larder-stricter`: Larder rejects (400/414/431/501/505, or 502 for an origin's
# response) what h11 reads; `h11-stricter`: the opposite. Each rule names the bytes that must be in
# the input for it to apply; a disagreement no rule explains fails the test.
ALLOWED = [
    Rule("early-rejection",
         "Larder refuses a head as soon as the bytes it has break the grammar (RequestParser's contract: "
         "'errors are thrown as soon as they are certain'); h11 waits for the empty line that ends the "
         "head, and refuses the same bytes once the head is complete.",
         "larder-stricter", rejected_once_complete),
    Rule("bare-lf",
         "RFC 9112 §2.2 lets a recipient accept a bare LF as a line terminator; Larder does not for "
         "requests (a proxy forwarding a message another server splits differently is a smuggling "
         "vector), h11 does everywhere (requests, responses, trailers). Larder accepts bare LF in "
         "response heads only.",
         "larder-stricter", lambda c, x: has_bare_lf(c.data)),
    Rule("obs-fold",
         "RFC 9112 §5.2: a server MUST reject obs-fold with 400 or replace it with SP, and a proxy MUST "
         "reject a response with obs-fold (502) or replace it; Larder rejects, h11 joins the lines.",
         "larder-stricter", lambda c, x: has_obs_fold(c.data)),
    Rule("control-bytes",
         "RFC 9110 §5.5: field values and reason phrases are VCHAR, obs-text, SP and HTAB; Larder rejects "
         "other control bytes (also in trailers and chunk extensions), h11 deliberately allows all but "
         "NUL and whitespace (h11 issue #57).",
         "larder-stricter", lambda c, x: has_lenient_ctl(c.data)),
    Rule("http-version",
         "Larder speaks HTTP/1.0 and HTTP/1.1 only and answers 505 to other request versions (RFC 9110 "
         "§15.6.6), HTTP/1.2 included (a tested choice in RequestParserTests; RFC 9110 §2.5 would allow "
         "treating it as 1.1), and 502 to a response whose major version is not 1; h11 accepts any "
         "DIGIT.DIGIT and never looks at it again.",
         "larder-stricter", lambda c, x: has_other_version(c.data, x["response"])),
    Rule("repeated-content-length",
         "RFC 9112 §6.3 item 5 allows rejecting a Content-Length list or repeated field; Larder refuses "
         "any repetition in requests (even of one value), h11 merges equal values.",
         "larder-stricter", lambda c, x: not x["response"] and has_repeated_cl(c.data)),
    Rule("content-length-with-transfer-encoding",
         "RFC 9112 §6.1: a server MAY reject a request with both, and §6.3 item 3 says such a response "
         "'ought to be handled as an error'; Larder answers 400 / 502, h11 lets Transfer-Encoding win.",
         "larder-stricter", lambda c, x: has_cl_and_te(c.data)),
    Rule("request-target",
         "RFC 9112 §3.2: Larder must route the target, so it accepts only origin-form (reverse mode here), "
         "absolute-form http/https without userinfo, authority-form with CONNECT and '*' with OPTIONS; "
         "h11 accepts any visible characters and never interprets the target.",
         "larder-stricter", lambda c, x: not x["response"] and has_non_routable_target(c.data, x["origin_port"])),
    Rule("host-syntax",
         "RFC 9112 §3.2: a server MUST answer 400 to a Host field with an invalid value; Larder checks it "
         "is uri-host [':' port] (RFC 3986), h11 only counts Host fields.",
         "larder-stricter", lambda c, x: not x["response"] and has_invalid_host(c.data)),
    Rule("fragment",
         "RFC 9112 §3.2: a request target has no fragment (RFC 9110 §4.2.5: it is the client's alone); "
         "Larder strips one, so it is neither keyed nor forwarded, h11 passes it on.",
         "semantic", lambda c, x: not x["response"] and has_fragment_in_target(c.data)),
    Rule("reverse-host",
         "In reverse mode Larder keys the cache on the Host it forwards, so it accepts there only a DNS "
         "name or an IP literal with an optional port (400 otherwise: sub-delims, percent-encoding, an "
         "empty port); h11 accepts any valid uri-host.",
         "larder-stricter", lambda c, x: not x["response"] and has_unroutable_host(c.data)),
    Rule("reverse-connect",
         "A reverse proxy serves its one origin: CONNECT is answered 405 before any port policy; h11 "
         "accepts the request and hands over the connection.",
         "larder-stricter", lambda c, x: not x["response"] and has_connect(c.data)),
    Rule("connect-policy",
         "CONNECT to a port outside connect_ports is refused with 403 (policy, not parsing); h11 accepts "
         "the request and hands over the connection.",
         "larder-stricter", lambda c, x: not x["response"] and has_connect(c.data)),
    Rule("limits",
         "Larder's configured bounds: request line over max_uri_bytes (414), more than max_header_count "
         "fields (431), a body over max_request_body (413), a chunk-size or trailer line over 4 KiB or "
         "trailers over 16 KiB (400); "
         "h11 has none of them (only its incomplete-event size, set to Larder's max_head_bytes here).",
         "larder-stricter", lambda c, x: over_limits(c.data)),
    Rule("chunk-line-syntax",
         "RFC 9112 §7.1/§7.1.1: chunk-size [ chunk-ext ] CRLF with chunk-ext = *( BWS ';' BWS name "
         "[ BWS '=' BWS value ] ); Larder checks the extension grammar and refuses whitespace after the "
         "size, h11 skips whatever follows ';' and allows trailing whitespace.",
         "larder-stricter", lambda c, x: has_h11_lenient_chunk_line(c.data)),
    Rule("chunk-size-bound",
         "Larder refuses chunk sizes of 2^62 or more (and stops a request body at max_request_body); h11 "
         "reads up to 20 hex digits and then waits for that many bytes.",
         "larder-stricter", lambda c, x: has_huge_chunk_size(c.data)),
    Rule("leading-empty-lines",
         "RFC 9112 §2.2: a server SHOULD ignore at least one empty line before a request line; Larder "
         "skips up to eight, h11 refuses any.",
         "h11-stricter", lambda c, x: not x["response"] and starts_with_empty_line(c, x)),
    Rule("transfer-coding-list",
         "RFC 9110 §5.6.1: recipients ignore empty list elements (and §5.3 joins field lines into one "
         "list), so 'chunked,' or 'chunked' plus an empty Transfer-Encoding line is 'chunked'; h11 "
         "wants exactly one field whose whole value is 'chunked'.",
         "h11-stricter", lambda c, x: has_te_list_with_empty_elements(c.data)),
    Rule("chunk-line-h11-bounds",
         "RFC 9112 §7.1.1 allows BWS before ';' in a chunk extension, and chunk-size has no digit limit "
         "(leading zeros); h11 refuses both (its chunk-size is at most 20 hex digits).",
         "h11-stricter", lambda c, x: has_h11_strict_chunk_line(c.data)),
    Rule("content-length-digits",
         "Content-Length = 1*DIGIT; h11 refuses more than 20 digits even when they are leading zeros.",
         "h11-stricter", lambda c, x: has_cl_over_20_digits(c.data)),
    Rule("content-length-list-same-value",
         "RFC 9110 §8.6: a Content-Length list or repeated field whose members all have the same decimal "
         "value may be replaced by that single value; Larder reads '5, 05' as 5 and forwards one "
         "'Content-Length: 5', where h11 compares the strings and refuses.",
         "h11-stricter", lambda c, x: x.get("response", False) and content_length_list_of_one_value(c.data)),
    Rule("trailer-framing-fields",
         "h11 applies Content-Length / Transfer-Encoding checks to trailer fields; they do not frame "
         "anything there (RFC 9112 §7.1.2, RFC 9110 §6.5.1), and Larder only checks their field syntax.",
         "h11-stricter", lambda c, x: has_framing_field_in_trailers(c.data)),
    Rule("response-transfer-codings",
         "RFC 9112 §6.3 item 4: a response whose final transfer coding is not chunked is read until the "
         "connection closes, and 'gzip, chunked' is chunked; h11 supports exactly one Transfer-Encoding "
         "field with the value 'chunked' and refuses the rest.",
         "h11-stricter", lambda c, x: x["response"] and has_response_te_not_only_chunked(c.data)),
]


# Larder bugs outside Sources/HTTPWire that this comparison finds. They are not deliberate: each
# stays here until it is fixed, and the test fails once one no longer shows (remove it then).
# Larder bugs outside HTTPWire that this comparison found, each as a Rule, until fixed (none now:
# the HTTP/1.0-without-Host forwarding, the relayed Content-Length list and the half-close below
# were fixed where they were found).
KNOWN_BUGS = []


def classify_request(h, lr):
    """None when both read the same; else (kind, description)."""
    if lr.end == "invalid-output" and h.end == "reject" and len(lr.messages) == len(h.messages) \
            and "forwarded" in lr.detail:
        return "h11-stricter", f"Larder forwarded request {len(h.messages) + 1} as it came, and h11 refuses it there too"
    if lr.end in ("timeout", "invalid-output", "reject-open", "error"):
        return "larder-fault", f"Larder: {lr}"
    n = len(h.messages)
    for i in range(n):
        if i >= len(lr.messages):
            if lr.end == "reject":
                return "larder-stricter", f"request {i + 1}"
            return "framing", f"Larder closed silently where h11 read request {i + 1}"
        if not h.messages[i].same(lr.messages[i]):
            return "semantic", f"request {i + 1}: h11 {h.messages[i]} vs Larder {lr.messages[i]}"
    if h.stop:
        return None  # the connection cannot go on after h11's last message; what Larder did next is its business
    if len(lr.messages) > n:
        if h.end == "reject":
            return "h11-stricter", f"request {n + 1}"
        return "framing", f"Larder read request {n + 1} where h11 needs more bytes"
    if h.end == lr.end:
        return None
    if lr.end == "reject":
        return "larder-stricter", f"after {n} requests h11 needs more bytes"
    return "h11-stricter", f"after {n} requests Larder waits for more bytes"


def classify_response(h, lr):
    if h.ok and lr.ok:
        if h.status == lr.status and h.body == lr.body:
            return None
        return "semantic", "relayed a different response"
    if h.ok == lr.ok:
        return None
    return ("larder-stricter", "") if h.ok else ("h11-stricter", "")


def content_length_list_of_one_value(data):
    """A head whose Content-Length fields, taken as one list, name a single decimal value twice or more."""
    head = data.split(b"\r\n\r\n", 1)[0]
    members = [m.strip() for v in re.findall(rb"(?im)^content-length:([^\r\n]*)", head) for m in v.split(b",")]
    return len(members) > 1 and all(m.isdigit() for m in members) and len({int(m) for m in members}) == 1


def explain(case, kind, ctx):
    for rule in ALLOWED + KNOWN_BUGS:
        if rule.kind == kind and rule.applies(case, ctx):
            return rule
    return None


# ---------------------------------------------------------------------------
# Running a corpus


@dataclass
class Finding:
    case: Case
    kind: str
    detail: str
    h11: str
    larder: str
    rule: object = None


def run_requests(cases, larder_port, origin_port, workers=24, quiet=0.05):
    ctx = {"response": False, "origin_port": origin_port}

    def first(case):
        h = h11_request(case.data)
        expect = len(h.messages)  # answers to wait for; a rejection (or more) must come within `quiet`
        return h, larder_request(larder_port, case.data, expect, quiet, defer=True)

    firsts = []
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        # Whether more comes on the connections that have every answer h11 expects: one window for
        # a batch of them (in batches, so that the connections left open stay well below Larder's
        # limit per client address).
        for start in range(0, len(cases), 200):
            batch = list(pool.map(first, cases[start:start + 200]))
            settle_pending([lr for _, lr in batch], quiet)
            firsts += batch

    def one(item):
        case, (h, lr) = item
        expect = lr.expect
        verdict = classify_request(h, lr)
        if verdict is not None and lr.end not in ("timeout", "error") and not lr.settled:
            # Larder may just have been slow (many inputs run at once; the first try waits only
            # `quiet` for an answer it did not expect): once more, patiently. (A silence seen by
            # settle_pending came after every other input had been answered: not slowness.)
            lr = larder_request(larder_port, case.data, expect, quiet=1.5)
            verdict = classify_request(h, lr)
        if verdict is None:
            return None
        kind, detail = verdict
        return Finding(case, kind, detail, str(h), str(lr),
                       explain(case, kind, dict(ctx, h=h, larder_detail=lr.detail)))

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return [f for f in pool.map(one, zip(cases, firsts)) if f is not None]


def run_responses(cases, larder_port, raw_origin, first_id=0, workers=24):
    ctx = {"response": True}
    ids = {}
    for i, case in enumerate(cases):
        ids[first_id + i] = case
        raw_origin.responses[first_id + i] = case.data

    def one(item):
        cid, case = item
        h = h11_response(case.data, case.method)
        lr, how = larder_response(larder_port, raw_origin.port, cid, case.method)
        if how == "invalid-output" and not lr.ok and not h.ok and h.detail and h.detail in lr.detail:
            # Relayed as it came, and h11 refuses Larder's copy for the reason it refused the origin's.
            return Finding(case, "h11-stricter", "Larder relayed it; h11 refuses it there too", str(h), str(lr),
                           explain(case, "h11-stricter", ctx))
        if how in ("timeout", "invalid-output", "error"):
            return Finding(case, "larder-fault", f"{how}: {lr.detail}", str(h), str(lr),
                           explain(case, "larder-fault", dict(ctx, larder_detail=lr.detail)))
        verdict = classify_response(h, lr)
        if verdict is None:
            return None
        kind, detail = verdict
        return Finding(case, kind, detail, str(h), str(lr), explain(case, kind, ctx))

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return [f for f in pool.map(one, ids.items()) if f is not None]


def larder_config(fake_dns_port):
    # Only 127.0.0.0/8 may be reached, whatever a mutated target names, and names resolve nowhere.
    deny = ["0.0.0.0/2", "64.0.0.0/3", "96.0.0.0/4", "112.0.0.0/5", "120.0.0.0/6", "124.0.0.0/7", "126.0.0.0/8",
            "128.0.0.0/1", "::/0"]
    return {
        "deny_destinations": deny,
        "access_log": "off",
        "session": {"max_idle_connections_per_host": 0, "dns_servers": [f"{LOCALHOST}:{fake_dns_port}"],
                    "timeout_interval_for_request": "5s"},
    }


def report(findings, total, title):
    lines = [f"{title}: {total} inputs, {len(findings)} disagreements"]
    by_rule = {}
    for f in findings:
        key = f.rule.name if f.rule else "NOT ALLOWED"
        if f.rule in KNOWN_BUGS:
            key = "KNOWN LARDER BUG " + key
        by_rule.setdefault(key, []).append(f)
    for key, items in sorted(by_rule.items(), key=lambda kv: (kv[0] != "NOT ALLOWED", kv[0])):
        lines.append(f"  {key}: {len(items)}")
        for f in items[: (40 if key == "NOT ALLOWED" else 5)]:
            lines.append(f"    - {f.case.name} [{f.kind}] {f.detail}")
            if key == "NOT ALLOWED":
                lines.append(f"        input:  {f.case.data[:300]!r}")
                lines.append(f"        h11:    {f.h11}")
                lines.append(f"        Larder: {f.larder}")
    return "\n".join(lines)


def start_larder(larder_factory, fake_dns, echo):
    """In reverse mode, for requests: every target reaches the echo origin."""
    config = larder_config(fake_dns.port)
    config["reverse_origin"] = f"http://{LOCALHOST}:{echo.port}"
    return larder_factory(config=config)


def start_forward_larder(larder_factory, fake_dns):
    """A forward proxy, for responses: absolute-form requests reach the raw origin (a reverse proxy
    serves only its own origin)."""
    return larder_factory(config=larder_config(fake_dns.port), name="forward")


# ---------------------------------------------------------------------------
# The tests


@pytest.mark.timeout_s(60)
def test_larder_and_h11_read_the_same_messages(larder_factory, fake_dns, report_metric):
    assert h11_version_ok(), f"h11 {h11.__version__} is too old: 0.16 or newer checks the CRLF after chunk data"
    t0 = time.monotonic()
    echo = EchoOrigin()
    raw = RawOrigin({})
    try:
        lr = start_larder(larder_factory, fake_dns, echo)
        forward = start_forward_larder(larder_factory, fake_dns)
        requests = build_request_corpus(echo.port) + mutated_requests(echo.port, MUTATIONS_IN_SUITE, seed=9112)
        responses = build_response_corpus() + mutated_responses(MUTATIONS_IN_SUITE // 2, seed=9110)
        req_findings = run_requests(requests, lr.port, echo.port)
        resp_findings = run_responses(responses, forward.port, raw)
    finally:
        echo.stop()
        raw.stop()
    elapsed = time.monotonic() - t0
    findings = req_findings + resp_findings
    text = report(req_findings, len(requests), "requests") + "\n" + report(resp_findings, len(responses), "responses")
    print(text)
    unexplained = [f for f in findings if f.rule is None]
    report_metric(f"differential: {len(requests)} requests and {len(responses)} responses compared with h11 in "
                  f"{elapsed:.1f} s: {len(findings)} disagreements, {len(unexplained)} not on the allow-list")
    assert not unexplained, text
    for bug in KNOWN_BUGS:
        assert any(f.rule is bug for f in findings), \
            f"known Larder bug {bug.name!r} no longer shows: remove it from KNOWN_BUGS\n{text}"


def test_half_close_after_a_request_still_gets_the_response(larder_factory, fake_dns):
    """A client may send its request and half-close at once (RFC 9112 §9.6 lets it); the answer must
    still arrive. Larder queues the response, re-enables reading, sees the end of stream and frees
    the socket before the response is written."""
    echo = EchoOrigin()
    try:
        lr = start_larder(larder_factory, fake_dns, echo)
        lost = 0
        for _ in range(10):
            with socket.create_connection((LOCALHOST, lr.port), timeout=IO_TIMEOUT) as s:
                s.sendall(b"GET /half-close HTTP/1.1\r\nHost: o\r\n\r\n")
                s.shutdown(socket.SHUT_WR)
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            lost += not data.startswith(b"HTTP/1.1 200")
    finally:
        echo.stop()
    assert lost == 0, f"{lost} of 10 responses lost after a half-close"
