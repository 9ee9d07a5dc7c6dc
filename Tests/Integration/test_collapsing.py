"""Request collapsing: concurrent misses for one URL share one origin fetch (two workers, so
followers on the other thread are covered too)."""

import json
import time

import pytest

from helpers import (RawClient, _read_head, concurrently, in_background, pattern, proxy_exchange, std_request,
                     wait_for_file)
from test_admin import ADMIN, stats, wait_stats
from test_cache import cache_status, methods, script



def until_hit(port, url, headers=(), timeout=5.0):
    """GETs URL until the answer is a hit (a store commits in the background) or TIMEOUT passes;
    returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        r = proxy_exchange(port, "GET", url, headers=headers)
        if cache_status(r).startswith("larder; hit") or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def joined(lr, n, timeout=10):
    """Waits until ``n`` requests have joined another's origin fetch (as followers) in all; the count."""
    return wait_stats(lr, lambda s: s["collapsed_requests"] >= n, timeout=timeout)["collapsed_requests"]


def burst(lr, url, n, headers=()):
    """``n`` concurrent GETs of ``url``, in the background: a function that waits for their answers."""
    return in_background(lambda: concurrently(n, lambda i: proxy_exchange(lr.port, "GET", url, headers=headers,
                                                                          timeout=20)))


def test_twenty_concurrent_misses_make_one_origin_fetch(larder_factory, origin, workdir):
    larder = larder_factory(config=ADMIN)
    size = 300_000
    script(workdir, "many", headers=[("Cache-Control", "max-age=60")], body_bytes=size)
    # The origin holds its answer until every other request has joined the first one's fetch.
    url = origin.url("/res/many?hold=many")
    answers = burst(larder, url, 20)
    joined(larder, 19)
    origin.open_gate("many")
    responses = answers()
    expected = pattern(size)
    assert all(r.status == 200 and r.body == expected for r in responses)
    assert methods(origin, "many") == ["GET"]
    statuses = [cache_status(r) for r in responses]
    assert sum("collapsed" in s for s in statuses) == 19, statuses
    assert sum("stored" in s for s in statuses) == 1, statuses
    # And the entry is a plain hit afterwards.
    again = proxy_exchange(larder.port, "GET", url)
    assert cache_status(again).startswith("larder; hit") and again.body == expected


def test_followers_stream_while_the_fetch_is_still_running(larder, origin, workdir):
    script(workdir, "stream", headers=[("Cache-Control", "max-age=60")], body_bytes=200_000,
           pause_after=50_000, pause_until="stream")
    url = origin.url("/res/stream")
    with RawClient(larder.port, 15) as leader, RawClient(larder.port, 15) as follower:
        leader.send(std_request("GET", url))
        head = _read_head(leader.reader)
        assert head.status == 200
        follower.send(std_request("GET", url))
        fhead = _read_head(follower.reader)
        # The first bytes come while the origin holds the rest back, not after the body is complete.
        first = follower.reader.read_exact(50_000)
        assert "collapsed" in (fhead.header("Cache-Status") or "")
        assert first == pattern(200_000)[:50_000]
        origin.open_gate("stream")
        rest = follower.reader.read_exact(150_000)
        assert first + rest == pattern(200_000)
        assert leader.reader.read_exact(200_000) == pattern(200_000)
    assert methods(origin, "stream") == ["GET"]


def test_uncacheable_response_releases_the_waiters_at_once(larder_factory, origin, workdir):
    larder = larder_factory(config=ADMIN)
    script(workdir, "nostore", headers=[("Cache-Control", "no-store")], body="private")
    url = origin.url("/res/nostore?hold=nostore")
    answers = burst(larder, url, 5)
    joined(larder, 4)
    # The first request's answer says no-store: the four waiting for it go to the origin themselves,
    # side by side (all four are there while the gate is shut again), not one after another.
    origin.open_gate("nostore", passes=1)
    assert len(origin.wait_requests(5, timeout=10)) == 5, methods(origin, "nostore")
    origin.open_gate("nostore")
    responses = answers()
    assert all(r.status == 200 and r.body == b"private" for r in responses)
    assert methods(origin, "nostore") == ["GET"] * 5
    assert not any("collapsed" in cache_status(r) for r in responses)


def test_followers_keep_their_response_when_the_leader_disconnects(larder, origin, workdir):
    script(workdir, "orphan", headers=[("Cache-Control", "max-age=60")], body_bytes=200_000,
           pause_after=50_000, pause_until="orphan")
    url = origin.url("/res/orphan")
    leader = RawClient(larder.port, 15)
    leader.send(std_request("GET", url))
    assert _read_head(leader.reader).status == 200
    with RawClient(larder.port, 15) as follower:
        follower.send(std_request("GET", url))
        fhead = _read_head(follower.reader)
        assert "collapsed" in (fhead.header("Cache-Status") or "")
        leader.close()
        # The rest of the body comes after the leader has gone (Larder finds out writing to it).
        origin.open_gate("orphan")
        assert follower.reader.read_exact(200_000) == pattern(200_000)
    # The fetch ran to completion without its first client, so the entry was stored.
    again = until_hit(larder.port, url)
    assert cache_status(again).startswith("larder; hit"), cache_status(again)
    assert again.body == pattern(200_000)
    assert methods(origin, "orphan") == ["GET"]


def test_follower_with_a_different_vary_header_fetches_alone(larder_factory, origin, workdir):
    larder = larder_factory(config=ADMIN)
    script(workdir, "vary", headers=[("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")], body="hej")
    url = origin.url("/res/vary?hold=vary")
    sv = burst(larder, url, 1, headers=[("Accept-Language", "sv")])
    assert len(origin.wait_requests(1)) == 1
    en = burst(larder, url, 1, headers=[("Accept-Language", "en")])
    joined(larder, 1)  # the second waits for the first one's head, then finds it varies
    origin.open_gate("vary")
    responses = sv() + en()
    assert all(r.status == 200 and r.body == b"hej" for r in responses)
    assert methods(origin, "vary") == ["GET", "GET"]


def test_collapsing_can_be_switched_off(larder_factory, origin, workdir):
    lr = larder_factory(config={"cache": {"collapse_requests": False}})
    script(workdir, "solo", headers=[("Cache-Control", "max-age=60")], body="solo")
    url = origin.url("/res/solo?hold=solo")
    answers = burst(lr, url, 3)
    # All three reach the origin while it holds the first.
    assert len(origin.wait_requests(3, timeout=10)) == 3, methods(origin, "solo")
    origin.open_gate("solo")
    responses = answers()
    assert all(r.body == b"solo" for r in responses)
    assert methods(origin, "solo") == ["GET"] * 3


def test_an_uncacheable_url_is_remembered_so_later_bursts_do_not_queue(larder_factory, origin, workdir):
    larder = larder_factory(config=ADMIN)
    script(workdir, "passmark", headers=[("Cache-Control", "no-store")], body="fresh each time")
    url = origin.url("/res/passmark?hold=passmark")
    # The first burst finds out: its followers wait for the leader's head, then fetch at once.
    answers = burst(larder, url, 5)
    joined(larder, 4)
    origin.open_gate("passmark")
    first = answers()
    assert all(r.status == 200 for r in first)
    # Later bursts know the URL is not stored: every request goes to the origin side by side (all
    # five are there while it holds them), none waits for another.
    origin.open_gate("passmark", shut=True)
    answers = burst(larder, url, 5)
    assert len(origin.wait_requests(10, timeout=10)) == 10, methods(origin, "passmark")
    origin.open_gate("passmark")
    later = answers()
    assert all(r.status == 200 and r.body == b"fresh each time" for r in later)
    assert stats(larder)["collapsed_requests"] == 4
    assert not any("collapsed" in cache_status(r) for r in later), [cache_status(r) for r in later]
    assert methods(origin, "passmark") == ["GET"] * 10


def test_a_url_that_becomes_cacheable_is_collapsed_again(larder_factory, origin, workdir):
    larder = larder_factory(config=ADMIN)
    script(workdir, "turns", headers=[("Cache-Control", "no-store")], body="x")
    url = origin.url("/res/turns")
    assert proxy_exchange(larder.port, "GET", url).status == 200
    # Now storable: the response is stored, the marker goes, and concurrent misses share a fetch.
    script(workdir, "turns", headers=[("Cache-Control", "max-age=60")], body_bytes=100_000)
    r = proxy_exchange(larder.port, "GET", url)
    assert r.status == 200 and "stored" in cache_status(r), cache_status(r)
    slow = origin.url("/res/turns?hold=turns")
    script(workdir, "turns", headers=[("Cache-Control", "max-age=60")], body_bytes=100_000)
    answers = burst(larder, slow, 5)
    joined(larder, 4)
    origin.open_gate("turns")
    statuses = [cache_status(x) for x in answers()]
    assert sum("collapsed" in s for s in statuses) == 4, statuses


DISK_ONLY = {"cache": {"memory_max_object_size": "1KiB"}}   # the bodies below live on disk only


def test_a_url_marked_pass_is_found_on_disk_once_stored(larder_factory, origin, workdir):
    # A pass marker must never hide what gets stored: the first stored answer clears it, and the
    # next request finds the response on disk (a lookup that trusted the marker would not).
    lr = larder_factory(config=DISK_ONLY)
    body = "d" * 3000
    script(workdir, "skipdisk", headers=[("Cache-Control", "no-store")], body=body)
    url = origin.url("/res/skipdisk")
    for _ in range(2):
        r = proxy_exchange(lr.port, "GET", url)
        assert r.body == body.encode() and "fwd=uri-miss" in cache_status(r), cache_status(r)
    script(workdir, "skipdisk", headers=[("Cache-Control", "max-age=60")], body=body)
    r = proxy_exchange(lr.port, "GET", url)
    assert "stored" in cache_status(r), cache_status(r)
    hit = until_hit(lr.port, url)
    assert hit.body == body.encode() and cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert methods(origin, "skipdisk") == ["GET"] * 3


def test_a_variant_not_stored_does_not_hide_the_variants_on_disk(larder_factory, origin, workdir):
    # A Vary miss answered no-store marks the URL pass, but something is stored for it: the other
    # variants' lookups must still read the disk, however the marker is used.
    lr = larder_factory(config=DISK_ONLY)
    body = "v" * 3000
    vary = [("Vary", "Accept-Language")]
    script(workdir, "varypass", headers=[("Cache-Control", "max-age=60")] + vary, body=body)
    url = origin.url("/res/varypass")
    en, fr = [("Accept-Language", "en")], [("Accept-Language", "fr")]
    assert "stored" in cache_status(proxy_exchange(lr.port, "GET", url, headers=en))
    assert cache_status(until_hit(lr.port, url, headers=en)).startswith("larder; hit"), "never served from disk"
    script(workdir, "varypass", headers=[("Cache-Control", "no-store")] + vary, body=body)
    for _ in range(2):
        r = proxy_exchange(lr.port, "GET", url, headers=fr)
        assert "fwd=vary-miss" in cache_status(r), cache_status(r)
    hit = proxy_exchange(lr.port, "GET", url, headers=en)
    assert hit.body == body.encode() and cache_status(hit).startswith("larder; hit"), cache_status(hit)
    assert methods(origin, "varypass") == ["GET"] * 3


def test_a_background_refresh_that_stores_a_changed_answer_lets_the_url_collapse_again(larder_factory, origin, workdir,
                                                                                        proxy_clock):
    # A Vary miss answered no-store marks the URL pass; the stored variant's background refresh then
    # stores a changed answer, which clears the marker as any stored answer does: a burst of misses
    # for another variant shares one fetch again instead of each going to the origin.
    larder = larder_factory(config=ADMIN)  # its statistics say when the refresh is over
    vary = [("Vary", "Accept-Language")]
    en, fr, de = [("Accept-Language", "en")], [("Accept-Language", "fr")], [("Accept-Language", "de")]
    script(workdir, "refreshpass", headers=[("Cache-Control", "max-age=1, stale-while-revalidate=60"),
                                            ("ETag", '"one"')] + vary, body="one")
    url = origin.url("/res/refreshpass")
    assert "stored" in cache_status(proxy_exchange(larder.port, "GET", url, headers=en))
    assert cache_status(until_hit(larder.port, url, headers=en)).startswith("larder; hit")
    script(workdir, "refreshpass", headers=[("Cache-Control", "no-store")] + vary, body="not kept")
    r = proxy_exchange(larder.port, "GET", url, headers=fr)
    assert r.body == b"not kept" and "detail=no-store" in cache_status(r), cache_status(r)   # marked pass now
    script(workdir, "refreshpass", headers=[("Cache-Control", "max-age=60"), ("ETag", '"two"')] + vary,
           body="two" * 20, pause_after=10, pause_until="refresh")
    proxy_clock.advance(1.2)   # en is stale, inside stale-while-revalidate
    asked = len(origin.requests())
    r = proxy_exchange(larder.port, "GET", url, headers=en)
    assert "stale-while-revalidate" in cache_status(r) and r.body == b"one", cache_status(r)
    # No request for the URL until the refresh is done: a miss meanwhile would clear the marker itself.
    # The refresh's HEAD and GET reach the origin, then it runs with no client until stored.
    assert len(origin.wait_requests(asked + 2)) == asked + 2
    s = wait_stats(larder, lambda s: s["detached_fetches_in_flight"] == 1)
    assert s["detached_fetches_in_flight"] == 1, s
    origin.open_gate("refresh")
    s = wait_stats(larder, lambda s: s["detached_fetches_in_flight"] == 0, timeout=10)
    assert s["detached_fetches_in_flight"] == 0, s
    r = proxy_exchange(larder.port, "GET", url, headers=en)
    assert r.body == b"two" * 20 and cache_status(r).startswith("larder; hit"), cache_status(r)
    # The burst's fetch is held at the origin until the other three have joined it, however slow
    # the machine: a URL still marked pass would send each to the origin, and none would join.
    script(workdir, "refreshpass", headers=[("Cache-Control", "max-age=60"), ("ETag", '"two"')] + vary,
           body="two" * 20, pause_after=10, pause_until="burst")
    before = stats(larder)["collapsed_requests"]
    answers = burst(larder, url, 4, headers=de)
    assert joined(larder, before + 3) >= before + 3
    origin.open_gate("burst")
    statuses = [cache_status(x) for x in answers()]
    assert sum("collapsed" in s for s in statuses) == 3, statuses


def test_released_followers_are_logged_as_misses_not_collapsed(larder_factory, origin, workdir):
    log = workdir / "access.log"
    lr = larder_factory(config={**ADMIN, "access_log": str(log), "access_log_format": "json"})
    script(workdir, "relog", headers=[("Cache-Control", "no-store")], body="x")
    url = origin.url("/res/relog?hold=relog")
    answers = burst(lr, url, 4)
    joined(lr, 3)
    origin.open_gate("relog")
    answers()
    def logged():
        text = log.read_text() if log.exists() else ""
        return [json.loads(line) for line in text.splitlines() if "/res/relog" in line]
    wait_for_file(log, lambda: len(logged()) >= 4)
    lines = logged()
    assert len(lines) == 4, lines
    assert not any(entry.get("cache") == "collapsed" for entry in lines), lines


@pytest.mark.parametrize("durability", ["fast", "safe"])
def test_a_large_object_is_a_hit_right_after_its_download(larder_factory, origin, workdir, durability):
    larder = larder_factory(config={"cache": {"durability": durability}})
    size = 24 << 20
    script(workdir, "justdone", headers=[("Cache-Control", "max-age=600")], body_bytes=size)
    url = origin.url("/res/justdone")
    first = proxy_exchange(larder.port, "GET", url, timeout=30)
    assert first.status == 200 and len(first.body) == size
    # At once: the disk writer may not have committed the entry yet; the request waits for it.
    again = proxy_exchange(larder.port, "GET", url, timeout=30)
    assert again.status == 200 and again.body == pattern(size)
    assert methods(origin, "justdone") == ["GET"], cache_status(again)
    assert cache_status(again).startswith("larder; hit"), cache_status(again)


def test_a_conditional_miss_does_not_stop_collapsing(larder_factory, origin, workdir):
    # A client revalidating its own copy (If-None-Match) on a Larder miss gets a 304, which is not
    # stored; that must not mark a cacheable URL uncacheable for 30 s.
    larder = larder_factory(config=ADMIN)
    script(workdir, "pm304", headers=[("Cache-Control", "max-age=60"), ("ETag", '"v1"')],
           body_bytes=100_000, conditional=True)
    url = origin.url("/res/pm304?hold=pm304")
    origin.open_gate("pm304", passes=1)
    r = proxy_exchange(larder.port, "GET", url, headers=[("If-None-Match", '"v1"')], timeout=20)
    assert r.status == 304
    answers = burst(larder, url, 5)
    joined(larder, 4)
    origin.open_gate("pm304")
    statuses = [cache_status(x) for x in answers()]
    assert sum("collapsed" in s for s in statuses) == 4, statuses
