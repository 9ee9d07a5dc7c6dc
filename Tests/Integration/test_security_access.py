"""Attacks on the access checks.

* Password checks as a CPU sink: many connections sending made-up `Proxy-Authorization` values
  against a bcrypt users file must neither delay a real user's first request nor queue unbounded
  work; they are answered 429 (with Retry-After) once their share of pending checks is taken.
* Destination checks skipped through a parent proxy: with `session.proxy` set, Larder connects
  only to the parent, yet a request for this proxy itself, for an address in `deny_destinations`
  or for a name resolving into one must still be refused before it is forwarded.
"""

import base64
import socket
import statistics
import subprocess
import threading
import time

from helpers import (FakeDNS, SockReader, _ThreadedServer, build_request, child_env, larder_bin, proxy_exchange,
                     read_response)
from test_admin import ADMIN, stats, wait_stats

ATTACKER = "127.0.0.2"  # all of 127.0.0.0/8 is loopback on Linux


def bcrypt_users(workdir, *entries):
    """A users file made by `larder passwd` with its default bcrypt cost (what operators get)."""
    lines = []
    for user, password in entries:
        r = subprocess.run([larder_bin(), "passwd", user, "--scheme", "bcrypt"], input=password.encode() + b"\n",
                           capture_output=True, timeout=30, env=child_env())
        assert r.returncode == 0, r.stderr
        lines.append(r.stdout.decode())
    path = workdir / "users"
    path.write_text("".join(lines))
    return path


def basic(user, password):
    return ("Proxy-Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())


def exchange_from(source, port, url, headers=(), timeout=20.0):
    """One request on a new connection from `source` (a loopback address); (response, seconds)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    try:
        started = time.monotonic()
        sock.sendall(build_request("GET", url, [("Host", "x")] + list(headers)))
        resp = read_response(SockReader(sock))
        return resp, time.monotonic() - started
    finally:
        sock.close()


class Flood:
    """`n` keep-alive connections from `source`, each sending a new wrong credential as soon as
    the previous one is answered, until stopped (or `limit` seconds pass)."""

    def __init__(self, port, url, n, source=ATTACKER, limit=30.0):
        self.port, self.url, self.source, self.limit = port, url, source, limit
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.answers = []  # (status, seconds, retry_after)
        self.errors = []
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)]

    def _run(self, i):
        deadline = time.monotonic() + self.limit
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=20, source_address=(self.source, 0))
        except OSError as e:
            self.errors.append(repr(e))
            return
        reader = SockReader(sock)
        k = 0
        try:
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                k += 1
                started = time.monotonic()
                sock.sendall(build_request("GET", self.url, [("Host", "x"), basic("alice", f"guess-{i}-{k}")]))
                resp = read_response(reader)
                with self.lock:
                    self.answers.append((resp.status, time.monotonic() - started, resp.header("Retry-After")))
                if resp.header("Connection") == "close":
                    break
        except OSError as e:
            self.errors.append(repr(e))
        finally:
            sock.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads:
            t.join(25)


# --- password checks ---------------------------------------------------------------------------


def test_a_flood_of_wrong_credentials_does_not_delay_a_real_users_first_request(larder_factory, origin, workdir,
                                                                              report_metric):
    path = bcrypt_users(workdir, ("alice", "correct horse"), ("bob", "battery staple"))
    lr = larder_factory(config=dict(ADMIN, auth={"users_file": str(path)}))
    url = origin.url("/echo")
    resp, quiet = exchange_from("127.0.0.1", lr.port, url, [basic("bob", "battery staple")])
    assert resp.status == 200

    with Flood(lr.port, url, 120) as flood:
        # The queue of checks has built up: the attacker's share of it is full.
        s = wait_stats(lr, lambda s: s["auth_checks_refused"]["max_pending_checks_per_client"] >= 1, timeout=10)
        assert s["auth_checks_refused"]["max_pending_checks_per_client"] >= 1, s["auth_checks_refused"]
        resp, seconds = exchange_from("127.0.0.1", lr.port, url, [basic("alice", "correct horse")])
    report_metric(f"valid user's first request: {quiet:.3f} s alone, {seconds:.3f} s under a flood of "
                  "120 wrong-credential connections")
    assert resp.status == 200, resp
    assert seconds < 2.0, f"valid user waited {seconds:.2f} s"

    assert not flood.errors, flood.errors[:3]
    statuses = {s for s, _, _ in flood.answers}
    assert statuses <= {407, 429}, statuses
    refused = [(s, t, ra) for s, t, ra in flood.answers if s == 429]
    assert refused, "no attacker request was refused"
    assert all(ra == "1" for _, _, ra in refused)
    # Refusals are immediate, and even checked guesses wait for a handful of checks at most.
    assert statistics.median(t for _, t, _ in refused) < 0.25
    assert max(t for _, t, _ in flood.answers) < 3.0

    s = stats(lr)
    assert s["auth_checks_refused"]["max_pending_checks_per_client"] == len(refused)
    # Logged at most about once a second, however many were refused.
    lines = [ln for ln in lr.log_text().splitlines() if "with unchecked proxy credentials" in ln]
    assert 1 <= len(lines) <= 6, len(lines)
    assert f"latest from {ATTACKER}" in lines[0]


def test_the_total_of_pending_checks_is_bounded_across_client_addresses(larder_factory, origin, workdir):
    path = bcrypt_users(workdir, ("alice", "correct horse"))
    lr = larder_factory(config=dict(ADMIN, auth={"users_file": str(path)}))  # at most 32 pending
    url = origin.url("/echo")
    # Eighty clients, each from its own address and within its share, all at once.
    socks = [socket.create_connection(("127.0.0.1", lr.port), timeout=20, source_address=(f"127.0.1.{i}", 0))
             for i in range(1, 81)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(build_request("GET", url, [("Host", "x"), basic("alice", f"wrong-{i}")]))
        results = [read_response(SockReader(sock)).status for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    assert sorted(set(results)) == [407, 429], results
    assert 32 <= results.count(407) < 80
    assert stats(lr)["auth_checks_refused"]["max_pending_checks"] == results.count(429)
    assert proxy_exchange(lr.port, "GET", url, headers=[basic("alice", "correct horse")]).status == 200


# --- destinations through a parent proxy --------------------------------------------------------


class FakeParent(_ThreadedServer):
    """A parent proxy that records each request line and answers 200 "from parent"."""

    def __init__(self):
        super().__init__()
        self.lines = []

    def handle(self, sock, peer):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return
            data += chunk
        self.lines.append(data.split(b"\r\n", 1)[0].decode("latin-1"))
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nfrom parent")


def test_through_a_parent_proxy_denied_destinations_are_refused_before_forwarding(larder_factory):
    parent = FakeParent()
    dns = FakeDNS({"inner.test": "127.0.0.3", "public.test": "127.0.0.5"})
    try:
        lr = larder_factory(config=dict(ADMIN, deny_destinations=["127.0.0.3/32", "169.254.0.0/16"],
                                        session={"proxy": f"http://127.0.0.1:{parent.port}",
                                                 "dns_servers": [f"127.0.0.1:{dns.port}"]}))
        refused = {
            # This proxy itself: by address literal, by name (from /etc/hosts), and 0.0.0.0.
            f"http://127.0.0.1:{lr.port}/": b"is this proxy itself",
            f"http://localhost:{lr.port}/x": b"is this proxy itself",
            f"http://0.0.0.0:{lr.port}/": b"is this proxy itself",
            # deny_destinations networks: an address literal (no DNS), and a name resolving into one.
            "http://127.0.0.3:8080/": b"127.0.0.3 is in deny_destinations (127.0.0.3/32)",
            "http://inner.test/": b"127.0.0.3 is in deny_destinations (127.0.0.3/32)",
            "http://169.254.169.254/latest/meta-data/": b"169.254.169.254 is in deny_destinations",
        }
        for url, reason in refused.items():
            r = proxy_exchange(lr.port, "GET", url)
            assert r.status == 403 and reason in r.body, (url, r.status, r.body)
        assert parent.lines == []

        # Allowed: a name resolving elsewhere, and a name local DNS does not know (the parent's call).
        for url in ("http://public.test/ok", "http://outside.test/ok"):
            r = proxy_exchange(lr.port, "GET", url)
            assert r.status == 200 and r.body == b"from parent", (url, r.status, r.body)
        assert parent.lines == ["GET http://public.test/ok HTTP/1.1", "GET http://outside.test/ok HTTP/1.1"]

        s = stats(lr)
        assert s["requests_denied"]["destination"] == len(refused)
        assert "403 to 127.0.0.1" in lr.log_text()
        assert "inner.test: 127.0.0.3 is in deny_destinations" in lr.log_text()

        # A name's addresses are kept a while (by each of the two workers): asking again costs no
        # lookup. The resolver varies the case of the names it asks for.
        for _ in range(6):
            assert proxy_exchange(lr.port, "GET", "http://inner.test/again").status == 403
        lookups = [q for q in dns.queries if q[0].lower() == "inner.test" and q[1] == 1]
        assert 1 <= len(lookups) <= 2, dns.queries
    finally:
        parent.stop()
        dns.stop()


def test_a_real_parent_larder_never_receives_requests_for_denied_origins(larder_factory, origin, workdir):
    # The parent listens on 127.0.0.2 too, so the child can deny the origin's 127.0.0.1 and still
    # reach its parent.
    parent = larder_factory(config={"via_name": "parent"}, args=("--listen", "127.0.0.2:0"), name="parent")
    m = parent.wait_for_log(r"proxy listening on 127\.0\.0\.2:(\d+)")
    assert m, parent.log_text()
    child = larder_factory(config={"via_name": "child", "deny_destinations": ["127.0.0.1/32"],
                                   "session": {"proxy": f"http://127.0.0.2:{m.group(1)}"}}, name="child")
    for url in (origin.url("/echo"), f"http://localhost:{origin.port}/echo"):
        r = proxy_exchange(child.port, "GET", url)
        assert r.status == 403 and b"127.0.0.1 is in deny_destinations (127.0.0.1/32)" in r.body, (url, r.status)
    assert origin.requests() == []
