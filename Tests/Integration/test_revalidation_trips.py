"""HEAD revalidation without wasted round trips: what the origin receives, request by request,
when a stale entry is checked.

* An entry with no validator (no ETag, no Last-Modified) is revalidated with one plain GET, whose
  200 replaces it, for clients and background refreshes alike: no HEAD could confirm it.
* A client's HEAD costs one HEAD: its 200 freshens the entry when nothing in it contradicts the
  stored response (validators, length, status; with no validator on either side, the length), and
  otherwise invalidates it and goes to the client as it is.
* A change found by HEAD costs one HEAD and one GET, and says so (Cache-Status
  `detail=revalidated-head-changed`, `larder_cache_revalidated_head_changed_total`).
"""

import re
import time

import pytest

from helpers import concurrently, in_background
from test_admin import admin, wait_stats
from test_cache import cache_status, get, methods, script, seen, wait_for_fresh_hit, wait_for_methods

ADMIN = {"admin_listen": "127.0.0.1:0"}

# Entries go stale by moving the proxy's clock (TestClock), not by waiting.
pytestmark = pytest.mark.usefixtures("proxy_clock")


def head_changed_count(lr):
    status, _, body = admin(lr, "GET", "/metrics")
    assert status == 200
    m = re.search(r"^larder_cache_revalidated_head_changed_total (\d+)$", body.decode(), re.M)
    assert m, "no larder_cache_revalidated_head_changed_total in /metrics"
    return int(m.group(1))


# -- 1. No validator: straight to GET ----------------------------------------------------------


def test_stale_entry_without_validators_is_revalidated_with_one_plain_get(larder, origin, workdir):
    # Fresh for a second: a response stale on arrival without validators is not stored at all.
    script(workdir, "noval", headers=[("Cache-Control", "max-age=1")], body="v1 body")
    url = origin.url("/res/noval")
    assert get(larder, url).body == b"v1 body"
    larder.clock.advance(2.2)
    script(workdir, "noval", headers=[("Cache-Control", "max-age=60"), ("X-Version", "2")], body="v2 body")
    resp = get(larder, url)
    assert resp.status == 200 and resp.body == b"v2 body" and resp.header("X-Version") == "2"
    status = cache_status(resp)
    assert "fwd=stale" in status and "fwd-status=200" in status and "stored" in status, status
    # One GET, with nothing to be conditional on.
    reqs = seen(origin, "noval")
    assert [m for m, _ in reqs] == ["GET", "GET"]
    assert "if-none-match" not in reqs[1][1] and "if-modified-since" not in reqs[1][1]
    # The 200 replaced the entry.
    hit = get(larder, url)
    assert hit.body == b"v2 body" and cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert methods(origin, "noval") == ["GET", "GET"]


def test_entry_with_last_modified_only_is_still_revalidated_with_head(larder, origin, workdir):
    lm = "Tue, 14 Nov 2023 22:13:20 GMT"
    script(workdir, "lmonly", headers=[("Cache-Control", "max-age=0"), ("Last-Modified", lm)], body="lm body")
    url = origin.url("/res/lmonly")
    get(larder, url)
    resp = get(larder, url)
    assert resp.body == b"lm body" and "detail=revalidated-head" in cache_status(resp), cache_status(resp)
    reqs = seen(origin, "lmonly")
    assert [m for m, _ in reqs] == ["GET", "HEAD"] and reqs[1][1].get("if-modified-since") == lm


SWR = ("Cache-Control", "max-age=1, stale-while-revalidate=30")


def stale_then_changed(larder, origin, workdir, name, changed, query="", etag=True, **more):
    """Stores /res/NAME ("v1 body", fresh for a second, then stale-while-revalidate for 30), lets it
    go stale, and changes it at the origin to the fields CHANGED with "v2 body" (MORE: the origin's
    other script options). Returns its URL."""
    script(workdir, name, headers=[SWR] + ([("ETag", '"v1"')] if etag else []), body="v1 body", conditional=True)
    url = origin.url(f"/res/{name}{query}")
    assert get(larder, url).body == b"v1 body"
    larder.clock.advance(2.2)
    script(workdir, name, headers=changed, body="v2 body", conditional=True, **more)
    return url


def test_background_refresh_without_validators_is_one_get(larder_factory, origin, workdir):
    larder = larder_factory(config=ADMIN)
    url = stale_then_changed(larder, origin, workdir, "swrnoval", [("Cache-Control", "max-age=60")], etag=False)
    stale = get(larder, url)
    assert stale.body == b"v1 body" and "detail=stale-while-revalidate" in cache_status(stale), cache_status(stale)
    assert wait_for_methods(origin, "swrnoval", ["GET", "GET"]) == ["GET", "GET"]
    # Asked for once the refresh is over: what is counted is the refresh's own trips. (A request
    # on another worker that looks the URL up just before the new answer is stored and joins just
    # after its fetch left the table leads a fetch of its own: a known window, in the stop's note.)
    assert wait_stats(larder, lambda s: s["detached_fetches_in_flight"] == 0)["detached_fetches_in_flight"] == 0
    fresh = wait_for_fresh_hit(larder, url, b"v2 body")
    assert fresh.body == b"v2 body" and cache_status(fresh).startswith("larder; hit"), cache_status(fresh)
    assert methods(origin, "swrnoval") == ["GET", "GET"]


@pytest.mark.parametrize("validated", [True, False], ids=["head-then-get", "plain-get"])
def test_requests_during_a_background_refresh_of_a_changed_entry_follow_it(larder_factory, origin, workdir,
                                                                          validated):
    # The changed answer's body arrives slowly. The refresh removed the outdated entry when the
    # origin said it changed; requests meanwhile, on either worker, follow the refresh's download
    # and get the new response, and none of them fetches the URL again. (Each used to miss and
    # fetch it on its own.)
    larder = larder_factory(config=ADMIN)
    name = f"swrslow{int(validated)}"
    url = stale_then_changed(larder, origin, workdir, name,
                             [("Cache-Control", "max-age=60")] + ([("ETag", '"v2"')] if validated else []),
                             etag=validated, pause_after=2, pause_until=name)
    assert "stale-while-revalidate" in cache_status(get(larder, url))
    trips = ["GET", "HEAD", "GET"] if validated else ["GET", "GET"]
    assert wait_for_methods(origin, name, trips) == trips
    # The origin holds the rest of the new body until the eight have joined the download.
    meanwhile = in_background(lambda: concurrently(8, lambda i: get(larder, url)))
    wait_stats(larder, lambda s: s["collapsed_requests"] >= 8)
    origin.open_gate(name)
    for r in meanwhile():
        assert r.body == b"v2 body" and "collapsed" in cache_status(r), cache_status(r)
    hit = get(larder, url)
    assert hit.body == b"v2 body" and cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert methods(origin, name) == trips


def test_a_request_between_a_background_head_and_its_get_follows_the_get(larder_factory, origin, workdir):
    # HEAD says changed; the GET that follows is slow to answer at all. A request in between
    # finds the entry gone and waits for that GET instead of sending its own.
    larder = larder_factory(config=ADMIN)
    origin.open_gate("swrgap", passes=2)  # the first GET and the HEAD; the origin holds the next GET
    url = stale_then_changed(larder, origin, workdir, "swrgap", [("Cache-Control", "max-age=60"), ("ETag", '"v2"')],
                             query="?hold=swrgap")
    assert "stale-while-revalidate" in cache_status(get(larder, url))
    assert wait_for_methods(origin, "swrgap", ["GET", "HEAD", "GET"]) == ["GET", "HEAD", "GET"]
    during = in_background(lambda: get(larder, url))
    wait_stats(larder, lambda s: s["collapsed_requests"] >= 1)
    origin.open_gate("swrgap")
    during = during()
    assert during.body == b"v2 body" and "collapsed" in cache_status(during), cache_status(during)
    assert methods(origin, "swrgap") == ["GET", "HEAD", "GET"]


def test_followers_of_a_background_refresh_whose_new_answer_is_not_stored_fetch_on_their_own(larder_factory, origin,
                                                                                              workdir):
    # HEAD says changed; the GET's answer may not be stored (no-store), so it is shared with no
    # one: the request waiting for it is released at its head and fetches on its own, promptly.
    larder = larder_factory(config=ADMIN)
    origin.open_gate("swrrel", passes=2)  # the first GET and the HEAD; the origin holds the next GET
    url = stale_then_changed(larder, origin, workdir, "swrrel", [("Cache-Control", "no-store"), ("ETag", '"v2"')],
                             query="?hold=swrrel")
    assert "stale-while-revalidate" in cache_status(get(larder, url))
    assert wait_for_methods(origin, "swrrel", ["GET", "HEAD", "GET"]) == ["GET", "HEAD", "GET"]
    during = in_background(lambda: get(larder, url))
    wait_stats(larder, lambda s: s["collapsed_requests"] >= 1)  # it waits for the refresh's GET
    start = time.monotonic()
    origin.open_gate("swrrel")
    during = during()
    elapsed = time.monotonic() - start
    assert during.body == b"v2 body" and "collapsed" not in cache_status(during), cache_status(during)
    assert elapsed < 3.5, elapsed
    assert methods(origin, "swrrel") == ["GET", "HEAD", "GET", "GET"]


def test_a_head_in_the_stale_while_revalidate_window_starts_no_refresh(larder, origin, workdir):
    # A refresh carries the triggering request's fields, and an answer to a HEAD cannot be stored:
    # refreshed for it, a changed entry would only be removed. The next GET refreshes.
    url = stale_then_changed(larder, origin, workdir, "swrhead", [("Cache-Control", "max-age=60"), ("ETag", '"v2"')])
    head = get(larder, url, method="HEAD")
    assert head.status == 200 and "stale-while-revalidate" in cache_status(head), cache_status(head)
    # (A refresh for the HEAD would have removed the changed entry: the GET below would miss.)
    assert methods(origin, "swrhead") == ["GET"]
    stale = get(larder, url)
    assert stale.body == b"v1 body" and "stale-while-revalidate" in cache_status(stale), cache_status(stale)
    assert wait_for_methods(origin, "swrhead", ["GET", "HEAD", "GET"]) == ["GET", "HEAD", "GET"]


@pytest.mark.parametrize("answer", ["cut", "no-store"])
def test_a_background_refresh_that_stores_nothing_new_removes_the_outdated_entry(larder_factory, origin, workdir,
                                                                                 answer):
    # The origin said the entry changed but no new response got stored (its body was cut, or it
    # may not be stored): the old one must not outlive the refresh.
    larder = larder_factory(config=ADMIN)
    name = f"swrgone{answer}"
    if answer == "cut":
        url = stale_then_changed(larder, origin, workdir, name, [("Cache-Control", "max-age=60")], etag=False,
                                 reset_after=3)
    else:
        url = stale_then_changed(larder, origin, workdir, name, [("Cache-Control", "no-store")], etag=False)
    assert "stale-while-revalidate" in cache_status(get(larder, url))
    assert wait_for_methods(origin, name, ["GET", "GET"]) == ["GET", "GET"]
    if answer == "cut":
        assert len(origin.wait_ended(1)) == 1  # the origin cut the refresh's answer
    # The origin reads its script after logging the request: it changes once the refresh is over.
    assert wait_stats(larder, lambda s: s["detached_fetches_in_flight"] == 0)["detached_fetches_in_flight"] == 0
    script(workdir, name, headers=[("Cache-Control", "max-age=60")], body="v3 body")
    deadline = time.monotonic() + 5
    while True:
        try:
            after = get(larder, url)
        except (ConnectionResetError, EOFError):
            # Arrived while the cut refresh was still being taken down: it followed that download
            # and was cut with it, as a follower of a cut fetch must be. Ask again.
            after = None
        if (after is not None and after.body != b"v1 body") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert after is not None and after.body == b"v3 body" and "fwd=uri-miss" in cache_status(after), cache_status(after)


# -- 2. A client's HEAD: one HEAD ------------------------------------------------------------


def test_client_head_for_a_changed_entry_is_one_head_and_invalidates(larder, origin, workdir):
    script(workdir, "headchg", headers=[("Cache-Control", "max-age=0"), ("ETag", '"v1"')], body="old",
           conditional=True)
    url = origin.url("/res/headchg")
    assert get(larder, url).body == b"old"
    script(workdir, "headchg", headers=[("Cache-Control", "max-age=60"), ("ETag", '"v2"'), ("X-Version", "2")],
           body="new body", conditional=True)
    resp = get(larder, url, method="HEAD")
    reqs = seen(origin, "headchg")
    assert [m for m, _ in reqs] == ["GET", "HEAD"]
    assert reqs[1][1].get("if-none-match") == '"v1"'
    # The origin's answer to the HEAD, as it is.
    assert resp.status == 200 and resp.body == b""
    assert resp.header("ETag") == '"v2"' and resp.header("X-Version") == "2" and resp.header("Content-Length") == "8"
    status = cache_status(resp)
    assert "fwd=stale" in status and "fwd-status=200" in status and "detail=revalidated-head-changed" in status, status
    # Invalidated: the next GET is a miss, not the old body.
    after = get(larder, url)
    assert after.body == b"new body" and "fwd=uri-miss" in cache_status(after), cache_status(after)
    assert methods(origin, "headchg") == ["GET", "HEAD", "GET"]


def test_client_head_for_an_entry_without_validators_freshens_it_when_nothing_contradicts(larder, origin, workdir):
    # RFC 9111 §4.3.5: no validator on either side, the same length, a 200: the HEAD's fields
    # update the stored ones, those it does not carry are kept.
    script(workdir, "headnoval", headers=[("Cache-Control", "max-age=1"), ("Template-A", "1"), ("Template-B", "1")],
           body="old")
    url = origin.url("/res/headnoval")
    get(larder, url)
    larder.clock.advance(2.2)
    script(workdir, "headnoval", headers=[("Cache-Control", "max-age=1000"), ("Template-A", "2")], body="new")
    resp = get(larder, url, method="HEAD")
    assert methods(origin, "headnoval") == ["GET", "HEAD"]
    assert resp.status == 200 and resp.header("Content-Length") == "3" and resp.body == b""
    assert resp.header("Template-A") == "2" and resp.header("Template-B") == "1"
    assert "detail=revalidated-head" in cache_status(resp) and "changed" not in cache_status(resp), cache_status(resp)
    # Fresh again, with the new fields: served from the cache (the stored body, which the HEAD
    # could not see change).
    hit = get(larder, url)
    assert cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert hit.body == b"old" and hit.header("Template-A") == "2" and hit.header("Template-B") == "1"
    assert methods(origin, "headnoval") == ["GET", "HEAD"]


@pytest.mark.parametrize("case", ["credentials, 200", "credentials, 304", "private 304", "cookie, no validators"])
def test_an_answer_that_is_one_users_never_updates_the_shared_entry(larder, origin, workdir, case):
    # An answer given to a request with credentials (or, for a HEAD's 200, which carries every field,
    # a Cookie), or one that says private, may carry that user's fields: it confirms the entry to
    # that client, who is served the entry as stored, and the entry stays as it was for the others.
    validators = [] if case == "cookie, no validators" else [("ETag", '"a"')]
    script(workdir, "oneuser", headers=[("Cache-Control", "max-age=1")] + validators, body="shared")
    url = origin.url("/res/oneuser")
    get(larder, url)
    larder.clock.advance(2.2)
    answer_cc = "private, max-age=1000" if case == "private 304" else "max-age=1000"
    # "conditional": the origin answers the HEAD's If-None-Match with a 304, as real servers do.
    script(workdir, "oneuser", headers=[("Cache-Control", answer_cc), ("X-User", "alice")] + validators,
           body="shared", conditional=case.endswith("304"))
    ask = {"credentials, 200": [("Authorization", "Basic YWxpY2U6cHc=")],
           "credentials, 304": [("Authorization", "Basic YWxpY2U6cHc=")],
           "private 304": [], "cookie, no validators": [("Cookie", "session=alice")]}[case]
    resp = get(larder, url, method="HEAD", headers=ask)
    assert resp.status == 200 and resp.header("X-User") is None, (resp.header("X-User"), cache_status(resp))
    assert "detail=revalidated-not-stored" in cache_status(resp), cache_status(resp)
    # Still stale for everyone else: the next request checks again, and never sees alice's field.
    script(workdir, "oneuser", headers=[("Cache-Control", "max-age=1000")] + validators, body="shared",
           conditional=bool(validators))
    after = get(larder, url)
    assert after.body == b"shared" and after.header("X-User") is None, after.header("X-User")
    assert "fwd=stale" in cache_status(after), cache_status(after)
    assert methods(origin, "oneuser")[:3] == ["GET", "HEAD", "HEAD" if validators else "GET"]


def test_a_head_answer_cannot_relabel_the_stored_bytes(larder, origin, workdir):
    # The same length and no validator, but another media type: a client asking for text/html must
    # not turn a stored JSON document into an HTML page for everyone.
    script(workdir, "relabel", headers=[("Cache-Control", "max-age=1"), ("Content-Type", "application/json")],
           body='{"q":"<img src=x onerror=alert(1)>"}')
    url = origin.url("/res/relabel")
    get(larder, url)
    larder.clock.advance(2.2)
    script(workdir, "relabel", headers=[("Cache-Control", "max-age=600"), ("Content-Type", "text/html")],
           body='{"q":"<img src=x onerror=alert(1)>"}')
    resp = get(larder, url, method="HEAD", headers=[("Accept", "text/html")])
    assert "detail=revalidated-head-changed" in cache_status(resp), cache_status(resp)
    after = get(larder, url)
    assert "fwd=uri-miss" in cache_status(after), cache_status(after)


@pytest.mark.parametrize("change", ["length", "status 410", "new validator"])
def test_client_head_for_an_entry_without_validators_that_contradicts_it_invalidates(larder, origin, workdir, change):
    script(workdir, "headcontra", headers=[("Cache-Control", "max-age=1")], body="old")
    url = origin.url("/res/headcontra")
    get(larder, url)
    larder.clock.advance(2.2)
    if change == "length":
        script(workdir, "headcontra", headers=[("Cache-Control", "max-age=1000")], body="longer")
    elif change == "status 410":
        script(workdir, "headcontra", status=410, headers=[("Cache-Control", "max-age=1000")], body="old")
    else:
        script(workdir, "headcontra", headers=[("Cache-Control", "max-age=1000"), ("ETag", '"n"')], body="old")
    resp = get(larder, url, method="HEAD")
    assert methods(origin, "headcontra") == ["GET", "HEAD"]
    assert "detail=revalidated-head-changed" in cache_status(resp), cache_status(resp)
    # The origin's answer, as it is; the entry is gone.
    assert resp.status == (410 if change == "status 410" else 200)
    assert "fwd=uri-miss" in cache_status(get(larder, url))
    assert methods(origin, "headcontra") == ["GET", "HEAD", "GET"]


def test_client_head_for_an_unchanged_entry_freshens_it(larder, origin, workdir):
    script(workdir, "headsame", headers=[("Cache-Control", "max-age=0"), ("ETag", '"s"'), ("X-Version", "1")],
           body="same body")
    url = origin.url("/res/headsame")
    get(larder, url)
    # Same validator, new fields and lifetime: the HEAD's 200 freshens the stored head.
    script(workdir, "headsame", headers=[("Cache-Control", "max-age=60"), ("ETag", '"s"'), ("X-Version", "2")],
           body="same body")
    resp = get(larder, url, method="HEAD")
    assert resp.status == 200 and resp.header("X-Version") == "2" and resp.header("Content-Length") == "9"
    assert "detail=revalidated-head" in cache_status(resp), cache_status(resp)
    assert methods(origin, "headsame") == ["GET", "HEAD"]
    hit = get(larder, url)
    assert hit.body == b"same body" and hit.header("X-Version") == "2"
    assert cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert methods(origin, "headsame") == ["GET", "HEAD"]


# -- 3. A change found by HEAD: one HEAD, one GET, reported ---------------------------------------


def test_change_found_by_head_is_one_head_one_get_and_reported(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "hchg", headers=[("Cache-Control", "max-age=0"), ("ETag", '"v1"')], body="old", conditional=True)
    url = origin.url("/res/hchg")
    assert get(lr, url).body == b"old"
    assert head_changed_count(lr) == 0
    script(workdir, "hchg", headers=[("Cache-Control", "max-age=60"), ("ETag", '"v2"')], body="new!",
           conditional=True)
    resp = get(lr, url)
    assert resp.body == b"new!"
    status = cache_status(resp)
    assert "fwd=stale" in status and "fwd-status=200" in status and "stored" in status, status
    assert "detail=revalidated-head-changed" in status, status
    reqs = seen(origin, "hchg")
    assert [m for m, _ in reqs] == ["GET", "HEAD", "GET"]
    # The GET is plain: the client asked for nothing conditional.
    assert "if-none-match" not in reqs[2][1]
    assert head_changed_count(lr) == 1
    # The new response is stored: no further HEAD or GET.
    hit = get(lr, url)
    assert hit.body == b"new!" and cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert methods(origin, "hchg") == ["GET", "HEAD", "GET"]


def test_change_found_by_a_background_head_is_counted(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "bgchg", headers=[("Cache-Control", "max-age=1, stale-while-revalidate=30"), ("ETag", '"v1"')],
           body="v1 body", conditional=True)
    url = origin.url("/res/bgchg")
    get(lr, url)
    lr.clock.advance(2.2)
    script(workdir, "bgchg", headers=[("Cache-Control", "max-age=60"), ("ETag", '"v2"')], body="v2 body",
           conditional=True)
    assert "stale-while-revalidate" in cache_status(get(lr, url))
    assert wait_for_methods(origin, "bgchg", ["GET", "HEAD", "GET"]) == ["GET", "HEAD", "GET"]
    deadline = time.monotonic() + 5
    while head_changed_count(lr) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert head_changed_count(lr) == 1


# -- 4. The per-origin connection limit holds while connections rest after HEAD answers --------


def test_head_revalidations_under_load_stay_within_the_connection_limit(larder_factory, origin, workdir):
    # After a HEAD answer a connection rests for one loop turn before reuse (stray bytes behind a
    # body-less answer). Resting connections still count against http_maximum_connections_per_host:
    # opening more meanwhile broke the limit, and the extra connections were closed again at once
    # (more than may idle), a connect and a close per revalidation under load.
    lr = larder_factory(config={"workers": 1, "session": {"http_maximum_connections_per_host": 4,
                                                          "max_idle_connections_per_host": 4}})
    script(workdir, "limit", headers=[("Cache-Control", "max-age=0"), ("ETag", '"v1"')], body="limited")
    clients = 24
    urls = [origin.url(f"/res/limit?c={i}&delay=0.01") for i in range(clients)]
    assert all(r.body == b"limited" for r in concurrently(clients, lambda i: get(lr, urls[i])))
    answers = concurrently(clients, lambda i: [get(lr, urls[i]) for _ in range(4)])
    failures = [(urls[i], r.status, cache_status(r)) for i, rs in enumerate(answers) for r in rs
                if r.status != 200 or r.body != b"limited" or "revalidated" not in cache_status(r)]
    assert not failures, failures[:5]
    reqs = [r for r in origin.requests() if r.get("path") == "/res/limit"]
    assert [r["method"] for r in reqs].count("HEAD") == 4 * clients
    conns = {r["conn"] for r in reqs}
    assert len(conns) <= 4, f"{len(conns)} origin connections with a limit of 4"
