"""CONNECT tunnels (plain TCP echo and TLS) and Upgrade (WebSocket) tunnels."""

import json
import socket
import ssl
import threading
import time

from helpers import RawClient, build_request, curl, free_port, headers_named, pattern, read_response, SockReader


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
    time.sleep(0.2)
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
