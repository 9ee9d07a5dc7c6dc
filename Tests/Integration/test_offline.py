"""Offline means offline (cache.offline): whatever a request asks, nothing reaches an origin.

Each test fills the cache while online where it needs to, switches offline with a reload, and then
checks what the client got and that the origin (which records every request) received nothing more:
cached responses are served fresh or stale, a miss is a 504, tunnels and unsafe methods a 503.
"""

import json
import time

import pytest

from prometheus_client.parser import text_string_to_metric_families

from helpers import RawClient, build_request, proxy_exchange
from test_admin import ADMIN, admin
from test_cache import cache_status, get, methods, script
from test_reload import rewrite

# Entries go stale by moving the proxy's clock (TestClock), not by waiting.
pytestmark = pytest.mark.usefixtures("proxy_clock")

POLICIES = ["use-protocol-cache-policy", "reload-ignoring-local-cache-data", "reload-revalidating-cache-data",
            "return-cache-data-else-load", "return-cache-data-dont-load"]


def set_offline(lr, offline):
    rewrite(lr, {"cache": {"offline": offline}})
    status, _, body = admin(lr, "POST", "/config/reload")
    # Answered once every worker has applied it: the next request on any worker is offline.
    assert status == 200 and json.loads(body)["applied"] == ["cache.offline"], body


def assert_offline_refusal(resp, status=503):
    assert resp.status == status, (resp.status, resp.body)
    assert b"offline" in resp.body, resp.body
    assert "detail=offline" in cache_status(resp), cache_status(resp)


def origin_paths(origin):
    return [(r["method"], r.get("path", "")) for r in origin.requests()]


def settle(origin, before, wait=0.25):
    """What the origin received since `before`, after giving background work a moment (a refresh
    or revalidation Larder started while answering would reach the origin on loopback within
    milliseconds)."""
    time.sleep(wait)
    return origin_paths(origin)[len(before):]


def test_cached_urls_are_served_fresh_and_stale_whatever_policy_is_asked(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "fresh", headers=[("Cache-Control", "max-age=600")], body="fresh body")
    script(workdir, "stale", headers=[("Cache-Control", "max-age=1"), ("ETag", '"s1"')], body="stale body",
           conditional=True)
    for name in ("fresh", "stale"):
        assert get(lr, origin.url(f"/res/{name}")).status == 200
    lr.clock.advance(2.2)
    set_offline(lr, True)
    before = origin_paths(origin)
    for policy in POLICIES:
        for extra in ([], [("Cache-Control", "no-cache")], [("Cache-Control", "max-age=0")]):
            headers = [("Larder-Cache-Policy", policy)] + extra
            fresh = get(lr, origin.url("/res/fresh"), headers=headers)
            assert fresh.status == 200 and fresh.body == b"fresh body", (policy, extra, fresh.status)
            assert cache_status(fresh).startswith("larder; hit"), (policy, cache_status(fresh))
            stale = get(lr, origin.url("/res/stale"), headers=headers)
            assert stale.status == 200 and stale.body == b"stale body", (policy, extra, stale.status)
            assert "detail=stale" in cache_status(stale), (policy, cache_status(stale))
            head = get(lr, origin.url("/res/stale"), headers=headers, method="HEAD")
            assert head.status == 200, (policy, head.status)
    assert settle(origin, before) == []


def test_a_miss_is_a_504_whatever_policy_is_asked(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "absent", headers=[("Cache-Control", "max-age=600")], body="never fetched")
    set_offline(lr, True)
    for policy in POLICIES:
        resp = get(lr, origin.url("/res/absent"), headers=[("Larder-Cache-Policy", policy)])
        assert resp.status == 504, (policy, resp.status)
    # A precondition the origin would judge is not sent there either.
    assert get(lr, origin.url("/res/absent"), headers=[("If-Match", '"x"')]).status == 504
    assert settle(origin, []) == []


def test_no_revalidation_and_no_background_refresh(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "reval", headers=[("Cache-Control", "max-age=1"), ("ETag", '"r1"')], body="reval body",
           conditional=True)
    script(workdir, "swr", headers=[("Cache-Control", "max-age=1, stale-while-revalidate=60"), ("ETag", '"w1"')],
           body="swr body", conditional=True)
    script(workdir, "mustrev", headers=[("Cache-Control", "max-age=1, must-revalidate"), ("ETag", '"m1"')],
           body="must body", conditional=True)
    for name in ("reval", "swr", "mustrev"):
        assert get(lr, origin.url(f"/res/{name}")).status == 200
    lr.clock.advance(2.2)
    set_offline(lr, True)
    before = origin_paths(origin)
    # Online these would revalidate with the origin (HEAD) or refresh it in the background.
    revalidate = [("Larder-Cache-Policy", "reload-revalidating-cache-data")]
    assert get(lr, origin.url("/res/reval"), headers=revalidate).body == b"reval body"
    protocol = [("Larder-Cache-Policy", "use-protocol-cache-policy")]
    swr = get(lr, origin.url("/res/swr"), headers=protocol)
    assert swr.status == 200 and swr.body == b"swr body"
    assert "stale-while-revalidate" not in cache_status(swr), cache_status(swr)
    # An entry that may never be served stale without the origin's word: 504, not a revalidation.
    assert get(lr, origin.url("/res/mustrev"), headers=protocol).status == 504
    assert settle(origin, before) == []
    assert methods(origin, "swr") == ["GET"]


def test_a_cache_rule_policy_cannot_reach_the_origin(larder_factory, origin, workdir):
    rules = [{"path_prefix": "/res/ruled", "policy": "reload-ignoring-local-cache-data"},
             {"path_prefix": "/res/elseload", "policy": "return-cache-data-else-load"}]
    lr = larder_factory(config={**ADMIN, "cache": {"rules": rules}})
    script(workdir, "ruled", headers=[("Cache-Control", "max-age=600")], body="ruled body")
    assert get(lr, origin.url("/res/ruled")).body == b"ruled body"
    set_offline(lr, True)
    before = origin_paths(origin)
    resp = get(lr, origin.url("/res/ruled"))
    assert resp.status == 200 and resp.body == b"ruled body"
    assert cache_status(resp).startswith("larder; hit"), cache_status(resp)
    assert get(lr, origin.url("/res/elseload")).status == 504
    assert settle(origin, before) == []


def test_unsafe_methods_options_trace_and_bodies_are_refused_with_503(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "target", headers=[("Cache-Control", "max-age=600")], body="cached")
    url = origin.url("/res/target")
    assert get(lr, url).body == b"cached"
    set_offline(lr, True)
    before = origin_paths(origin)
    for method in ("POST", "PUT", "PATCH"):
        assert_offline_refusal(proxy_exchange(lr.port, method, url, body=b"payload"))
    for method in ("POST", "DELETE", "OPTIONS", "TRACE", "PROPFIND"):
        resp = proxy_exchange(lr.port, method, url, headers=[("Content-Length", "0")] if method == "POST" else [])
        assert_offline_refusal(resp)
        assert method in resp.body.decode() or method == "PROPFIND", resp.body
    # A GET with a body is never answered from the cache, so it is refused too.
    assert_offline_refusal(proxy_exchange(lr.port, "GET", url, body=b"query"))
    # Any policy the request names changes nothing.
    assert_offline_refusal(proxy_exchange(lr.port, "POST", url, body=b"x",
                                          headers=[("Larder-Cache-Policy", "reload-ignoring-local-cache-data")]))
    # The connection goes on after a refusal without a body.
    with RawClient(lr.port) as c:
        assert_offline_refusal(c.request("DELETE", url))
        assert c.request("GET", url).body == b"cached"
    assert settle(origin, before) == []
    # Nothing was invalidated by the refused unsafe requests.
    assert cache_status(get(lr, url)).startswith("larder; hit")


def test_connect_is_refused_with_503(larder_factory, echo_server):
    lr = larder_factory(config={**ADMIN, "connect_ports": [echo_server.port]})
    set_offline(lr, True)
    with RawClient(lr.port) as c:
        c.send(build_request("CONNECT", f"127.0.0.1:{echo_server.port}", [("Host", f"127.0.0.1:{echo_server.port}")]))
        resp = c.response("CONNECT")
        assert_offline_refusal(resp)
        assert b"CONNECT" in resp.body
    time.sleep(0.25)  # a connection Larder opened before refusing would have been accepted
    assert echo_server.connections == 0


def test_websocket_upgrade_is_refused_with_503(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    set_offline(lr, True)
    headers = [("Host", origin.hostport), ("Connection", "Upgrade"), ("Upgrade", "websocket"),
               ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]
    with RawClient(lr.port) as c:
        c.send(build_request("GET", origin.url("/upgrade"), headers))
        assert_offline_refusal(c.response())
    assert settle(origin, []) == []


def test_refusals_are_counted(larder_factory, origin, workdir, echo_server):
    lr = larder_factory(config={**ADMIN, "connect_ports": [echo_server.port]})
    set_offline(lr, True)
    proxy_exchange(lr.port, "POST", origin.url("/echo"), body=b"x")
    proxy_exchange(lr.port, "OPTIONS", origin.url("/echo"))
    with RawClient(lr.port) as c:
        c.send(build_request("CONNECT", f"127.0.0.1:{echo_server.port}", [("Host", f"127.0.0.1:{echo_server.port}")]))
        assert c.response("CONNECT").status == 503
    status, _, body = admin(lr, "GET", "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["larder_offline_refusals"].samples[0].value == 3
    assert settle(origin, []) == []


def test_a_reload_turning_offline_off_restores_forwarding(larder_factory, origin, workdir, echo_server):
    lr = larder_factory(config={**ADMIN, "connect_ports": [echo_server.port], "cache": {"offline": True}})
    script(workdir, "later", headers=[("Cache-Control", "max-age=600")], body="later body")
    assert_offline_refusal(proxy_exchange(lr.port, "POST", origin.url("/echo"), body=b"x"))
    assert get(lr, origin.url("/res/later")).status == 504
    assert settle(origin, [], wait=0.1) == []
    set_offline(lr, False)
    posted = proxy_exchange(lr.port, "POST", origin.url("/echo"), body=b"x")
    assert posted.status == 200 and json.loads(posted.body)["method"] == "POST"
    assert get(lr, origin.url("/res/later")).body == b"later body"
    with RawClient(lr.port) as c:
        c.send(build_request("CONNECT", f"127.0.0.1:{echo_server.port}", [("Host", f"127.0.0.1:{echo_server.port}")]))
        assert c.response("CONNECT").status == 200
        c.send(b"ping")
        assert c.reader.read_exact(4) == b"ping"
    # And back offline: the URL fetched meanwhile is served from the cache, the rest refused.
    set_offline(lr, True)
    before = origin_paths(origin)
    assert get(lr, origin.url("/res/later")).body == b"later body"
    assert_offline_refusal(proxy_exchange(lr.port, "POST", origin.url("/echo"), body=b"x"))
    assert settle(origin, before) == []
