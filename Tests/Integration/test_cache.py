"""The cache, one test per row of the documented policy table and the RFC 9111 rules around it.

Each test scripts a resource on the origin (``/res/NAME`` reads ``res-NAME.json`` from the test's
directory), sends requests through the real proxy, and checks what the client got and what the
origin saw (method and headers of every request it received).
"""

import email.utils
import json
import time

from helpers import RawClient, pattern, proxy_exchange, wait_until


def script(workdir, name, status=200, headers=(), body="hello", **extra):
    spec = {"status": status, "headers": [list(h) for h in headers], "body": body}
    spec.update(extra)
    (workdir / f"res-{name}.json").write_text(json.dumps(spec))


def get(lr, url, headers=(), method="GET"):
    return proxy_exchange(lr.port, method, url, headers=headers, timeout=15)


def seen(origin, name):
    """(method, headers) of each request the origin received for /res/NAME."""
    out = []
    for r in origin.requests():
        if r.get("path", "").startswith(f"/res/{name}"):
            out.append((r["method"], {k.lower(): v for k, v in r["headers"]}))
    return out


def methods(origin, name):
    return [m for m, _ in seen(origin, name)]


def cache_status(resp):
    return resp.header("Cache-Status") or ""


def wait_disk_entries(lr, n, timeout=10.0):
    """Waits until the writer has committed ``n`` entries (the admin endpoint's statistics)."""
    from test_admin import wait_stats
    s = wait_stats(lr, lambda s: s["cache_entries"]["disk"] >= n, timeout=timeout)
    assert s["cache_entries"]["disk"] >= n, s["cache_entries"]


def http_date(offset):
    return email.utils.formatdate(time.time() + offset, usegmt=True)


def test_fresh_response_is_served_from_cache(larder, origin, workdir):
    script(workdir, "fresh", headers=[("Cache-Control", "max-age=60")], body="fresh body")
    url = origin.url("/res/fresh")
    first = get(larder, url)
    assert first.status == 200 and first.body == b"fresh body"
    assert "fwd=uri-miss" in cache_status(first) and "stored" in cache_status(first)
    second = get(larder, url)
    assert second.status == 200 and second.body == b"fresh body"
    assert cache_status(second).startswith("larder; hit"), cache_status(second)
    assert second.header("Age") is not None and int(second.header("Age")) >= 0
    assert methods(origin, "fresh") == ["GET"]


def test_stale_unchanged_is_revalidated_with_head_and_served_from_cache(larder, origin, workdir):
    script(workdir, "stale", headers=[("Cache-Control", "max-age=0"), ("ETag", '"v1"')], body="v1 body",
           conditional=True)
    url = origin.url("/res/stale")
    assert get(larder, url).body == b"v1 body"
    again = get(larder, url)
    assert again.status == 200 and again.body == b"v1 body"
    assert "fwd=stale" in cache_status(again) and "fwd-status=304" in cache_status(again), cache_status(again)
    reqs = seen(origin, "stale")
    assert [m for m, _ in reqs] == ["GET", "HEAD"]
    assert reqs[1][1].get("if-none-match") == '"v1"'


def test_stale_changed_is_head_then_get_and_the_new_body_served(larder, origin, workdir):
    script(workdir, "changed", headers=[("Cache-Control", "max-age=0"), ("ETag", '"v1"')], body="old", conditional=True)
    url = origin.url("/res/changed")
    assert get(larder, url).body == b"old"
    script(workdir, "changed", headers=[("Cache-Control", "max-age=0"), ("ETag", '"v2"')], body="new!", conditional=True)
    resp = get(larder, url)
    assert resp.body == b"new!"
    assert methods(origin, "changed") == ["GET", "HEAD", "GET"]


def test_head_answer_with_the_same_validators_counts_as_unchanged(larder, origin, workdir):
    # No 304 from this origin: a 200 to the HEAD whose strong ETag matches means unchanged.
    script(workdir, "same", headers=[("Cache-Control", "max-age=0"), ("ETag", '"s1"')], body="same body")
    url = origin.url("/res/same")
    get(larder, url)
    resp = get(larder, url)
    assert resp.body == b"same body"
    assert methods(origin, "same") == ["GET", "HEAD"]
    assert "fwd-status=200" in cache_status(resp)


def test_response_no_cache_means_head_on_every_use(larder, origin, workdir):
    script(workdir, "nocache", headers=[("Cache-Control", "no-cache, max-age=600"), ("ETag", '"n"')], body="x",
           conditional=True)
    url = origin.url("/res/nocache")
    for _ in range(3):
        assert get(larder, url).body == b"x"
    assert methods(origin, "nocache") == ["GET", "HEAD", "HEAD"]


def test_only_if_cached_miss_is_504_and_origin_untouched(larder, origin, workdir):
    script(workdir, "oic", headers=[("Cache-Control", "max-age=60")])
    resp = get(larder, origin.url("/res/oic"), headers=[("Cache-Control", "only-if-cached")])
    assert resp.status == 504
    assert methods(origin, "oic") == []


def test_only_if_cached_hit_is_served(larder, origin, workdir):
    script(workdir, "oichit", headers=[("Cache-Control", "max-age=0"), ("ETag", '"o"')], body="kept")
    url = origin.url("/res/oichit")
    get(larder, url)
    resp = get(larder, url, headers=[("Cache-Control", "only-if-cached")])
    assert resp.status == 200 and resp.body == b"kept"
    assert methods(origin, "oichit") == ["GET"]


def test_max_stale_serves_stale_without_the_network(larder, origin, workdir):
    script(workdir, "maxstale", headers=[("Cache-Control", "max-age=0"), ("ETag", '"m"')], body="old but fine")
    url = origin.url("/res/maxstale")
    get(larder, url)
    resp = get(larder, url, headers=[("Cache-Control", "max-stale")])
    assert resp.status == 200 and resp.body == b"old but fine"
    assert methods(origin, "maxstale") == ["GET"]


def test_request_no_cache_asks_the_origin(larder, origin, workdir):
    script(workdir, "reqnc", headers=[("Cache-Control", "max-age=600"), ("ETag", '"r"')], body="b", conditional=True)
    url = origin.url("/res/reqnc")
    get(larder, url)
    get(larder, url, headers=[("Cache-Control", "no-cache")])
    get(larder, url, headers=[("Pragma", "no-cache")])
    assert methods(origin, "reqnc") == ["GET", "HEAD", "HEAD"]


def test_a_newer_response_too_large_for_memory_replaces_the_memory_copy(larder_factory, origin, workdir):
    """RFC 9111 §4: of the responses stored for a request, the most recent is used. The first,
    small one (a gzip variant) is held in the memory tier too; the larger one stored after it, which
    no longer varies, lives on disk only, and the memory copy must not go on being served."""
    script(workdir, "grows", headers=[("Cache-Control", "max-age=600"), ("Vary", "Accept-Encoding")],
           body="small gzip variant")
    lr = larder_factory(config={"cache": {"memory_max_object_size": "1KiB"}})
    url = origin.url("/res/grows")
    gzip = [("Accept-Encoding", "gzip")]
    assert get(lr, url, headers=gzip).body == b"small gzip variant"
    assert cache_status(get(lr, url, headers=gzip)).startswith("larder; hit")
    big = "no longer varies " + "x" * 8000
    script(workdir, "grows", headers=[("Cache-Control", "max-age=600")], body=big)
    # Another coding: a Vary miss, fetched and stored (on disk only: larger than the memory limit).
    assert get(lr, url, headers=[("Accept-Encoding", "br")]).body == big.encode()
    for _ in range(3):
        r = get(lr, url, headers=gzip)
        assert r.body == big.encode(), (cache_status(r), r.body[:20])
    assert cache_status(r).startswith("larder; hit"), cache_status(r)
    assert methods(origin, "grows") == ["GET", "GET"]


def test_no_store_private_and_authorization_are_not_reused(larder, origin, workdir):
    script(workdir, "nostore", headers=[("Cache-Control", "no-store, max-age=60")])
    script(workdir, "private", headers=[("Cache-Control", "private, max-age=60")])
    script(workdir, "auth", headers=[("Cache-Control", "max-age=60")])
    for name in ("nostore", "private"):
        for _ in range(2):
            assert get(larder, origin.url(f"/res/{name}")).status == 200
        assert methods(origin, name) == ["GET", "GET"], name
    for _ in range(2):
        get(larder, origin.url("/res/auth"), headers=[("Authorization", "Bearer t")])
    assert methods(origin, "auth") == ["GET", "GET"]


def test_s_maxage_wins_over_max_age(larder, origin, workdir):
    script(workdir, "smax", headers=[("Cache-Control", "max-age=0, s-maxage=60")], body="shared")
    url = origin.url("/res/smax")
    get(larder, url)
    assert cache_status(get(larder, url)).startswith("larder; hit")
    assert methods(origin, "smax") == ["GET"]


def test_vary_keeps_variants_apart(larder, origin, workdir):
    script(workdir, "vary", headers=[("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")], body="any")
    url = origin.url("/res/vary")
    get(larder, url, headers=[("Accept-Language", "en")])
    get(larder, url, headers=[("Accept-Language", "fr")])
    en = get(larder, url, headers=[("Accept-Language", "en")])
    fr = get(larder, url, headers=[("Accept-Language", "fr")])
    assert cache_status(en).startswith("larder; hit") and cache_status(fr).startswith("larder; hit")
    reqs = seen(origin, "vary")
    assert [h.get("accept-language") for _, h in reqs] == ["en", "fr"]


def test_post_invalidates_the_stored_response(larder, origin, workdir):
    script(workdir, "inval", headers=[("Cache-Control", "max-age=600")], body="v")
    url = origin.url("/res/inval")
    get(larder, url)
    assert cache_status(get(larder, url)).startswith("larder; hit")
    post = proxy_exchange(larder.port, "POST", url, body=b"change", timeout=15)
    assert post.status == 200
    resp = get(larder, url)
    assert "fwd=uri-miss" in cache_status(resp), cache_status(resp)
    assert methods(origin, "inval") == ["GET", "POST", "GET"]


def test_heuristic_freshness_from_last_modified(larder, origin, workdir):
    script(workdir, "heur", headers=[("Last-Modified", http_date(-10 * 86400))], body="old file")
    url = origin.url("/res/heur")
    get(larder, url)
    resp = get(larder, url)
    assert cache_status(resp).startswith("larder; hit"), cache_status(resp)
    assert methods(origin, "heur") == ["GET"]


def test_expires_in_the_past_is_stale(larder, origin, workdir):
    script(workdir, "expired", headers=[("Expires", http_date(-3600)), ("ETag", '"e"')], body="e", conditional=True)
    url = origin.url("/res/expired")
    get(larder, url)
    get(larder, url)
    assert methods(origin, "expired") == ["GET", "HEAD"]


def test_revalidation_refreshes_stored_headers(larder, origin, workdir):
    script(workdir, "refresh", headers=[("Cache-Control", "max-age=0"), ("ETag", '"f"'), ("X-Version", "1")],
           body="body", conditional=True)
    url = origin.url("/res/refresh")
    get(larder, url)
    script(workdir, "refresh", headers=[("Cache-Control", "max-age=60"), ("ETag", '"f"'), ("X-Version", "2")],
           body="body", conditional=True)
    second = get(larder, url)
    assert second.header("X-Version") == "2"
    third = get(larder, url)
    assert cache_status(third).startswith("larder; hit"), cache_status(third)
    assert third.header("X-Version") == "2" and third.body == b"body"
    assert methods(origin, "refresh") == ["GET", "HEAD"]


def test_404_with_max_age_is_cached(larder, origin, workdir):
    script(workdir, "gone", status=404, headers=[("Cache-Control", "max-age=60")], body="not here")
    url = origin.url("/res/gone")
    assert get(larder, url).status == 404
    resp = get(larder, url)
    assert resp.status == 404 and resp.body == b"not here"
    assert methods(origin, "gone") == ["GET"]


def test_head_is_answered_from_a_stored_get(larder, origin, workdir):
    script(workdir, "headget", headers=[("Cache-Control", "max-age=60")], body="twelve bytes")
    url = origin.url("/res/headget")
    get(larder, url)
    resp = get(larder, url, method="HEAD")
    assert resp.status == 200 and resp.body == b""
    assert resp.header("Content-Length") == "12"
    assert methods(origin, "headget") == ["GET"]


def test_truncated_body_is_not_stored(larder, origin, workdir):
    script(workdir, "cut", headers=[("Cache-Control", "max-age=60")], body="x" * 10000, reset_after=100)
    url = origin.url("/res/cut")
    with RawClient(larder.port, 10) as c:
        try:
            c.request("GET", url)  # the client sees a reset, not a complete response
        except OSError:
            pass
    script(workdir, "cut", headers=[("Cache-Control", "max-age=60")], body="complete")
    resp = get(larder, url)
    assert resp.body == b"complete"
    assert methods(origin, "cut") == ["GET", "GET"]


def test_24_mib_object_is_stored_and_served_byte_exact(larder, origin, workdir):
    n = 24 << 20
    script(workdir, "big", headers=[("Cache-Control", "max-age=600")], body_bytes=n)
    url = origin.url("/res/big")
    first = get(larder, url)
    assert len(first.body) == n and first.body == pattern(n)
    second = get(larder, url)
    assert cache_status(second).startswith("larder; hit"), cache_status(second)
    assert len(second.body) == n and second.body == pattern(n)
    assert methods(origin, "big") == ["GET"]


def test_range_is_served_from_the_cache(larder, origin, workdir):
    script(workdir, "range", headers=[("Cache-Control", "max-age=60")], body="0123456789")
    url = origin.url("/res/range")
    get(larder, url)
    part = get(larder, url, headers=[("Range", "bytes=2-5")])
    assert part.status == 206 and part.body == b"2345"
    assert part.header("Content-Range") == "bytes 2-5/10"
    suffix = get(larder, url, headers=[("Range", "bytes=-3")])
    assert suffix.status == 206 and suffix.body == b"789"
    assert get(larder, url, headers=[("Range", "bytes=50-")]).status == 416
    assert methods(origin, "range") == ["GET"]


def test_client_conditional_is_answered_304_from_the_cache(larder, origin, workdir):
    script(workdir, "cond", headers=[("Cache-Control", "max-age=60"), ("ETag", '"c1"')], body="cond")
    url = origin.url("/res/cond")
    get(larder, url)
    resp = get(larder, url, headers=[("If-None-Match", '"c1"')])
    assert resp.status == 304 and resp.header("ETag") == '"c1"'
    assert methods(origin, "cond") == ["GET"]


def test_entries_survive_a_restart(larder_factory, origin, workdir):
    script(workdir, "persist", headers=[("Cache-Control", "max-age=600")], body="still here")
    url = origin.url("/res/persist")
    lr = larder_factory(config={"admin_listen": "127.0.0.1:0"})
    get(lr, url)
    wait_disk_entries(lr, 1)  # committed by the writer
    lr.stop()
    lr2 = larder_factory(name=lr.name)
    resp = get(lr2, url)
    assert resp.body == b"still here" and cache_status(resp).startswith("larder; hit"), cache_status(resp)
    assert methods(origin, "persist") == ["GET"]


def test_policy_header_selects_documented_policies(larder, origin, workdir):
    script(workdir, "pol", headers=[("Cache-Control", "max-age=600")], body="p")
    url = origin.url("/res/pol")
    miss = get(larder, url, headers=[("Larder-Cache-Policy", "return-cache-data-dont-load")])
    assert miss.status == 504
    get(larder, url)
    get(larder, url, headers=[("Larder-Cache-Policy", "reload-ignoring-local-cache-data")])
    reqs = seen(origin, "pol")
    assert [m for m, _ in reqs] == ["GET", "GET"]
    assert all("larder-cache-policy" not in h for _, h in reqs)
    bad = get(larder, url, headers=[("Larder-Cache-Policy", "sometimes")])
    assert bad.status == 400


def test_offline_switch_serves_only_from_cache(larder_factory, origin, workdir):
    script(workdir, "off", headers=[("Cache-Control", "max-age=0")], body="o")
    lr = larder_factory(config={"cache": {"offline": True}})
    assert get(lr, origin.url("/res/off")).status == 504
    assert methods(origin, "off") == []


def test_storage_rule_not_allowed_keeps_responses_out(larder_factory, origin, workdir):
    script(workdir, "rule", headers=[("Cache-Control", "max-age=600")], body="r")
    lr = larder_factory(config={"cache": {"rules": [{"path_prefix": "/res/rule", "storage": "not-allowed"}]}})
    url = origin.url("/res/rule")
    get(lr, url)
    resp = get(lr, url)
    assert "storage-policy" in cache_status(resp), cache_status(resp)
    assert methods(origin, "rule") == ["GET", "GET"]


def test_if_match_and_if_unmodified_since_go_to_the_origin(larder, origin, workdir):
    script(workdir, "precond", headers=[("Cache-Control", "max-age=60"), ("ETag", '"v1"')], body="stored")
    url = origin.url("/res/precond")
    assert get(larder, url).body == b"stored"
    for field in [("If-Match", '"v1"'), ("If-Unmodified-Since", http_date(0))]:
        r = get(larder, url, headers=[field])
        assert r.status == 200 and "fwd=bypass" in cache_status(r), cache_status(r)
    assert methods(origin, "precond") == ["GET", "GET", "GET"]
    # The entry is untouched by the bypassed requests.
    assert cache_status(get(larder, url)).startswith("larder; hit")


def wait_for_methods(origin, name, expected, timeout=5.0):
    """The methods the origin saw for /res/NAME once they are ``expected`` (woken by each request
    it logs) or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    while True:
        with origin.logged_cond:
            logged = origin.logged
        got = methods(origin, name)
        left = deadline - time.monotonic()
        if got == expected or left <= 0:
            return got
        with origin.logged_cond:
            origin.logged_cond.wait_for(lambda: origin.logged > logged, left)


def wait_for_fresh_hit(lr, url, body, timeout=5.0):
    """GETs ``url`` until the answer is a hit with ``body`` (a background refresh stores it; a request
    meanwhile may follow the refresh's download instead) or ``timeout`` passed; the last answer."""
    last = []

    def fresh_hit():
        last[:] = [get(lr, url)]
        return last[0].body == body and cache_status(last[0]).startswith("larder; hit")
    wait_until(fresh_hit, timeout, interval=0.02)
    return last[0]


def test_stale_while_revalidate_serves_stale_and_refreshes_in_the_background(larder_factory, origin, workdir,
                                                                            proxy_clock):
    from test_admin import ADMIN, wait_stats  # (test_admin imports this module)
    larder = larder_factory(config=ADMIN)
    cc = ("Cache-Control", "max-age=1, stale-while-revalidate=30")
    script(workdir, "swr", headers=[cc, ("ETag", '"v1"')], body="v1 body", conditional=True)
    url = origin.url("/res/swr")
    assert get(larder, url).body == b"v1 body"
    proxy_clock.advance(2.2)
    # The new version is fresh for long enough that the checks below do not start another refresh.
    script(workdir, "swr", headers=[("Cache-Control", "max-age=60"), ("ETag", '"v2"')], body="v2 body",
           conditional=True)
    stale = get(larder, url)
    assert stale.body == b"v1 body"
    assert "detail=stale-while-revalidate" in cache_status(stale), cache_status(stale)
    # The refresh runs after the client has its answer: HEAD says changed, GET stores the new one.
    assert wait_for_methods(origin, "swr", ["GET", "HEAD", "GET"]) == ["GET", "HEAD", "GET"]
    # Once the refresh is over (see test_revalidation_trips.py's no-validator twin for why).
    assert wait_stats(larder, lambda s: s["detached_fetches_in_flight"] == 0)["detached_fetches_in_flight"] == 0
    fresh = wait_for_fresh_hit(larder, url, b"v2 body")
    assert fresh.body == b"v2 body" and cache_status(fresh).startswith("larder; hit"), cache_status(fresh)
    assert methods(origin, "swr") == ["GET", "HEAD", "GET"]


def test_stale_while_revalidate_unchanged_freshens_the_entry(larder_factory, origin, workdir, proxy_clock):
    from test_admin import ADMIN, wait_stats  # (test_admin imports this module)
    larder = larder_factory(config=ADMIN)
    script(workdir, "swr2", headers=[("Cache-Control", "max-age=1, stale-while-revalidate=30"), ("ETag", '"same"')],
           body="same body", conditional=True)
    url = origin.url("/res/swr2")
    assert get(larder, url).body == b"same body"
    proxy_clock.advance(2.2)
    # Same validators, longer lifetime: the HEAD's fields freshen the entry (RFC 9111 §4.3.5).
    script(workdir, "swr2", headers=[("Cache-Control", "max-age=60"), ("ETag", '"same"')],
           body="same body", conditional=True)
    assert "stale-while-revalidate" in cache_status(get(larder, url))
    assert wait_for_methods(origin, "swr2", ["GET", "HEAD"]) == ["GET", "HEAD"]
    # The background HEAD's answer is in once the refresh is over.
    assert wait_stats(larder, lambda s: s["detached_fetches_in_flight"] == 0)["detached_fetches_in_flight"] == 0
    again = get(larder, url)
    # Freshened by the background HEAD: a plain hit, no new origin request.
    assert cache_status(again).startswith("larder; hit") and "stale" not in cache_status(again), cache_status(again)
    assert again.body == b"same body"
    assert methods(origin, "swr2") == ["GET", "HEAD"]


def test_memory_only_rule_keeps_entries_off_disk(larder_factory, origin, workdir):
    script(workdir, "memonly", headers=[("Cache-Control", "max-age=600")], body="in memory")
    script(workdir, "ondisk", headers=[("Cache-Control", "max-age=600")], body="on disk")
    lr = larder_factory(config={"admin_listen": "127.0.0.1:0",
                                "cache": {"rules": [{"path_prefix": "/res/memonly", "storage": "memory-only"}]}})
    for name in ("memonly", "ondisk"):
        get(lr, origin.url(f"/res/{name}"))
        hit = get(lr, origin.url(f"/res/{name}"))
        assert cache_status(hit).startswith("larder; hit"), cache_status(hit)
    wait_disk_entries(lr, 1)  # the writer committed the disk entry
    lr.stop()
    lr2 = larder_factory(name=lr.name)
    gone = get(lr2, origin.url("/res/memonly"), headers=[("Cache-Control", "only-if-cached")])
    kept = get(lr2, origin.url("/res/ondisk"), headers=[("Cache-Control", "only-if-cached")])
    assert gone.status == 504 and kept.status == 200 and kept.body == b"on disk"


def test_rule_policy_applies_per_url(larder_factory, origin, workdir):
    script(workdir, "ruled", headers=[("Cache-Control", "max-age=0"), ("ETag", '"r"')], body="ruled")
    lr = larder_factory(config={"cache": {"rules": [{"path_prefix": "/res/ruled",
                                                      "policy": "return-cache-data-else-load"}]}})
    url = origin.url("/res/ruled")
    get(lr, url)
    resp = get(lr, url)
    # returnCacheDataElseLoad: the stale entry is served without asking the origin.
    assert resp.body == b"ruled" and cache_status(resp).startswith("larder; hit"), cache_status(resp)
    assert methods(origin, "ruled") == ["GET"]


def test_policy_header_else_load_and_revalidating(larder, origin, workdir):
    script(workdir, "hdr", headers=[("Cache-Control", "max-age=600"), ("ETag", '"h"')], body="h", conditional=True)
    url = origin.url("/res/hdr")
    first = get(larder, url, headers=[("Larder-Cache-Policy", "return-cache-data-else-load")])
    assert first.body == b"h" and "fwd=uri-miss" in cache_status(first)
    hit = get(larder, url, headers=[("Larder-Cache-Policy", "return-cache-data-else-load")])
    assert cache_status(hit).startswith("larder; hit")
    checked = get(larder, url, headers=[("Larder-Cache-Policy", "reload-revalidating-cache-data")])
    assert checked.body == b"h" and "fwd=stale" in cache_status(checked), cache_status(checked)
    assert methods(origin, "hdr") == ["GET", "HEAD"]


def test_conditional_get_revalidation_is_one_round_trip(larder_factory, origin, workdir):
    lr = larder_factory(config={"cache": {"revalidation": "conditional-get"}})
    script(workdir, "cget", headers=[("Cache-Control", "max-age=0"), ("ETag", '"c1"')], body="one", conditional=True)
    url = origin.url("/res/cget")
    get(lr, url)
    same = get(lr, url)
    assert same.body == b"one" and "fwd-status=304" in cache_status(same), cache_status(same)
    script(workdir, "cget", headers=[("Cache-Control", "max-age=0"), ("ETag", '"c2"')], body="two", conditional=True)
    changed = get(lr, url)
    assert changed.body == b"two"
    reqs = seen(origin, "cget")
    assert [m for m, _ in reqs] == ["GET", "GET", "GET"]
    assert reqs[1][1].get("if-none-match") == '"c1"' and reqs[2][1].get("if-none-match") == '"c1"'
    # The changed response replaced the entry: next time it validates with the new tag.
    get(lr, url)
    assert seen(origin, "cget")[3][1].get("if-none-match") == '"c2"'


def test_stale_if_error_serves_stale_when_the_origin_fails(larder, origin, workdir, proxy_clock):
    script(workdir, "sie", headers=[("Cache-Control", "max-age=1, stale-if-error=60"), ("ETag", '"e"')],
           body="kept")
    script(workdir, "sie2", headers=[("Cache-Control", "max-age=1"), ("ETag", '"e"')], body="old")
    url, url2 = origin.url("/res/sie"), origin.url("/res/sie2")
    get(larder, url)
    get(larder, url2)
    proxy_clock.advance(2.2)
    script(workdir, "sie", status=503, body="down")
    script(workdir, "sie2", status=503, body="down")
    resp = get(larder, url)
    assert resp.status == 200 and resp.body == b"kept"
    assert "stale-if-error" in cache_status(resp), cache_status(resp)
    # Without stale-if-error the error goes through.
    assert get(larder, url2).status == 503


def test_a_fresh_entry_without_last_modified_answers_if_modified_since_by_its_date(larder, origin, workdir):
    """RFC 9111 §4.3.2: without Last-Modified the stored Date stands in; not newer than the condition
    is a 304 from the cache, newer is the whole response (it has been modified since)."""
    script(workdir, "nolm", headers=[("Cache-Control", "max-age=600"), ("Date", http_date(-100))], body="dated")
    url = origin.url("/res/nolm")
    assert get(larder, url).body == b"dated"
    later = get(larder, url, headers=[("If-Modified-Since", http_date(-50))])
    assert later.status == 304 and "hit" in cache_status(later), (later.status, cache_status(later))
    earlier = get(larder, url, headers=[("If-Modified-Since", http_date(-3000))])
    assert earlier.status == 200 and earlier.body == b"dated" and "hit" in cache_status(earlier)
    assert methods(origin, "nolm") == ["GET"]
