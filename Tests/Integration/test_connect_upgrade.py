"""CONNECT tunnels (plain TCP echo and TLS) and Upgrade (WebSocket) tunnels."""

import hashlib
import json
import os
import signal
import socket
import ssl
import struct
import threading
import time

import pytest

from helpers import (RawClient, RSSSampler, SockReader, build_request, curl, free_port, headers_named, pattern,
                     pattern_chunks, pattern_sha256, read_response, wait_for_file)


def _connect_tunnel(proxy_port, target_port, timeout=10):
    c = RawClient(proxy_port, timeout)
    c.send(build_request("CONNECT", f"127.0.0.1:{target_port}", [("Host", f"127.0.0.1:{target_port}")]))
    resp = c.response("CONNECT")
    return c, resp


def _send_in_thread(sock, data, shutdown=False):
    errors = []

    def run():
        try:
            sock.sendall(data)
            if shutdown:
                sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, errors


def test_connect_tunnel_to_echo_server(larder_factory, echo_server):
    lr = larder_factory(config={"connect_ports": [echo_server.port]})
    c, resp = _connect_tunnel(lr.port, echo_server.port)
    with c:
        assert resp.status == 200
        for payload in (b"hello\n", b"x", pattern(1024 * 1024 + 3)):
            t, errs = _send_in_thread(c.sock, payload)
            got = c.reader.read_exact(len(payload))
            t.join(10)
            assert not errs
            assert got == payload
    assert echo_server.connections == 1


def test_connect_tunnel_half_close(larder_factory, echo_server):
    lr = larder_factory(config={"connect_ports": [echo_server.port]})
    c, resp = _connect_tunnel(lr.port, echo_server.port)
    with c:
        assert resp.status == 200
        payload = pattern(100000)
        t, errs = _send_in_thread(c.sock, payload, shutdown=True)
        got = c.reader.read_to_eof()
        t.join(10)
        assert not errs
    assert got == payload + b"[eof after 100000 bytes]"


def test_connect_tls_with_curl(larder_factory, tls_server):
    lr = larder_factory(config={"connect_ports": [tls_server.port]})
    r = curl("-p", "-x", lr.proxy_url, "--cacert", tls_server.cafile,
             f"https://127.0.0.1:{tls_server.port}/hello-curl", timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello over tls /hello-curl\n"
    assert "served /hello-curl" in tls_server.events


def test_connect_tls_with_python_ssl(larder_factory, tls_server):
    lr = larder_factory(config={"connect_ports": [tls_server.port]})
    c, resp = _connect_tunnel(lr.port, tls_server.port)
    with c:
        assert resp.status == 200
        assert not c.reader.buf, "bytes after the CONNECT response before the TLS handshake"
        ctx = ssl.create_default_context(cafile=tls_server.cafile)
        tls = ctx.wrap_socket(c.sock, server_hostname="127.0.0.1")
        try:
            tls.sendall(b"GET /hello-py HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            resp2 = read_response(SockReader(tls))
        finally:
            tls.close()
    assert resp2.status == 200
    assert resp2.body == b"hello over tls /hello-py\n"


def test_connect_to_a_port_not_allowed_is_403(larder_factory, echo_server):
    lr = larder_factory(config={"connect_ports": [443]})
    c, resp = _connect_tunnel(lr.port, echo_server.port)
    c.close()
    assert resp.status == 403
    time.sleep(0.1)  # a connection Larder opened before refusing would have been accepted
    assert echo_server.connections == 0


def test_connect_to_a_refused_port_is_502(larder_factory):
    port = free_port()
    lr = larder_factory(config={"connect_ports": [port]})
    c, resp = _connect_tunnel(lr.port, port)
    c.close()
    assert resp.status == 502


def test_websocket_upgrade_becomes_a_tunnel(larder, origin):
    headers = [
        ("Host", origin.hostport),
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ]
    with RawClient(larder.port) as c:
        c.send(build_request("GET", origin.url("/upgrade"), headers))
        resp = c.response()
        assert resp.status == 101
        assert (resp.header("Upgrade") or "").lower() == "websocket"
        assert "upgrade" in (resp.header("Connection") or "").lower()
        assert resp.header("Sec-WebSocket-Accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        c.send(b"ping-1")
        assert c.reader.read_exact(6) == b"ping-1"
        big = pattern(300000)
        t, errs = _send_in_thread(c.sock, big, shutdown=True)
        got = c.reader.read_to_eof()
        t.join(10)
        assert not errs
    assert got == big + f"[eof after {6 + len(big)} bytes]".encode()
    reqs = origin.wait_requests(1)
    seen = reqs[0]["headers"]
    assert headers_named(seen, "Upgrade") == ["websocket"]
    assert any("upgrade" in v.lower() for v in headers_named(seen, "Connection")), seen
    assert headers_named(seen, "Sec-WebSocket-Key") == ["dGhlIHNhbXBsZSBub25jZQ=="]


def test_upgrade_refused_by_origin_stays_http(larder, origin):
    # Without Upgrade in the request the origin answers 426; the connection stays plain HTTP.
    with RawClient(larder.port) as c:
        resp = c.request("GET", origin.url("/upgrade"))
        assert resp.status == 426
        after = c.request("GET", origin.url("/echo"))
        assert after.status == 200
        assert json.loads(after.body)["path"] == "/echo"


# --- Tunnels between plain sockets: bulk directions move by splice(2) -------------------------------
#
# LARDER_TEST_TUNNEL_SPLICE: unset, a direction splices after a 64 KiB read; "always" from the first
# byte; "off" never (the user-space pump, also what a kernel without splice falls back to).

SPLICE_MODES = ["adaptive", "always", "off"]
MiB = 1024 * 1024


def _larder_for(larder_factory, port, mode, **config):
    env = {} if mode == "adaptive" else {"LARDER_TEST_TUNNEL_SPLICE": mode}
    return larder_factory(config={"connect_ports": [port], **config}, env=env)


class _OneShotOrigin:
    """Accepts one connection on 127.0.0.1 and runs ``handler(sock)`` on it in a thread; what the
    handler returns (or raises) is kept."""

    def __init__(self, handler):
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.result = None
        self.error = None
        self.done = threading.Event()
        self._t = threading.Thread(target=self._run, args=(handler,), daemon=True)
        self._t.start()

    def _run(self, handler):
        try:
            self.srv.settimeout(15)
            sock, _ = self.srv.accept()
            sock.settimeout(30)
            with sock:
                self.result = handler(sock)
        except Exception as e:  # noqa: BLE001 - reported by wait()
            self.error = e
        finally:
            self.srv.close()
            self.done.set()

    def wait(self, timeout=30):
        assert self.done.wait(timeout), "origin handler did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def _send_pattern(sock, n):
    for piece in pattern_chunks(n):
        sock.sendall(piece)


def _send_pattern_in_thread(sock, n):
    errors = []

    def run():
        try:
            _send_pattern(sock, n)
        except OSError as e:
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, errors


def _recv_sha(sock, n=None, already=b""):
    """sha256 and length of ``already`` and what ``sock`` delivers after it: ``n`` bytes in all, or
    everything up to EOF."""
    h = hashlib.sha256(already)
    got = len(already)
    while n is None or got < n:
        data = sock.recv(min(256 * 1024, n - got) if n is not None else 256 * 1024)
        if not data:
            break
        h.update(data)
        got += len(data)
    return h.hexdigest(), got


def _client_recv_sha(c, n=None):
    """``_recv_sha`` for a tunnel's client, counting what its reader took with the CONNECT answer."""
    already = bytes(c.reader.buf)
    c.reader.buf.clear()
    return _recv_sha(c.sock, n, already)


def _fds(pid):
    return os.listdir(f"/proc/{pid}/fd")


def _pipes(pid):
    n = 0
    for fd in _fds(pid):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                n += 1
        except OSError:
            pass
    return n


def _tunnel(port, target_port, early=b""):
    """A client through a CONNECT to ``target_port`` (``early`` bytes go in the same send), past
    its 200 answer; its reader may hold bytes the origin sent right away."""
    c = RawClient(port, 30)
    c.send(build_request("CONNECT", f"127.0.0.1:{target_port}", [("Host", f"127.0.0.1:{target_port}")]) + early)
    resp = c.response("CONNECT")
    assert resp.status == 200
    return c


@pytest.mark.parametrize("mode", SPLICE_MODES)
def test_tunnel_carries_32_mib_each_way_at_once(larder_factory, mode):
    size = 32 * MiB

    def handler(sock):
        t, errs = _send_pattern_in_thread(sock, size)
        got = _recv_sha(sock, size)
        t.join(30)
        assert not errs, errs
        ack = sock.recv(1)  # the client has everything: the tunnel is still up, with its pipes
        return got, ack

    origin = _OneShotOrigin(handler)
    lr = _larder_for(larder_factory, origin.port, mode)
    pipes_before = _pipes(lr.pid)
    c = _tunnel(lr.port, origin.port)
    with c:
        t, errs = _send_pattern_in_thread(c.sock, size)
        got = _client_recv_sha(c, size)
        t.join(30)
        assert not errs, errs
        spliced_pipes = _pipes(lr.pid) - pipes_before
        c.sock.sendall(b"!")
        (origin_got, ack) = origin.wait()
    assert got == (pattern_sha256(size), size)
    assert origin_got == (pattern_sha256(size), size)
    assert ack == b"!"
    # One pipe (two descriptors) per spliced direction, none in user space.
    assert spliced_pipes == (0 if mode == "off" else 4), spliced_pipes


@pytest.mark.parametrize("mode", SPLICE_MODES)
def test_tunnel_half_close_from_the_client_still_delivers_the_origins_rest(larder_factory, mode):
    up, down = 4 * MiB, 8 * MiB

    def handler(sock):
        got = _recv_sha(sock)  # to the client's EOF
        _send_pattern(sock, down)  # then answers, and closes
        return got

    origin = _OneShotOrigin(handler)
    lr = _larder_for(larder_factory, origin.port, mode)
    c = _tunnel(lr.port, origin.port)
    with c:
        _send_pattern(c.sock, up)
        c.sock.shutdown(socket.SHUT_WR)
        got = _client_recv_sha(c)
    assert origin.wait() == (pattern_sha256(up), up)
    assert got == (pattern_sha256(down), down)


@pytest.mark.parametrize("mode", SPLICE_MODES)
def test_tunnel_half_close_from_the_origin_still_delivers_the_clients_rest(larder_factory, mode):
    up, down = 4 * MiB, 8 * MiB

    def handler(sock):
        _send_pattern(sock, down)
        sock.shutdown(socket.SHUT_WR)  # done sending, still reading
        return _recv_sha(sock)

    origin = _OneShotOrigin(handler)
    lr = _larder_for(larder_factory, origin.port, mode)
    c = _tunnel(lr.port, origin.port)
    with c:
        got = _client_recv_sha(c)  # to the origin's EOF
        _send_pattern(c.sock, up)
        c.sock.shutdown(socket.SHUT_WR)
        assert origin.wait() == (pattern_sha256(up), up)
        assert c.sock.recv(1) == b""  # and the tunnel ends
    assert got == (pattern_sha256(down), down)


@pytest.mark.parametrize("mode", SPLICE_MODES)
def test_tunnel_relays_early_bytes_of_both_sides_first_and_in_order(larder_factory, mode):
    early = b"early-bytes-in-the-connect-packet:" + pattern(3000)
    greeting = b"origin speaks first\n"
    rest = 2 * MiB

    def handler(sock):
        sock.sendall(greeting)
        got = bytearray()
        while True:
            data = sock.recv(256 * 1024)
            if not data:
                break
            got += data
        _send_pattern(sock, rest)
        return bytes(got)

    origin = _OneShotOrigin(handler)
    lr = _larder_for(larder_factory, origin.port, mode)
    c = _tunnel(lr.port, origin.port, early=early)
    with c:
        assert c.reader.read_exact(len(greeting)) == greeting
        _send_pattern(c.sock, rest)
        c.sock.shutdown(socket.SHUT_WR)
        got = c.reader.read_to_eof()
    sent = origin.wait()
    assert sent[:len(early)] == early
    assert sent[len(early):] == pattern(rest)
    assert got == pattern(rest)


@pytest.mark.parametrize("mode", SPLICE_MODES)
def test_tunnel_to_a_slow_reader_holds_little_memory(larder_factory, memory_bound, report_metric, mode):
    size = 16 * MiB

    def handler(sock):
        _send_pattern(sock, size)

    origin = _OneShotOrigin(handler)
    lr = _larder_for(larder_factory, origin.port, mode)
    before = lr.rss_kib()
    c = _tunnel(lr.port, origin.port)
    with c:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        c.reader.read_exact(256 * 1024)  # a bulk flow, then the client stops reading
        with RSSSampler(lr) as rss:
            # Unbounded, the proxy would take in the origin's 16 MiB within milliseconds on loopback.
            time.sleep(0.5)
        got = _recv_sha(c.sock, already=pattern(256 * 1024) + bytes(c.reader.buf))
    origin.wait()
    grown = rss.peak_kib - before
    report_metric(f"RSS growth with a 16 MiB tunnel to a client paused for 0.5 s: {grown} KiB")
    assert grown < 4 * 1024, f"RSS grew {grown} KiB while the client did not read"
    assert got == (pattern_sha256(size), size)


@pytest.mark.parametrize("mode", SPLICE_MODES)
def test_client_reset_mid_transfer_closes_the_origin_side_and_frees_everything(larder_factory, mode):
    seen = {}

    def handler(sock):
        def reader():
            try:
                while sock.recv(65536):
                    pass
                seen.setdefault("end", ("eof", time.monotonic()))
            except OSError as e:
                seen.setdefault("end", (type(e).__name__, time.monotonic()))
        threading.Thread(target=reader, daemon=True).start()
        try:
            for piece in pattern_chunks(1 << 34):
                sock.sendall(piece)
        except OSError as e:
            seen.setdefault("end", (type(e).__name__, time.monotonic()))

    origin = _OneShotOrigin(handler)
    lr = _larder_for(larder_factory, origin.port, mode)
    fds_before = len(_fds(lr.pid))
    c = _tunnel(lr.port, origin.port)
    c.sock.sendall(pattern(100_000))
    c.reader.read_exact(4 * MiB)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    reset_at = time.monotonic()
    c.close()
    origin.wait(10)
    assert "end" in seen
    assert seen["end"][1] - reset_at < 1.0, seen
    deadline = time.monotonic() + 2
    while len(_fds(lr.pid)) != fds_before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(_fds(lr.pid)) == fds_before


@pytest.mark.parametrize("mode", SPLICE_MODES)
def test_spliced_tunnel_logs_the_bytes_each_way(larder_factory, workdir, mode):
    up, down = 3 * MiB + 17, 5 * MiB + 3

    def handler(sock):
        got = _recv_sha(sock, up)
        _send_pattern(sock, down)
        return got

    origin = _OneShotOrigin(handler)
    log = workdir / "access.jsonl"
    env = {} if mode == "adaptive" else {"LARDER_TEST_TUNNEL_SPLICE": mode}
    lr = larder_factory(config={"connect_ports": [origin.port], "access_log": str(log),
                                "access_log_format": "json"}, env=env)
    c = _tunnel(lr.port, origin.port)
    with c:
        _send_pattern(c.sock, up)
        got = _client_recv_sha(c)
    assert origin.wait() == (pattern_sha256(up), up)
    assert got[1] == down
    def records():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    wait_for_file(log, lambda: any(r["method"] == "CONNECT" for r in records()))
    tunnel = next(r for r in records() if r["method"] == "CONNECT")
    assert tunnel["bytes"] == down and tunnel["bytes_from_client"] == up, tunnel


@pytest.mark.parametrize("mode", SPLICE_MODES)
def test_shutdown_closes_a_busy_tunnel_when_the_grace_is_over(larder_factory, mode):
    seen = {}

    def handler(sock):
        try:
            for piece in pattern_chunks(1 << 34):  # more than the client will ever read
                sock.sendall(piece)
        except OSError as e:
            seen["end"] = (type(e).__name__, time.monotonic())

    origin = _OneShotOrigin(handler)
    lr = _larder_for(larder_factory, origin.port, mode, shutdown_grace="1s")
    c = _tunnel(lr.port, origin.port)
    with c:
        c.reader.read_exact(4 * MiB)  # bulk: spliced by now, and the client stops reading
        lr.proc.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        assert lr.wait_exit(10) == 0, lr.log_text()[-3000:]
        origin.wait(10)
    assert seen["end"][1] - stopped_at < 3.0, seen
