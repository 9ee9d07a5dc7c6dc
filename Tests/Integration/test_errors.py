"""Upstream failures (refused, timeout, DNS, truncated bodies) and malformed client requests."""

import socket
import time

import pytest

from helpers import RawClient, build_request, curl, free_port, pattern, proxy_exchange, std_request

# ---------------------------------------------------------------------------
# Upstream failures


def test_connection_refused_is_502_naming_the_upstream(larder):
    port = free_port()
    resp = proxy_exchange(larder.port, "GET", f"http://127.0.0.1:{port}/nothing-here")
    assert resp.status == 502
    assert (resp.header("Content-Type") or "").startswith("text/plain")
    assert f"127.0.0.1:{port}".encode() in resp.body, resp.body


def test_hanging_origin_is_504_after_the_request_timeout(larder_factory, origin):
    lr = larder_factory(config={"session": {"timeout_interval_for_request": "1s"}})
    t0 = time.monotonic()
    resp = proxy_exchange(lr.port, "GET", origin.url("/hang"), timeout=10)
    elapsed = time.monotonic() - t0
    assert resp.status == 504
    assert (resp.header("Content-Type") or "").startswith("text/plain")
    assert resp.body.strip() != b""
    assert 0.8 <= elapsed <= 3.0, f"504 after {elapsed:.2f}s"


def test_dns_failure_is_502(larder_factory, fake_dns):
    lr = larder_factory(config={"session": {"dns_servers": [f"127.0.0.1:{fake_dns.port}"]}})
    resp = proxy_exchange(lr.port, "GET", "http://no-such-host.test/path", timeout=15)
    assert resp.status == 502
    assert (resp.header("Content-Type") or "").startswith("text/plain")
    assert b"no-such-host.test" in resp.body, resp.body
    assert any(name.rstrip(".").lower() == "no-such-host.test" for name, _ in fake_dns.queries), fake_dns.queries


def test_origin_dropping_the_connection_without_answer_is_502(larder, origin):
    resp = proxy_exchange(larder.port, "GET", origin.url("/drop"))
    assert resp.status == 502
    assert (resp.header("Content-Type") or "").startswith("text/plain")


def test_oversized_origin_response_head_is_502(larder_factory, origin):
    lr = larder_factory(config={"limits": {"max_response_head_bytes": "8KiB"}})
    resp = proxy_exchange(lr.port, "GET", origin.url("/bighead/20000"))
    assert resp.status == 502


@pytest.mark.parametrize("variant", ["", "?rst=1", "?chunked=1"])
def test_origin_closing_mid_body_is_not_a_complete_response_curl(larder, origin, variant):
    r = curl("-x", larder.proxy_url, origin.url(f"/reset/1048576{variant}"), timeout=20)
    # 18: transfer closed with outstanding data; 56: connection reset (Larder resets on purpose).
    assert r.returncode in (18, 56), (r.returncode, r.stderr)
    assert len(r.stdout) < 1048576


@pytest.mark.parametrize("variant", ["", "?chunked=1"])
def test_origin_closing_mid_body_is_not_a_complete_response_raw(larder, origin, variant):
    with RawClient(larder.port, timeout=10) as c:
        c.send(std_request("GET", origin.url(f"/reset/1048576{variant}")))
        got = []
        with pytest.raises((EOFError, ConnectionResetError)):
            c.response(sink=got.append)
    received = sum(len(x) for x in got)
    assert received < 1048576
    # What did arrive is the right prefix.
    assert b"".join(got) == pattern(received)


# ---------------------------------------------------------------------------
# Malformed client requests


def _malformed_cases(hostport):
    url = f"http://{hostport}/echo"
    h = f"Host: {hostport}\r\n"
    return {
        "duplicate-content-length": (
            f"POST {url} HTTP/1.1\r\n{h}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!".encode(), 400),
        "obs-fold": (f"GET {url} HTTP/1.1\r\n{h}X-Folded: a\r\n  b\r\n\r\n".encode(), 400),
        "huge-header": (f"GET {url} HTTP/1.1\r\n{h}X-Huge: {'h' * 100 * 1024}\r\n\r\n".encode(), 431),
        "too-many-fields": (
            (f"GET {url} HTTP/1.1\r\n{h}" + "".join(f"X-F{i}: {i}\r\n" for i in range(150)) + "\r\n").encode(),
            431),
        "long-uri": (f"GET {url}?{'u' * 10 * 1024} HTTP/1.1\r\n{h}\r\n".encode(), 414),
        "http2-request-line": (f"GET {url} HTTP/2.0\r\n{h}\r\n".encode(), 505),
        "cl-te-smuggling": (
            f"POST {url} HTTP/1.1\r\n{h}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
            f"0\r\n\r\nGET {url} HTTP/1.1\r\n{h}\r\n".encode(), 400),
        "space-before-colon": (f"GET {url} HTTP/1.1\r\n{h}X-Bad : 1\r\n\r\n".encode(), 400),
        "garbage-request-line": (b"THIS IS NOT HTTP\r\n\r\n", 400),
    }


MALFORMED = ["duplicate-content-length", "obs-fold", "huge-header", "too-many-fields", "long-uri",
             "http2-request-line", "cl-te-smuggling", "space-before-colon", "garbage-request-line"]


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_request_gets_4xx_and_close(larder_factory, origin, case):
    lr = larder_factory(config={"limits": {"max_head_bytes": "64KiB", "max_header_count": 100,
                                           "max_uri_bytes": "8KiB"}})
    data, status = _malformed_cases(origin.hostport)[case]
    with RawClient(lr.port, timeout=10) as c:
        try:
            c.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the proxy may stop reading early; its answer must still arrive
        try:
            resp = c.response()
        except ConnectionResetError as e:
            pytest.fail(f"connection reset before the {status} response could be read "
                        f"(no lingering close?): {e!r}")
        assert resp.status == status, resp
        assert c.closed_by_peer(5), "the connection must be closed after a malformed request"
    # The origin's log is written before it answers; the proxy answered (and closed) already.
    assert origin.requests() == [], "a malformed request reached the origin"
    ok = proxy_exchange(lr.port, "GET", origin.url("/bytes/10"))
    assert ok.status == 200
    assert ok.body == pattern(10)


def test_client_header_timeout_is_408(larder_factory, origin):
    lr = larder_factory(config={"limits": {"client_header_timeout": "1s"}})
    with RawClient(lr.port, timeout=10) as c:
        c.send(f"GET {origin.url('/bytes/1')} HTTP/1.1\r\nHost: {origin.hostport}\r\n".encode())
        t0 = time.monotonic()
        resp = c.response()
        elapsed = time.monotonic() - t0
        assert resp.status == 408
        assert c.closed_by_peer(5)
    assert 0.8 <= elapsed <= 3.0, f"408 after {elapsed:.2f}s"
    assert origin.requests() == []



def test_https_absolute_form_is_fetched_over_verified_tls(larder_factory, tls_server):
    lr = larder_factory(config={"session": {"ca_file": tls_server.cafile}})
    resp = proxy_exchange(lr.port, "GET", f"https://127.0.0.1:{tls_server.port}/secure?x=1", timeout=15)
    assert resp.status == 200, resp.body
    assert resp.body == b"hello over tls /secure?x=1\n"


def test_https_origin_with_an_unknown_ca_is_502_naming_tls(larder_factory, tls_server):
    lr = larder_factory()  # system trust store: the test's self-signed certificate is unknown
    resp = proxy_exchange(lr.port, "GET", f"https://127.0.0.1:{tls_server.port}/", timeout=15)
    assert resp.status == 502
    assert b"TLS" in resp.body and f"127.0.0.1:{tls_server.port}".encode() in resp.body, resp.body
    assert not any(e.startswith("served") for e in tls_server.events)


# ---------------------------------------------------------------------------
# What Larder's own answers say about themselves


def test_a_malformed_request_after_a_forwarded_one_is_the_clients_fault_not_the_origins(larder, origin):
    """The connection's previous request went to an origin: a malformed head after it is still
    Larder's refusal (`detail=bad-request`), never reported as an origin error."""
    with RawClient(larder.port, timeout=10) as c:
        c.send(std_request("GET", origin.url("/bytes/10")))
        first = c.response()
        assert first.status == 200 and first.body == pattern(10)
        c.send(b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
        refused = c.response()
        assert refused.status == 400, refused
        status = refused.header("Cache-Status") or ""
        assert "detail=bad-request" in status and "origin-error" not in status and "fwd=" not in status, status
        assert c.closed_by_peer(5)


def test_a_bad_chunk_in_a_forwarded_body_is_answered_with_the_bare_reason(larder, origin):
    """A chunked body whose framing breaks is refused with 400: the client's fault (no
    `origin-error`, though the request was on its way to an origin), the reason as the body."""
    with RawClient(larder.port, timeout=10) as c:
        c.send(f"POST {origin.url('/echo')} HTTP/1.1\r\nHost: {origin.hostport}\r\n"
               "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n".encode())
        resp = c.response()
        assert resp.status == 400, resp
        status = resp.header("Cache-Status") or ""
        assert "detail=bad-request" in status and "origin-error" not in status, status
        assert resp.body == b"invalid chunk size\n", resp.body
        assert c.closed_by_peer(5)


def test_an_http10_keep_alive_client_is_told_its_local_answer_keeps_the_connection(larder, origin):
    """An HTTP/1.0 client that asked for keep-alive gets `Connection: keep-alive` on an answer
    Larder makes itself (HTTP/1.0 means close otherwise), and the connection does stay open."""
    with RawClient(larder.port, timeout=10) as c:
        c.send(b"OPTIONS * HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        local = c.response()
        assert local.status == 200, local
        assert (local.header("Connection") or "").lower() == "keep-alive", local
        c.send(f"GET {origin.url('/bytes/7')} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".encode())
        forwarded = c.response()
        assert forwarded.status == 200 and forwarded.body == pattern(7), forwarded
