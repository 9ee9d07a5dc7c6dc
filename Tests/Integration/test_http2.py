"""HTTP/2 from clients: prior knowledge on the plain listener, ALPN on the TLS listener and on
intercepted connections, every request doing what it does over HTTP/1.1 (the cache, collapsing,
bodies, CONNECT), and the hostile peers of the HTTP/2 literature, each refused with a stream or
connection error, a log line and nothing forwarded.

Real clients: curl (--http2-prior-knowledge, --http2), nghttp, h2load, and Python's h2 for what the
others will not send."""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import pytest

from h2client import H2Client, RawH2, StreamResult, frame
from helpers import RawClient, _ThreadedServer, curl, proxy_exchange, std_request, wait_until
from origin import pattern, unique_body
from test_access_log import read_lines
from test_admin import stats
from test_tls import PKI, origin_with  # noqa: F401 (fixtures below)

import hyperframe.frame as hf

ADMIN = {"admin_listen": "127.0.0.1:0"}
PROTOCOL_ERROR = 0x1
ENHANCE_YOUR_CALM = 0xB


def h2_curl(lr, origin, path, *extra):
    """curl with prior knowledge, sending the origin's URL to Larder's plain listener."""
    return curl("--http2-prior-knowledge", "--connect-to", f"{origin.hostport}:127.0.0.1:{lr.port}",
                *extra, origin.url(path))


@pytest.fixture
def pki(workdir):
    return PKI(workdir / "pki")


@pytest.fixture
def servers():
    started = []
    yield started
    for s in started:
        s.stop()


def sha(b):
    return hashlib.sha256(b).hexdigest()


# ---------------------------------------------------------------------------
# Clients that speak HTTP/2


def test_curl_with_prior_knowledge_gets_a_miss_then_a_hit(larder_factory, origin):
    lr = larder_factory(config=ADMIN)
    first = h2_curl(lr, origin, "/unique/1/70000", "-D", "-", "-o", "/dev/null")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(b"HTTP/2 200"), first.stdout
    assert b"cache-status: larder; fwd=uri-miss" in first.stdout
    second = h2_curl(lr, origin, "/unique/1/70000", "-D", "-")
    assert second.returncode == 0, second.stderr
    head, body = second.stdout.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/2 200") and b"cache-status: larder; hit" in head, head
    r = RawClient(lr.port).request("GET", origin.url("/unique/1/70000"))
    assert r.status == 200 and r.body == body and len(body) == 70000
    assert len(origin.requests()) == 1, "the second fetch is a hit"
    s = stats(lr)
    assert s["http2"]["connections"] >= 2 and s["http2"]["streams"] >= 2, s["http2"]


def test_each_stream_has_its_access_log_line_saying_http2(larder_factory, origin, workdir):
    log = workdir / "access.json"
    lr = larder_factory(config={"access_log": str(log), "access_log_format": "json"})
    with H2Client(lr.port) as c:
        sids = [c.request("GET", origin.hostport, f"/unique/{n}/100") for n in (3, 4, 3)]
        for sid in sids:
            assert c.wait(sid).status == 200
    records = [json.loads(line) for line in read_lines(log, 3)]
    assert sorted(r["url"] for r in records) == sorted(origin.url(f"/unique/{n}/100") for n in (3, 3, 4))
    assert {r["version"] for r in records} == {"HTTP/2.0"}
    assert {r["client"] for r in records} == {"127.0.0.1"}


def test_curl_over_the_tls_listener_negotiates_h2_in_reverse_mode(larder_factory, origin, pki):
    cert, key = pki.leaf("proxy")
    lr = larder_factory(config={"reverse_origin": origin.base,
                                "tls": {"listen": ["127.0.0.1:0"], "certificate_file": cert, "key_file": key}},
                        listeners=2)
    url = f"https://localhost:{lr.ports[1]}/unique/2/5000"
    for want in ("fwd=uri-miss", "hit"):
        r = curl("--http2", "--cacert", pki.ca, url, "-D", "-")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(b"HTTP/2 200"), r.stdout[:200]
        assert f"cache-status: larder; {want}".encode() in r.stdout, r.stdout[:600]
    # HTTP/1.1 clients on the same listener are unchanged.
    r = curl("--http1.1", "--cacert", pki.ca, url, "-w", "%{http_version}", "-o", "/dev/null")
    assert r.stdout == b"1.1", r.stderr
    assert len(origin.requests()) == 1


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
def test_bodies_of_every_size_arrive_whole_as_misses_and_hits(larder_factory, origin, pki, tls):
    """A DATA frame under 4 KiB is copied into nghttp2's buffer with the frames around it; a larger
    one is written apart: over TLS put together with its header and encrypted at once (one
    record), on a plain socket moved to the socket's output. Bodies on both sides of those sizes, several streams at
    once on one connection, fetched (a miss, streamed as it arrives) and then stored (a hit), and
    one client with a small window that takes them a piece at a time."""
    if tls:
        cert, key = pki.leaf("proxy")
        lr = larder_factory(config={"reverse_origin": origin.base,
                                    "tls": {"listen": ["127.0.0.1:0"], "certificate_file": cert, "key_file": key}},
                            listeners=2)
        port, scheme, ca = lr.ports[1], "https", pki.ca
    else:
        lr = larder_factory(config={"reverse_origin": origin.base})
        port, scheme, ca = lr.port, "http", None
    sizes = {80: 1_000_000, 81: 300_001, 82: 16_375, 83: 16_376, 84: 4_095, 85: 4_096, 86: 1_000, 87: 1}
    for round_ in ("miss", "hit"):
        with H2Client(port, tls_ca=ca) as c:
            sids = {n: c.request("GET", f"localhost:{port}", f"/unique/{n}/{size}", scheme=scheme)
                    for n, size in sizes.items()}
            for n, sid in sids.items():
                s = c.wait(sid, timeout=30)
                assert s.status == 200 and s.ended and bytes(s.body) == unique_body(n, sizes[n]), (round_, n, s)
    for window in (20_000, 3_000):
        with H2Client(port, tls_ca=ca, initial_window=window) as c:
            sid = c.request("GET", f"localhost:{port}", "/unique/81/300001", scheme=scheme)
            s = c.wait(sid, timeout=30)
            assert s.status == 200 and bytes(s.body) == unique_body(81, 300_001), (window, s)
    assert sorted(r["path"] for r in origin.requests()) == sorted(f"/unique/{n}/{size}" for n, size in sizes.items())


def tcp_send_queue(local_port, remote_port):
    """Bytes the kernel holds unsent (or unacknowledged) on the loopback TCP socket from
    ``local_port`` to ``remote_port`` (/proc/net/tcp's tx_queue)."""
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1].split(":"), fields[2].split(":")
            if int(local[1], 16) == local_port and int(remote[1], 16) == remote_port:
                return int(fields[4].split(":")[0], 16)
    return 0


def test_large_frames_sent_as_made_over_tls_survive_a_socket_that_fills(larder_factory, origin, pki):
    """Over TLS a large DATA frame is put together and encrypted as it is made, while its bytes
    are in the cache, not queued for the next turn. When the socket takes no more, the frame is
    queued whole, and libevent's next write finishes the record OpenSSL holds from the same bytes.
    Small answers' frames are staged and sent together at the end of the loop's pass, or queued
    behind what the socket has not taken. A client with a small receive buffer asks for more than
    the kernel can hold (stored answers and a miss, 10 MB), and reads nothing until Larder's
    socket to it holds a MB; then it asks for 80 small answers, which queue behind the rest, and
    a second connection reading at full speed is answered meanwhile."""
    cert, key = pki.leaf("proxy")
    lr = larder_factory(config={"reverse_origin": origin.base, "workers": 1,
                                "tls": {"listen": ["127.0.0.1:0"], "certificate_file": cert, "key_file": key}},
                        listeners=2)
    port = lr.ports[1]
    stored = {90: 1_000_000, 91: 1_000_001, 92: 700_000, 93: 16_375, 95: 3_000}
    with H2Client(port, tls_ca=pki.ca) as c:
        for n, size in stored.items():
            s = c.wait(c.request("GET", f"localhost:{port}", f"/unique/{n}/{size}", scheme="https"), timeout=30)
            assert s.status == 200 and bytes(s.body) == unique_body(n, size), (n, s)
    sizes = {**stored, 94: 2_000_000}
    asked = [n for n in (90, 91, 92, 93) for _ in range(3)] + [94]
    with H2Client(port, tls_ca=pki.ca, receive_buffer=4096, initial_window=1 << 24) as slow, \
            H2Client(port, tls_ca=pki.ca, initial_window=1 << 24) as fast:
        for c in (slow, fast):  # the connection's window too, not only the streams'
            c.conn.increment_flow_control_window(1 << 30)
            c.flush()
        slow_ids = {slow.request("GET", f"localhost:{port}", f"/unique/{n}/{sizes[n]}", scheme="https"): n
                    for n in asked}
        slow_port = slow.sock.getsockname()[1]
        assert wait_until(lambda: tcp_send_queue(port, slow_port) >= 1_000_000, timeout=30)
        small_ids = [slow.request("GET", f"localhost:{port}", "/unique/95/3000", scheme="https") for _ in range(80)]
        fast_ids = {n: fast.request("GET", f"localhost:{port}", f"/unique/{n}/{size}", scheme="https")
                    for n, size in stored.items()}
        for n, sid in fast_ids.items():
            s = fast.wait(sid, timeout=30)
            assert s.status == 200 and s.ended and bytes(s.body) == unique_body(n, stored[n]), ("fast", n, s)
        for sid, n in slow_ids.items():
            s = slow.wait(sid, timeout=60)
            assert s.status == 200 and s.ended and bytes(s.body) == unique_body(n, sizes[n]), ("slow", n, s)
        for sid in small_ids:
            s = slow.wait(sid, timeout=30)
            assert s.status == 200 and s.ended and bytes(s.body) == unique_body(95, 3000), ("small", sid, s)
    assert sorted(r["path"] for r in origin.requests()) == sorted(f"/unique/{n}/{size}" for n, size in sizes.items())


def test_answers_beyond_what_one_flush_stages_over_tls_all_arrive(larder_factory, origin, pki):
    """Over TLS a flush stages frames up to the socket's high-water mark (256 KiB), sent at the
    end of the pass; the answers beyond it follow without the client sending anything after its
    90 requests (no WINDOW_UPDATE, its windows wide open from the start), so no read of the
    connection brings them: 90 small stored answers, 370 KB, asked for in one write."""
    cert, key = pki.leaf("proxy")
    lr = larder_factory(config={"reverse_origin": origin.base, "workers": 1,
                                "tls": {"listen": ["127.0.0.1:0"], "certificate_file": cert, "key_file": key}},
                        listeners=2)
    port = lr.ports[1]
    path = "/unique/96/4000"
    with H2Client(port, tls_ca=pki.ca) as c:
        s = c.wait(c.request("GET", f"localhost:{port}", path, scheme="https"))
        assert s.status == 200 and bytes(s.body) == unique_body(96, 4000), s
    with H2Client(port, tls_ca=pki.ca, initial_window=1 << 24) as c:
        c.auto_window = False
        c.conn.increment_flow_control_window(1 << 30)
        sids = []
        for _ in range(90):  # all in one write, so that one read brings them and one pass answers
            sid = c.conn.get_next_available_stream_id()
            c.streams[sid] = StreamResult()
            c.conn.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":authority", f"localhost:{port}"),
                                      (":path", path)], end_stream=True)
            sids.append(sid)
        c.flush()
        assert c.pump(lambda: all(c.streams[sid].ended for sid in sids), timeout=30), \
            sum(c.streams[sid].ended for sid in sids)
        assert all(bytes(c.streams[sid].body) == unique_body(96, 4000) for sid in sids)
    assert [r["path"] for r in origin.requests()] == [path]


def test_an_intercepted_connection_speaks_h2_and_its_second_fetch_is_a_hit(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = larder_factory(config={"workers": 1, "connect_ports": [origin.port],
                                "tls": {"ca_file": str(pki.ca), "intercept": ["localhost"]}})
    larder_ca = lr.ca_dir / "larder-ca.pem"
    url = f"https://localhost:{origin.port}/intercepted-h2"
    for want in ("fwd=uri-miss", "hit"):
        r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", larder_ca, "--http2", url, "-D", "-")
        assert r.returncode == 0, r.stderr
        assert b"HTTP/2 200" in r.stdout and f"cache-status: larder; {want}".encode() in r.stdout, r.stdout
        assert r.stdout.endswith(b"body of /intercepted-h2\n")
    assert origin.paths == ["/intercepted-h2"]


def test_nghttp_fetches_many_urls_on_one_connection(larder_factory, origin):
    if not shutil.which("nghttp"):
        pytest.skip("nghttp (Debian's nghttp2-client) is not installed")
    lr = larder_factory(config={"reverse_origin": origin.base})
    urls = [f"http://127.0.0.1:{lr.port}/unique/{n}/{1000 + n}" for n in range(8)]
    r = subprocess.run(["nghttp", "-n", "-s"] + urls + urls, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    # Each URL once at the origin: the repeated ones were hits or joined the first fetch.
    assert sorted(q["path"] for q in origin.requests()) == sorted(f"/unique/{n}/{1000 + n}" for n in range(8))


def test_h2load_runs_thousands_of_requests_over_multiplexed_streams(larder_factory, origin):
    if not shutil.which("h2load"):
        pytest.skip("h2load (Debian's nghttp2-client) is not installed")
    lr = larder_factory(config={"reverse_origin": origin.base})
    r = subprocess.run(["h2load", "-n", "4000", "-c", "8", "-m", "10", f"http://127.0.0.1:{lr.port}/unique/7/1024"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out = r.stdout.decode()
    assert "4000 succeeded" in out and "4000 2xx" in out, out


def test_streams_of_one_connection_asking_for_one_url_share_one_fetch(larder_factory, origin):
    lr = larder_factory()
    url_path = "/unique/9/300000?hold=h2collapse"
    with H2Client(lr.port) as c:
        sids = [c.request("GET", origin.hostport, url_path) for _ in range(12)]
        assert len(origin.wait_requests(1)) == 1
        origin.open_gate("h2collapse")
        results = [c.wait(sid, 30) for sid in sids]
    assert all(r.status == 200 and r.ended for r in results), results
    assert len({sha(bytes(r.body)) for r in results}) == 1 and len(results[0].body) == 300000
    assert len(origin.requests()) == 1


def test_request_bodies_with_and_without_a_length_reach_the_origin(larder_factory, origin):
    lr = larder_factory()
    body = os.urandom(700_000)
    with H2Client(lr.port) as c:
        with_length = c.request("POST", origin.hostport, "/echo", headers=[("content-length", str(len(body)))],
                                body=b"", end=False)
        without = c.request("PUT", origin.hostport, "/echo", body=body[:1000])
        sent = 0
        while sent < len(body):  # as the windows allow
            room = min(c.conn.local_flow_control_window(with_length), 16384)
            if room == 0:
                c.pump(lambda: c.conn.local_flow_control_window(with_length) > 0, 10)
                continue
            c.conn.send_data(with_length, body[sent:sent + room], end_stream=sent + room >= len(body))
            c.flush()
            sent += room
        a, b = c.wait(with_length, 30), c.wait(without, 30)
    assert a.status == 200 and b.status == 200, (a, b)
    ea, eb = json.loads(bytes(a.body)), json.loads(bytes(b.body))
    assert ea["body_sha256"] == sha(body) and ea["method"] == "POST", ea
    assert eb["body_sha256"] == sha(body[:1000]) and eb["method"] == "PUT", eb


def test_stream_after_stream_each_request_is_answered_as_its_own(larder_factory, origin, workdir):
    """A body-less request's exchange answers later streams' requests (it is not made afresh for
    each): whatever came before on it, each request is judged, answered and logged on its own —
    credentials included — and a request with a body still ends its exchange."""
    from test_access import basic, users_file
    log = workdir / "access.json"
    users = users_file(workdir, ("alice", "pw"))
    lr = larder_factory(config=dict(ADMIN, auth={"users_file": str(users)}, access_log=str(log),
                                    access_log_format="json"))
    alice, wrong = basic("alice", "pw"), basic("alice", "nope")
    host = origin.hostport

    def one(c, method, path, headers=(), body=None):
        r = c.wait(c.request(method, host, path, headers=[(k.lower(), v) for k, v in headers], body=body))
        assert r.ended, r
        return r

    expected = []
    with H2Client(lr.port) as c:
        r = one(c, "GET", "/unique/1/1000", [alice])
        assert r.status == 200 and bytes(r.body) == unique_body(1, 1000)
        assert one(c, "GET", "/unique/1/1000").status == 407  # the verdict before is not this request's
        assert one(c, "GET", "/unique/1/1000", [wrong]).status == 407
        r = one(c, "HEAD", "/unique/2/5000", [alice])
        assert r.status == 200 and r.header("content-length") == "5000" and not r.body
        r = one(c, "GET", "/unique/2/5000", [alice])
        assert r.status == 200 and bytes(r.body) == unique_body(2, 5000)
        reused = stats(lr)["http2"]["exchanges_reused"]
        assert reused == 4, reused  # the first stream's exchange answered the four after it
        r = one(c, "POST", "/echo", [alice, ("Content-Length", "3")], body=b"abc")
        assert r.status == 200 and json.loads(bytes(r.body))["body_sha256"] == sha(b"abc")
        # A request with a body has an exchange of its own, its last: with the one waiting exchange
        # kept busy (its origin holds the answer), the next request needs a new one.
        held = c.request("GET", host, "/unique/30/100?hold=reuse", headers=[alice])
        assert wait_until(lambda: stats(lr)["http2"]["exchanges_reused"] == reused + 1)
        assert one(c, "GET", "/unique/1/1000", [alice]).status == 200
        assert stats(lr)["http2"]["exchanges_reused"] == reused + 1
        origin.open_gate("reuse")
        r = c.wait(held)
        assert r.status == 200 and bytes(r.body) == unique_body(30, 100)
        expected += [200, 407, 407, 200, 200, 200, 200, 200]
        for i in range(30):
            n = 3 + i % 3
            r = one(c, "GET", f"/unique/{n}/{700 + n}", [alice] if i % 4 else [])
            if i % 4:
                assert r.status == 200 and bytes(r.body) == unique_body(n, 700 + n), (i, r)
            else:
                assert r.status == 407, (i, r)
            expected.append(r.status)
        # And several at once, then one after another again.
        sids = [c.request("GET", host, f"/unique/{n}/2000", headers=[alice]) for n in range(10, 20)]
        for n, sid in zip(range(10, 20), sids):
            r = c.wait(sid)
            assert r.status == 200 and bytes(r.body) == unique_body(n, 2000), (n, r)
            expected.append(200)
        r = one(c, "GET", "/unique/10/2000", [alice])
        assert r.status == 200 and bytes(r.body) == unique_body(10, 2000)
        expected.append(200)
    records = [json.loads(line) for line in read_lines(log, len(expected))]
    assert sorted(rec["status"] for rec in records) == sorted(expected)
    # Each line is its own request's: the sequential ones in order, with their own URL and size.
    first = records[:8]
    assert [rec["status"] for rec in first] == expected[:8]
    assert [rec["url"] for rec in first] == [origin.url(p) for p in (
        "/unique/1/1000", "/unique/1/1000", "/unique/1/1000", "/unique/2/5000", "/unique/2/5000", "/echo",
        "/unique/1/1000", "/unique/30/100?hold=reuse")]
    assert {rec["version"] for rec in records} == {"HTTP/2.0"}
    for req in origin.requests():
        assert not any(k.lower() == "proxy-authorization" for k, _ in req["headers"])
    # Most streams were answered by an exchange an earlier one left waiting; the POST's was its last.
    h2 = stats(lr)["http2"]
    assert h2["streams"] == len(expected) and h2["exchanges_reused"] >= len(expected) - 12, h2


def test_every_kind_of_answer_leaves_the_next_stream_its_own(larder_factory, origin):
    """After answers without a body, with an interim one before them, framed by the origin's
    close, chunked, refused or cut, the next stream of the connection gets exactly its own answer,
    whether its exchange was kept waiting or had to be made anew."""
    lr = larder_factory(config=ADMIN)
    host = origin.hostport
    kinds = [("HEAD", "/bytes/3000", 200), ("GET", "/status/204", 204), ("GET", "/status/304", 304),
             ("GET", "/early-hints", 200), ("GET", "/close/2500", 200), ("GET", "/chunked/7000", 200),
             ("GET", "/status/500", 500), ("GET", "/status/404", 404), ("GET", "/reset/4000", None),
             ("GET", "/drop", 502), ("OPTIONS", "/bytes/10", 200), ("DELETE", "/status/200", 200)]
    with H2Client(lr.port) as c:
        for n, (method, path, status) in enumerate(kinds):
            r = c.wait(c.request(method, host, path))
            if status is None:  # cut after its head: the stream is reset, not ended
                assert r.reset is not None or len(r.body) < 4000, (path, r)
            else:
                assert r.status == status, (path, r)
            after = c.wait(c.request("GET", host, f"/unique/{100 + n}/{900 + n}"))
            assert after.status == 200 and bytes(after.body) == unique_body(100 + n, 900 + n), (path, after)
    assert stats(lr)["http2"]["exchanges_reused"] >= len(kinds)


def test_streams_reset_at_any_moment_leave_the_others_their_own_answers(larder_factory, origin):
    """Streams reset in the read that brought them or once their answer has started, among streams
    that are not: every stream not reset gets exactly its own answer, and the exchanges the reset
    ones held are never handed a later stream's request half-done."""
    lr = larder_factory(config=ADMIN)
    host = origin.hostport
    with H2Client(lr.port) as c:
        for round_ in range(12):
            wanted = {}
            for k in range(8):
                n = 400 + round_ * 8 + k
                sid = c.conn.get_next_available_stream_id()
                c.streams[sid] = StreamResult()
                c.conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", host),
                                          (":path", f"/unique/{n}/{20000 + k * 7000}")], end_stream=True)
                if k % 4 == 1:
                    c.conn.reset_stream(sid, error_code=0x8)  # in the same write as its HEADERS
                else:
                    wanted[sid] = (n, 20000 + k * 7000)
            c.flush()
            # One reset once its answer has begun; the rest read to their end.
            started = next(iter(wanted))
            c.pump(lambda: len(c.streams[started].body) > 0 or c.streams[started].ended, 10)
            if not c.streams[started].ended:
                c.conn.reset_stream(started, error_code=0x8)
                c.flush()
                del wanted[started]
            for sid, (n, size) in wanted.items():
                r = c.wait(sid, 20)
                assert r.status == 200 and bytes(r.body) == unique_body(n, size), (round_, n, r)
        # And the connection goes on as before.
        r = c.wait(c.request("GET", host, "/unique/499/3000"))
        assert r.status == 200 and bytes(r.body) == unique_body(499, 3000)
    assert stats(lr)["http2"]["exchanges_reused"] > 0


def test_the_heads_of_one_read_each_reach_their_own_exchange(larder_factory, origin):
    """The HTTP/1.1 heads of the requests one read brings wait in one buffer until their exchanges
    start. Among body-less requests that wait there, a request with a body whose head goes to its
    stream at once, a refused one, cookies in crumbs and heads large enough to make the buffer
    grow, each request reaches the origin as its client sent it and each stream gets its own
    answer."""
    lr = larder_factory(config=ADMIN)
    host = origin.hostport
    with H2Client(lr.port, validate=False) as c:
        for round_ in range(6):
            wanted, refused = {}, []
            for k in range(10):
                tag = f"{round_}-{k}"
                sid = c.conn.get_next_available_stream_id()
                c.streams[sid] = StreamResult()
                base = [(":scheme", "http"), (":authority", host), (":path", f"/echo?tag={tag}"), ("x-tag", tag)]
                if k == 3:
                    c.conn.send_headers(sid, [(":method", "POST")] + base + [("content-length", "5")])
                    c.conn.send_data(sid, f"b{tag}".encode()[:5].ljust(5, b"."), end_stream=True)
                    wanted[sid] = (tag, "POST")
                elif k == 6:
                    c.conn.send_headers(sid, [(":method", "GET")] + base + [("host", "other.test")], end_stream=True)
                    refused.append(sid)
                else:
                    big = "v" * (3000 * (k % 3)) or "-"  # heads past the buffer's first kilobyte
                    c.conn.send_headers(sid, [(":method", "GET")] + base + [
                        ("cookie", f"a={tag}"), ("x-big", big), ("cookie", f"b={tag}")], end_stream=True)
                    wanted[sid] = (tag, "GET")
            c.flush()  # all of them in one write
            for sid, (tag, method) in wanted.items():
                r = c.wait(sid, 20)
                assert r.status == 200, (tag, r)
                got = json.loads(bytes(r.body))
                fields = {}
                for name, value in got["headers"]:
                    fields.setdefault(name.lower(), []).append(value)
                assert got["method"] == method and got["target"].endswith(f"/echo?tag={tag}"), (tag, got)
                assert fields["x-tag"] == [tag], (tag, fields)
                if method == "POST":
                    assert got["body"] == f"b{tag}"[:5].ljust(5, "."), (tag, got)
                else:
                    assert fields["cookie"] == [f"a={tag}; b={tag}"], (tag, fields)
                    assert len(fields["x-big"][0]) == 3000 * ((int(tag.split("-")[1])) % 3) or fields["x-big"] == ["-"]
            for sid in refused:
                assert c.wait(sid, 20).status == 400
    assert stats(lr)["http2"]["exchanges_reused"] > 0


def test_answer_heads_queued_behind_a_client_that_does_not_read_arrive_whole(larder_factory, origin):
    """Answer heads wait in Larder's own buffer until nghttp2 has written them. A client that lets
    the output back up while its streams are answered, their heads large enough together to pass
    that buffer's bound (so that later heads are copied by nghttp2 instead), then reads, gets each
    head as its origin sent it."""
    lr = larder_factory(config=ADMIN)
    host = origin.hostport
    with H2Client(lr.port, receive_buffer=4096, timeout=30, initial_window=1 << 24) as c:
        # Bodies the windows let through and the client does not read: the socket backs up, and
        # Larder stops asking nghttp2 for frames, so the heads after them wait in its queue.
        c.conn.increment_flow_control_window(1 << 24)
        fillers = [c.request("GET", host, f"/bytes/{3_000_000 + k}") for k in range(3)]
        assert wait_until(lambda: sum(1 for r in origin.requests() if r["path"].startswith("/bytes/")) == 3, timeout=20)
        wanted = {}
        for n in range(90):
            big = f"{n:03d}" + "b" * 4000
            sid = c.conn.get_next_available_stream_id()
            c.streams[sid] = StreamResult()
            c.conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", host),
                                      (":path", f"/headers?x-n={n}&x-big={big}")], end_stream=True)
            wanted[sid] = (str(n), big)
            c.flush()
        # Every request reached the origin while the client read nothing.
        assert wait_until(lambda: sum(1 for r in origin.requests() if r["path"] == "/headers") == 90, timeout=20)
        for sid, (n, big) in wanted.items():
            r = c.wait(sid, 30)
            assert r.status == 200 and r.header("x-n") == n, (n, r)
            assert r.header("x-big") == big, (n, (r.header("x-big") or "")[:20])
        for k, sid in enumerate(fillers):
            r = c.wait(sid, 30)
            assert r.status == 200 and len(r.body) == 3_000_000 + k, (k, r)
    assert stats(lr)["http2"]["streams"] == 93


def _peak_memory_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _hpack_integer(value, prefix_bits, first):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value % 128) | 0x80)
        value //= 128
    out.append(value)
    return bytes(out)


def test_heads_of_streams_reset_in_the_write_that_opened_them_do_not_pile_up(larder_factory, origin, memory_bound):
    """HEADERS frames of some forty bytes that HPACK makes some 60 KiB each (fifteen references to
    one 4,000-byte field), each followed by its stream's reset, in one write: each head goes when
    its stream does, not when the read is over, and the rapid-reset cut-off lets go of the rest.
    Before, they piled up to some 15 MB for one 17 KB write."""
    lr = larder_factory(config=ADMIN)
    authority = origin.hostport.encode()
    value = b"a" * 4000

    def literal(index, v):  # literal without indexing, name from the static table
        return _hpack_integer(index, 4, 0x00) + _hpack_integer(len(v), 7, 0x00) + v

    out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(hf.SettingsFrame(0))
    for i in range(190):
        block = b"\x82\x86" + literal(1, authority) + literal(4, f"/echo?i={i}".encode())
        if i == 0:  # x-p: 4,000 bytes, indexed as the dynamic table's first entry (62)
            block += b"\x40" + _hpack_integer(3, 7, 0) + b"x-p" + _hpack_integer(len(value), 7, 0) + value
            block += b"\xbe" * 14
        else:
            block += b"\xbe" * 15
        headers = hf.HeadersFrame(1 + 2 * i, data=block, flags=["END_HEADERS", "END_STREAM"])
        reset = hf.RstStreamFrame(1 + 2 * i, error_code=8)
        out += frame(headers) + frame(reset)
    before = _peak_memory_kib(lr.pid)
    with socket.create_connection(("127.0.0.1", lr.port), timeout=10) as s:
        s.sendall(out)
        # Cut off for rapid reset: the connection ends (reset, as Larder leaves frames unread).
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass
    assert stats(lr)["http2"]["connection_errors"] == 1
    grown = _peak_memory_kib(lr.pid) - before
    assert grown < 3 * 1024, f"peak memory grew by {grown} KiB"


def test_connections_gone_with_answers_pending_are_let_go_once_those_end(larder_factory, origin, memory_bound):
    """An HTTP/2 connection's exchanges name it without a reference of their own, so their streams
    hold it: one whose client vanished while its answers waited at the origin lives on until those
    are over, then goes. Rounds of 60 connections, each with two streams held at the origin when
    its socket is closed, leave Larder answering and its memory where it was after the first
    round (a connection kept for good would hold its session's buffers and tables)."""
    lr = larder_factory(config=dict(ADMIN, workers=1, session={"http_maximum_connections_per_host": 200},
                                    cache={"memory_capacity": "64KiB"}))  # the answers stored stay on disk
    host = origin.hostport
    per_round, streams = 60, 2

    def vanishing_round(k):
        gate = f"vanish{k}"
        paths = []
        clients = []
        for i in range(per_round):
            c = H2Client(lr.port)
            for j in range(streams):
                n = k * 1000 + i * streams + j
                paths.append(f"/unique/{n}/2000")
                c.request("GET", host, f"/unique/{n}/2000?hold={gate}")
            clients.append(c)
        held = set(paths)
        assert wait_until(lambda: sum(r["path"] in held for r in origin.requests()) == len(held), timeout=30)
        for c in clients:
            c.sock.close()  # the client vanishes with both its answers pending
        origin.open_gate(gate)
        # Every answer came back from the origin (stored, so asked again it is a hit).
        with H2Client(lr.port) as c:
            for p in paths:
                r = c.wait(c.request("GET", host, p), 20)
                assert r.status == 200 and len(r.body) == 2000, (p, r)

    vanishing_round(0)  # the allocator's arenas grow to what a round takes
    before = lr.rss_kib("RssAnon")
    for k in range(1, 6):
        vanishing_round(k)
    grown = lr.rss_kib("RssAnon") - before
    assert grown < 4 * 1024, f"anonymous memory grew by {grown} KiB over 300 vanished connections"
    assert stats(lr)["http2"]["connections"] == 6 * per_round + 6


def test_at_most_sixteen_exchanges_wait_for_a_connections_next_streams(larder_factory, origin):
    """Twenty streams at once leave sixteen exchanges waiting (the rest close): the next twenty,
    held at the origin until all have started, find exactly sixteen."""
    lr = larder_factory(config=ADMIN)
    host = origin.hostport

    def batch(c, first, gate):
        sids = [c.request("GET", host, f"/unique/{n}/200?hold={gate}") for n in range(first, first + 20)]
        # All twenty started before any is answered: each holds its exchange meanwhile.
        wanted = {f"/unique/{n}/200" for n in range(first, first + 20)}
        assert wait_until(lambda: sum(r["path"] in wanted for r in origin.requests()) == 20, timeout=20)
        origin.open_gate(gate)
        for n, sid in zip(range(first, first + 20), sids):
            r = c.wait(sid, 20)
            assert r.status == 200 and bytes(r.body) == unique_body(n, 200), (n, r)

    with H2Client(lr.port) as c:
        batch(c, 200, "cap1")
        before = stats(lr)["http2"]["exchanges_reused"]
        batch(c, 300, "cap2")
        assert stats(lr)["http2"]["exchanges_reused"] - before == 16


def test_the_hits_of_one_read_are_answered_by_one_waiting_exchange(larder_factory, origin):
    """A hit whose small stored body the connection holds whole is done with its exchange at once:
    the ten hits of one read are all answered by the one exchange an earlier stream left waiting,
    in turn, rather than each by an exchange of its own (ten exchanges' memory touched per read)."""
    lr = larder_factory(config=ADMIN)
    host = origin.hostport

    def ten_hits(c):
        sids = []
        for _ in range(10):  # one write, so one read
            sid = c.conn.get_next_available_stream_id()
            c.streams[sid] = StreamResult()
            c.conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", host),
                                      (":path", "/unique/5/1000")], end_stream=True)
            sids.append(sid)
        c.flush()
        for sid in sids:
            r = c.wait(sid)
            assert r.status == 200 and bytes(r.body) == unique_body(5, 1000), r
            assert r.header("cache-status").startswith("larder; hit"), r

    with H2Client(lr.port) as c:
        first = c.wait(c.request("GET", host, "/unique/5/1000"))
        assert first.status == 200 and bytes(first.body) == unique_body(5, 1000)
        before = stats(lr)["http2"]["exchanges_reused"]
        ten_hits(c)
        assert stats(lr)["http2"]["exchanges_reused"] - before == 10
    assert sum(1 for r in origin.requests() if r["path"] == "/unique/5/1000") == 1


def test_a_request_handed_to_a_waiting_exchange_at_its_idle_deadline_is_answered(larder_factory, origin):
    """A waiting exchange's idle deadline may be due in the very turn of the loop its next head
    arrives in: the head is read, never answered 408 as unread. Each trial sends the head at a
    different instant around that deadline (a slow machine only misses the window, it cannot make
    this fail wrongly)."""
    idle = 0.3
    lr = larder_factory(config=dict(ADMIN, workers=1, limits={"client_idle_timeout": f"{int(idle * 1000)}ms"}))
    base = [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport)]
    statuses = []
    for k in range(24):
        offset = (k % 12 - 4) / 2000  # -2 ms .. +3.5 ms
        r = RawH2(lr.port)
        try:
            r.headers(1, base + [(":path", "/hang")])  # an open stream: the connection is not idle
            r.headers(3, base + [(":path", "/unique/7/10")])
            assert r.wait(3).status == 200
            due = time.monotonic() + idle + offset
            while time.monotonic() < due - 0.003:
                time.sleep(0.001)
            while time.monotonic() < due:
                pass
            r.headers(5, base + [(":path", "/unique/7/10")])
            statuses.append(r.wait(5).status)
        finally:
            r.close()
    assert statuses == [200] * 24, statuses
    assert stats(lr)["http2"]["exchanges_reused"] >= 1


def test_streams_after_one_reset_mid_answer_are_answered_whole(larder_factory, origin):
    """A stream the client resets while its answer is being sent ends its exchange; the streams
    after it get their own answers, whole."""
    lr = larder_factory(config=ADMIN)
    with H2Client(lr.port) as c:
        c.auto_window = False  # the big answer stalls at the first window
        big = c.request("GET", origin.hostport, "/unique/50/4000000")
        c.pump(lambda: len(c.streams[big].body) > 0, 10)
        c.conn.reset_stream(big, error_code=0x8)
        c.flush()
        c.auto_window = True
        for n in range(51, 61):
            r = c.wait(c.request("GET", origin.hostport, f"/unique/{n}/{3000 + n}"))
            assert r.status == 200 and bytes(r.body) == unique_body(n, 3000 + n), (n, r)
        r = c.wait(c.request("GET", origin.hostport, "/unique/50/4000000"), 30)
        assert r.status == 200 and len(r.body) == 4000000 and bytes(r.body) == unique_body(50, 4000000)
    assert stats(lr)["http2"]["exchanges_reused"] >= 9


def test_a_connect_stream_is_a_tunnel(larder_factory, echo_server):
    lr = larder_factory(config={"connect_ports": [echo_server.port]})
    with H2Client(lr.port) as c:
        sid = c.connect(f"127.0.0.1:{echo_server.port}")
        s = c.streams[sid]
        assert c.pump(lambda: s.headers is not None), s
        assert s.status == 200
        c.conn.send_data(sid, b"ping over h2")
        c.flush()
        assert c.pump(lambda: bytes(s.body).startswith(b"ping over h2")), s.body
        # A second tunnel on the same connection.
        sid2 = c.connect(f"127.0.0.1:{echo_server.port}")
        s2 = c.streams[sid2]
        assert c.pump(lambda: s2.headers is not None) and s2.status == 200


def test_a_connect_streams_end_half_closes_the_tunnel(larder_factory, echo_server):
    """END_STREAM from the client is a FIN to the destination, which may still answer."""
    lr = larder_factory(config={"connect_ports": [echo_server.port]})
    with H2Client(lr.port) as c:
        sid = c.connect(f"127.0.0.1:{echo_server.port}")
        s = c.streams[sid]
        assert c.pump(lambda: s.headers is not None) and s.status == 200, s
        c.conn.send_data(sid, b"last words", end_stream=True)
        c.flush()
        s = c.wait(sid)
    assert bytes(s.body) == b"last words[eof after 10 bytes]" and s.ended, s


class Firehose(_ThreadedServer):
    """A CONNECT target that sends as fast as it is taken (64 MiB at most per connection), and
    counts what it got rid of."""

    def __init__(self):
        self.sent = 0
        super().__init__()

    def handle(self, sock, peer):
        chunk = b"f" * 65536
        for _ in range(1024):
            sock.sendall(chunk)
            self.sent += len(chunk)


def test_tunnel_streams_whose_client_takes_nothing_hold_little_and_are_cut(larder_factory, servers, memory_bound):
    """Each CONNECT stream buffers what an answer may (`http2.stream_output`) each way, not the
    megabyte of an HTTP/1.1 tunnel, and one whose bytes its client leaves untaken (its window
    closed) for the idle timeout is reset, as any stream waiting on its client is. Before, 100
    such streams held some 110 MB for as long as the client stayed."""
    target = Firehose()
    servers.append(target)
    lr = larder_factory(config={"workers": 1, "connect_ports": [target.port],
                                "limits": {"client_idle_timeout": "3s"}})
    before = _peak_memory_kib(lr.pid)
    with H2Client(lr.port, initial_window=0) as c:
        c.auto_window = False
        sids = [c.connect(f"127.0.0.1:{target.port}") for _ in range(60)]
        assert c.pump(lambda: all(c.streams[s].headers is not None for s in sids), 15), c.streams
        assert all(c.streams[s].status == 200 for s in sids)
        # Each tunnel is cut once it made no progress for the idle timeout.
        assert c.pump(lambda: all(c.streams[s].reset is not None for s in sids) or c.closed, 30), \
            [s for s in sids if c.streams[s].reset is None]
        assert not c.closed and all(len(c.streams[s].body) == 0 for s in sids)
    assert lr.wait_for_log(r"made no progress", timeout=10)
    grown = _peak_memory_kib(lr.pid) - before
    # What the tunnels took from the target: each at most its output, its input and the
    # socket's buffers.
    assert grown < 24 * 1024, f"peak memory grew by {grown} KiB for 60 tunnels ({target.sent} bytes taken)"


def test_tunnel_streams_count_in_the_workers_connections(larder_factory, echo_server, origin):
    """An HTTP/2 connection is counted once when accepted, but each of its CONNECT streams holds
    a socket of its own: each counts as a connection while it lasts, so streams cannot take the
    process past its descriptor budget (limits.max_connections, derived from the open-files limit).
    Before, one address filled every descriptor with three connections of 100 tunnels each."""
    lr = larder_factory(config={"workers": 1, "connect_ports": [echo_server.port],
                                "limits": {"max_connections": 12}})
    with H2Client(lr.port) as c:
        sids = [c.connect(f"127.0.0.1:{echo_server.port}") for _ in range(30)]
        assert c.pump(lambda: all(c.streams[s].headers is not None for s in sids), 15), c.streams
        statuses = [c.streams[s].status for s in sids]
        # The connection itself and eleven tunnels make the worker's twelve.
        assert statuses.count(200) == 11 and statuses.count(503) == 19, statuses
        assert wait_until(lambda: echo_server.connections == 11)
        full = RawClient(lr.port).request("GET", origin.url("/unique/60/100"))
        assert full.status == 503, full
        assert all(c.streams[s].reset is None for s in sids if c.streams[s].status == 200)
    # The tunnels end with their connection, and their places with them.
    assert wait_until(lambda: RawClient(lr.port).request("GET", origin.url("/unique/61/100")).status == 200,
                      timeout=10)
    assert lr.wait_for_log(r"503 to HTTP/2 client 127.0.0.1: 12 connections and streams at origins")


def test_requests_of_streams_at_origins_count_in_the_workers_connections(larder_factory, origin):
    lr = larder_factory(config={"workers": 1, "limits": {"max_connections": 6}})
    host = origin.hostport
    with H2Client(lr.port) as c:
        sids = [c.request("GET", host, f"/unique/{70 + i}/100?hold=budget") for i in range(12)]
        assert wait_until(lambda: len(origin.requests()) == 5), origin.requests()
        refused = [c.wait(s) for s in sids[5:]]
        assert all(r.status == 503 for r in refused), refused
        origin.open_gate("budget")
        answered = [c.wait(s) for s in sids[:5]]
        assert all(r.status == 200 and len(r.body) == 100 for r in answered), answered
        # Their places are free again.
        again = c.wait(c.request("GET", host, "/unique/80/100"))
        assert again.status == 200, again


def test_tunnel_streams_count_in_their_addresss_requests_at_origins(larder_factory, echo_server):
    lr = larder_factory(config={"connect_ports": [echo_server.port], "limits": {"origin_fetches_per_client": 4}})
    with H2Client(lr.port) as c:
        sids = [c.connect(f"127.0.0.1:{echo_server.port}") for _ in range(10)]
        assert c.pump(lambda: all(c.streams[s].headers is not None for s in sids), 15), c.streams
        statuses = [c.streams[s].status for s in sids]
        assert statuses.count(200) == 4 and statuses.count(429) == 6, statuses
        # One ends: another may open.
        first = sids[statuses.index(200)]
        c.conn.end_stream(first)
        c.flush()
        assert c.pump(lambda: c.streams[first].ended or c.streams[first].reset is not None, 10)
        assert wait_until(lambda: c.wait(c.connect(f"127.0.0.1:{echo_server.port}")).status == 200, timeout=10)


class Banner(_ThreadedServer):
    """A CONNECT target that says its line and ends its side first, then reads until the client's
    side ends (noted in ``ends``)."""

    def __init__(self):
        self.ends = 0
        super().__init__()

    def handle(self, sock, peer):
        sock.sendall(b"hello from banner\n")
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass
        self.ends += 1


@pytest.mark.parametrize("client_end", ["end_stream", "reset"])
def test_a_tunnel_its_destination_ends_first_closes_when_its_client_does(larder_factory, servers, client_end):
    """A CONNECT stream's END_STREAM from Larder is its destination's half-close (RFC 9113 §8.5):
    the stream stays open for the client's side, and the tunnel closes, giving back its places,
    once the client ends or resets it. Before, the stream was reset at once and the tunnel, its
    socket and its places stayed until the HTTP/2 connection closed."""
    target = Banner()
    servers.append(target)
    lr = larder_factory(config={"workers": 1, "connect_ports": [target.port], "limits": {"max_connections": 4}})
    with H2Client(lr.port) as c:
        sids = [c.connect(f"127.0.0.1:{target.port}") for _ in range(3)]
        assert c.pump(lambda: all(c.streams[s].ended or c.streams[s].reset is not None for s in sids), 15)
        for sid in sids:
            s = c.streams[sid]
            assert s.status == 200 and bytes(s.body) == b"hello from banner\n" and s.ended and s.reset is None, s
            c.conn.send_data(sid, b"still here")  # the client may still send
        c.flush()
        # The connection and three tunnels fill the worker: a request needing an origin waits.
        full = c.wait(c.request("GET", f"127.0.0.1:{target.port}", "/"))
        assert full.status == 503, full
        for sid in sids:
            if client_end == "end_stream":
                c.conn.end_stream(sid)
            else:
                c.conn.reset_stream(sid, error_code=8)
        c.flush()
        assert wait_until(lambda: target.ends == 3, timeout=10), target.ends
        assert wait_until(lambda: c.wait(c.connect(f"127.0.0.1:{target.port}")).status == 200, timeout=10)


def test_a_connect_to_a_port_not_allowed_is_refused_on_its_stream(larder_factory, echo_server):
    lr = larder_factory()
    with H2Client(lr.port) as c:
        s = c.wait(c.connect(f"127.0.0.1:{echo_server.port}"))
        assert s.status == 403, s
        ok = c.wait(c.request("GET", "127.0.0.1:1", "/"), 10)  # the connection goes on
        assert ok.status is not None


def test_the_same_request_over_h1_and_h2_gets_the_same_entry(larder_factory, origin):
    lr = larder_factory()
    r = RawClient(lr.port).request("GET", origin.url("/unique/11/2048"))
    assert r.status == 200
    with H2Client(lr.port) as c:
        s = c.wait(c.request("GET", origin.hostport, "/unique/11/2048"))
    assert s.status == 200 and bytes(s.body) == r.body
    assert s.header("cache-status").startswith("larder; hit"), s.headers
    assert len(origin.requests()) == 1


CONNECTION_FIELDS = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}


def comparable(headers):
    """An answer's fields as both protocols must carry them: names lowered, the connection's own
    fields left out, and the clock's (Date, Age, a Cache-Status ttl) reduced to being there."""
    out = []
    for n, v in headers:
        n = (n.decode() if isinstance(n, bytes) else n).lower()
        v = v.decode("latin-1") if isinstance(v, bytes) else v
        if n.startswith(":") or n in CONNECTION_FIELDS:
            continue
        if n in ("date", "age"):
            v = "*"
        if n == "cache-status":
            v = re.sub(r";\s*ttl=-?\d+", "", v)
        out.append((n, v))
    return sorted(out)


def test_every_kind_of_answer_head_reaches_h2_clients_as_it_reaches_h1_ones(larder_factory, origin, workdir):
    """Answers of every kind an exchange writes for a stream: a hit, an origin's answer relayed
    (with a length, chunked), Larder's own error with its text (their heads go to nghttp2 as they
    are written), and a 304, a HEAD and an empty body from the cache (theirs through the stream).
    Each answer over h2 has the fields, status and body the same request gets over HTTP/1.1, and
    the stream's exchange answers the next stream's request after it."""
    for name, headers, body in (("hit", [("Cache-Control", "max-age=3600"), ("ETag", '"v1"')], "h" * 3000),
                                ("empty", [("Cache-Control", "max-age=3600")], ""),
                                ("private", [("Cache-Control", "no-store"), ("X-Kind", "private")], "p" * 500)):
        (workdir / f"res-{name}.json").write_text(json.dumps(
            {"status": 200, "headers": [list(h) for h in headers], "body": body}))
    lr = larder_factory(config=ADMIN)
    cases = [
        ("GET", "/res/hit", []),
        ("GET", "/res/hit", [("If-None-Match", '"v1"')]),
        ("HEAD", "/res/hit", []),
        ("GET", "/res/empty", []),
        ("GET", "/res/private", []),
        ("GET", "/chunked/5000", []),
        ("GET", "/status/404", []),
        ("GET", "/res/never", [("Cache-Control", "only-if-cached")]),
    ]
    h1 = RawClient(lr.port)
    for method, path, headers in cases:
        h1.request(method, origin.url(path), headers)  # the cache as the answers compared find it
    over_h1 = [h1.request(method, origin.url(path), headers) for method, path, headers in cases]
    with H2Client(lr.port) as c:
        reused = stats(lr)["http2"]["exchanges_reused"]
        for (method, path, headers), r in zip(cases, over_h1):
            s = c.wait(c.request(method, origin.hostport, path, headers=[(k.lower(), v) for k, v in headers]))
            assert s.ended and s.reset is None, (path, s)
            assert s.status == r.status, (path, s, r)
            assert bytes(s.body) == r.body, (path, s, r)
            assert comparable(s.headers) == comparable(r.headers), (path, s.headers, r.headers)
        assert stats(lr)["http2"]["exchanges_reused"] - reused == len(cases) - 1
    statuses = [r.status for r in over_h1]
    assert statuses == [200, 304, 200, 200, 200, 200, 404, 504], statuses
    assert [len(r.body) for r in over_h1][:4] == [3000, 0, 0, 0] and b"only-if-cached" in over_h1[-1].body


def test_an_answer_head_reaches_h2_clients_before_its_body(larder_factory, origin, workdir):
    """An origin that sends its head and then holds its body back: the head reaches the h2 client
    at once, to the stream that asked (relayed) and to one that joined its fetch (shared), as over
    HTTP/1.1, not when the body comes."""
    (workdir / "res-held.json").write_text(json.dumps(
        {"status": 200, "headers": [["Cache-Control", "max-age=60"]], "body_bytes": 3000,
         "pause_after": 0, "pause_until": "held-body"}))
    lr = larder_factory(config=ADMIN)
    with H2Client(lr.port) as c:
        first = c.request("GET", origin.hostport, "/res/held")
        assert c.pump(lambda: c.streams[first].headers is not None, 10), c.streams[first]
        second = c.request("GET", origin.hostport, "/res/held")
        assert c.pump(lambda: c.streams[second].headers is not None, 10), c.streams[second]
        assert not c.streams[first].body and not c.streams[second].body
        origin.open_gate("held-body")
        for sid in (first, second):
            s = c.wait(sid)
            assert s.status == 200 and bytes(s.body) == pattern(3000) and s.ended, s
    assert sum(1 for r in origin.requests() if r.get("path") == "/res/held") == 1, "the second joined the first"


def test_a_request_over_the_field_limit_is_refused_by_a_waiting_exchange(larder_factory, origin):
    """More fields than `limits.max_header_count`, well within HTTP/2's header list size: nghttp2
    and the translation let them through, and the HTTP/1.1 parser refuses the request (431), also
    when it is handed to an exchange waiting between requests rather than written into its stream.
    The refused request reaches no origin, and the connection's next stream is answered."""
    lr = larder_factory(config=ADMIN)
    with H2Client(lr.port) as c:
        first = c.wait(c.request("GET", origin.hostport, "/unique/60/500"))
        assert first.status == 200, first
        reused = stats(lr)["http2"]["exchanges_reused"]
        many = [(f"x-f{i}", "v") for i in range(150)]
        over = c.wait(c.request("GET", origin.hostport, "/unique/61/500", headers=many))
        assert stats(lr)["http2"]["exchanges_reused"] == reused + 1, over  # handed to the waiting exchange
        assert over.status == 431 and over.ended, over
        after = c.wait(c.request("GET", origin.hostport, "/unique/62/500"))
        assert after.status == 200 and bytes(after.body) == unique_body(62, 500), after
    assert not any(r.get("path") == "/unique/61/500" for r in origin.requests())


@pytest.mark.parametrize("limit,status,path,headers", [
    ("max_head_bytes", 431, "/unique/71/500", [("x-big", "v" * 2500)]),
    ("max_uri_bytes", 414, "/unique/71/500?" + "q" * 1100, []),
])
def test_a_request_over_a_size_limit_is_refused_by_a_waiting_exchange(larder_factory, origin, limit, status,
                                                                       path, headers):
    """A head larger than `limits.max_head_bytes`, or a request line longer than
    `limits.max_uri_bytes`, once translated: refused as the HTTP/1.1 parser refuses it (431, 414)
    when the request is handed to an exchange waiting between requests, and one just within the
    limit is answered. Nothing refused reaches the origin, and the next stream is answered."""
    limits = {"max_head_bytes": 2048, "max_uri_bytes": 1024}  # a request line may not outgrow the head
    lr = larder_factory(config={**ADMIN, "limits": limits})
    with H2Client(lr.port) as c:
        first = c.wait(c.request("GET", origin.hostport, "/unique/70/500"))
        assert first.status == 200, first
        reused = stats(lr)["http2"]["exchanges_reused"]
        over = c.wait(c.request("GET", origin.hostport, path, headers=headers))
        assert stats(lr)["http2"]["exchanges_reused"] == reused + 1, over  # handed to the waiting exchange
        assert over.status == status and over.ended, over
        # Within the limit: what the translation adds (absolute target, Host) counted as the parser counts it.
        within_path = "/unique/72/500?" + "q" * 900 if limit == "max_uri_bytes" else "/unique/72/500"
        within_headers = [("x-big", "v" * 1700)] if headers else []
        within = c.wait(c.request("GET", origin.hostport, within_path, headers=within_headers))
        assert within.status == 200 and bytes(within.body) == unique_body(72, 500), within
    assert not any(r.get("path", "").startswith("/unique/71/") for r in origin.requests())


def test_shutdown_sends_goaway_and_lets_open_streams_finish(larder_factory, origin):
    lr = larder_factory(config={"shutdown_grace": "10s"})
    # Python's h2 takes a GOAWAY for the end of everything: the frames are read by hand here.
    with RawH2(lr.port) as c:
        c.headers(1, [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport),
                      (":path", "/unique/12/100000?hold=h2drain")])
        assert len(origin.wait_requests(1)) == 1
        os.kill(lr.pid, signal.SIGTERM)
        lr.wait_for_text("shutting down")
        assert c.pump(lambda: c.goaway is not None), "GOAWAY"
        assert c.goaway == 0
        origin.open_gate("h2drain")
        s = c.wait(1, 20)
    assert s.status == 200 and len(s.body) == 100000 and s.ended, s
    assert lr.wait_exit(10) == 0


def test_streams_opened_before_a_late_goaway_start_nothing_and_cost_the_client_nothing(larder_factory, origin):
    """A shutdown's GOAWAY waits behind a download the client is not reading: streams the client
    opens meanwhile are above the GOAWAY's last stream, so they are refused (REFUSED_STREAM says
    nothing of them was processed, RFC 9113 §8.7). None of their requests may reach the origin,
    and the refusals are not resets of the client's doing: no rapid-reset cut-off. Before, all
    150 reached the origin, and the refusals cut the client off with ENHANCE_YOUR_CALM."""
    lr = larder_factory(config={"workers": 1, "shutdown_grace": "30s", "http2": {"max_concurrent_streams": 300}})
    host = origin.hostport

    def refuses_connections():  # the worker closed its listener: it has begun draining
        try:
            socket.create_connection(("127.0.0.1", lr.port), timeout=5).close()
            return False
        except OSError:
            return True

    with RawH2(lr.port) as c:
        c.headers(1, [(":method", "GET"), (":scheme", "http"), (":authority", host), (":path", "/bytes/20000000")])
        assert len(origin.wait_requests(1)) == 1
        local_port = c.sock.getsockname()[1]
        # Not read: the kernel's buffers fill, then Larder's output, where the GOAWAY will wait.
        assert wait_until(lambda: tcp_send_queue(lr.port, local_port) > 100_000, timeout=20)
        os.kill(lr.pid, signal.SIGTERM)
        # The worker closes its listener and queues this connection's GOAWAY in one go.
        assert wait_until(refuses_connections, timeout=20)
        for sid in range(3, 3 + 2 * 150, 2):
            c.headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", host),
                            (":path", f"/unique/{5000 + sid}/10")])
        # Reading now: the download goes on, the GOAWAY arrives, the connection ends.
        assert c.pump(lambda: c.goaway is not None, 30), "GOAWAY"
        assert c.goaway == 0
        assert c.wait_closed(30)
    assert lr.wait_exit(30) == 0
    assert "rapid reset" not in lr.log_text()
    assert [r["path"] for r in origin.requests()] == ["/bytes/20000000"]


# ---------------------------------------------------------------------------
# Hostile peers: refused on the stream or the connection, logged, nothing forwarded


@pytest.mark.parametrize("fields,why", [
    ([("X-Upper", "a")], "upper case in a field name"),
    ([("x-a", "b\r\nx-injected: 1")], "CR LF in a value"),
    ([("x-a", "nul\x00")], "NUL in a value"),
    ([("connection", "close")], "a connection-specific field"),
    ([("transfer-encoding", "chunked")], "transfer-encoding"),
    ([("te", "gzip")], "te other than trailers"),
    ([("upgrade", "websocket")], "upgrade"),
    ([("keep-alive", "1")], "keep-alive"),
])
def test_a_field_http2_forbids_resets_the_stream_and_reaches_nobody(larder_factory, origin, fields, why):
    lr = larder_factory()
    with RawH2(lr.port) as c:
        c.headers(1, [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport),
                      (":path", "/unique/20/10")] + fields)
        s = c.wait(1)
        assert s.reset == PROTOCOL_ERROR or c.goaway is not None, (why, s)
        # The connection goes on for requests that are fine.
        c.headers(3, [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport),
                      (":path", "/unique/21/10")])
        ok = c.wait(3)
        assert ok.status == 200, why
    assert [q["path"] for q in origin.requests()] == ["/unique/21/10"], why


@pytest.mark.parametrize("pseudo,status", [
    ([(":method", "GET"), (":scheme", "http"), (":authority", "{o}"), (":path", "/a b")], None),
    ([(":method", "GET"), (":scheme", "http"), (":authority", "user@{o}"), (":path", "/")], 400),
    ([(":method", "GET"), (":scheme", "ftp"), (":authority", "{o}"), (":path", "/")], 400),
    ([(":method", "GET"), (":scheme", "http"), (":authority", "{o}"), (":path", "x")], None),
    ([(":method", "G T"), (":scheme", "http"), (":authority", "{o}"), (":path", "/")], None),
    ([(":method", "GET"), (":scheme", "http"), (":authority", "{o}"), (":path", "/"), ("host", "evil.test")], 400),
    ([(":method", "GET"), ("x-a", "1"), (":scheme", "http"), (":authority", "{o}"), (":path", "/")], None),
    ([(":method", "GET"), (":scheme", "http"), (":authority", "{o}"), (":path", "/"), (":status", "200")], None),
    ([(":method", "GET"), (":method", "GET"), (":scheme", "http"), (":authority", "{o}"), (":path", "/")], None),
])
def test_a_request_line_http11_cannot_carry_is_refused(larder_factory, origin, pseudo, status):
    """The h2-to-h1 desync: a :path, :method or :authority that would become a second request or
    field when written as HTTP/1.1, a host that disagrees with :authority, pseudo-header fields out
    of place. None: nghttp2 resets the stream before Larder sees it."""
    lr = larder_factory()
    fields = [(n, v.replace("{o}", origin.hostport)) for n, v in pseudo]
    with RawH2(lr.port) as c:
        c.headers(1, fields)
        s = c.wait(1)
        if status is None:
            assert s.reset is not None or c.goaway is not None, s
        else:
            assert s.status == status, s
    assert origin.requests() == []


def test_a_content_length_the_data_frames_disagree_with_resets_the_stream(larder_factory, origin):
    lr = larder_factory()
    with RawH2(lr.port) as c:
        c.headers(1, [(":method", "POST"), (":scheme", "http"), (":authority", origin.hostport),
                      (":path", "/echo"), ("content-length", "5")], end_stream=False)
        c.data(1, b"far more than five bytes")
        s = c.wait(1)
        assert s.reset is not None or c.goaway is not None, s
    time.sleep(0.2)  # a request that was forwarded would be logged by now
    assert all(q["path"] != "/echo" or q["body_len"] <= 5 for q in origin.requests())


def test_a_continuation_flood_ends_the_connection(larder_factory, origin):
    lr = larder_factory(config=ADMIN)
    with RawH2(lr.port) as c:
        h = hf.HeadersFrame(1)
        h.data = b""
        c.send(frame(h))
        try:
            for _ in range(2000):
                cont = hf.ContinuationFrame(1)
                cont.data = b"\x40\x01a\x01b" * 10  # literal fields, never ending the block
                c.send(frame(cont))
        except OSError:
            pass  # cut off while sending: the point
        assert c.wait_closed(10)
    lr.wait_for_text("HTTP/2 client")
    assert stats(lr)["http2"]["connection_errors"] >= 1
    assert origin.requests() == []


def test_an_hpack_bomb_is_refused(larder_factory, origin):
    """A header list far over the limit, however small on the wire (one field repeated from the
    dynamic table)."""
    lr = larder_factory(config={"http2": {"max_header_list": "16KiB"}})
    with RawH2(lr.port) as c:
        enc = [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport), (":path", "/unique/30/5")]
        enc += [("x-bomb", "b" * 4000)] * 40
        c.headers(1, enc)
        s = c.wait(1)
        assert s.reset is not None or c.goaway is not None or (s.status or 0) >= 400, s
    assert origin.requests() == []


def test_rapid_reset_is_cut_off(larder_factory, origin):
    """CVE-2023-44487: streams opened and reset at once, each making Larder start work."""
    lr = larder_factory(config=ADMIN)
    with RawH2(lr.port) as c:
        try:
            for n in range(400):
                sid = 1 + 2 * n
                c.headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport),
                                (":path", f"/unique/{1000 + n}/10?hold=never")])
                if n % 2:
                    c.pump(lambda: False, 0.001)  # some HEADERS arrive alone, and start work
                c.rst(sid)
        except OSError:
            pass  # cut off while sending
        assert c.wait_closed(10)
        assert c.goaway in (None, ENHANCE_YOUR_CALM)
    lr.wait_for_text("rapid reset")
    # Resets in the same read as their HEADERS start nothing; the rest are few.
    assert len(origin.requests()) < 150


def test_streams_a_client_has_larder_reset_count_as_rapid_reset(larder_factory, origin):
    """MadeYouReset (CVE-2025-8671): rather than reset its streams itself, a client has Larder
    reset them once their requests started, with a WINDOW_UPDATE that overflows each stream's
    window. Cut off as for rapid reset, having made few requests reach the origin; before, the
    resets went uncounted and the requests never stopped."""
    lr = larder_factory(config=ADMIN)
    host = origin.hostport

    def window_update(sid, increment):
        f = hf.WindowUpdateFrame(sid)
        f.window_increment = increment
        return frame(f)

    sid, started = 1, 0
    with RawH2(lr.port) as c:
        try:
            for _ in range(30):  # 600 streams at most
                batch = []
                for _ in range(20):
                    c.headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", host),
                                    (":path", f"/unique/{2000 + sid}/10?hold=never")])
                    batch.append(sid)
                    sid += 2
                # Until they all reach the origin, or the connection is cut off (GOAWAY).
                if not wait_until(lambda: c.pump(lambda: c.goaway is not None, 0.01)
                                  or len(origin.requests()) == started + 20, timeout=10):
                    break
                if c.goaway is not None:
                    break
                started += 20  # each request reached the origin: its work started
                c.send(b"".join(window_update(s, 0x7FFFFFFF) for s in batch))
                assert c.pump(lambda: all(c.streams[s].reset == 0x3 for s in batch) or c.goaway is not None, 10)
        except OSError:
            pass  # cut off while sending
        assert c.wait_closed(10)
        assert c.goaway == ENHANCE_YOUR_CALM
    lr.wait_for_text("rapid reset")
    assert len(origin.requests()) < 150


def test_a_ping_flood_from_a_client_that_never_reads_ends_the_connection(larder_factory):
    lr = larder_factory(config=ADMIN)
    with RawH2(lr.port) as c:
        ping = hf.PingFrame(0)
        ping.opaque_data = b"12345678"
        data = frame(ping) * 1000
        try:
            for _ in range(200):
                c.send(data)
        except OSError:
            pass
        assert c.wait_closed(15)
    lr.wait_for_text("flooded Larder")
    assert stats(lr)["http2"]["connection_errors"] >= 1


def test_a_stream_whose_window_never_opens_does_not_stall_the_others(larder_factory, origin):
    lr = larder_factory(config={"limits": {"client_idle_timeout": "2s"}})
    with H2Client(lr.port, initial_window=0) as c:
        c.auto_window = False
        stalled = c.request("GET", origin.hostport, "/unique/40/200000")
        s = c.streams[stalled]
        assert c.pump(lambda: s.headers is not None), s
        # Another stream, given a window, is answered meanwhile.
        other = c.request("GET", origin.hostport, "/unique/41/1000")
        c.conn.increment_flow_control_window(1 << 20, stream_id=other)
        c.conn.increment_flow_control_window(1 << 20)
        c.flush()
        o = c.wait(other, 10)
        assert o.status == 200 and len(o.body) == 1000 and o.ended
        # The stalled stream is cut once its answer made no progress for the idle timeout.
        assert c.pump(lambda: s.reset is not None or c.closed, 15), s


@pytest.mark.parametrize("stored", [False, True], ids=["through-its-exchange", "small-stored-body-held"])
def test_a_stream_whose_window_opens_a_byte_at_a_time_is_cut(larder_factory, origin, stored):
    """A client must take 16 KiB of what waits for it per idle timeout, as over HTTP/1.1: one that
    opens its window a byte at a time holds its stream no longer than one that opens nothing,
    whether its answer comes through its exchange or is a small stored body the connection holds.
    Before, any byte taken counted as progress."""
    lr = larder_factory(config=dict(ADMIN, limits={"client_idle_timeout": "2s"}))
    path = "/unique/91/3000" if stored else "/unique/90/300000"
    if stored:
        with H2Client(lr.port) as c:
            assert c.wait(c.request("GET", origin.hostport, path)).status == 200
        assert wait_until(lambda: stats(lr)["cache_entries"]["memory"] >= 1)
    with H2Client(lr.port, initial_window=0) as c:
        c.auto_window = False
        sid = c.request("GET", origin.hostport, path)
        s = c.streams[sid]
        assert c.pump(lambda: s.headers is not None), s
        give_up = time.monotonic() + 40
        while s.reset is None and not c.closed and time.monotonic() < give_up:
            c.conn.increment_flow_control_window(1, stream_id=sid)
            c.conn.increment_flow_control_window(1)
            c.flush()
            c.pump(lambda: s.reset is not None, 0.25)  # a byte a quarter of a second
        assert s.reset is not None and not c.closed, (len(s.body), s)
        assert 0 < len(s.body) < 3000
    # Cut by the connection's look at its streams, or by the exchange's own send timeout.
    assert lr.wait_for_log(r"made no progress|took less than 16 KiB", timeout=10)


def test_a_stream_beside_a_download_on_a_slow_link_is_not_cut(larder_factory, origin):
    """Answer bytes held back by Larder's own socket (a slow link, shared with a download), not by
    the client's windows, are not the client's doing: a stream beside the download that moves
    less than 16 KiB per idle timeout is not cut for it."""
    lr = larder_factory(config={"limits": {"client_idle_timeout": "3s"}})
    with H2Client(lr.port, initial_window=16 << 20) as c:
        c.conn.increment_flow_control_window(64 << 20)
        c.flush()
        c.request("GET", origin.hostport, "/bytes/50000000")
        slow = c.request("GET", origin.hostport, "/slow/20000?seconds=6")
        s = c.streams[slow]
        give_up = time.monotonic() + 60
        while not (s.ended or s.reset is not None or c.closed) and time.monotonic() < give_up:
            data = c.sock.recv(8192)
            if not data:
                break
            for e in c.conn.receive_data(data):
                c.handle(e)
            c.flush()
            time.sleep(0.05)  # a slow link: some 160 KB/s
        assert s.ended and s.reset is None and len(s.body) == 20000, s
    assert not lr.wait_for_log(r"made no progress", timeout=0.5)


def test_a_collapsed_leader_taking_a_byte_at_a_time_does_not_hold_its_followers(larder_factory, origin, workdir):
    """A leader of a fetch whose length is unknown (chunked) cannot hand it over, so it paces the
    origin for its followers: an HTTP/2 leader opening its window a byte at a time is cut as one
    over HTTP/1.1 is, and its follower gets the whole answer."""
    size = 4 << 20
    (workdir / "res-trickle.json").write_text(json.dumps(
        {"status": 200, "headers": [["Cache-Control", "max-age=3600"]], "chunked": True, "body_bytes": size}))
    lr = larder_factory(config={"limits": {"client_idle_timeout": "2s"}})
    url = origin.url("/res/trickle")
    follower = {}
    with H2Client(lr.port, initial_window=0) as c:
        c.auto_window = False
        sid = c.request("GET", origin.hostport, "/res/trickle")
        s = c.streams[sid]
        assert c.pump(lambda: s.headers is not None), s

        def follow():
            try:
                follower["response"] = proxy_exchange(lr.port, "GET", url, timeout=60)
            except Exception as e:  # noqa: BLE001 - reported by the assertion below
                follower["error"] = e

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        give_up = time.monotonic() + 40
        while t.is_alive() and s.reset is None and not c.closed and time.monotonic() < give_up:
            c.conn.increment_flow_control_window(1, stream_id=sid)
            c.conn.increment_flow_control_window(1)
            c.flush()
            c.pump(lambda: not t.is_alive() or s.reset is not None, 0.25)  # a byte a quarter of a second
        t.join(30)
        assert "response" in follower, follower
        r = follower["response"]
        assert r.status == 200 and len(r.body) == size, (r.status, len(r.body))
        assert c.pump(lambda: s.reset is not None or c.closed, 10) and s.reset is not None, s
    assert len([q for q in origin.requests() if q["path"] == "/res/trickle"]) == 1


def test_a_small_stored_answer_to_a_window_that_never_opens_is_cut(larder_factory, origin):
    """A small stored body is handed to the connection whole, out of its exchange's stream (which
    is free for the next request at once): a client whose window never opens still has its stream
    cut once it made no progress for the idle timeout, and the others answered meanwhile."""
    lr = larder_factory(config=dict(ADMIN, limits={"client_idle_timeout": "2s"}))
    host = origin.hostport
    with H2Client(lr.port) as c:
        assert c.wait(c.request("GET", host, "/unique/43/3000")).status == 200
    assert wait_until(lambda: stats(lr)["cache_entries"]["memory"] >= 1)
    with H2Client(lr.port, initial_window=0) as c:
        c.auto_window = False
        stalled = c.request("GET", host, "/unique/43/3000")
        s = c.streams[stalled]
        assert c.pump(lambda: s.headers is not None), s
        assert "hit" in s.header("cache-status"), s.headers
        other = c.request("GET", host, "/unique/43/3000")
        c.conn.increment_flow_control_window(1 << 20, stream_id=other)
        c.conn.increment_flow_control_window(1 << 20)
        c.flush()
        o = c.wait(other, 10)
        assert o.status == 200 and bytes(o.body) == unique_body(43, 3000) and o.ended
        assert c.pump(lambda: s.reset is not None or c.closed, 15), s
        assert len(s.body) == 0
    assert lr.wait_for_log(r"made no progress", timeout=10), lr.log_text()[-2000:]
    assert [q["path"] for q in origin.requests()] == ["/unique/43/3000"]


def test_stored_bodies_arrive_whole_through_windows_that_cut_their_frames(larder_factory, origin):
    """A stored body goes to a plain-socket client in pieces its DATA frames move whole; windows of
    odd sizes cut frames inside pieces, and the bytes still arrive whole and in order, on streams of
    one connection at once and one after another."""
    lr = larder_factory(config=ADMIN)
    host = origin.hostport
    sizes = [300_000, 16_384 * 4, 16_384 * 4 + 1, 1, 40_000, 4_095, 2_500]
    with H2Client(lr.port) as c:
        for n, size in enumerate(sizes):
            r = c.wait(c.request("GET", host, f"/unique/{200 + n}/{size}"))
            assert r.status == 200 and bytes(r.body) == unique_body(200 + n, size)
    # Stored once the writer is through with them (the client may have its last byte before).
    assert wait_until(lambda: stats(lr)["cache_entries"]["memory"] >= len(sizes))
    # Bodies under 4 KiB are handed to the connection whole and copied into frames from there.
    for window in (100, 1_000):
        with H2Client(lr.port, initial_window=window) as c:
            for n, size in enumerate(sizes):
                if size < 4_096:
                    r = c.wait(c.request("GET", host, f"/unique/{200 + n}/{size}"), timeout=30)
                    assert r.status == 200 and "hit" in r.header("cache-status"), (window, size, r)
                    assert bytes(r.body) == unique_body(200 + n, size), (window, size)
    for window in (10_007, 16_383, 16_385, 65_535):
        with H2Client(lr.port, initial_window=window) as c:
            sids = [c.request("GET", host, f"/unique/{200 + n}/{size}") for n, size in enumerate(sizes)]
            for n, (size, sid) in enumerate(zip(sizes, sids)):
                r = c.wait(sid, timeout=30)
                assert r.status == 200 and "hit" in r.header("cache-status"), (window, size, r)
                assert bytes(r.body) == unique_body(200 + n, size), (window, size)
            for n, size in enumerate(sizes):
                r = c.wait(c.request("GET", host, f"/unique/{200 + n}/{size}"), timeout=30)
                assert bytes(r.body) == unique_body(200 + n, size), (window, size)
    assert len([q for q in origin.requests() if q["path"].startswith("/unique/2")]) == len(sizes)


class ListedLengthOrigin(_ThreadedServer):
    """An HTTP/1.1 origin whose body-less answers (to HEAD, and a 304 to a conditional GET) say
    their length as a list of one value, `Content-Length: 5, 5`, which HTTP allows and Larder
    relays on such answers as it came."""

    def handle(self, sock, peer):
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                more = sock.recv(65536)
                if not more:
                    return
                data += more
            head, data = data.split(b"\r\n\r\n", 1)
            method = head.split(b" ", 1)[0]
            if method == b"HEAD":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\nCache-Control: no-store\r\n\r\n")
            else:
                sock.sendall(b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 5, 5\r\n\r\n")


def test_a_list_of_one_length_on_a_body_less_answer_reaches_the_client_as_one(larder_factory, servers):
    origin = ListedLengthOrigin()
    servers.append(origin)
    lr = larder_factory()
    host = f"127.0.0.1:{origin.port}"
    with H2Client(lr.port) as c:
        r = c.wait(c.request("HEAD", host, "/listed"))
        assert r.status == 200 and r.reset is None and r.header("content-length") == "5", r
        r = c.wait(c.request("GET", host, "/listed", headers=[("if-none-match", '"x"')]))
        assert r.status == 304 and r.reset is None and r.header("content-length") == "5", r


def test_upgrade_h2c_is_never_honoured(larder_factory, origin):
    lr = larder_factory()
    c = RawClient(lr.port)
    c.send(std_request("GET", origin.url("/unique/50/10"),
                       headers=[("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
                                ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")]))
    r = c.response()
    assert r.status == 200 and r.header("upgrade") is None
    for q in origin.requests():
        names = {n.lower() for n, _ in q["headers"]}
        assert "upgrade" not in names and "http2-settings" not in names, q


def test_http2_off_keeps_the_listener_http11_only(larder_factory, origin):
    lr = larder_factory(config={"http2": {"enabled": False}})
    r = h2_curl(lr, origin, "/unique/60/10", "-o", "/dev/null", "-w", "%{http_code}")
    assert r.stdout != b"200"
    assert origin.requests() == []


# ---------------------------------------------------------------------------
# To origins: https origins that choose h2 by ALPN (a second Larder, in reverse mode over TLS, is
# the HTTP/2 origin here)


def h2_origin(larder_factory, origin, pki, **config):
    cert, key = pki.leaf("h2-origin")
    b = larder_factory(config={"reverse_origin": origin.base, "admin_listen": "127.0.0.1:0", "access_log": "off",
                               "tls": {"listen": ["127.0.0.1:0"], "certificate_file": cert, "key_file": key},
                               **config}, listeners=2, name="h2origin")
    return b, b.ports[1]


def fetch_all(port, urls, headers=()):
    results = [None] * len(urls)

    def one(i):
        results[i] = RawClient(port, 30).request("GET", urls[i], headers=headers)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(urls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_requests_to_an_h2_origin_share_one_connection(larder_factory, origin, pki):
    b, port = h2_origin(larder_factory, origin, pki)
    # One worker: each worker has its own connections to origins.
    a = larder_factory(config={"workers": 1, "admin_listen": "127.0.0.1:0", "tls": {"ca_file": str(pki.ca)}})
    urls = [f"https://localhost:{port}/unique/{n}/{20000 + n}" for n in range(8)]
    results = fetch_all(a.port, urls)
    for n, r in enumerate(results):
        assert r is not None and r.status == 200, (n, r)
        assert r.body == unique_body(n, 20000 + n), n
    sb = stats(b)
    assert sb["http2"]["streams"] == 8 and sb["http2"]["connections"] == 1, sb["http2"]
    assert stats(a)["origin_http2_streams"] >= 8
    # Stored by A: asked again, nothing reaches B.
    again = RawClient(a.port).request("GET", urls[3])
    assert again.status == 200 and "hit" in again.header("cache-status")
    assert stats(b)["http2"]["streams"] == 8


def test_bodies_go_to_an_h2_origin_and_back(larder_factory, origin, pki):
    b, port = h2_origin(larder_factory, origin, pki)
    a = larder_factory(config={"tls": {"ca_file": str(pki.ca)}})
    body = os.urandom(600_000)
    c = RawClient(a.port, 30)
    r = c.request("POST", f"https://localhost:{port}/echo", body=body)
    assert r.status == 200, r
    echo = json.loads(r.body)
    assert echo["body_sha256"] == sha(body) and echo["method"] == "POST"
    # A chunked answer (no length) comes back whole, and the connection to A goes on.
    r = c.request("GET", f"https://localhost:{port}/chunked/300000")
    assert r.status == 200 and r.body == pattern(300000)
    # HEAD and 304 answers have no body.
    r = c.request("HEAD", f"https://localhost:{port}/unique/70/5000")
    assert r.status == 200 and r.body == b""
    assert r.header("content-length") == "5000"


def test_revalidation_with_an_h2_origin(larder_factory, origin, pki, proxy_clock):
    b, port = h2_origin(larder_factory, origin, pki)
    a = larder_factory(config={"tls": {"ca_file": str(pki.ca)}})
    url = f"https://localhost:{port}/unique/71/3000"
    assert RawClient(a.port).request("GET", url).status == 200
    proxy_clock.advance(7200)  # stale for A (max-age=3600)
    r = RawClient(a.port).request("GET", url)
    assert r.status == 200 and r.body == unique_body(71, 3000)
    assert "fwd=stale" in r.header("cache-status"), r.header("cache-status")


def test_session_http2_off_speaks_http11_to_the_origin(larder_factory, origin, pki):
    b, port = h2_origin(larder_factory, origin, pki)
    a = larder_factory(config={"admin_listen": "127.0.0.1:0", "tls": {"ca_file": str(pki.ca)},
                               "session": {"http2": "off"}})
    r = RawClient(a.port).request("GET", f"https://localhost:{port}/unique/72/100")
    assert r.status == 200
    assert stats(b)["http2"]["streams"] == 0
    assert stats(a)["origin_http2_streams"] == 0


def test_an_h2_origin_going_away_fails_only_its_open_requests(larder_factory, origin, pki):
    b, port = h2_origin(larder_factory, origin, pki)
    a = larder_factory(config={"tls": {"ca_file": str(pki.ca)}})
    assert RawClient(a.port).request("GET", f"https://localhost:{port}/unique/73/100").status == 200
    held = RawClient(a.port, 30)
    held.send(std_request("GET", f"https://localhost:{port}/unique/74/100?hold=h2gone"))
    assert len(origin.wait_requests(2)) == 2
    b.stop()
    r = held.response()
    assert r.status in (502, 504), r


def test_an_extended_connect_carries_a_websocket_in_reverse_mode(larder_factory, origin):
    """RFC 8441: the origin sees an HTTP/1.1 upgrade with a key of Larder's; the client a 200, then
    the WebSocket's bytes both ways on its stream."""
    lr = larder_factory(config={"reverse_origin": origin.base})
    with RawH2(lr.port) as c:
        # The server's SETTINGS first: they allow extended CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL).
        assert c.pump(lambda: c.server_settings.get(hf.SettingsFrame.ENABLE_CONNECT_PROTOCOL) == 1)
        c.headers(1, [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
                      (":authority", f"127.0.0.1:{lr.port}"), (":path", "/upgrade"),
                      ("sec-websocket-version", "13")], end_stream=False)
        s = c.streams[1]
        assert c.pump(lambda: s.headers is not None or s.reset is not None), s
        assert s.status == 200, s
        assert s.header("sec-websocket-accept") is None and s.header("upgrade") is None
        c.data(1, b"frame bytes", end_stream=False)
        assert c.pump(lambda: bytes(s.body) == b"frame bytes"), s.body
    q = origin.wait_requests(1)[0]
    names = {n.lower(): v for n, v in q["headers"]}
    assert names["upgrade"] == "websocket" and len(names["sec-websocket-key"]) == 24, names


class ScriptedH2Origin(_ThreadedServer):
    """An https origin speaking only h2 (Python's h2 as a server, TLS with ALPN h2): ``answer(origin,
    conn, stream_id, headers)`` decides each request's answer. Bodies are sent as the client's
    windows allow (``send_body``); DATA received is acknowledged only with ``acknowledge``."""

    def __init__(self, certfile, keyfile, answer, acknowledge=True):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certfile, keyfile)
        self.ctx.set_alpn_protocols(["h2"])
        self.answer = answer
        self.acknowledge = acknowledge
        self.requests = []
        self.received = 0
        self.pending = {}  # stream id -> body bytes still to send
        self.blocked = set()  # streams whose answer waited for a window
        self.windows_seen = []
        self.accepted = 0  # connections handled so far, each numbered by it
        self.request_connections = []  # the number of the connection each request came on
        super().__init__()

    def send_body(self, conn, sid, body):
        self.pending[sid] = body
        self.flow(conn)

    def flow(self, conn):
        for sid in list(self.pending):
            body = self.pending[sid]
            try:
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                while room > 0 and body:
                    conn.send_data(sid, body[:room], end_stream=len(body) <= room)
                    body = body[room:]
                    room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            except h2.exceptions.StreamClosedError:
                # Larder reset it (its client left). h2 closes the stream while reading the frames
                # that come before the reset's own event, so a window update can still name it.
                del self.pending[sid]
                continue
            if body:
                self.pending[sid] = body
                self.blocked.add(sid)  # Larder's windows are closed: it stopped taking the answer
            else:
                del self.pending[sid]

    def handle(self, sock, peer):
        tls = self.wrapped(self.ctx.wrap_socket(sock, server_side=True))
        self.accepted += 1
        number = self.accepted
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False,
                                                                           validate_outbound_headers=False,
                                                                           normalize_outbound_headers=False))
        conn.initiate_connection()
        tls.sendall(conn.data_to_send())
        tls.settimeout(30)
        while True:
            try:
                data = tls.recv(65536)
            except socket.timeout:
                return
            if not data:
                return
            for e in conn.receive_data(data):
                if isinstance(e, h2.events.RequestReceived):
                    self.requests.append(dict(e.headers)[b":path"].decode())
                    self.request_connections.append(number)
                    self.answer(self, conn, e.stream_id, dict(e.headers))
                elif isinstance(e, h2.events.DataReceived):
                    self.received += len(e.data)
                    if self.acknowledge and e.flow_controlled_length:
                        conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.WindowUpdated):
                    self.windows_seen.append(conn.outbound_flow_control_window)
                    self.flow(conn)
                elif isinstance(e, h2.events.StreamReset):
                    self.pending.pop(e.stream_id, None)
            tls.sendall(conn.data_to_send())


def answer_ok(origin, conn, sid, headers):
    body = f"h2 body of {headers[b':path'].decode()}".encode()
    conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body))), ("cache-control", "no-store")])
    conn.send_data(sid, body, end_stream=True)


class RefusingH2Origin(ScriptedH2Origin):
    """Refuses the requests whose numbers are in ``refuse`` (1-based) with REFUSED_STREAM: the
    origin did not process them, so they may be sent again."""

    def __init__(self, certfile, keyfile, refuse):
        self.refuse = set(refuse)
        self.served = []

        def answer(origin, conn, sid, headers):
            if len(origin.requests) in self.refuse:
                conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
                return
            self.served.append(headers[b":path"].decode())
            answer_ok(origin, conn, sid, headers)

        super().__init__(certfile, keyfile, answer)


def test_a_stream_the_origin_refused_is_sent_again(larder_factory, pki, servers):
    cert, key = pki.leaf("refusing")
    o = RefusingH2Origin(cert, key, refuse=[2])
    servers.append(o)
    a = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}})
    c = RawClient(a.port, 20)
    first = c.request("GET", f"https://localhost:{o.port}/one")
    assert first.status == 200 and first.body == b"h2 body of /one", first
    second = c.request("GET", f"https://localhost:{o.port}/two")  # refused once, then served
    assert second.status == 200 and second.body == b"h2 body of /two", second
    assert len(o.requests) == 3 and o.served == ["/one", "/two"] and o.connections == 1


# ---------------------------------------------------------------------------
# Found by review: what a client can hold, and for how long


def test_an_answer_without_a_length_to_a_closed_window_is_bounded_and_cut(larder_factory, origin):
    """A chunked answer (and a close-delimited one, which Larder writes chunked) is read from its
    exchange only as the client's window allows: the origin is held back, memory stays bounded,
    and the stream is reset once it made no progress for the idle timeout."""
    lr = larder_factory(config={"limits": {"client_idle_timeout": "2s"}})
    before = lr.rss_kib()
    with RawH2(lr.port, initial_window=0) as c:
        for sid, path in ((1, "/chunked/400000000"), (3, "/close/400000000")):
            c.headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport),
                            (":path", path)])
        assert c.pump(lambda: all(c.streams[s].reset is not None for s in (1, 3)), 30), c.streams
        assert len(c.streams[1].body) == 0 and len(c.streams[3].body) == 0
    grown = lr.rss_kib() - before
    assert grown < 64 * 1024, f"RSS grew by {grown} KiB"
    assert lr.wait_for_log(r"made no progress|took less than 16 KiB of its answer", timeout=10), lr.log_text()[-2000:]


def test_a_client_that_opens_windows_but_never_reads_gets_nothing_more_queued(larder_factory, origin, memory_bound):
    """A client that never reads its socket but keeps sending WINDOW_UPDATEs: each read of them
    used to let one more frame of a chunked answer onto the backed-up socket output (3,000 updates
    grew it by about 48 MiB); past its high-water mark nothing more is queued."""
    lr = larder_factory(config={"workers": 1})
    with RawH2(lr.port, initial_window=(1 << 31) - 1) as c:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for sid in (1, 3, 5):
            c.headers(sid, [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport),
                            (":path", "/chunked/400000000")])
        assert wait_until(lambda: len(origin.requests()) == 3, timeout=10)
        before = lr.rss_kib()
        update = hf.WindowUpdateFrame(0)
        update.window_increment = 1
        for _ in range(3000):
            c.send(update.serialize())
            time.sleep(0.001)  # one read, and one flush, each
        grown = lr.rss_kib() - before
    assert grown < 24 * 1024, f"RSS grew by {grown} KiB"


def test_a_request_answered_before_the_client_ended_it_is_reset_with_no_error(larder_factory, origin):
    """RFC 9113 §8.1: an answer that is complete while the request is not ends the stream with
    RST_STREAM(NO_ERROR), so a HEADERS frame without END_STREAM holds nothing open."""
    lr = larder_factory()
    with RawH2(lr.port) as c:
        c.headers(1, [(":method", "GET"), (":scheme", "ftp"), (":authority", origin.hostport), (":path", "/")],
                  end_stream=False)
        c.headers(3, [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1:1"), (":path", "/")],
                  end_stream=False)
        assert c.pump(lambda: all(c.streams.get(s) and c.streams[s].reset is not None for s in (1, 3))), c.streams
        assert c.streams[1].status == 400 and c.streams[1].reset == 0
        assert c.streams[3].status == 502 and c.streams[3].reset == 0


def test_bodies_of_reset_streams_give_their_window_back(larder_factory, origin):
    lr = larder_factory(config={"http2": {"connection_window": "256KiB", "stream_window": "64KiB"}})
    with RawH2(lr.port) as c:
        sid = 1
        for _ in range(6):  # 6 × 64 KiB: more than the connection window, if nothing came back
            c.headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", origin.hostport),
                            (":path", "/echo?hold=never"), ("content-length", "1000000")], end_stream=False)
            for _ in range(4):
                c.data(sid, b"x" * 16384, end_stream=False)
            c.rst(sid)
            sid += 2
        body = os.urandom(300_000)
        c.headers(sid, [(":method", "POST"), (":scheme", "http"), (":authority", origin.hostport),
                        (":path", "/echo"), ("content-length", str(len(body)))], end_stream=False)
        sent = 0
        while sent < len(body):
            room = c.window(sid)
            if room <= 0:
                assert c.pump(lambda: c.window(sid) > 0, 10), "the windows never opened again"
                continue
            piece = body[sent:sent + min(room, 16384)]
            c.data(sid, piece, end_stream=sent + len(piece) == len(body))
            sent += len(piece)
        s = c.wait(sid, 20)
    assert s.status == 200 and json.loads(bytes(s.body))["body_sha256"] == sha(body), s


def test_a_tunnel_over_h2_has_its_access_log_line(larder_factory, echo_server, workdir):
    log = workdir / "access.json"
    lr = larder_factory(config={"connect_ports": [echo_server.port], "access_log": str(log),
                                "access_log_format": "json"})
    with H2Client(lr.port) as c:
        sid = c.connect(f"127.0.0.1:{echo_server.port}")
        s = c.streams[sid]
        assert c.pump(lambda: s.headers is not None) and s.status == 200
        c.conn.send_data(sid, b"12345", end_stream=True)
        c.flush()
        c.wait(sid)
    records = [json.loads(line) for line in read_lines(log, 1)]
    assert records[0]["method"] == "CONNECT" and records[0]["version"] == "HTTP/2.0", records
    assert records[0]["bytes_from_client"] == 5, records


def test_a_connect_stream_to_an_intercepted_host_is_tunnelled_untouched(larder_factory, echo_server):
    """A stream has no socket of its own to terminate TLS on: the tunnel is what the client gets."""
    lr = larder_factory(config={"connect_ports": [echo_server.port], "tls": {"intercept": ["127.0.0.1"]}})
    with H2Client(lr.port) as c:
        sid = c.connect(f"127.0.0.1:{echo_server.port}")
        s = c.streams[sid]
        assert c.pump(lambda: s.headers is not None) and s.status == 200
        c.conn.send_data(sid, b"not TLS at all")
        c.flush()
        assert c.pump(lambda: bytes(s.body) == b"not TLS at all"), s


def test_expect_100_continue_is_not_forwarded(larder_factory, origin):
    lr = larder_factory()
    with H2Client(lr.port) as c:
        s = c.wait(c.request("POST", origin.hostport, "/echo", headers=[("expect", "100-continue"),
                                                                          ("content-length", "5")], body=b"hello"))
    assert s.status == 200
    names = {n.lower() for n, _ in origin.requests()[0]["headers"]}
    assert "expect" not in names


def test_an_h2_origin_that_never_answers_is_a_504_after_the_request_timeout(larder_factory, pki, servers):
    o = ScriptedH2Origin(*pki.leaf("silent"), answer=lambda *a: None)
    servers.append(o)
    a = larder_factory(config={"tls": {"ca_file": str(pki.ca)}, "session": {"timeout_interval_for_request": "2s"}})
    r = RawClient(a.port, 30).request("GET", f"https://localhost:{o.port}/never")
    assert r.status == 504, r


def test_answers_abandoned_by_their_clients_give_the_connection_window_back(larder_factory, pki, servers):
    def answer(origin, conn, sid, headers):
        path = headers[b":path"].decode()
        if path.startswith("/big"):
            conn.send_headers(sid, [(":status", "200"), ("content-length", str(32 << 20)), ("cache-control", "no-store")])
            origin.send_body(conn, sid, b"b" * (32 << 20))
        else:
            answer_ok(origin, conn, sid, headers)

    o = ScriptedH2Origin(*pki.leaf("big"), answer=answer)
    servers.append(o)
    a = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)},
                               "session": {"timeout_interval_for_request": "5s"}})
    for n in range(6):  # each client reads a little of its answer, then leaves
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # so Larder's buffers fill
        sock.settimeout(10)
        sock.connect(("127.0.0.1", a.port))
        sock.sendall(std_request("GET", f"https://localhost:{o.port}/big/{n}"))
        sock.recv(100)
        # Once the origin waits for a window, the answer's bytes sit unread in Larder: leave then.
        assert wait_until(lambda: len(o.blocked) > n, timeout=10), o.blocked
        sock.close()
    r = RawClient(a.port, 20).request("GET", f"https://localhost:{o.port}/small")
    assert r.status == 200 and r.body == b"h2 body of /small", r


def test_clients_that_stop_reading_cannot_close_a_shared_origin_connection_to_others(larder_factory, pki, servers):
    # Each client reads a little of a large answer and then nothing, staying connected: its
    # stream's window stays closed (the origin is held back), but the connection's must not,
    # or a few such clients would stall every other request to the origin.
    big = 8 << 20

    def answer(origin, conn, sid, headers):
        path = headers[b":path"].decode()
        if path.startswith("/big"):
            conn.send_headers(sid, [(":status", "200"), ("content-length", str(big)), ("cache-control", "no-store")])
            origin.send_body(conn, sid, b"b" * big)
        else:  # as the windows allow, like the big ones (h2 refuses to overrun them)
            body = f"h2 body of {path}".encode()
            conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body))), ("cache-control", "no-store")])
            origin.send_body(conn, sid, body)

    o = ScriptedH2Origin(*pki.leaf("shared"), answer=answer)
    servers.append(o)
    a = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)},
                               "session": {"timeout_interval_for_request": "30s"}})
    assert RawClient(a.port, 20).request("GET", f"https://localhost:{o.port}/small/first").status == 200
    held = []
    try:
        for n in range(12):  # more than the connection's window (1 MiB) holds in stream windows
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(10)
            sock.connect(("127.0.0.1", a.port))
            held.append(sock)
            sock.sendall(std_request("GET", f"https://localhost:{o.port}/big/{n}"))
            sock.recv(100)
            assert wait_until(lambda: len(o.blocked) > n, timeout=10), o.blocked
        # Every stalled answer is held back by its own window: Larder took what it buffers for a
        # client (its window and the relay's, about 1.4 MB), not the whole.
        assert wait_until(lambda: len(o.pending) == 12, timeout=10), o.pending.keys()
        assert all(len(rest) > big // 2 for rest in o.pending.values()), {k: big - len(v) for k, v in o.pending.items()}
        r = RawClient(a.port, 20).request("GET", f"https://localhost:{o.port}/small/after")
        assert r.status == 200 and r.body == b"h2 body of /small/after", r
        assert len(o.requests) == 14 and len(set(o.request_connections)) == 1, (o.requests, o.request_connections)
    finally:
        for sock in held:
            sock.close()


def test_a_request_head_too_large_for_an_h2_origin_fails_alone(larder_factory, pki, servers):
    """A client's head that nghttp2 will not send as one header block (over 64 KiB encoded,
    possible with a raised limits.max_head_bytes) fails that request only: another client's
    download on the same origin connection goes on, and the connection serves the next."""
    def answer(origin, conn, sid, headers):
        path = headers[b":path"].decode()
        body = b"b" * (4 << 20) if path.startswith("/big") else f"h2 body of {path}".encode()
        conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body))), ("cache-control", "no-store")])
        origin.send_body(conn, sid, body)

    o = ScriptedH2Origin(*pki.leaf("heads"), answer=answer)
    servers.append(o)
    a = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}, "limits": {"max_head_bytes": "1MiB"}})
    assert RawClient(a.port, 20).request("GET", f"https://localhost:{o.port}/small/first").status == 200
    with socket.create_connection(("127.0.0.1", a.port), timeout=20) as download:
        download.sendall(std_request("GET", f"https://localhost:{o.port}/big/1"))
        got = len(download.recv(100))
        huge = RawClient(a.port, 20).request("GET", f"https://localhost:{o.port}/small/huge",
                                             headers=[("X-Big", "v" * 300_000)])
        assert huge.status == 502, huge
        while got < 4 << 20:
            data = download.recv(1 << 20)
            assert data, got
            got += len(data)
    after = RawClient(a.port, 20).request("GET", f"https://localhost:{o.port}/small/after")
    assert after.status == 200 and after.body == b"h2 body of /small/after", after
    assert "/small/huge" not in o.requests and len(set(o.request_connections)) == 1, (o.requests, o.request_connections)


def test_a_chunked_upload_to_an_h2_origin_that_takes_nothing_is_held_back(larder_factory, pki, servers):
    o = ScriptedH2Origin(*pki.leaf("sink"), answer=lambda *a: None, acknowledge=False)
    servers.append(o)
    a = larder_factory(config={"tls": {"ca_file": str(pki.ca)}})
    before = a.rss_kib()
    sent = 0
    with socket.create_connection(("127.0.0.1", a.port), timeout=5) as s:
        s.sendall(f"POST https://localhost:{o.port}/upload HTTP/1.1\r\nHost: localhost:{o.port}\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"%x\r\n" % 65536 + b"u" * 65536 + b"\r\n"
        try:
            for _ in range(3200):  # 200 MiB at most
                s.sendall(chunk)
                sent += 65536
        except (socket.timeout, OSError):
            pass  # held back: the point
    assert sent < 64 << 20, f"{sent} bytes accepted for an origin that took {o.received}"
    assert a.rss_kib() - before < 64 * 1024


def test_an_h2_answer_with_a_status_below_100_never_reaches_a_client_or_the_cache(larder_factory, pki, servers):
    def answer(origin, conn, sid, headers):
        conn.send_headers(sid, [(":status", "099")])
        conn.send_data(sid, b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nCache-Control: max-age=600\r\n\r\npoisoned",
                       end_stream=True)

    o = ScriptedH2Origin(*pki.leaf("odd"), answer=answer)
    servers.append(o)
    a = larder_factory(config={"tls": {"ca_file": str(pki.ca)}})
    c = RawClient(a.port, 20)
    for path in ("/a", "/b", "/b"):
        r = c.request("GET", f"https://localhost:{o.port}{path}")
        assert r.status == 502 and b"poisoned" not in r.body, r
    # Nothing was stored: the second /b reached the origin too (each may be tried twice: a GET that
    # failed before any answer on a connection already in use is sent once more).
    assert 2 <= o.requests.count("/b") <= 4, o.requests


def test_an_answer_cut_after_its_head_is_not_sent_again(larder_factory, pki, servers):
    def answer(origin, conn, sid, headers):
        conn.send_headers(sid, [(":status", "200"), ("content-length", "100")])
        conn.send_data(sid, b"0123456789")
        conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.INTERNAL_ERROR)

    o = ScriptedH2Origin(*pki.leaf("cut"), answer=answer)
    servers.append(o)
    a = larder_factory(config={"workers": 1, "tls": {"ca_file": str(pki.ca)}})
    # The first request opens the connection; the second rides it (where a failure before any
    # answer would be retried).
    for path in ("/first", "/second"):
        c = RawClient(a.port, 20)
        c.send(std_request("GET", f"https://localhost:{o.port}{path}"))
        try:
            r = c.response()
            assert r.status == 502 or len(r.body) < 100, r
        except (EOFError, OSError, ValueError):
            pass  # cut: as it should be
    assert o.requests == ["/first", "/second"], o.requests


# ---------------------------------------------------------------------------
# More of what a request does over HTTP/1.1, over a stream


def test_ranges_purge_and_only_if_cached_over_h2(larder_factory, origin):
    lr = larder_factory(config={"purge_allowed_from": ["127.0.0.1/32"]})
    url_path = "/unique/80/10000"
    with H2Client(lr.port) as c:
        full = c.wait(c.request("GET", origin.hostport, url_path))
        assert full.status == 200 and len(full.body) == 10000
        part = c.wait(c.request("GET", origin.hostport, url_path, headers=[("range", "bytes=100-199")]))
        assert part.status == 206 and bytes(part.body) == bytes(full.body[100:200]), part
        assert part.header("content-range") == "bytes 100-199/10000"
        cached = c.wait(c.request("GET", origin.hostport, url_path, headers=[("cache-control", "only-if-cached")]))
        assert cached.status == 200 and "hit" in cached.header("cache-status")
        purged = c.wait(c.request("PURGE", origin.hostport, url_path))
        assert purged.status == 200, purged
        gone = c.wait(c.request("GET", origin.hostport, url_path, headers=[("cache-control", "only-if-cached")]))
        assert gone.status == 504, gone
    assert len(origin.requests()) == 1


def test_a_settings_flood_ends_the_connection(larder_factory):
    lr = larder_factory(config=ADMIN)
    with RawH2(lr.port) as c:
        settings = hf.SettingsFrame(0)
        settings.settings = {hf.SettingsFrame.HEADER_TABLE_SIZE: 4096}
        data = frame(settings) * 1000
        try:
            for _ in range(100):
                c.send(data)
        except OSError:
            pass
        assert c.wait_closed(15)
    lr.wait_for_text("HTTP/2 client")
    assert stats(lr)["http2"]["connection_errors"] >= 1


def test_a_priority_flood_holds_no_state(larder_factory, origin, memory_bound):
    """100,000 PRIORITY frames chaining ever new idle streams (nghttp2 keeps a bounded set of
    idle streams for the priority tree), then 100,000 PRIORITY_UPDATE frames for streams never
    opened, are read (the PING after them is answered) at no cost in memory: the connection still
    serves requests, and another client is served meanwhile."""
    lr = larder_factory(config=ADMIN)

    def priority(sid, depends_on, weight):  # RFC 9113 §6.3
        return frame(hf.PriorityFrame(sid, depends_on=depends_on, stream_weight=weight))

    def priority_update(sid):  # RFC 9218 §7.1: on stream 0, naming the stream it is for
        payload = struct.pack(">I", sid) + b"u=0"
        return struct.pack(">I", len(payload))[1:] + bytes([0x10, 0]) + struct.pack(">I", 0) + payload

    fields = [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport)]
    with RawH2(lr.port) as c:
        before = _peak_memory_kib(lr.pid)
        sid = 1
        for _ in range(100):
            c.send(b"".join(priority(sid + 2 * i, sid + 2 * i - 2 if i else 0, i % 256) for i in range(1000)))
            sid += 2000
        with H2Client(lr.port) as other:
            r = other.wait(other.request("GET", origin.hostport, "/unique/61/1000"))
            assert r.status == 200 and bytes(r.body) == unique_body(61, 1000)
        for _ in range(100):
            c.send(b"".join(priority_update(sid + 2 * i) for i in range(1000)))
            sid += 2000
        ping = hf.PingFrame(0)
        ping.opaque_data = b"12345678"
        c.send(frame(ping))
        assert c.pump(lambda: "PingFrame" in c.frames_seen, 30) and not c.closed, (c.frames_seen[-5:], c.goaway)
        c.headers(sid, fields + [(":path", "/unique/62/1000")])
        r = c.wait(sid)
        assert r.status == 200 and bytes(r.body) == unique_body(62, 1000)
        grown = _peak_memory_kib(lr.pid) - before
        assert grown < 4 * 1024, f"peak memory grew by {grown} KiB"
    assert stats(lr)["http2"]["connection_errors"] == 0


def test_stream_ids_exhausted_or_going_backwards_start_nothing(larder_factory, origin):
    """A client that used the last stream id it has can open no more; a HEADERS frame on an id below
    one already used is for a closed stream (nghttp2 drops it): nothing is forwarded either way."""
    lr = larder_factory()
    with RawH2(lr.port) as c:
        fields = [(":method", "GET"), (":scheme", "http"), (":authority", origin.hostport)]
        c.headers(2147483647, fields + [(":path", "/unique/82/10")])
        assert c.wait(2147483647).status == 200
        c.headers(5, fields + [(":path", "/unique/83/10")])
        ping = hf.PingFrame(0)
        ping.opaque_data = b"12345678"
        c.send(frame(ping))  # answered after stream 5's HEADERS were read
        assert c.pump(lambda: "PingFrame" in c.frames_seen), c.frames_seen
        assert c.streams[5].headers is None and c.streams[5].reset in (None, 0x5)
    assert [q["path"] for q in origin.requests()] == ["/unique/82/10"]


def test_a_client_that_sends_the_preface_and_nothing_else_is_closed(larder_factory):
    lr = larder_factory(config={"limits": {"client_header_timeout": "1s"}})
    with RawH2(lr.port) as c:
        assert c.wait_closed(15)
        assert c.goaway == 0
