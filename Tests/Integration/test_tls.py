"""TLS: verified https origins (reasons for failures, version limits, pooling and session
resumption, pinned exceptions), the HTTPS listener and admin endpoint, interception that makes
https cacheable, and `larder ca init`.

Every certificate is made here with the openssl command line (tls_pki.py): a test CA, leaf
certificates it signs (good, expired, for another name), and a self-signed one outside it.
"""

import hashlib
import os
import signal
import socket
import ssl
import stat
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from helpers import LOCALHOST, OriginProcess, RawClient, _ThreadedServer, curl, larder_bin, proxy_exchange
from tls_pki import PKI, fingerprint  # noqa: F401 (other tests import them from here)


class HTTPSOrigin(_ThreadedServer):
    """An https origin with keep-alive (unless ``close_each``): answers ``GET /PATH`` with
    ``body of /PATH`` and ``Cache-Control: max-age=3600``. Counts handshakes, resumed sessions and
    requests per path."""

    def __init__(self, certfile, keyfile, close_each=False, minimum=None, maximum=None):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certfile, keyfile)
        if minimum:
            self.ctx.minimum_version = minimum
        if maximum:
            self.ctx.maximum_version = maximum
        self.close_each = close_each
        self.handshakes = 0
        self.resumed = 0
        self.paths = []
        self.lock = threading.Lock()
        super().__init__()

    def handle(self, sock, peer):
        tls = self.wrapped(self.ctx.wrap_socket(sock, server_side=True))
        with self.lock:
            self.handshakes += 1
            self.resumed += 1 if tls.session_reused else 0
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = tls.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            path = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
            with self.lock:
                self.paths.append(path)
            body = f"body of {path}\n".encode()
            close = self.close_each
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nCache-Control: max-age=3600\r\n"
                        b"Content-Length: %d\r\n%s\r\n" % (len(body), b"Connection: close\r\n" if close else b"")
                        + body)
            if close:
                try:
                    tls.unwrap()
                except (OSError, ssl.SSLError):
                    pass
                return


@pytest.fixture
def pki(workdir):
    return PKI(workdir / "pki")


@pytest.fixture
def servers():
    started = []
    yield started
    for s in started:
        s.stop()


def origin_with(servers, *args, **kw):
    s = HTTPSOrigin(*args, **kw)
    servers.append(s)
    return s


# ---------------------------------------------------------------------------
# Outbound: https origins


def test_https_origin_over_verified_tls_with_pooled_connections(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}})
    with RawClient(lr.port, timeout=15) as c:
        for i in range(5):
            resp = c.request("GET", f"https://localhost:{origin.port}/pooled/{i}",
                             headers=[("Cache-Control", "no-cache")])
            assert resp.status == 200, resp.body
            assert resp.body == f"body of /pooled/{i}\n".encode()
    assert origin.handshakes == 1, "five requests should share one pooled TLS connection"


def test_reverse_mode_to_an_https_origin(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = larder_factory(config={"workers": 1, "reverse_origin": f"https://localhost:{origin.port}",
                                "tls": {"ca_file": str(pki.ca)}})
    for _ in range(2):
        with RawClient(lr.port, timeout=15) as c:
            resp = c.request("GET", "/reverse", headers=[("Host", "www.example")])
        assert resp.status == 200, resp.body
        assert resp.body == b"body of /reverse\n"
    assert origin.paths == ["/reverse"], "the second request is a cache hit"


def test_the_command_line_ca_file_is_tls_ca_file(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = larder_factory(config={"workers": 1}, args=("--ca-file", pki.ca))
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/flag", timeout=15)
    assert resp.status == 200, resp.body


def test_a_new_connection_resumes_the_tls_session(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"), close_each=True)
    lr = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}})
    for i in range(4):
        resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/resume/{i}", timeout=15)
        assert resp.status == 200, resp.body
    assert origin.handshakes == 4
    assert origin.resumed >= 3, f"only {origin.resumed} of the later handshakes resumed a session"


@pytest.mark.parametrize("case,reason", [
    ("expired", b"certificate has expired"),
    ("wrong-name", b"hostname mismatch"),
    ("unknown-ca", b"unable to get local issuer certificate"),
])
def test_verification_failures_are_502_with_the_reason(larder_factory, pki, servers, case, reason):
    if case == "expired":
        cert = pki.leaf("expired", days=-1)
    elif case == "wrong-name":
        cert = pki.leaf("other", sans="DNS:other.example")
    else:
        cert = PKI(pki.dir / "elsewhere").leaf("stranger")
    origin = origin_with(servers, *cert)
    lr = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}})
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/secret", timeout=15)
    assert resp.status == 502, resp.body
    assert reason in resp.body, resp.body
    assert origin.paths == [], "nothing may be sent over a connection that failed verification"


@pytest.mark.parametrize("larder_side,origin_side", [
    ({"tls_minimum_version": "1.3"}, {"maximum": ssl.TLSVersion.TLSv1_2}),
    ({"tls_maximum_version": "1.2"}, {"minimum": ssl.TLSVersion.TLSv1_3}),
])
def test_tls_version_limits_are_enforced(larder_factory, pki, servers, larder_side, origin_side):
    origin = origin_with(servers, *pki.leaf("good"), **origin_side)
    lr = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}, "session": larder_side})
    resp = proxy_exchange(lr.port, "GET", f"https://localhost:{origin.port}/v", timeout=15)
    assert resp.status == 502, resp.body
    assert b"TLS" in resp.body
    # Within the limits the same origin is fine.
    lr2 = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}})
    assert proxy_exchange(lr2.port, "GET", f"https://localhost:{origin.port}/v", timeout=15).status == 200


def test_a_pinned_fingerprint_accepts_a_self_signed_origin_and_nothing_else(larder_factory, pki, servers):
    cert, key = pki.self_signed("pinned")
    origin = origin_with(servers, cert, key)
    url = f"https://localhost:{origin.port}/pinned"
    # Without the exception: an unknown issuer.
    plain = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}})
    assert proxy_exchange(plain.port, "GET", url, timeout=15).status == 502
    pinned = larder_factory(config={"workers": 1, "tls": {
        "ca_file": str(pki.ca), "trust": [{"host": "localhost", "sha256": fingerprint(cert)}]}})
    resp = proxy_exchange(pinned.port, "GET", url, timeout=15)
    assert resp.status == 200, resp.body
    wrong = "ab" * 32
    mismatched = larder_factory(config={"workers": 1, "tls": {
        "ca_file": str(pki.ca), "trust": [{"host": "*.localdomain", "sha256": fingerprint(cert)},
                                          {"host": "localhost", "sha256": wrong}]}})
    resp = proxy_exchange(mismatched.port, "GET", url, timeout=15)
    assert resp.status == 502
    assert b"fingerprint mismatch" in resp.body, resp.body


def test_a_star_pin_covers_every_origin_and_a_suffix_pin_only_the_names_below_it(larder_factory, pki, servers):
    cert, key = pki.self_signed("pinned-any")
    origin = origin_with(servers, cert, key)
    url = f"https://localhost:{origin.port}/any"
    # `*.localhost` is for names below localhost, not localhost itself: the chain is checked, and fails.
    below = larder_factory(config={"workers": 1, "tls": {
        "ca_file": str(pki.ca), "trust": [{"host": "*.localhost", "sha256": fingerprint(cert)}]}})
    resp = proxy_exchange(below.port, "GET", url, timeout=15)
    assert resp.status == 502
    assert b"certificate verification failed" in resp.body, resp.body
    anywhere = larder_factory(config={"workers": 1, "tls": {
        "ca_file": str(pki.ca), "trust": [{"host": "*", "sha256": fingerprint(cert)}]}})
    resp = proxy_exchange(anywhere.port, "GET", url, timeout=15)
    assert resp.status == 200, resp.body
    assert resp.body == b"body of /any\n"


# ---------------------------------------------------------------------------
# Inbound: the HTTPS listener and the admin endpoint


def peer_certificate_fingerprint(port, cafile, name="127.0.0.1"):
    ctx = ssl.create_default_context(cafile=str(cafile))
    with socket.create_connection((LOCALHOST, port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname=name) as t:
            return hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest()


def test_curl_through_the_https_listener_and_a_certificate_reload(larder_factory, pki, workdir):
    cert, key = pki.leaf("proxy-a")
    live_cert, live_key = workdir / "proxy.pem", workdir / "proxy.key"
    live_cert.write_text(Path(cert).read_text())
    live_key.write_text(Path(key).read_text())
    origin = OriginProcess(workdir)
    try:
        lr = larder_factory(config={"workers": 1, "tls": {"listen": ["127.0.0.1:0"], "certificate_file": str(live_cert),
                                                           "key_file": str(live_key)}}, listeners=2)
        tls_port = lr.ports[1]
        r = curl("--proxy", f"https://127.0.0.1:{tls_port}", "--proxy-cacert", pki.ca,
                 origin.url("/bytes/64"), "-o", "/dev/null", "-w", "%{http_code}")
        assert r.stdout == b"200", r.stderr
        assert peer_certificate_fingerprint(tls_port, pki.ca) == fingerprint(cert)

        # A renewed certificate under the same file names is served after SIGHUP.
        cert_b, key_b = pki.leaf("proxy-b")
        live_cert.write_text(Path(cert_b).read_text())
        live_key.write_text(Path(key_b).read_text())
        os.kill(lr.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "TLS certificate reloaded" not in lr.log_text():
            assert time.monotonic() < deadline, lr.log_text()[-2000:]
            time.sleep(0.05)
        assert peer_certificate_fingerprint(tls_port, pki.ca) == fingerprint(cert_b)

        # A client that does not speak TLS gets a log line, not a crash.
        with socket.create_connection((LOCALHOST, tls_port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            s.settimeout(10)
            try:
                while s.recv(4096):
                    pass
            except OSError:
                pass
        deadline = time.monotonic() + 10
        while "TLS handshake with client" not in lr.log_text():
            assert time.monotonic() < deadline, lr.log_text()[-2000:]
            time.sleep(0.05)
    finally:
        origin.stop()


def test_the_admin_endpoint_over_tls(larder_factory, pki):
    cert, key = pki.leaf("admin")
    lr = larder_factory(config={"workers": 1, "admin_listen": "127.0.0.1:0",
                                "tls": {"admin": True, "certificate_file": cert, "key_file": key}})
    r = curl("--cacert", pki.ca, f"https://127.0.0.1:{lr.admin_port}/healthz", "-w", " %{http_code}")
    assert r.stdout.endswith(b" 200"), (r.stdout, r.stderr)


def test_tls_listener_without_a_certificate_fails_to_start(larder_factory):
    lr = larder_factory(config={"tls": {"listen": ["127.0.0.1:0"]}}, wait=False)
    assert lr.wait_exit(30) not in (None, 0)
    assert "tls.certificate_file" in lr.log_text()


# ---------------------------------------------------------------------------
# Interception


def connect_through(port, target):
    """A socket through Larder's CONNECT to ``target`` (host:port), the 200 read."""
    s = socket.create_connection((LOCALHOST, port), timeout=15)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = s.recv(4096)
        assert data, f"connection closed before the CONNECT answer: {buf!r}"
        buf += data
    assert buf.startswith(b"HTTP/1.1 200"), buf
    return s


def test_interception_serves_the_second_fetch_from_the_cache(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = larder_factory(config={"workers": 1, "connect_ports": [origin.port],
                                "tls": {"ca_file": str(pki.ca), "intercept": ["localhost"]}})
    larder_ca = lr.ca_dir / "larder-ca.pem"
    assert larder_ca.exists(), lr.log_text()
    assert str(larder_ca) in lr.log_text()
    url = f"https://localhost:{origin.port}/intercepted"
    for i in range(2):
        r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", larder_ca, "--http1.1", url, "-D", "-")
        assert r.returncode == 0, r.stderr
        assert b"body of /intercepted" in r.stdout
    assert b"Cache-Status: larder; hit" in r.stdout, r.stdout
    assert origin.paths == ["/intercepted"], "the second fetch must be a cache hit"

    # The minted certificate names the destination and chains to Larder's CA.
    ctx = ssl.create_default_context(cafile=str(larder_ca))
    with connect_through(lr.port, f"localhost:{origin.port}") as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            cert = t.getpeercert()
            assert ("DNS", "localhost") in cert["subjectAltName"]
            issuer = dict(x[0] for x in cert["issuer"])
            assert issuer["commonName"] == "Larder interception CA"
    stored = list((lr.cache_dir / "certificates").glob("localhost*.pem"))
    assert stored, "the minted certificate is kept on disk"
    assert stat.S_IMODE(stored[0].stat().st_mode) == 0o600


def test_a_destination_not_matched_is_tunnelled_untouched(larder_factory, pki, servers):
    cert, key = pki.leaf("good")
    origin = origin_with(servers, cert, key)
    lr = larder_factory(config={"workers": 1, "connect_ports": [origin.port],
                                "tls": {"ca_file": str(pki.ca), "intercept": ["*.example.invalid"]}})
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with connect_through(lr.port, f"localhost:{origin.port}") as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            assert hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest() == fingerprint(cert)


def test_a_client_that_does_not_trust_the_ca_fails_cleanly(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = larder_factory(config={"workers": 1, "connect_ports": [origin.port],
                                "tls": {"ca_file": str(pki.ca), "intercept": ["localhost"]}})
    r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", pki.ca, f"https://localhost:{origin.port}/x")
    assert r.returncode != 0
    assert origin.paths == []
    deadline = time.monotonic() + 10
    while "TLS handshake with client" not in lr.log_text():
        assert time.monotonic() < deadline, lr.log_text()[-2000:]
        time.sleep(0.05)
    # The proxy is unharmed.
    larder_ca = lr.ca_dir / "larder-ca.pem"
    r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", larder_ca, f"https://localhost:{origin.port}/y")
    assert r.stdout == b"body of /y\n", r.stderr


def intercepting_larder(larder_factory, pki, origin):
    return larder_factory(config={"workers": 1, "connect_ports": [origin.port],
                                  "tls": {"ca_file": str(pki.ca), "intercept": ["localhost"]}})


def distrust_line(lr, origin):
    """The log line of a failed handshake with an intercepted client: it names the destination,
    and the interception CA the client should trust."""
    m = lr.wait_for_log(rf"TLS handshake with client 127\.0\.0\.1:\d+ for localhost:{origin.port} \(intercepted\) "
                        r"failed: [^\n]*", timeout=10)
    assert m, lr.log_text()[-2000:]
    line = m.group(0)
    assert "the client probably does not trust Larder's interception CA" in line, line
    assert f"install {lr.ca_dir / 'larder-ca.pem'} in its trust store" in line, line
    return line


def test_curl_without_larders_ca_is_logged_with_the_destination_and_the_likely_cause(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = intercepting_larder(larder_factory, pki, origin)
    r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", pki.ca, f"https://localhost:{origin.port}/x")
    assert r.returncode == 60, r.stderr  # curl: the peer's certificate cannot be verified
    distrust_line(lr, origin)
    assert origin.paths == []


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_client_hanging_up_on_the_minted_certificate_is_logged_too(larder_factory, pki, servers, how):
    """Some clients refuse a certificate without an alert: they see it and hang up."""
    origin = origin_with(servers, *pki.leaf("good"))
    lr = intercepting_larder(larder_factory, pki, origin)
    s = connect_through(lr.port, f"localhost:{origin.port}")
    with s:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ssl.create_default_context(cafile=str(pki.ca)).wrap_bio(incoming, outgoing, server_hostname="localhost")
        with pytest.raises(ssl.SSLWantReadError):
            tls.do_handshake()
        s.sendall(outgoing.read())  # the ClientHello
        assert s.recv(65536), "Larder answers the ClientHello (its certificate among it)"
        if how == "reset":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            s.shutdown(socket.SHUT_WR)
    line = distrust_line(lr, origin)
    assert "the client closed the connection during the handshake" in line, line


def test_a_client_that_never_starts_the_handshake_is_not_a_failure(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = intercepting_larder(larder_factory, pki, origin)
    connect_through(lr.port, f"localhost:{origin.port}").close()
    # Then a real failure: its line is the only one.
    r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", pki.ca, f"https://localhost:{origin.port}/x")
    assert r.returncode == 60
    distrust_line(lr, origin)
    assert lr.log_text().count("TLS handshake with client") == 1, lr.log_text()[-2000:]


def test_ca_init_writes_a_ca_and_will_not_overwrite_it(workdir):
    target = workdir / "myca"
    run = lambda *extra: subprocess.run([larder_bin(), "ca", "init", "--dir", str(target), *extra],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    first = run()
    assert first.returncode == 0, first.stderr
    cert, key = target / "larder-ca.pem", target / "larder-ca-key.pem"
    assert str(cert).encode() in first.stdout
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    text = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-text"], stdout=subprocess.PIPE,
                          check=True, timeout=30).stdout
    assert b"CA:TRUE" in text and b"Certificate Sign" in text
    before = fingerprint(cert)
    assert before.encode() in first.stdout
    again = run()
    assert again.returncode != 0 and b"--force" in again.stderr
    assert fingerprint(cert) == before
    assert run("--force").returncode == 0
    assert fingerprint(cert) != before


def test_ca_init_creates_missing_parent_directories_clients_can_pass(workdir):
    """Clients read the certificate, so the directories to it are 0755; the key is 0600."""
    target = workdir / "not" / "there" / "yet"
    r = subprocess.run([larder_bin(), "ca", "init", "--dir", str(target)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE((target / "larder-ca.pem").stat().st_mode) == 0o644
    assert stat.S_IMODE((target / "larder-ca-key.pem").stat().st_mode) == 0o600
    for d in (workdir / "not", workdir / "not" / "there", target):
        assert stat.S_IMODE(d.stat().st_mode) == 0o755, d
