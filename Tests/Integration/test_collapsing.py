"""Request collapsing: concurrent misses for one URL share one origin fetch (two workers, so
followers on the other thread are covered too)."""

import threading
import time

from helpers import RawClient, _read_head, pattern, proxy_exchange, std_request
from test_cache import cache_status, methods, script


def concurrently(n, fn):
    """Runs fn(i) on n threads started together; returns the results in order."""
    results = [None] * n
    errors = []
    gate = threading.Barrier(n)

    def run(i):
        try:
            gate.wait(10)
            results[i] = fn(i)
        except Exception as e:  # reported below, with the index
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return results


def test_twenty_concurrent_misses_make_one_origin_fetch(larder, origin, workdir):
    size = 300_000
    script(workdir, "many", headers=[("Cache-Control", "max-age=60")], body_bytes=size)
    # The origin waits before answering, so every request arrives while the first is fetching.
    url = origin.url("/res/many?delay=1")
    responses = concurrently(20, lambda i: proxy_exchange(larder.port, "GET", url, timeout=20))
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
           pause_after=50_000, pause=2)
    url = origin.url("/res/stream")
    with RawClient(larder.port, 15) as leader, RawClient(larder.port, 15) as follower:
        leader.send(std_request("GET", url))
        head = _read_head(leader.reader)
        assert head.status == 200
        start = time.monotonic()
        follower.send(std_request("GET", url))
        fhead = _read_head(follower.reader)
        first = follower.reader.read_exact(50_000)
        waited = time.monotonic() - start
        assert "collapsed" in (fhead.header("Cache-Status") or "")
        assert first == pattern(200_000)[:50_000]
        # The first bytes came during the origin's pause, not after the body was complete.
        assert waited < 1.5, waited
        rest = follower.reader.read_exact(150_000)
        assert first + rest == pattern(200_000)
        assert leader.reader.read_exact(200_000) == pattern(200_000)
    assert methods(origin, "stream") == ["GET"]


def test_uncacheable_response_releases_the_waiters_at_once(larder, origin, workdir):
    script(workdir, "nostore", headers=[("Cache-Control", "no-store")], body="private")
    url = origin.url("/res/nostore?delay=1")
    start = time.monotonic()
    responses = concurrently(5, lambda i: proxy_exchange(larder.port, "GET", url, timeout=20))
    elapsed = time.monotonic() - start
    assert all(r.status == 200 and r.body == b"private" for r in responses)
    # Each request went to the origin itself, side by side, not one after another.
    assert methods(origin, "nostore") == ["GET"] * 5
    assert elapsed < 3.5, elapsed
    assert not any("collapsed" in cache_status(r) for r in responses)


def test_followers_keep_their_response_when_the_leader_disconnects(larder, origin, workdir):
    script(workdir, "orphan", headers=[("Cache-Control", "max-age=60")], body_bytes=200_000,
           pause_after=50_000, pause=1)
    url = origin.url("/res/orphan")
    leader = RawClient(larder.port, 15)
    leader.send(std_request("GET", url))
    assert _read_head(leader.reader).status == 200
    with RawClient(larder.port, 15) as follower:
        follower.send(std_request("GET", url))
        fhead = _read_head(follower.reader)
        assert "collapsed" in (fhead.header("Cache-Status") or "")
        leader.close()
        assert follower.reader.read_exact(200_000) == pattern(200_000)
    # The fetch ran to completion without its first client, so the entry was stored.
    deadline = time.monotonic() + 5
    while True:
        again = proxy_exchange(larder.port, "GET", url)
        if cache_status(again).startswith("larder; hit") or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert cache_status(again).startswith("larder; hit"), cache_status(again)
    assert again.body == pattern(200_000)
    assert methods(origin, "orphan") == ["GET"]


def test_follower_with_a_different_vary_header_fetches_alone(larder, origin, workdir):
    script(workdir, "vary", headers=[("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")], body="hej")
    url = origin.url("/res/vary?delay=1")
    langs = ["sv", "en"]
    responses = concurrently(2, lambda i: proxy_exchange(larder.port, "GET", url,
                                                         headers=[("Accept-Language", langs[i])], timeout=20))
    assert all(r.status == 200 and r.body == b"hej" for r in responses)
    assert methods(origin, "vary") == ["GET", "GET"]


def test_collapsing_can_be_switched_off(larder_factory, origin, workdir):
    lr = larder_factory(config={"cache": {"collapse_requests": False}})
    script(workdir, "solo", headers=[("Cache-Control", "max-age=60")], body="solo")
    url = origin.url("/res/solo?delay=1")
    responses = concurrently(3, lambda i: proxy_exchange(lr.port, "GET", url, timeout=20))
    assert all(r.body == b"solo" for r in responses)
    assert methods(origin, "solo") == ["GET"] * 3
