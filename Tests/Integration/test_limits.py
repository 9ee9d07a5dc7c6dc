"""Limits, each against the real binary: request bodies (413), connections per worker (503) and per
client address (429), a client sending its head one byte a second (408), origins that never
accept, never answer or stall mid-body (504 or a cut connection)."""

import select
import socket
import threading
import time

from helpers import RawClient, build_request, caller_place, curl, note_sleep, proxy_exchange, std_request
from test_admin import ADMIN, stats
from test_cache import script


def origin_bodies(origin):
    return [r["body_len"] for r in origin.requests()]


# --- request bodies ----------------------------------------------------------------------------


def test_request_body_over_the_limit_is_413_before_the_origin_sees_it(larder_factory, origin, tmp_path):
    lr = larder_factory(config={"limits": {"max_request_body": "1MiB"}})
    url = origin.url("/echo")
    # curl announces the size and waits for 100-continue: the 413 comes instead, nothing is sent.
    big = tmp_path / "big"
    big.write_bytes(b"x" * (2 << 20))
    r = curl("-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", lr.proxy_url, "--data-binary", f"@{big}", url)
    assert r.stdout == b"413", r
    # A client that sends its whole body at once still reads the answer (Larder lingers, no reset).
    with RawClient(lr.port) as c:
        c.send(std_request("POST", url, body=b"y" * (3 << 20)))
        resp = c.response("POST")
        assert resp.status == 413 and b"over the limit of 1048576" in resp.body
    assert origin_bodies(origin) == []
    # At the limit it goes through.
    r = proxy_exchange(lr.port, "POST", url, body=b"z" * (1 << 20), timeout=20)
    assert r.status == 200 and origin_bodies(origin) == [1 << 20]


def test_chunked_request_body_over_the_limit_is_cut_with_413(larder_factory, origin):
    lr = larder_factory(config={"limits": {"max_request_body": "64KiB"}})
    with RawClient(lr.port) as c:
        head = build_request("POST", origin.url("/echo"), [("Host", origin.hostport), ("Transfer-Encoding", "chunked")])
        c.send(head)
        for _ in range(20):
            c.send(b"1000\r\n" + b"c" * 0x1000 + b"\r\n")   # 80 KiB in all
        c.send(b"0\r\n\r\n")
        resp = c.response("POST")
        assert resp.status == 413 and b"chunked request body over the limit" in resp.body
    # The proxy goes on serving.
    assert proxy_exchange(lr.port, "GET", origin.url("/echo")).status == 200


# --- connections --------------------------------------------------------------------------------


def open_idle(port, url, n):
    """n keep-alive connections, each after one answered request."""
    clients = []
    for _ in range(n):
        c = RawClient(port)
        assert c.request("GET", url).status == 200
        clients.append(c)
    return clients


def test_connections_per_client_address_are_limited_with_429(larder_factory, origin):
    lr = larder_factory(config=dict(ADMIN, limits={"max_connections_per_client": 3}))
    url = origin.url("/echo")
    clients = open_idle(lr.port, url, 3)
    try:
        r = proxy_exchange(lr.port, "GET", url)
        assert r.status == 429 and r.header("Retry-After") == "1"
        assert b"too many connections from your address" in r.body
        # Connections already open keep working.
        assert clients[0].request("GET", url).status == 200
        clients.pop().close()
        deadline = time.monotonic() + 5
        while proxy_exchange(lr.port, "GET", url).status != 200:
            assert time.monotonic() < deadline, "a freed slot was not reused"
            time.sleep(0.05)
    finally:
        for c in clients:
            c.close()
    s = stats(lr)
    assert s["client_connections_refused"]["max_connections_per_client"] >= 1
    assert "limits.max_connections_per_client" in lr.log_text()


def test_a_full_worker_answers_503_and_recovers(larder_factory, origin):
    lr = larder_factory(config=dict(ADMIN, workers=1, limits={"max_connections": 4, "max_connections_per_client": 0}))
    url = origin.url("/echo")
    clients = open_idle(lr.port, url, 4)
    try:
        statuses = [proxy_exchange(lr.port, "GET", url).status for _ in range(5)]
        assert statuses == [503] * 5
        # One refusal line in the log for the burst, not one per connection (the log is read by a
        # thread of the test's, which a busy machine may leave behind: waited for first).
        assert lr.wait_for_log(r"refused", timeout=10), lr.log_text()[-2000:]
        assert lr.log_text().count("refused") == 1, lr.log_text()[-2000:]
        # Counted before the idle clients leave: a retry below can still be refused while their
        # closes are on their way.
        assert stats(lr)["client_connections_refused"]["max_connections"] == 5
    finally:
        for c in clients:
            c.close()
    deadline = time.monotonic() + 5
    while proxy_exchange(lr.port, "GET", url).status != 200:
        assert time.monotonic() < deadline, "the proxy did not accept again after connections closed"
        time.sleep(0.05)


def test_a_flood_beyond_the_limit_never_breaks_the_proxy(larder_factory, origin):
    lr = larder_factory(config={"workers": 1, "limits": {"max_connections": 50, "max_connections_per_client": 0}})
    url = origin.url("/echo")
    socks = []
    try:
        for _ in range(400):
            s = socket.create_connection(("127.0.0.1", lr.port), timeout=5)
            socks.append(s)
        # Whatever happened to the flood, a new client is served once it is gone.
    finally:
        for s in socks:
            s.close()
    deadline = time.monotonic() + 10
    while proxy_exchange(lr.port, "GET", url).status != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert lr.proc.poll() is None


# --- slow clients ---------------------------------------------------------------------------------


def test_a_head_sent_one_byte_a_second_is_dropped_with_408(larder_factory, origin):
    lr = larder_factory(config={"limits": {"client_header_timeout": "2s"}})
    request = build_request("GET", origin.url("/echo"), [("Host", origin.hostport), ("X-Pad", "a" * 40)])
    s = socket.create_connection(("127.0.0.1", lr.port), timeout=10)
    t0 = time.monotonic()
    answer = b""
    try:
        for byte in request:
            s.sendall(bytes([byte]))
            # Others are served meanwhile.
            assert proxy_exchange(lr.port, "GET", origin.url("/echo"), timeout=5).status == 200
            # A byte a second: the next goes when a second has passed without an answer (the pace
            # of the slow client, counted as such).
            began = time.monotonic()
            if not select.select([s], [], [], 1)[0]:
                note_sleep(time.monotonic() - began, f"pace at {caller_place()}")
            s.setblocking(False)
            try:
                answer += s.recv(4096)
            except BlockingIOError:
                pass
            except ConnectionError:
                break
            finally:
                s.setblocking(True)
            if answer:
                break
            assert time.monotonic() - t0 < 8, "still connected long after the header timeout"
    finally:
        s.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert 1.8 <= time.monotonic() - t0 <= 5


# --- origin timeouts ---------------------------------------------------------------------------


def test_an_origin_that_never_accepts_is_504_after_the_connect_timeout(larder_factory):
    # A listener with a full backlog: the kernel drops further SYNs, so connecting hangs.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(("127.0.0.1", port))
            fillers.append(f)
        time.sleep(0.2)
        lr = larder_factory(config={"session": {"connect_timeout": "1s"}})
        t0 = time.monotonic()
        r = proxy_exchange(lr.port, "GET", f"http://127.0.0.1:{port}/", timeout=10)
        elapsed = time.monotonic() - t0
        assert r.status == 504 and b"timed out connecting" in r.body, (r.status, r.body)
        assert 0.8 <= elapsed <= 3.5
    finally:
        for f in fillers:
            f.close()
        server.close()


def test_an_origin_stalling_mid_body_cuts_the_response_and_stores_nothing(larder_factory, origin, workdir):
    lr = larder_factory(config={"session": {"timeout_interval_for_request": "1s"}})
    script(workdir, "stall", headers=[("Cache-Control", "max-age=600")], body_bytes=100_000,
           pause_after=10_000, pause=4)
    url = origin.url("/res/stall")
    with RawClient(lr.port, timeout=10) as c:
        c.send(std_request("GET", url))
        t0 = time.monotonic()
        try:
            resp = c.response("GET")
            complete = len(resp.body) == 100_000
        except Exception:
            complete = False
        assert not complete, "a stalled body must not look complete"
        assert time.monotonic() - t0 < 4
    # Nothing half-stored: the next request goes to the origin again (which no longer stalls).
    script(workdir, "stall", headers=[("Cache-Control", "max-age=600")], body_bytes=100_000)
    before = len(origin.requests())
    r = proxy_exchange(lr.port, "GET", url, timeout=20)
    assert len(origin.requests()) == before + 1
    assert r.status == 200 and len(r.body) == 100_000
