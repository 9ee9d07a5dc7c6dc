"""https origins and CONNECT tunnels through a parent proxy (`session.proxy`), with credentials.

The parent here is a small CONNECT/absolute-form proxy run by the test: it can require
`Proxy-Authorization`, records every request head it is sent (request line and fields), and can be
told to misbehave: answer CONNECT with a given status, close or stall mid-handshake, send bytes of
its own behind its 200, or an endless answer head. The https origins are test_tls's, with a test CA.

What is checked: an https:// absolute-form request goes as `CONNECT` to the parent, then TLS with
the origin inside (verified against `tls.ca_file`), is cached and served as a hit; pooled tunnels
are per origin; the parent's credentials (`session.proxy_credentials_file`) go on every CONNECT and
absolute-form request, the client's own `Proxy-Authorization` never; a refusing, closing, stalling
or babbling parent is a 502 or 504 with a log line; the credentials never reach Larder's log.
"""

import base64
import select
import socket
import subprocess
import time

import pytest

from helpers import (LOCALHOST, RawClient, _ThreadedServer, build_request, child_env, curl, larder_bin,
                     proxy_exchange)
from test_tls import PKI, HTTPSOrigin

USER, PASSWORD = "larder-up", "pa:ss w0rd!"
GOOD = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
CLIENT_CREDENTIALS = "Basic " + base64.b64encode(b"client:for-larder-only").decode()


class Parent(_ThreadedServer):
    """A parent proxy. ``required``: the Proxy-Authorization it wants (None: any). ``mode`` for
    CONNECT: "tunnel", an int status, "close", "stall", "early" (200 then bytes of its own),
    "interims" (1xx answers without end) or "huge" (an answer head that never ends). Absolute-form requests are answered "from parent"."""

    def __init__(self, required=GOOD, mode="tunnel"):
        self.required = required
        self.mode = mode
        self.heads = []  # (request line, {lower-case name: [values]})
        super().__init__()

    def connects(self):
        return [line.split(" ")[1] for line, _ in self.heads if line.startswith("CONNECT ")]

    def handle(self, sock, peer):
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
                if len(data) > 65536:
                    return
            head, data = data.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            fields = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                fields.setdefault(name.strip().lower(), []).append(value.strip())
            self.heads.append((lines[0], fields))
            method, target = lines[0].split(" ")[:2]
            if self.required is not None and fields.get("proxy-authorization") != [self.required]:
                sock.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                             b"Proxy-Authenticate: Basic realm=\"parent-realm\"\r\nContent-Length: 0\r\n\r\n")
                continue
            if method != "CONNECT":
                body = b"from parent " + target.encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nCache-Control: max-age=60\r\n\r\n"
                             % len(body) + body)
                continue
            return self.answer_connect(sock, target, data)

    def answer_connect(self, sock, target, early):
        mode = self.mode
        if isinstance(mode, int):
            sock.sendall(b"HTTP/1.1 %d Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" % mode)
            return
        if mode == "close":
            return
        if mode == "stall":
            self._stop.wait(10)  # says nothing until the test ends it
            return
        if mode == "early":
            sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x03\x00\x05hello")
            self._stop.wait(1)  # holds the connection a while (or until the test ends)
            return
        if mode == "interims":
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" * 20)
            self._stop.wait(1)  # holds the connection a while (or until the test ends)
            return
        if mode == "huge":
            sock.sendall(b"HTTP/1.1 200 Connection established\r\n")
            try:
                for _ in range(200):
                    sock.sendall(b"X-Pad: " + b"a" * 1000 + b"\r\n")
            except OSError:
                pass
            return
        port = int(target.rsplit(":", 1)[1])
        upstream = socket.create_connection((LOCALHOST, port), timeout=5)
        try:
            sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if early:
                upstream.sendall(early)
            relay(sock, upstream, self._stop)
        finally:
            upstream.close()


def relay(a, b, stop, limit=30):
    """Bytes both ways until either side closes, the server stops, or ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and not stop.is_set():
        ready, _, _ = select.select([a, b], [], [], 0.2)
        for s in ready:
            try:
                data = s.recv(65536)
            except OSError:
                return
            if not data:
                return
            (b if s is a else a).sendall(data)


@pytest.fixture
def pki(workdir):
    return PKI(workdir / "pki")


@pytest.fixture
def servers():
    started = []
    yield started
    for s in started:
        s.stop()


def start(servers, server):
    servers.append(server)
    return server


def child_of(larder_factory, parent, pki, workdir, credentials=f"{USER}:{PASSWORD}", **config):
    session = {"proxy": f"http://127.0.0.1:{parent.port}", "connect_timeout": "3s",
               "timeout_interval_for_request": "3s"}
    if credentials is not None:
        path = workdir / "parent-credentials"
        path.write_text(f"# the parent's account\n{credentials}\n")
        session["proxy_credentials_file"] = str(path)
    base = {"workers": 1, "session": session}
    if pki is not None:
        base["tls"] = {"ca_file": str(pki.ca)}
    base.update(config)
    return larder_factory(config=base, name="child")


def assert_no_secret(lr):
    text = lr.log_text()
    for secret in (PASSWORD, GOOD.split(" ")[1], CLIENT_CREDENTIALS.split(" ")[1]):
        assert secret not in text, f"a credential appears in Larder's log: {secret!r}"


# --- https origins through the parent ------------------------------------------------------------


def test_https_through_the_parent_is_tunnelled_verified_and_cached(larder_factory, pki, servers, workdir):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir, log_level="debug")
    url = f"https://localhost:{origin.port}/cached"
    first = proxy_exchange(lr.port, "GET", url, headers=[("Proxy-Authorization", CLIENT_CREDENTIALS)], timeout=15)
    assert first.status == 200, first.body
    assert first.body == b"body of /cached\n"
    second = proxy_exchange(lr.port, "GET", url, timeout=15)
    assert second.status == 200 and second.body == b"body of /cached\n"
    assert "hit" in second.header("Cache-Status"), second.header("Cache-Status")
    assert origin.paths == ["/cached"], "the second request is a hit"
    # One CONNECT, to the origin, with Larder's credentials for the parent and nothing else:
    # the request itself went inside TLS, unseen by the parent.
    assert [line for line, _ in parent.heads] == [f"CONNECT localhost:{origin.port} HTTP/1.1"]
    fields = parent.heads[0][1]
    assert fields["proxy-authorization"] == [GOOD]
    assert fields["host"] == [f"localhost:{origin.port}"]
    assert_no_secret(lr)


def test_two_origins_never_share_a_tunnel(larder_factory, pki, servers, workdir):
    a = start(servers, HTTPSOrigin(*pki.leaf("a")))
    b = start(servers, HTTPSOrigin(*pki.leaf("b")))
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir)
    with RawClient(lr.port, timeout=15) as c:
        for i in range(3):
            for o, name in ((a, "a"), (b, "b")):
                resp = c.request("GET", f"https://localhost:{o.port}/{name}/{i}", headers=[("Cache-Control", "no-cache")])
                assert resp.status == 200, resp.body
                assert resp.body == f"body of /{name}/{i}\n".encode()
    # Each origin got its own requests only, over one pooled tunnel each, asked of the parent by name.
    assert a.paths == ["/a/0", "/a/1", "/a/2"] and b.paths == ["/b/0", "/b/1", "/b/2"]
    assert a.handshakes == 1 and b.handshakes == 1
    assert sorted(parent.connects()) == sorted([f"localhost:{a.port}", f"localhost:{b.port}"])


def test_an_https_reverse_origin_is_reached_through_the_parent(larder_factory, pki, servers, workdir):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir, reverse_origin=f"https://localhost:{origin.port}")
    for _ in range(2):
        with RawClient(lr.port, timeout=15) as c:
            resp = c.request("GET", "/reverse", headers=[("Host", "www.example")])
        assert resp.status == 200 and resp.body == b"body of /reverse\n", resp.body
    assert origin.paths == ["/reverse"]
    assert [line for line, _ in parent.heads] == [f"CONNECT localhost:{origin.port} HTTP/1.1"]


def test_denied_https_destinations_are_never_asked_of_the_parent(larder_factory, pki, servers, workdir):
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir, deny_destinations=["127.0.0.3/32"])
    for url in ("https://127.0.0.3/", f"https://127.0.0.1:{lr.port}/"):
        resp = proxy_exchange(lr.port, "GET", url, timeout=15)
        assert resp.status == 403, (url, resp.status, resp.body)
    assert parent.heads == []


def test_the_origin_certificate_is_verified_inside_the_tunnel(larder_factory, pki, servers, workdir):
    # A certificate for another name: the parent's tunnel changes nothing about verification.
    origin = start(servers, HTTPSOrigin(*pki.leaf("other", sans="DNS:other.example")))
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir)
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/secret", timeout=15)
    assert resp.status == 502 and b"hostname mismatch" in resp.body, resp.body
    assert origin.paths == []


def test_the_parents_own_certificate_is_no_origin_certificate(larder_factory, pki, servers, workdir):
    # A parent that, asked for a tunnel, connects to a server with a certificate from outside the
    # CA: refused, as it would be directly.
    stranger = start(servers, HTTPSOrigin(*PKI(workdir / "elsewhere").leaf("stranger")))
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir)
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{stranger.port}/x", timeout=15)
    assert resp.status == 502 and b"unable to get local issuer certificate" in resp.body, resp.body
    assert stranger.paths == []


@pytest.mark.parametrize("status", [403, 407, 500])
def test_a_refusing_parent_is_a_502_with_its_status_logged(larder_factory, pki, servers, workdir, status):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = start(servers, Parent(mode=status if status != 407 else "tunnel",
                                   required=GOOD if status != 407 else "Basic bm90OnRoaXM="))
    lr = child_of(larder_factory, parent, pki, workdir)
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/x", timeout=15)
    assert resp.status == 502, (resp.status, resp.body)
    assert f"refused CONNECT localhost:{origin.port} with {status}".encode() in resp.body, resp.body
    # The parent's challenge is not Larder's: no Proxy-Authenticate reaches the client.
    assert resp.header("Proxy-Authenticate") is None
    lr.wait_for_log(f"parent proxy 127.0.0.1:{parent.port} refused CONNECT localhost:{origin.port} with {status}")
    assert origin.paths == []
    assert_no_secret(lr)


def test_wrong_credentials_are_a_502_that_names_the_407(larder_factory, pki, servers, workdir):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir, credentials=f"{USER}:not-the-password")
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/x", timeout=15)
    assert resp.status == 502 and b"407" in resp.body and b"credentials" in resp.body, resp.body
    assert resp.header("Proxy-Authenticate") is None
    lr.wait_for_log("with 407: it wants credentials")
    assert "not-the-password" not in lr.log_text()


@pytest.mark.parametrize("mode,status,said", [
    ("close", 502, b"closed the connection"),
    ("stall", 504, b"through parent proxy 127.0.0.1:"),
    ("early", 502, b"sent data after its answer to CONNECT"),
    ("huge", 502, b"too large"),
    ("interims", 502, b"more than 8 interim answers to CONNECT"),
])
def test_a_misbehaving_parent_is_a_5xx_within_the_timeouts(larder_factory, pki, servers, workdir, mode, status, said):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = start(servers, Parent(mode=mode))
    lr = child_of(larder_factory, parent, pki, workdir)
    began = time.monotonic()
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/x", timeout=15)
    took = time.monotonic() - began
    assert resp.status == status and said in resp.body, (mode, resp.status, resp.body)
    assert took < 8, f"{mode}: answered after {took:.1f} s (timeouts are 3 s)"
    assert origin.paths == [] and origin.handshakes == 0
    lr.wait_for_log(f"{status} for ")
    # Still serving, through the same parent.
    assert proxy_exchange(lr.port, "GET", "http://plain.example/after", timeout=15).status == 200


def test_without_credentials_configured_none_are_sent(larder_factory, pki, servers, workdir):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = start(servers, Parent(required=None))
    lr = child_of(larder_factory, parent, pki, workdir, credentials=None)
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/open",
                          headers=[("Proxy-Authorization", CLIENT_CREDENTIALS)], timeout=15)
    assert resp.status == 200, resp.body
    assert "proxy-authorization" not in parent.heads[0][1]


# --- plain http and client tunnels through the parent --------------------------------------------


def test_plain_http_requests_carry_the_parents_credentials_not_the_clients(larder_factory, servers, workdir):
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, None, workdir, log_level="debug")
    resp = proxy_exchange(lr.port, "GET", "http://plain.example/page",
                          headers=[("Proxy-Authorization", CLIENT_CREDENTIALS)], timeout=15)
    assert resp.status == 200 and resp.body == b"from parent http://plain.example/page", resp.body
    line, fields = parent.heads[0]
    assert line == "GET http://plain.example/page HTTP/1.1"
    assert fields["proxy-authorization"] == [GOOD]
    assert_no_secret(lr)


def test_a_407_to_a_plain_request_is_a_502_not_the_parents_challenge(larder_factory, servers, workdir):
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, None, workdir, credentials=f"{USER}:wrong")
    resp = proxy_exchange(lr.port, "GET", "http://plain.example/page", timeout=15)
    assert resp.status == 502, (resp.status, resp.body)
    assert b"refused a request for http://plain.example:80 with 407" in resp.body, resp.body
    assert resp.header("Proxy-Authenticate") is None
    lr.wait_for_log("502 for .*parent proxy 127.0.0.1:[0-9]+ refused a request for http://plain.example:80 with 407")
    assert "wrong" not in lr.log_text()


def test_intercepted_https_goes_through_the_parent_inside_tls(larder_factory, pki, servers, workdir):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir, connect_ports=[origin.port],
                  tls={"ca_file": str(pki.ca), "intercept": ["localhost"]})
    larder_ca = lr.ca_dir / "larder-ca.pem"
    url = f"https://localhost:{origin.port}/intercepted"
    for _ in range(2):
        r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", larder_ca, "--http1.1", url, "-D", "-")
        assert r.returncode == 0, r.stderr
        assert b"body of /intercepted" in r.stdout
    assert b"Cache-Status: larder; hit" in r.stdout, r.stdout
    assert origin.paths == ["/intercepted"]
    # Larder's fetch went as a CONNECT to the parent, never as a request the parent could read.
    assert [line for line, _ in parent.heads] == [f"CONNECT localhost:{origin.port} HTTP/1.1"]
    assert parent.heads[0][1]["proxy-authorization"] == [GOOD]


def test_client_connect_tunnels_carry_the_parents_credentials(larder_factory, servers, workdir):
    origin = start(servers, EchoTarget())
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, None, workdir, connect_ports=[origin.port])
    with RawClient(lr.port, timeout=15) as c:
        c.send(build_request("CONNECT", f"127.0.0.1:{origin.port}",
                             [("Host", f"127.0.0.1:{origin.port}"), ("Proxy-Authorization", CLIENT_CREDENTIALS)]))
        resp = c.response("CONNECT")
        assert resp.status == 200
        c.sock.sendall(b"ping")
        assert c.reader.read_exact(4) == b"ping"
    line, fields = parent.heads[0]
    assert line == f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1"
    assert fields["proxy-authorization"] == [GOOD]
    assert_no_secret(lr)


def test_a_client_tunnel_refused_by_the_parent_is_a_502(larder_factory, servers, workdir):
    origin = start(servers, EchoTarget())
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, None, workdir, credentials="someone:wrong", connect_ports=[origin.port])
    with RawClient(lr.port, timeout=15) as c:
        c.send(build_request("CONNECT", f"127.0.0.1:{origin.port}", [("Host", f"127.0.0.1:{origin.port}")]))
        resp = c.response("CONNECT")
    assert resp.status == 502 and b"407" in resp.body, resp.body
    assert resp.header("Proxy-Authenticate") is None


class EchoTarget(_ThreadedServer):
    def handle(self, sock, peer):
        while True:
            data = sock.recv(65536)
            if not data:
                return
            sock.sendall(data)


# --- configuration -------------------------------------------------------------------------------


def test_credentials_in_the_proxy_address_are_refused_without_echoing_them(larder_factory, workdir):
    lr = larder_factory(config={"session": {"proxy": "http://alice:s3cret@127.0.0.1:3128"}}, wait=False)
    assert lr.wait_exit(15) != 0
    text = lr.log_text()
    assert "proxy_credentials_file" in text
    assert "s3cret" not in text


def test_an_unreadable_or_malformed_credentials_file_stops_the_start(larder_factory, workdir):
    bad = workdir / "bad-credentials"
    bad.write_text("no colon here s3cret\n")
    lr = larder_factory(config={"session": {"proxy": "http://127.0.0.1:3128",
                                            "proxy_credentials_file": str(bad)}}, wait=False, name="bad")
    assert lr.wait_exit(15) != 0
    assert "session.proxy_credentials_file" in lr.log_text() and "s3cret" not in lr.log_text()
    missing = larder_factory(config={"session": {"proxy": "http://127.0.0.1:3128",
                                                 "proxy_credentials_file": str(workdir / "absent")}},
                             wait=False, name="missing")
    assert missing.wait_exit(15) != 0
    assert "cannot read" in missing.log_text()


def test_a_chain_of_two_larders_with_authentication(larder_factory, pki, servers, workdir):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = larder_factory(config={"workers": 1, "via_name": "parent", "connect_ports": [origin.port],
                                    "auth": {"users_file": str(users_file(workdir, (USER, PASSWORD)))}},
                            name="parent")
    credentials = workdir / "parent-credentials"
    credentials.write_text(f"{USER}:{PASSWORD}\n")
    child = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)},
                                   "session": {"proxy": parent.proxy_url,
                                               "proxy_credentials_file": str(credentials)}}, name="child")
    url = f"https://localhost:{origin.port}/chained"
    for _ in range(2):
        resp = proxy_exchange(child.port, "GET", url, headers=[("Proxy-Authorization", CLIENT_CREDENTIALS)],
                              timeout=15)
        assert resp.status == 200 and resp.body == b"body of /chained\n", (resp.status, resp.body)
    assert "hit" in resp.header("Cache-Status")
    assert origin.paths == ["/chained"]
    for lr in (parent, child):
        assert_no_secret(lr)
    # Without the credentials the parent challenges, and the child says so with a 502.
    bare = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)},
                                  "session": {"proxy": parent.proxy_url}}, name="bare")
    resp = proxy_exchange(bare.port, "GET", f"https://localhost:{origin.port}/refused", timeout=15)
    assert resp.status == 502 and b"with 407" in resp.body, (resp.status, resp.body)
    assert resp.header("Proxy-Authenticate") is None


def users_file(workdir, *entries):
    """A users file made with `larder passwd`."""
    lines = []
    for user, password in entries:
        r = subprocess.run([larder_bin(), "passwd", user, "--scheme", "sha512", "--cost", "1000"],
                           input=password.encode() + b"\n", capture_output=True, timeout=30, env=child_env())
        assert r.returncode == 0, r.stderr
        lines.append(r.stdout.decode().strip())
    path = workdir / "users"
    path.write_text("\n".join(lines) + "\n")
    return path


# --- numbers -------------------------------------------------------------------------------------


def test_tunnels_are_reused_and_cost_little_per_request(larder_factory, pki, servers, workdir, report_metric):
    origin = start(servers, HTTPSOrigin(*pki.leaf("good")))
    parent = start(servers, Parent())
    lr = child_of(larder_factory, parent, pki, workdir)
    direct = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}}, name="direct")
    n = 50

    def fetch_all(port, prefix, headers):
        times = []
        with RawClient(port, timeout=15) as c:
            for i in range(n):
                began = time.monotonic()
                resp = c.request("GET", f"https://localhost:{origin.port}/{prefix}/{i}", headers=headers)
                times.append(time.monotonic() - began)
                assert resp.status == 200, resp.body
        return sorted(times)[n // 2] * 1000

    through = fetch_all(lr.port, "through", [("Cache-Control", "no-cache")])
    hits = fetch_all(lr.port, "through", [])
    alone = fetch_all(direct.port, "direct", [("Cache-Control", "no-cache")])
    assert len([p for p in origin.paths if p.startswith("/through/")]) == n, "the second round is all hits"
    # All of them over one tunnel, asked of the parent once.
    assert parent.connects() == [f"localhost:{origin.port}"]
    assert origin.handshakes == 2, "one TLS connection through the parent, one direct"
    report_metric(f"{n} https fetches on one client connection: median {through:.2f} ms through the parent "
                  f"(1 CONNECT, 1 TLS handshake), {alone:.2f} ms direct; cache hits {hits:.2f} ms")
