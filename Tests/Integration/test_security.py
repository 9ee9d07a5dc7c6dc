"""Attacks on a shared cache and its connections, each kept as a test against the real binary.

Request smuggling through the Connection field, response desync after body-less answers and
early final answers, Host poisoning and open forwarding in reverse mode, cookies handed to other
clients, request bodies left unread or read twice, host names with a trailing dot, fragments,
unbounded memory from clients that do not read, a collapsed follower stalling everyone, and a
transfer coding a proxy cannot relay. The origins here are raw sockets scripted per test, so they
can misbehave exactly as a hostile or broken origin would.
"""

import select
import socket
import threading
import time

import pytest

from helpers import (LOCALHOST, RSSSampler, RawClient, _ThreadedServer, build_request, caller_place, headers_named,
                     in_background, note_sleep, proxy_exchange, std_request)
from test_admin import ADMIN, stats, wait_stats


# ---------------------------------------------------------------------------------------------
# A scripted origin


class Req:
    def __init__(self, conn, method, target, headers):
        self.conn = conn
        self.method = method
        self.target = target
        self.headers = headers
        self.body = b""

    def header(self, name):
        values = headers_named(self.headers, name)
        return values[0] if values else None

    def __repr__(self):
        return f"<Req conn={self.conn} {self.method} {self.target} body={self.body[:60]!r}>"


class ScriptedOrigin(_ThreadedServer):
    """A keep-alive HTTP/1.1 origin whose answers each test scripts: ``handler(req)`` returns the
    bytes to send (None closes), a list of byte strings and callables (called in turn, to pace the
    answer), or ``(answer, False)`` to answer without reading the request's body, as a lax origin
    does, leaving the body to be parsed as the next request."""

    def __init__(self, handler):
        self.handler = handler
        self.seen = []
        self.answered = 0  # answers sent whole (every part of the script)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        super().__init__()

    def handle(self, sock, peer):
        conn = self.connections
        buf = bytearray()
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, rest = bytes(buf).partition(b"\r\n\r\n")
            buf = bytearray(rest)
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                return
            headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:] if ":" in line]
            req = Req(conn, parts[0], parts[1], headers)
            out = self.handler(req)
            read_body = True
            if isinstance(out, tuple):
                out, read_body = out
            if read_body:
                req.body = self._read_body(sock, buf, req)
            with self.lock:
                self.seen.append(req)
                self.changed.notify_all()
            if out is None:
                return
            for part in out if isinstance(out, list) else [out]:
                if callable(part):
                    part()
                elif isinstance(part, tuple):   # (bytes, send flags), e.g. socket.MSG_OOB
                    sock.send(*part)
                else:
                    sock.sendall(part)
            with self.lock:
                self.answered += 1
                self.changed.notify_all()

    @staticmethod
    def _read_body(sock, buf, req):
        def fill(n):
            while len(buf) < n:
                data = sock.recv(65536)
                if not data:
                    raise EOFError("body cut")
                buf.extend(data)

        if (req.header("transfer-encoding") or "").lower() == "chunked":
            body = bytearray()
            while True:
                while b"\r\n" not in buf:
                    fill(len(buf) + 1)
                line, _, _ = bytes(buf).partition(b"\r\n")
                del buf[:len(line) + 2]
                size = int(line.split(b";")[0], 16)
                fill(size + 2)
                body += buf[:size]
                del buf[:size + 2]
                if size == 0:
                    return bytes(body)
        n = int(req.header("content-length") or 0)
        fill(n)
        body = bytes(buf[:n])
        del buf[:n]
        return body

    def targets(self):
        with self.lock:
            return [r.target for r in self.seen]

    def wait_seen(self, n, timeout=10):
        """Waits until ``n`` requests have arrived; True if they did."""
        with self.lock:
            return self.changed.wait_for(lambda: len(self.seen) >= n, timeout)

    def wait_answered(self, n, timeout=10):
        """Waits until ``n`` answers were sent whole (their late parts too); True if they were."""
        with self.lock:
            return self.changed.wait_for(lambda: self.answered >= n, timeout)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"


def answer(status=200, body=b"", headers=(), reason="OK", length=None):
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{n}: {v}" for n, v in headers]
    lines.append(f"Content-Length: {len(body) if length is None else length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


SMUGGLED = answer(200, b"SMUGGLED", [("Cache-Control", "max-age=600")])


@pytest.fixture
def scripted():
    servers = []

    def start(handler):
        s = ScriptedOrigin(handler)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def by_path(routes):
    """A handler answering from a dict of target path -> response bytes (or callables)."""
    def handler(req):
        r = routes.get(req.target.split("?")[0], answer(404, b"no such path"))
        return r(req) if callable(r) else r
    return handler


# ---------------------------------------------------------------------------------------------
# 1. Connection: Content-Length


def test_connection_cannot_remove_content_length_so_a_body_is_never_a_second_request(larder, scripted):
    origin = scripted(by_path({"/upload": answer(200, b"stored"), "/victim": answer(200, b"victim page",
                                                                                     [("Cache-Control", "max-age=600")])}))
    inner = build_request("GET", "/smuggled", [("Host", f"127.0.0.1:{origin.port}")])
    with RawClient(larder.port) as c:
        c.send(std_request("POST", origin.url("/upload"),
                           [("Connection", "Content-Length"), ("Content-Length", str(len(inner)))], inner))
        r = c.response()
        assert r.status == 200 and r.body == b"stored"
    victim = proxy_exchange(larder.port, "GET", origin.url("/victim"))
    assert victim.body == b"victim page"
    assert "/smuggled" not in origin.targets(), origin.seen
    upload = [q for q in origin.seen if q.target == "/upload"][0]
    assert upload.header("Content-Length") == str(len(inner)) and upload.body == inner


def test_connection_naming_end_to_end_fields_drops_them_for_the_cache_too(larder, scripted):
    """A field the client names in Connection is removed before anything reads the request: the
    origin and the cache see the same request (here: no Cache-Control, so the entry is used)."""
    origin = scripted(by_path({"/page": answer(200, b"page", [("Cache-Control", "max-age=600")])}))
    assert proxy_exchange(larder.port, "GET", origin.url("/page")).status == 200
    r = proxy_exchange(larder.port, "GET", origin.url("/page"),
                       [("Cache-Control", "no-cache"), ("Connection", "Cache-Control")])
    assert "hit" in r.header("Cache-Status"), r.headers
    assert all(q.header("Cache-Control") is None for q in origin.seen)


# ---------------------------------------------------------------------------------------------
# 2. Bytes after a body-less response


@pytest.mark.parametrize("case", ["head", "head-later", "204", "304"])
def test_bytes_after_a_bodyless_response_are_never_read_as_the_next_response(larder_factory, scripted, case):
    lr = larder_factory(config=ADMIN)
    answered = threading.Event()

    def handler(req):
        if req.target == "/victim":
            return answer(200, b"the real victim page", [("Cache-Control", "max-age=600")])
        if case == "head":
            return answer(200, b"", [("Cache-Control", "max-age=600")], length=5) + SMUGGLED
        if case == "head-later":
            # The stray response once the client has the real one, in a segment of its own.
            return [answer(200, b"", [("Cache-Control", "max-age=600")], length=5), lambda: answered.wait(10),
                    SMUGGLED]
        if case == "204":
            return b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n" + SMUGGLED
        return b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n" + SMUGGLED

    origin = scripted(handler)
    method = "HEAD" if case.startswith("head") else "GET"
    headers = [("If-None-Match", '"x"')] if case == "304" else []
    with RawClient(lr.port) as c:
        c.send(std_request(method, origin.url("/first"), headers))
        first = c.response(method)
        answered.set()
        assert first.status in (200, 204, 304)
        # Every byte of the answer is sent, the stray response too (on loopback, it has arrived).
        assert origin.wait_answered(1)
        c.send(std_request("GET", origin.url("/victim")))
        victim = c.response()
    assert victim.body == b"the real victim page"
    again = proxy_exchange(lr.port, "GET", origin.url("/victim"))
    assert again.body == b"the real victim page"
    wait_stats(lr, lambda s: s["origin_connections_discarded_unsafe"] >= 1)


def test_a_head_revalidation_followed_by_smuggled_bytes_does_not_poison_the_next_url(larder_factory, scripted):
    """Larder revalidates with HEAD by default: it walks into this itself when an entry is stale."""
    lr = larder_factory(config=ADMIN)

    def handler(req):
        if req.method == "HEAD":
            return answer(200, b"", [("ETag", '"v1"'), ("Cache-Control", "max-age=0")], length=4) + SMUGGLED
        if req.target == "/stale":
            return answer(200, b"v1v1", [("ETag", '"v1"'), ("Cache-Control", "max-age=0")])
        return answer(200, b"other page", [("Cache-Control", "max-age=600")])

    origin = scripted(handler)
    assert proxy_exchange(lr.port, "GET", origin.url("/stale")).body == b"v1v1"
    with RawClient(lr.port) as c:
        r = c.request("GET", origin.url("/stale"))
        assert r.body == b"v1v1"
        other = c.request("GET", origin.url("/other"))
    assert other.body == b"other page"
    assert proxy_exchange(lr.port, "GET", origin.url("/other")).body == b"other page"


def test_urgent_data_cannot_hide_a_second_answer_from_the_unread_bytes_check(larder_factory, scripted):
    """recv stops at TCP urgent data, so the read that brings a response's last bytes can come back
    short while a second, unasked-for answer waits behind the urgent byte. The connection goes
    straight to a request waiting for it (one connection per host): that request must never get
    the second answer."""
    lr = larder_factory(config=dict(ADMIN, workers=1, session={"http_maximum_connections_per_host": 1}))
    victim_waits = threading.Event()

    def handler(req):
        if req.target == "/first":
            return [lambda: victim_waits.wait(10),
                    (answer(200, b"ok", [("Cache-Control", "no-store")]) + b"!", socket.MSG_OOB), SMUGGLED]
        return answer(200, b"the real victim page", [("Cache-Control", "max-age=600")])

    origin = scripted(handler)
    results = {}

    def first():
        results["first"] = proxy_exchange(lr.port, "GET", origin.url("/first"))

    t = threading.Thread(target=first)
    t.start()
    assert origin.wait_seen(1)   # /first holds the only connection; /victim waits for it
    victim = in_background(lambda: proxy_exchange(lr.port, "GET", origin.url("/victim")))
    wait_stats(lr, lambda s: s["requests"]["GET"] >= 2)  # Larder has read it: it waits for the connection
    victim_waits.set()
    victim = victim()
    t.join(10)
    assert results["first"].body == b"ok"
    assert victim.body == b"the real victim page"
    assert proxy_exchange(lr.port, "GET", origin.url("/victim")).body == b"the real victim page"
    wait_stats(lr, lambda s: s["origin_connections_discarded_unsafe"] >= 1)


# ---------------------------------------------------------------------------------------------
# 8. Expect: 100-continue answered with a final status


def test_a_final_answer_to_expect_continue_never_leaves_the_body_on_a_reused_connection(larder_factory, scripted):
    lr = larder_factory(config=ADMIN)

    def handler(req):
        if req.target == "/upload":
            # A final answer without reading the body, and the connection kept open.
            return answer(417, b"", reason="Expectation Failed"), False
        if req.target == "/smuggled":
            return SMUGGLED
        return answer(200, b"the victim page", [("Cache-Control", "max-age=600")])

    origin = scripted(handler)
    inner = build_request("GET", "/smuggled", [("Host", f"127.0.0.1:{origin.port}")])
    with RawClient(lr.port) as c:
        c.send(std_request("POST", origin.url("/upload"),
                           [("Expect", "100-continue"), ("Content-Length", str(len(inner)))], inner))
        r = c.response()
        assert r.status == 417
    # The origin connection is back in the pool, or was closed for its unread bytes.
    s = wait_stats(lr, lambda s: s["origin_connections_idle"] + s["origin_connections_discarded_unsafe"] >= 1)
    assert s["origin_connections_idle"] + s["origin_connections_discarded_unsafe"] >= 1, s
    for _ in range(3):
        assert proxy_exchange(lr.port, "GET", origin.url("/victim")).body == b"the victim page"
    wait_stats(lr, lambda s: s["origin_connections_discarded_unsafe"] >= 1)


# ---------------------------------------------------------------------------------------------
# 3. Reverse mode


def host_echo(req):
    body = f"page for {req.header('Host')}".encode()
    return answer(200, body, [("Cache-Control", "max-age=600")])


def test_reverse_mode_keys_on_the_forwarded_host_so_host_cannot_poison(larder_factory, scripted):
    origin = scripted(host_echo)
    lr = larder_factory(args=["--reverse-origin", f"http://127.0.0.1:{origin.port}"])
    with RawClient(lr.port) as c:
        c.send(build_request("GET", "/index", [("Host", "evil.example")]))
        assert c.response().body == b"page for evil.example"
    with RawClient(lr.port) as c:
        c.send(build_request("GET", "/index", [("Host", "www.example")]))
        r = c.response()
    assert r.body == b"page for www.example"
    with RawClient(lr.port) as c:
        c.send(build_request("GET", "/index", [("Host", "WWW.example.")]))
        r = c.response()
    assert r.body == b"page for www.example" and "hit" in r.header("Cache-Status")


def test_reverse_mode_can_send_the_origins_host_and_refuses_unlisted_hosts(larder_factory, scripted):
    origin = scripted(host_echo)
    lr = larder_factory(config={"reverse_host": "origin", "reverse_allowed_hosts": ["www.example", "*.cdn.example"]},
                        args=["--reverse-origin", f"http://127.0.0.1:{origin.port}"])
    with RawClient(lr.port) as c:
        c.send(build_request("GET", "/index", [("Host", "evil.example")]))
        r = c.response()
    assert r.status == 400 and b"not served here" in r.body
    with RawClient(lr.port) as c:
        c.send(build_request("GET", "/index", [("Host", "a.cdn.example:8080")]))
        r = c.response()
    assert r.status == 200 and r.body == f"page for 127.0.0.1:{origin.port}".encode()
    assert origin.targets() == ["/index"]


def test_reverse_mode_is_not_an_open_proxy(larder_factory, scripted):
    origin = scripted(host_echo)
    elsewhere = scripted(lambda req: answer(200, b"reached elsewhere"))
    lr = larder_factory(args=["--reverse-origin", f"http://127.0.0.1:{origin.port}"])
    r = proxy_exchange(lr.port, "GET", elsewhere.url("/x"))
    assert r.body != b"reached elsewhere" and elsewhere.targets() == []
    assert r.body == f"page for 127.0.0.1:{elsewhere.port}".encode()  # the origin's page for that Host
    with RawClient(lr.port) as c:
        c.send(build_request("CONNECT", f"127.0.0.1:{elsewhere.port}", [("Host", f"127.0.0.1:{elsewhere.port}")]))
        r = c.response("CONNECT")
    assert r.status == 405
    assert elsewhere.connections == 0


# ---------------------------------------------------------------------------------------------
# 4. Cookies


def test_a_stored_response_never_hands_its_cookie_to_another_client(larder, scripted):
    origin = scripted(by_path({"/login-page": answer(200, b"welcome", [("Cache-Control", "max-age=600"),
                                                                        ("Set-Cookie", "session=SECRET1"),
                                                                        ("Set-Cookie2", "old=SECRET2")])}))
    first = proxy_exchange(larder.port, "GET", origin.url("/login-page"))
    assert first.header("Set-Cookie") == "session=SECRET1"  # the client that asked gets its cookie
    for method in ("GET", "HEAD"):
        r = proxy_exchange(larder.port, method, origin.url("/login-page"))
        assert "hit" in r.header("Cache-Status")
        assert r.header("Set-Cookie") is None and r.header("Set-Cookie2") is None, r.headers
    assert len(origin.seen) == 1


def test_collapsed_followers_never_receive_the_leaders_cookie(larder_factory, scripted):
    larder = larder_factory(config=ADMIN)
    gate = threading.Event()

    def handler(req):
        gate.wait(5)
        return answer(200, b"x" * 1000, [("Cache-Control", "max-age=600"), ("Set-Cookie", "session=LEADER"),
                                          ("Cache-Control", 'no-cache="X-Private"'), ("X-Private", "leader-only")])

    origin = scripted(handler)
    results = [None] * 4

    def fetch(i):
        results[i] = proxy_exchange(larder.port, "GET", origin.url("/shared"))

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    wait_stats(larder, lambda s: s["collapsed_requests"] >= 3)  # the others follow the first one's fetch
    gate.set()
    for t in threads:
        t.join(10)
    followers = [r for r in results if "collapsed" in (r.header("Cache-Status") or "")]
    assert followers, [r.header("Cache-Status") for r in results]
    for r in followers:
        assert r.header("Set-Cookie") is None and r.header("X-Private") is None, r.headers
    assert sum(r.header("Set-Cookie") == "session=LEADER" for r in results) == 1


def test_qualified_no_cache_fields_stay_out_after_a_revalidation(larder, scripted):
    def handler(req):
        if req.header("If-None-Match") == '"v1"' or req.method == "HEAD":
            # The update carries the private field again, and a cookie, but no qualifier of its own.
            return (f"HTTP/1.1 {'304 Not Modified' if req.method == 'GET' else '200 OK'}\r\nETag: \"v1\"\r\n"
                    "Cache-Control: max-age=600\r\nX-Secret: from-update\r\nSet-Cookie: s=UPDATE\r\n"
                    + ("Content-Length: 2\r\n" if req.method == "HEAD" else "") + "\r\n").encode()
        return answer(200, b"ok", [("ETag", '"v1"'), ("Cache-Control", 'max-age=0, no-cache="X-Secret"'),
                                   ("X-Secret", "first")])

    origin = scripted(handler)
    first = proxy_exchange(larder.port, "GET", origin.url("/q"))
    assert first.header("X-Secret") == "first"
    revalidated = proxy_exchange(larder.port, "GET", origin.url("/q"))
    assert revalidated.body == b"ok"
    hit = proxy_exchange(larder.port, "GET", origin.url("/q"))
    assert "hit" in hit.header("Cache-Status"), hit.headers
    assert hit.header("X-Secret") is None and hit.header("Set-Cookie") is None, hit.headers


def test_each_revalidation_builds_on_the_head_the_last_one_left(larder, scripted):
    # The memory tier keeps a freshened head parsed for the next revalidation: that copy must be
    # the latest head, never the one first stored. A field only the first update adds has to
    # survive the later ones, and the round counter must always be the newest.
    rounds = []

    def handler(req):
        if req.method == "HEAD":
            rounds.append(req)
            n = len(rounds)
            extra = "X-Added: by-round-1\r\n" if n == 1 else ""
            return (f"HTTP/1.1 200 OK\r\nETag: \"v1\"\r\nCache-Control: max-age=0\r\nX-Round: {n}\r\n{extra}"
                    "Content-Length: 2\r\n\r\n").encode()
        return answer(200, b"ok", [("ETag", '"v1"'), ("Cache-Control", "max-age=0"), ("X-Round", "0")])

    origin = scripted(handler)
    assert proxy_exchange(larder.port, "GET", origin.url("/r")).header("X-Round") == "0"
    for n in range(1, 5):
        r = proxy_exchange(larder.port, "GET", origin.url("/r"))
        assert r.body == b"ok" and "revalidated" in r.header("Cache-Status"), r.headers
        assert r.header("X-Round") == str(n), r.headers
        assert r.header("X-Added") == "by-round-1", r.headers
        assert r.all("X-Round") == [str(n)], "one X-Round, the newest"
    assert len(rounds) == 4


# ---------------------------------------------------------------------------------------------
# 5, 6, 15. Request bodies on GET and HEAD


def test_a_body_on_a_cached_get_is_read_not_run_as_the_next_request(larder, scripted):
    origin = scripted(by_path({"/page": answer(200, b"cached page", [("Cache-Control", "max-age=600")]),
                               "/smuggled": SMUGGLED}))
    assert proxy_exchange(larder.port, "GET", origin.url("/page")).body == b"cached page"
    inner = std_request("GET", origin.url("/smuggled"))
    with RawClient(larder.port) as c:
        c.send(std_request("GET", origin.url("/page"), [("Content-Length", str(len(inner)))], inner))
        r = c.response()
        assert r.body == b"cached page"
        assert "request-body" in r.header("Cache-Status")
        # The body was the request's: the next answer on this connection is the next request's.
        after = c.request("GET", origin.url("/page"))
        assert after.body == b"cached page" and b"SMUGGLED" not in bytes(c.reader.buf), after
    assert "/smuggled" not in origin.targets()
    fat = [q for q in origin.seen if q.body]
    assert fat and fat[0].body == inner


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_is_forwarded_once_and_never_revalidated(larder, scripted, framing):
    def handler(req):
        if req.method == "HEAD" or req.header("If-None-Match"):
            return answer(200, b"", [("ETag", '"v2"'), ("Cache-Control", "max-age=0")], length=5)
        return answer(200, b"v-new", [("ETag", '"v2"' if req.body else '"v1"'), ("Cache-Control", "max-age=0")])

    origin = scripted(handler)
    proxy_exchange(larder.port, "GET", origin.url("/r"))
    body = b"x" * 90
    nxt = std_request("GET", origin.url("/next"), [("Cookie", "victim=secret")])
    with RawClient(larder.port) as c:
        if framing == "length":
            c.send(std_request("GET", origin.url("/r"), [("Content-Length", "90")], body) + nxt)
        else:
            c.send(std_request("GET", origin.url("/r"), [("Transfer-Encoding", "chunked")],
                               b"5a\r\n" + body + b"\r\n0\r\n\r\n") + nxt)
        first = c.response()
        assert first.status == 200
        second = c.response()
        assert second.status == 200
    with_body = [q for q in origin.seen if q.body]
    assert len(with_body) == 1 and with_body[0].target == "/r" and with_body[0].body == body, origin.seen
    assert not any(q.method == "HEAD" for q in origin.seen), "a request with a body is never revalidated"
    nexts = [q for q in origin.seen if q.target == "/next"]
    assert len(nexts) == 1 and nexts[0].header("Cookie") == "victim=secret"


def test_a_fat_get_response_is_not_stored(larder, scripted):
    answers = iter([b"answer to the query in the body", b"answer to a plain GET", b"again"])
    origin = scripted(lambda req: answer(200, next(answers), [("Cache-Control", "max-age=600")]))
    r = proxy_exchange(larder.port, "GET", origin.url("/search"), body=b"query=1")
    assert r.body == b"answer to the query in the body"
    assert origin.seen[0].body == b"query=1"
    plain = proxy_exchange(larder.port, "GET", origin.url("/search"))
    assert plain.body == b"answer to a plain GET" and "hit" not in plain.header("Cache-Status")


def test_transfer_codings_other_than_chunked_are_refused_with_502(larder, scripted):
    import gzip
    payload = gzip.compress(b"hello")
    chunked = f"{len(payload):x}\r\n".encode() + payload + b"\r\n0\r\n\r\n"
    origin = scripted(lambda req: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked)
    r = proxy_exchange(larder.port, "GET", origin.url("/z"))
    assert r.status == 502 and b"Transfer-Encoding" in r.body


# ---------------------------------------------------------------------------------------------
# 7. Host names with a trailing dot, 10. fragments


def test_a_trailing_dot_meets_every_host_rule(larder_factory, scripted, tmp_path):
    from test_access import users_file
    origin = scripted(lambda req: answer(200, b"inside"))
    users = users_file(tmp_path, ("alice", "wonder"))
    lr = larder_factory(config={"auth": {"users_file": str(users), "destinations": ["intranet.test"]},
                                "deny_destinations": ["blocked.test"], "connect_ports": [443, origin.port]})
    for host in ("intranet.test", "intranet.test.", "INTRANET.test."):
        r = proxy_exchange(lr.port, "GET", f"http://{host}:{origin.port}/")
        assert r.status == 407, (host, r)
    for host in ("blocked.test.", "Blocked.Test."):
        assert proxy_exchange(lr.port, "GET", f"http://{host}:{origin.port}/").status == 403
        with RawClient(lr.port) as c:
            c.send(build_request("CONNECT", f"{host}:{origin.port}", [("Host", f"{host}:{origin.port}")]))
            assert c.response("CONNECT").status == 403
    for bad in ("intranet.test..", ".intranet.test", "intranet..test"):
        assert proxy_exchange(lr.port, "GET", f"http://{bad}:{origin.port}/").status == 400
    assert origin.targets() == []


def test_a_trailing_dot_names_the_same_cache_entry(larder, scripted):
    origin = scripted(lambda req: answer(200, b"one entry", [("Cache-Control", "max-age=600")]))
    proxy_exchange(larder.port, "GET", f"http://127.0.0.1.:{origin.port}/dot")
    r = proxy_exchange(larder.port, "GET", f"http://127.0.0.1:{origin.port}/dot")
    assert "hit" in r.header("Cache-Status") and len(origin.seen) == 1
    assert origin.seen[0].header("Host") == f"127.0.0.1:{origin.port}"


def test_a_host_field_that_disagrees_with_the_target_neither_reaches_the_origin_nor_keys_the_cache(larder, scripted):
    # RFC 9112 §3.2.2: an absolute target's authority overrides Host. A client naming another host
    # in Host must not get it to the origin (Host is written from the target) nor store the answer
    # under that host for its clients.
    origin = scripted(lambda req: answer(200, (req.header("Host") or "").encode(), [("Cache-Control", "max-age=600")]))
    authority = f"127.0.0.1:{origin.port}"
    r = proxy_exchange(larder.port, "GET", origin.url("/hosted"), [("Host", "victim.example")])
    assert r.body == authority.encode(), r.body
    hit = proxy_exchange(larder.port, "GET", origin.url("/hosted"))
    assert "hit" in hit.header("Cache-Status") and hit.body == authority.encode()
    assert [q.header("Host") for q in origin.seen] == [authority]


def test_a_fragment_is_never_forwarded_and_a_bare_query_gets_its_slash(larder, scripted):
    origin = scripted(lambda req: answer(200, req.target.encode(), [("Cache-Control", "max-age=600")]))
    r = proxy_exchange(larder.port, "GET", origin.url("/page?x=1#section"))
    assert r.body == b"/page?x=1"
    r = proxy_exchange(larder.port, "GET", f"http://127.0.0.1:{origin.port}?q=2", [("Host", f"127.0.0.1:{origin.port}")])
    assert r.body == b"/?q=2"
    hit = proxy_exchange(larder.port, "GET", origin.url("/?q=2"))
    assert "hit" in hit.header("Cache-Status") and hit.body == b"/?q=2"
    assert origin.targets() == ["/page?x=1", "/?q=2"]


# ---------------------------------------------------------------------------------------------
# 11. Memory bounded whatever clients do


def test_pipelined_requests_from_a_client_that_never_reads_stay_bounded(larder, scripted, memory_bound, report_metric):
    origin = scripted(lambda req: answer(200, b"p" * 1024, [("Cache-Control", "max-age=600")]))
    proxy_exchange(larder.port, "GET", origin.url("/small"))
    before = larder.rss_kib()
    one = std_request("GET", origin.url("/small"))
    sock = socket.create_connection((LOCALHOST, larder.port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sent = 0
    deadline = time.monotonic() + 8
    with RSSSampler(larder) as sampler:
        sock.setblocking(False)
        batch = one * 500
        while sent < 100_000 and time.monotonic() < deadline:
            try:
                sock.send(batch)
                sent += 500
            except BlockingIOError:
                # Until the proxy reads more; once it has read nothing for 0.3 s, it stopped (an
                # unbounded proxy stalled that long by a busy machine has read far too much already).
                began = time.monotonic()
                _, writable, _ = select.select([], [sock], [], 0.3)
                if not writable:
                    note_sleep(time.monotonic() - began, f"quiet window at {caller_place()}")
                    break
        # Whatever the proxy read is answered (queued) within this.
        time.sleep(0.3)
    sock.close()
    growth_mib = (sampler.peak_kib - before) / 1024
    report_metric(f"pipelined requests sent without reading: {sent}; RSS growth {growth_mib:.1f} MiB")
    # Unbounded, each request queued a response (about 4 KiB with its buffers): 100,000 of them
    # grew Larder by about 400 MiB. Bounded, what is queued is the output limit and socket buffers.
    assert growth_mib < 40, growth_mib


def test_many_clients_reading_a_disk_object_slowly_hold_a_bounded_window_each(larder_factory, scripted,
                                                                             memory_bound, report_metric):
    size = 4 << 20
    body = bytes(range(256)) * (size // 256)
    origin = scripted(lambda req: answer(200, body, [("Cache-Control", "max-age=600")]))
    lr = larder_factory(config={**ADMIN, "cache": {"memory_max_object_size": "64KiB"}})
    assert len(proxy_exchange(lr.port, "GET", origin.url("/big"), timeout=30).body) == size
    s = wait_stats(lr, lambda s: s["cache_entries"]["disk"] >= 1)  # committed to disk
    assert s["cache_entries"]["disk"] >= 1, s["cache_entries"]
    before = lr.rss_kib("RssAnon")
    answered = stats(lr)["responses"]["2xx"]
    socks = []
    request = std_request("GET", origin.url("/big"))
    with RSSSampler(lr, field="RssAnon") as sampler:
        for _ in range(200):
            s = socket.create_connection((LOCALHOST, lr.port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(request)
            socks.append(s)
        # Every answer under way: its head sent and its first window of the body queued with it.
        got = wait_stats(lr, lambda s: s["responses"]["2xx"] >= answered + 200, timeout=10)["responses"]["2xx"]
        assert got >= answered + 200, f"{got - answered} of 200 answers started"
        time.sleep(0.2)  # and sampled a few times more
    for s in socks:
        s.close()
    growth_mib = (sampler.peak_kib - before) / 1024
    report_metric(f"200 stalled readers of a 4 MiB disk object: RssAnon growth {growth_mib:.1f} MiB")
    assert growth_mib < 120, growth_mib


# ---------------------------------------------------------------------------------------------
# 12. A collapsed follower that never reads


def test_a_follower_that_never_reads_cannot_stall_the_leader(larder_factory, scripted, report_metric):
    size = 24 << 20
    started = threading.Event()

    def handler(req):
        head = f"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: {size}\r\n\r\n".encode()
        return [head + b"y" * (256 << 10), lambda: started.wait(10), b"z" * (size - (256 << 10))]

    origin = scripted(handler)
    lr = larder_factory(config=ADMIN)
    follower = socket.create_connection((LOCALHOST, lr.port), timeout=5)
    follower.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    leader = RawClient(lr.port, timeout=30)
    leader.send(std_request("GET", origin.url("/huge")))
    assert origin.wait_seen(1)  # the leader's fetch is under way
    follower.sendall(std_request("GET", origin.url("/huge")))
    wait_stats(lr, lambda s: s["collapsed_requests"] >= 1)  # the follower joined it
    started.set()
    t0 = time.monotonic()
    got = []
    r = leader.response(sink=lambda piece: got.append(len(piece)))
    elapsed = time.monotonic() - t0
    leader.close()
    follower.close()
    report_metric(f"leader's 24 MiB with a stalled collapsed follower: {elapsed:.2f} s")
    assert sum(got) == size and r.status == 200
    # The follower reads what is stored behind the leader: the leader never waits for it (waiting,
    # it would go on only once the follower had read nothing for the stall timeout, 5 s).
    assert elapsed < 4, elapsed



# ---------------------------------------------------------------------------------------------
# 16. What an allowed client can reach: this machine and the metadata address


def test_widening_allow_clients_protects_this_machine(larder_factory, scripted):
    origin = scripted(lambda req: answer(200, b"a local service"))
    local_only = larder_factory(name="local-only")
    assert proxy_exchange(local_only.port, "GET", origin.url("/")).body == b"a local service"
    widened = larder_factory(name="widened", config={"allow_clients": ["127.0.0.0/8", "10.0.0.0/8"]})
    for url in (origin.url("/"), f"http://localhost:{origin.port}/", f"http://0.0.0.0:{origin.port}/",
                f"http://[::ffff:127.0.0.1]:{origin.port}/"):
        r = proxy_exchange(widened.port, "GET", url)
        assert r.status == 403 and b"this machine" in r.body, (url, r)
    opted_out = larder_factory(name="opted-out", config={"allow_clients": ["127.0.0.0/8", "10.0.0.0/8"],
                                                         "protect_this_host": "off"})
    assert proxy_exchange(opted_out.port, "GET", origin.url("/")).body == b"a local service"
    assert len(origin.seen) == 2


def _start_shipped(tmp_path, name, config_path, env=()):
    """The binary with a shipped configuration as it is, on a loopback port and a scratch cache."""
    import subprocess
    from helpers import LISTEN_RE, child_env, larder_bin, spawn
    cmd = [larder_bin(), "--config", config_path, "--listen", "127.0.0.1:0", "--admin-listen", "off",
           "--cache-dir", tmp_path / f"{name}-cache", "--access-log", "off", "--workers", "1", "--log-level", "info"]
    proc = spawn(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**child_env(), **dict(env)})
    deadline = time.monotonic() + 15
    for raw in iter(proc.stderr.readline, b""):
        m = LISTEN_RE.search(raw.decode("utf-8", "replace"))
        if m:
            threading.Thread(target=lambda: [None for _ in iter(proc.stderr.readline, b"")], daemon=True).start()
            return proc, int(m.group(1))
        assert time.monotonic() < deadline, f"{name} did not start"
    raise AssertionError(f"{name} exited with {proc.wait(5)}")


def _dockerfile_environment():
    from helpers import REPO_ROOT
    text = (REPO_ROOT / "Docker" / "Dockerfile").read_text().replace("\\\n", " ")
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in line[4:].split():
                key, _, value = pair.partition("=")
                env[key] = value
    return env


@pytest.mark.parametrize("shipped", ["defaults", "container", "ci-cache", "offline-mirror"])
def test_what_a_client_of_a_shipped_configuration_can_reach(tmp_path, scripted, shipped):
    """The metadata address never; this machine's own services only while every allowed client is local."""
    from helpers import REPO_ROOT, stop_process
    origin = scripted(lambda req: answer(200, b"a local service"))
    env = {}
    if shipped == "defaults":
        config = REPO_ROOT / "Config" / "larder.yaml"
    elif shipped == "container":
        env = {k: v for k, v in _dockerfile_environment().items()
               if k.startswith("LARDER_") and k not in ("LARDER_CONFIG", "LARDER_LISTEN", "LARDER_CACHE_DIR")}
        config = REPO_ROOT / "Config" / "larder.yaml"
    else:
        config = REPO_ROOT / "Config" / "examples" / f"{shipped}.yaml"
    proc, port = _start_shipped(tmp_path, shipped, config, env.items())
    try:
        metadata = proxy_exchange(port, "GET", "http://169.254.169.254/latest/meta-data/")
        assert metadata.status == 403, metadata
        widened = shipped in ("container", "ci-cache")
        local = proxy_exchange(port, "GET", origin.url("/"))
        if widened:
            assert local.status == 403 and b"this machine" in local.body, local
        else:
            assert local.body == b"a local service", local
    finally:
        stop_process(proc)


# ---------------------------------------------------------------------------------------------
# Found by attacking the finished change again


def test_a_late_body_after_head_cannot_answer_another_request_when_reuse_is_off(larder_factory, scripted):
    """A streaming backend that writes a body for HEAD, late: with reuse after body-less answers
    off, the connection is never handed to the next request, so the late bytes answer nobody."""
    victim_sent = threading.Event()

    def handler(req):
        if req.method == "HEAD":
            return [answer(200, b"", [("Cache-Control", "no-store")], length=60), lambda: victim_sent.wait(10),
                    answer(200, b"poisoned", [("Cache-Control", "max-age=600")])]
        return answer(200, b"the real page", [("Cache-Control", "max-age=600")])

    origin = scripted(handler)
    lr = larder_factory(config={"workers": 1, "session": {"reuse_after_bodyless_answers": False}})
    head_done = threading.Event()

    def head():
        proxy_exchange(lr.port, "HEAD", origin.url("/a"))
        head_done.set()

    threading.Thread(target=head, daemon=True).start()
    assert origin.wait_seen(1)  # the HEAD holds the connection, its late body still to come
    victim = in_background(lambda: proxy_exchange(lr.port, "GET", origin.url("/b")))
    # The late body comes once the victim's request is at the origin (on a connection of its own:
    # on the HEAD's, it would be read as the answer to it).
    origin.wait_seen(2)
    victim_sent.set()
    assert victim().body == b"the real page"
    assert proxy_exchange(lr.port, "GET", origin.url("/b")).body == b"the real page"
    assert head_done.wait(5)


def test_a_204_announcing_a_body_never_leaves_its_connection_reusable(larder_factory, scripted):
    next_sent = threading.Event()

    def handler(req):
        if req.target == "/empty":
            return [b"HTTP/1.1 204 No Content\r\nContent-Length: 37\r\n\r\n", lambda: next_sent.wait(10),
                    answer(200, b"poisoned", [("Cache-Control", "max-age=600")])]
        return answer(200, b"the real page", [("Cache-Control", "max-age=600")])

    origin = scripted(handler)
    lr = larder_factory(config=dict(ADMIN, workers=1))
    with RawClient(lr.port) as c:
        assert c.request("GET", origin.url("/empty")).status == 204
        # The announced body comes once the next request is at the origin (on another connection:
        # on the 204's, the late bytes would be read as its answer).
        c.send(std_request("GET", origin.url("/next")))
        origin.wait_seen(2)
        next_sent.set()
        assert c.response().body == b"the real page"
    wait_stats(lr, lambda s: s["origin_connections_discarded_unsafe"] >= 1)


def test_only_websocket_upgrades_are_relayed_so_h2c_cannot_smuggle_requests(larder_factory, scripted):
    def handler(req):
        if (req.header("Upgrade") or "").lower() == "h2c":
            return b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
        return answer(200, f"plain answer for {req.header('Host')}".encode())

    origin = scripted(handler)
    lr = larder_factory(config={"reverse_allowed_hosts": ["site.test"]},
                        args=["--reverse-origin", f"http://127.0.0.1:{origin.port}"])
    with RawClient(lr.port) as c:
        c.send(build_request("GET", "/p", [("Host", "site.test"), ("Connection", "Upgrade, HTTP2-Settings"),
                                           ("Upgrade", "h2c"), ("HTTP2-Settings", "AAMAAABkAAQAoAAAAAIAAAAA")]))
        r = c.response()
        assert r.status == 200 and r.body == b"plain answer for site.test"
        c.send(build_request("GET", "/admin", [("Host", "internal.test")]))
        refused = c.response()
    assert refused.status == 400 and b"not served here" in refused.body
    assert all(q.header("Upgrade") is None for q in origin.seen)
    assert "/admin" not in origin.targets()


def test_reverse_mode_forwards_the_host_spelling_it_keys_on(larder_factory, scripted):
    origin = scripted(host_echo)
    lr = larder_factory(args=["--reverse-origin", f"http://127.0.0.1:{origin.port}"])
    bodies = []
    for host in ("site.test:80", "site.test", "SITE.test.:80"):
        with RawClient(lr.port) as c:
            c.send(build_request("GET", "/port", [("Host", host)]))
            bodies.append(c.response().body)
    assert bodies == [b"page for site.test"] * 3
    assert len(origin.seen) == 1


def test_a_revalidation_answers_cookie_goes_to_its_client_only(larder, scripted):
    def handler(req):
        if req.method == "HEAD" or req.header("If-None-Match"):
            return (f"HTTP/1.1 {'200 OK' if req.method == 'HEAD' else '304 Not Modified'}\r\nETag: \"v1\"\r\n"
                    "Cache-Control: max-age=600\r\nSet-Cookie: session=ROTATED\r\n"
                    + ("Content-Length: 2\r\n" if req.method == "HEAD" else "") + "\r\n").encode()
        return answer(200, b"ok", [("ETag", '"v1"'), ("Cache-Control", "max-age=0")])

    origin = scripted(handler)
    proxy_exchange(larder.port, "GET", origin.url("/rotate"))
    revalidated = proxy_exchange(larder.port, "GET", origin.url("/rotate"))
    assert revalidated.body == b"ok" and revalidated.header("Set-Cookie") == "session=ROTATED"
    hit = proxy_exchange(larder.port, "GET", origin.url("/rotate"))
    assert "hit" in hit.header("Cache-Status") and hit.header("Set-Cookie") is None


def test_an_answer_before_the_body_is_in_announces_the_close(larder, scripted):
    origin = scripted(lambda req: (answer(413, b"too big", reason="Content Too Large"), False))
    with RawClient(larder.port) as c:
        c.send(std_request("POST", origin.url("/upload"), [("Content-Length", "100000")], b"x" * 1000))
        r = c.response()
        assert r.status == 413 and r.header("Connection") == "close"
        assert c.closed_by_peer(5)


def test_response_fields_named_in_connection_do_not_drive_the_cache(larder, scripted):
    origin = scripted(lambda req: answer(200, b"hop", [("Cache-Control", "max-age=600"), ("Connection", "Cache-Control")]))
    first = proxy_exchange(larder.port, "GET", origin.url("/hop"))
    assert first.header("Cache-Control") is None
    second = proxy_exchange(larder.port, "GET", origin.url("/hop"))
    assert "hit" not in second.header("Cache-Status") and len(origin.seen) == 2


def test_a_follower_that_reads_slowly_is_waited_for_not_cut(larder_factory, scripted, report_metric):
    """Collapsing slows the group to a follower that keeps reading (within the lag window)."""
    import hashlib
    from test_reliability import slow_download
    size = 8 << 20  # the follower falls more than the lag limit (4 MiB) behind
    body = bytes(range(256)) * (size // 256)
    started = threading.Event()

    def handler(req):
        head = f"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: {size}\r\n\r\n".encode()
        return [head + body[:256 << 10], lambda: started.wait(10), body[256 << 10:]]

    origin = scripted(handler)
    lr = larder_factory(config=ADMIN)
    results = [None, None]
    leader = threading.Thread(target=slow_download, args=(lr.port, origin.url("/big"), 64 << 20, results, 0, 1 << 20))
    leader.start()
    assert origin.wait_seen(1)  # the leader's fetch is under way
    follower = threading.Thread(target=slow_download, args=(lr.port, origin.url("/big"), 16 << 20, results, 1, 1 << 16))
    follower.start()
    wait_stats(lr, lambda s: s["collapsed_requests"] >= 1)  # the follower joined the fetch
    started.set()
    t0 = time.monotonic()
    leader.join(30)
    follower.join(30)
    report_metric(f"8 MiB shared by a fast leader and a follower reading 16 MiB/s: {time.monotonic() - t0:.1f} s, "
                  f"{[r[0] for r in results]}")
    expected = hashlib.sha256(body).hexdigest()
    assert results == [(200, expected, size), (200, expected, size)], [r[:1] + r[2:] for r in results if r]
    assert len(origin.seen) == 1
    assert stats(lr)["collapsed_followers_detached"] == 0
