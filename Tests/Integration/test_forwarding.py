"""Plain HTTP/1.1 forwarding through Larder: methods, bodies, framing, keep-alive,
pipelining, 100-continue, hop-by-hop fields, Via, Max-Forwards, 1xx, odd statuses."""

import http.client
import json
import time

import pytest

from helpers import (RawClient, _read_head, build_request, concurrently, curl, headers_named, in_background, pattern,
                     proxy_exchange, read_response, sha256, std_request, wait_for_file)

# ---------------------------------------------------------------------------
# Basic forwarding


def test_absolute_form_get_is_forwarded_in_origin_form(larder, origin):
    r = curl("-x", larder.proxy_url, origin.url("/bytes/100000"))
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) == 100000
    assert r.stdout == pattern(100000)
    reqs = origin.wait_requests(1)
    assert len(reqs) == 1
    req = reqs[0]
    assert req["method"] == "GET"
    assert req["target"] == "/bytes/100000"
    assert req["version"] == "HTTP/1.1"
    assert headers_named(req["headers"], "Host") == [origin.hostport]


def test_query_string_is_forwarded(larder, origin):
    resp = proxy_exchange(larder.port, "GET", origin.url("/echo?a=1&b=two%20words&c"))
    assert resp.status == 200
    assert json.loads(resp.body)["target"] == "/echo?a=1&b=two%20words&c"


def test_origin_form_is_rejected_without_reverse_origin(larder, origin):
    with RawClient(larder.port) as c:
        c.send(build_request("GET", "/bytes/10", [("Host", origin.hostport)]))
        resp = c.response()
    assert resp.status == 400
    assert (resp.header("Content-Type") or "").startswith("text/plain")
    assert resp.body.strip() != b""
    # Answered by the proxy: had it been forwarded, the origin would have logged it before answering.
    assert origin.requests() == []


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "FOO"])
def test_methods_pass_through(larder, origin, method):
    body = f"payload for {method}".encode() if method in ("POST", "PUT", "PATCH", "FOO") else b""
    conn = http.client.HTTPConnection("127.0.0.1", larder.port, timeout=10)
    try:
        conn.request(method, origin.url("/echo"), body=body or None,
                     headers={"Content-Length": str(len(body))} if body else {})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    assert resp.status == 200
    reqs = origin.wait_requests(1)
    assert len(reqs) == 1
    assert reqs[0]["method"] == method
    assert reqs[0]["body"] == body.decode()
    if method == "HEAD":
        assert data == b""
        assert int(resp.getheader("Content-Length")) > 0
    else:
        echoed = json.loads(data)
        assert echoed["method"] == method
        assert echoed["body"] == body.decode()
        assert echoed["body_len"] == len(body)


# ---------------------------------------------------------------------------
# Request bodies


def test_request_body_with_content_length_reaches_origin(larder, origin, tmp_path):
    payload = pattern(1024 * 1024 + 17)
    f = tmp_path / "upload.bin"
    f.write_bytes(payload)
    r = curl("-x", larder.proxy_url, "-H", "Expect:", "-H", "Content-Type: application/octet-stream",
             "--data-binary", f"@{f}", origin.url("/echo"))
    assert r.returncode == 0, r.stderr
    echoed = json.loads(r.stdout)
    assert echoed["method"] == "POST"
    assert echoed["body_len"] == len(payload)
    assert echoed["body_sha256"] == sha256(payload)
    assert headers_named(echoed["headers"], "Content-Length") == [str(len(payload))]


def _chunked(pieces, ext_every=2):
    out = bytearray()
    for i, p in enumerate(pieces):
        ext = b";name=value" if i % ext_every == 1 else b""
        out += b"%x%s\r\n" % (len(p), ext) + p + b"\r\n"
    return bytes(out) + b"0\r\n\r\n"


def test_chunked_request_body_reaches_origin_byte_exact(larder, origin):
    data = pattern(200000)
    sizes = [1, 10, 4096, 70000, 3, 125890]
    pieces, off = [], 0
    for s in sizes:
        pieces.append(data[off:off + s])
        off += s
    assert off == len(data)
    with RawClient(larder.port) as c:
        c.send(build_request("POST", origin.url("/echo"),
                             [("Host", origin.hostport), ("Transfer-Encoding", "chunked"),
                              ("Content-Type", "application/octet-stream")]) + _chunked(pieces))
        resp = c.response()
    assert resp.status == 200
    echoed = json.loads(resp.body)
    assert echoed["body_len"] == len(data)
    assert echoed["body_sha256"] == sha256(data)
    te = headers_named(echoed["headers"], "Transfer-Encoding")
    cl = headers_named(echoed["headers"], "Content-Length")
    # Re-framed by the proxy: either chunked or a length, never both.
    assert (te == ["chunked"] and cl == []) or (te == [] and cl == [str(len(data))]), echoed["headers"]


def test_chunked_upload_with_curl(larder, origin, tmp_path):
    payload = pattern(300001)
    f = tmp_path / "up.bin"
    f.write_bytes(payload)
    r = curl("-x", larder.proxy_url, "-H", "Transfer-Encoding: chunked", "-H", "Expect:",
             "-T", f, origin.url("/echo"))
    assert r.returncode == 0, r.stderr
    echoed = json.loads(r.stdout)
    assert echoed["method"] == "PUT"
    assert echoed["body_len"] == len(payload)
    assert echoed["body_sha256"] == sha256(payload)


# ---------------------------------------------------------------------------
# Response framing


def test_chunked_response_is_byte_exact(larder, origin):
    r = curl("-x", larder.proxy_url, origin.url("/chunked/300000"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == pattern(300000)
    with RawClient(larder.port) as c:
        resp = c.request("GET", origin.url("/chunked/123457"))
    assert resp.status == 200
    assert resp.body == pattern(123457)


def test_until_close_response_is_byte_exact(larder, origin):
    r = curl("-x", larder.proxy_url, origin.url("/close/300000"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == pattern(300000)
    with RawClient(larder.port) as c:
        resp = c.request("GET", origin.url("/close/77777"))
    assert resp.status == 200
    assert resp.body == pattern(77777)


def test_content_length_response_through_raw_client(larder, origin):
    with RawClient(larder.port) as c:
        resp = c.request("GET", origin.url("/bytes/65536"))
    assert resp.status == 200
    assert resp.header("Content-Length") == "65536"
    assert resp.body == pattern(65536)


def test_head_then_get_on_the_same_connection(larder, origin):
    with RawClient(larder.port) as c:
        head = c.request("HEAD", origin.url("/bytes/5000"))
        assert head.status == 200
        assert head.header("Content-Length") == "5000"
        assert head.body == b""
        get = c.request("GET", origin.url("/bytes/7"))
        assert get.status == 200
        assert get.body == pattern(7)


def test_large_end_to_end_header_passes_unchanged(larder, origin):
    value = "v" * 4000 + "-end"
    resp = proxy_exchange(larder.port, "GET", origin.url("/echo"), [("X-Large", value)])
    assert resp.status == 200
    assert headers_named(json.loads(resp.body)["headers"], "X-Large") == [value]


def test_http10_client_gets_response_and_close(larder, origin):
    with RawClient(larder.port) as c:
        c.send(build_request("GET", origin.url("/bytes/1000"), [("Host", origin.hostport)],
                             version="HTTP/1.0"))
        resp = c.response()
        assert resp.status == 200
        assert resp.body == pattern(1000)
        assert resp.header("Transfer-Encoding") is None  # chunked is not for HTTP/1.0 clients
        assert c.closed_by_peer(5), "an HTTP/1.0 request without keep-alive must end with a close"


# ---------------------------------------------------------------------------
# Keep-alive and pipelining


def test_curl_reuses_one_client_connection_and_proxy_reuses_origin_connection(larder, origin):
    urls = [origin.url(f"/bytes/{n}") for n in (10, 20, 30)]
    r = curl("-v", "-x", larder.proxy_url, *urls)
    assert r.returncode == 0, r.stderr
    assert r.stdout == pattern(10) + pattern(20) + pattern(30)
    err = r.stderr.decode(errors="replace")
    assert err.count("Re-using existing connection") == 2, err
    reqs = origin.wait_requests(3)
    assert [q["target"] for q in reqs] == ["/bytes/10", "/bytes/20", "/bytes/30"]
    assert len({q["peer_port"] for q in reqs}) == 1, "origin connection was not reused"
    assert [q["seq"] for q in reqs] == [1, 2, 3]


def test_origin_connection_is_reused_for_sequential_requests(larder, origin):
    with RawClient(larder.port) as c:
        for n in range(1, 6):
            resp = c.request("GET", origin.url(f"/bytes/{n * 100}"))
            assert resp.status == 200
            assert resp.body == pattern(n * 100)
    reqs = origin.wait_requests(5)
    assert len(reqs) == 5
    assert len({q["conn"] for q in reqs}) == 1, [(q["conn"], q["peer_port"]) for q in reqs]
    assert len({q["peer_port"] for q in reqs}) == 1
    assert [q["seq"] for q in reqs] == [1, 2, 3, 4, 5]


def test_bursts_up_to_the_per_host_limit_reuse_their_origin_connections(larder_factory, origin):
    # 48 clients ask together, three times over. The first burst opens 48 origin connections; they
    # must all stay pooled for the next bursts (by default as many may idle as may be open), not
    # be closed as they finish and opened again a moment later: a connect and a close cost far
    # more than the request they carry. One worker, since pools are per worker.
    larder = larder_factory(config={"workers": 1})
    clients = 48
    conns = [RawClient(larder.port) for _ in range(clients)]
    try:
        for burst in range(3):
            # The origin holds every answer until all of the burst's requests are there at once.
            answers = in_background(lambda: concurrently(clients, lambda i: conns[i].request(
                "GET", origin.url(f"/bytes/{100 + i}?hold=b{burst}"))))
            assert len(origin.wait_requests((burst + 1) * clients, timeout=15)) == (burst + 1) * clients
            origin.open_gate(f"b{burst}")
            answers = answers()
            failures = [(i, burst, r.status) for i, r in enumerate(answers)
                        if r.status != 200 or r.body != pattern(100 + i)]
            assert not failures, failures
    finally:
        for c in conns:
            c.close()
    reqs = origin.wait_requests(3 * clients)
    assert len(reqs) == 3 * clients
    conns = {q["conn"] for q in reqs}
    assert len(conns) == clients, f"{len(conns)} origin connections for bursts of {clients}"


def test_pipelined_requests_get_responses_in_order(larder, origin):
    h = [("Host", origin.hostport)]
    data = (build_request("GET", origin.url("/bytes/10?hold=first"), h)
            + std_request("POST", origin.url("/echo"), h, b"second body")
            + build_request("GET", origin.url("/status/299"), h))
    with RawClient(larder.port) as c:
        c.send(data)
        # The first is answered only once all three are with Larder.
        origin.wait_requests(1)
        origin.open_gate("first")
        r1 = c.response()
        r2 = c.response()
        r3 = c.response()
    assert (r1.status, r1.body) == (200, pattern(10))
    assert r2.status == 200
    assert json.loads(r2.body)["body"] == "second body"
    assert (r3.status, r3.body) == (299, b"status 299\n")


def test_expect_100_continue_raw(larder, origin):
    body = pattern(100000)
    with RawClient(larder.port) as c:
        c.send(build_request("POST", origin.url("/echo"),
                             [("Host", origin.hostport), ("Content-Length", str(len(body))),
                              ("Expect", "100-continue")]))
        interim = _read_head(c.reader)  # must arrive before we send the body
        assert interim.status == 100
        c.send(body)
        resp = c.response()
    assert resp.status == 200
    echoed = json.loads(resp.body)
    assert echoed["body_len"] == len(body)
    assert echoed["body_sha256"] == sha256(body)


def test_expect_100_continue_curl(larder, origin, tmp_path):
    payload = pattern(2 * 1024 * 1024)
    f = tmp_path / "big.bin"
    f.write_bytes(payload)
    t0 = time.monotonic()
    r = curl("-v", "-x", larder.proxy_url, "-H", "Expect: 100-continue", "--expect100-timeout", "8",
             "--data-binary", f"@{f}", origin.url("/echo"))
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode(errors="replace")
    assert "< HTTP/1.1 100 Continue" in err, err
    assert elapsed < 6, f"curl waited for its expect100 timeout ({elapsed:.1f}s)"
    echoed = json.loads(r.stdout)
    assert echoed["body_len"] == len(payload)
    assert echoed["body_sha256"] == sha256(payload)


# ---------------------------------------------------------------------------
# Hop-by-hop fields, Via


def test_request_hop_by_hop_fields_are_removed(larder, origin):
    headers = [
        ("Host", origin.hostport),
        ("Connection", "keep-alive, X-Drop-Me"),
        ("X-Drop-Me", "must not arrive"),
        ("Keep-Alive", "timeout=5"),
        ("Proxy-Connection", "keep-alive"),
        ("Proxy-Authorization", "Basic dXNlcjpwYXNz"),
        ("TE", "trailers"),
        ("Trailer", "X-Checksum"),
        ("Upgrade", "h2c"),
        ("X-Custom", "value with  inner  spaces"),
        ("X-Multi", "a"),
        ("X-Multi", "b"),
        ("Accept", "text/plain"),
        ("Cache-Control", "no-cache"),
        ("X-Unknown-Header-Zzz", "zzz;q=1, \"quoted\""),
        ("Authorization", "Bearer token123"),
    ]
    with RawClient(larder.port) as c:
        c.send(build_request("GET", origin.url("/echo"), headers))
        resp = c.response()
    assert resp.status == 200
    seen = json.loads(resp.body)["headers"]
    names = [n.lower() for n, _ in seen]
    for hop in ("x-drop-me", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
                "upgrade"):
        assert hop not in names, f"{hop} reached the origin: {seen}"
    for v in headers_named(seen, "Connection"):
        assert "x-drop-me" not in v.lower() and "upgrade" not in v.lower(), seen
    assert headers_named(seen, "Via") == ["1.1 larder"]
    assert headers_named(seen, "Host") == [origin.hostport]
    assert headers_named(seen, "X-Custom") == ["value with  inner  spaces"]
    assert ", ".join(headers_named(seen, "X-Multi")) == "a, b"
    assert headers_named(seen, "Accept") == ["text/plain"]
    assert headers_named(seen, "Cache-Control") == ["no-cache"]
    assert headers_named(seen, "X-Unknown-Header-Zzz") == ["zzz;q=1, \"quoted\""]
    assert headers_named(seen, "Authorization") == ["Bearer token123"]


def test_response_hop_by_hop_fields_are_removed(larder, origin):
    with RawClient(larder.port) as c:
        resp = c.request("GET", origin.url("/hop"))
    assert resp.status == 200
    assert resp.body == b"hop\n"
    names = resp.names()
    for hop in ("x-origin-hop", "keep-alive", "proxy-connection", "trailer", "upgrade"):
        assert hop not in names, f"{hop} reached the client: {resp.headers}"
    for v in resp.all("Connection"):
        assert "x-origin-hop" not in v.lower(), resp.headers
    assert resp.all("X-End-To-End") == ["kept"]
    assert resp.all("Via") == ["1.1 larder"]


def test_via_is_added_to_responses(larder, origin):
    resp = proxy_exchange(larder.port, "GET", origin.url("/bytes/3"))
    assert resp.status == 200
    assert resp.all("Via") == ["1.1 larder"]


def test_via_name_from_config(larder_factory, origin):
    lr = larder_factory(config={"via_name": "edge-7"})
    resp = proxy_exchange(lr.port, "GET", origin.url("/echo"))
    assert resp.status == 200
    assert headers_named(json.loads(resp.body)["headers"], "Via") == ["1.1 edge-7"]
    assert resp.all("Via") == ["1.1 edge-7"]


def test_via_is_appended_to_an_existing_via(larder, origin):
    resp = proxy_exchange(larder.port, "GET", origin.url("/echo"), [("Via", "1.0 client-side")])
    assert resp.status == 200
    via = headers_named(json.loads(resp.body)["headers"], "Via")
    assert ", ".join(via) == "1.0 client-side, 1.1 larder"


def test_additional_headers_are_added_unless_client_sent_them(larder_factory, origin):
    lr = larder_factory(config={"session": {"http_additional_headers": {"X-Team": "cache"}}})
    r1 = proxy_exchange(lr.port, "GET", origin.url("/echo"))
    assert r1.status == 200
    assert headers_named(json.loads(r1.body)["headers"], "X-Team") == ["cache"]
    r2 = proxy_exchange(lr.port, "GET", origin.url("/echo"), [("X-Team", "mine")])
    assert r2.status == 200
    assert headers_named(json.loads(r2.body)["headers"], "X-Team") == ["mine"]


# ---------------------------------------------------------------------------
# Max-Forwards


@pytest.mark.parametrize("method", ["TRACE", "OPTIONS"])
def test_max_forwards_zero_is_answered_by_the_proxy(larder, origin, method):
    with RawClient(larder.port) as c:
        resp = c.request(method, origin.url("/echo?mf0"), [("Max-Forwards", "0")])
        assert resp.status == 200
        # Same connection still usable; the sentinel reaches the origin (and, answered in order
        # after it, a forwarded request would have been logged first).
        sentinel = c.request("GET", origin.url("/status/200?sentinel"))
        assert sentinel.status == 200
    reqs = origin.wait_requests(1)
    assert [q["target"] for q in reqs] == ["/status/200?sentinel"], reqs


@pytest.mark.parametrize("method", ["TRACE", "OPTIONS"])
def test_max_forwards_is_decremented(larder, origin, method):
    resp = proxy_exchange(larder.port, method, origin.url("/echo"), [("Max-Forwards", "5")])
    assert resp.status == 200
    reqs = origin.wait_requests(1)
    assert len(reqs) == 1
    assert reqs[0]["method"] == method
    assert headers_named(reqs[0]["headers"], "Max-Forwards") == ["4"]


# ---------------------------------------------------------------------------
# Status codes


def test_early_hints_are_relayed_before_the_final_response(larder, origin):
    with RawClient(larder.port) as c:
        resp = c.request("GET", origin.url("/early-hints"))
    assert [i.status for i in resp.interim] == [103]
    assert resp.interim[0].all("Link") == ["</style.css>; rel=preload; as=style"]
    assert resp.status == 200
    assert resp.body == b"final body\n"


@pytest.mark.parametrize("code", [299, 499, 599, 999])
def test_unusual_status_codes_pass_through(larder, origin, code):
    resp = proxy_exchange(larder.port, "GET", origin.url(f"/status/{code}"))
    assert resp.status == code
    assert resp.body == f"status {code}\n".encode()


@pytest.mark.parametrize("code", [204, 304])
def test_bodiless_statuses_keep_the_connection_usable(larder, origin, code):
    with RawClient(larder.port) as c:
        resp = c.request("GET", origin.url(f"/status/{code}"))
        assert resp.status == code
        after = c.request("GET", origin.url("/bytes/5"))
        assert after.status == 200
        assert after.body == pattern(5)


# ---------------------------------------------------------------------------
# Parent proxy


def test_parent_proxy_chain_adds_two_via_entries(larder_factory, origin):
    parent = larder_factory(config={"via_name": "parent"}, name="parent")
    child = larder_factory(config={"via_name": "child", "session": {"proxy": parent.proxy_url}},
                           name="child")
    resp = proxy_exchange(child.port, "GET", origin.url("/echo?chain"))
    assert resp.status == 200
    seen = json.loads(resp.body)
    assert seen["target"] == "/echo?chain"
    assert ", ".join(headers_named(seen["headers"], "Via")) == "1.1 child, 1.1 parent"
    assert ", ".join(resp.all("Via")) == "1.1 parent, 1.1 child"
    body = curl("-x", child.proxy_url, origin.url("/bytes/50000"))
    assert body.returncode == 0, body.stderr
    assert body.stdout == pattern(50000)


def connect_through(lr, port, payload=b"through the chain"):
    c = RawClient(lr.port, 15)
    c.send(build_request("CONNECT", f"127.0.0.1:{port}", [("Host", f"127.0.0.1:{port}")]))
    resp = c.response("CONNECT")
    if resp.status != 200:
        c.close()
        return resp, None
    c.sock.sendall(payload)
    echoed = c.reader.read_exact(len(payload))
    c.close()
    return resp, echoed


def test_connect_tunnels_go_through_the_parent_proxy(larder_factory, echo_server, workdir):
    log = workdir / "parent.jsonl"
    parent = larder_factory(config={"connect_ports": [echo_server.port], "access_log": str(log),
                                    "access_log_format": "json"}, name="parent")
    child = larder_factory(config={"connect_ports": [echo_server.port], "session": {"proxy": parent.proxy_url}},
                           name="child")
    resp, echoed = connect_through(child, echo_server.port)
    assert resp.status == 200 and echoed == b"through the chain"
    # The parent carried the tunnel: its access log has the CONNECT (written when the tunnel ended).
    wait_for_file(log, lambda: "CONNECT" in (log.read_text() if log.exists() else ""))
    assert any(json.loads(line)["method"] == "CONNECT" for line in log.read_text().splitlines())


def test_a_parent_refusing_the_connect_is_a_502_that_says_so(larder_factory, echo_server):
    parent = larder_factory(config={"connect_ports": [443]}, name="parent")
    child = larder_factory(config={"connect_ports": [echo_server.port], "session": {"proxy": parent.proxy_url}},
                           name="child")
    resp, _ = connect_through(child, echo_server.port)
    assert resp.status == 502 and b"refused CONNECT" in resp.body and b"403" in resp.body, resp.body
