"""Ranged misses fill the cache: for a cacheable URL Larder fetches the whole object once (without
the client's `Range`), stores it, and answers the range from it as it streams, so the next ranged
request — a download manager's, `apt` resuming, a media player's — is a hit."""

import time

import pytest

from helpers import RawClient, pattern, proxy_exchange
from test_cache import cache_status, methods, script, seen

SIZE = 3 << 20

# Clients that asked for a range and stay connected: a fill runs on past the client's range only
# while its client's connection is open (closed, the fill is judged as an aborted download).
_STAYING = []


@pytest.fixture(autouse=True)
def staying_clients():
    yield _STAYING
    while _STAYING:
        _STAYING.pop().close()


def ranged(lr, url, spec, timeout=15):
    """The range, on a connection that stays open until the test ends."""
    c = RawClient(lr.port, timeout=timeout)
    _STAYING.append(c)
    return c.request("GET", url, headers=[("Range", f"bytes={spec}")])


def eventually_a_hit(lr, url, spec):
    """The range from the cache once the object is stored (the fill runs on after the first answer)."""
    deadline = time.monotonic() + 10
    while True:
        r = proxy_exchange(lr.port, "GET", url, headers=[("Range", f"bytes={spec}"), ("Cache-Control", "only-if-cached")],
                           timeout=15)
        if r.status != 504 or time.monotonic() > deadline:
            return r
        time.sleep(0.02)


def test_a_ranged_miss_is_answered_from_the_whole_object_and_the_next_range_is_a_hit(larder, origin, workdir):
    script(workdir, "iso", headers=[("Cache-Control", "max-age=600")], body_bytes=SIZE)
    url = origin.url("/res/iso")
    body = pattern(SIZE)
    first = ranged(larder, url, "100-199")
    assert first.status == 206, first.status
    assert first.header("Content-Range") == f"bytes 100-199/{SIZE}"
    assert first.body == body[100:200]
    # The origin was asked for the whole object, once.
    assert [(m, "range" in h) for m, h in seen(origin, "iso")] == [("GET", False)]
    later = eventually_a_hit(larder, url, f"{SIZE - 1000}-")
    assert later.status == 206 and later.body == body[SIZE - 1000:], cache_status(later)
    assert "hit" in cache_status(later), cache_status(later)
    whole = proxy_exchange(larder.port, "GET", url, timeout=15)
    assert whole.body == body and "hit" in cache_status(whole), (cache_status(first), cache_status(later), cache_status(whole))
    assert methods(origin, "iso") == ["GET"]


def test_a_suffix_range_and_an_unsatisfiable_range_on_a_miss(larder, origin, workdir):
    small = 100_000  # within the read-through limit: the fill cuts the suffix from the stream
    script(workdir, "tail", headers=[("Cache-Control", "max-age=600")], body_bytes=small)
    url = origin.url("/res/tail")
    r = ranged(larder, url, "-500")
    assert r.status == 206 and r.body == pattern(small)[-500:]
    script(workdir, "past", headers=[("Cache-Control", "max-age=600")], body_bytes=1000)
    url2 = origin.url("/res/past")
    r2 = ranged(larder, url2, "5000-6000")
    assert r2.status == 416 and r2.header("Content-Range") == "bytes */1000"
    # Both objects were still stored whole.
    assert eventually_a_hit(larder, url, "0-9").body == pattern(small)[:10]
    assert "hit" in cache_status(eventually_a_hit(larder, url2, "0-9"))


def test_several_ranges_or_an_uncacheable_object_far_in_go_to_the_origin_as_sent(larder, origin, workdir):
    script(workdir, "multi", headers=[("Cache-Control", "max-age=600")], body_bytes=SIZE)
    ranged(larder, origin.url("/res/multi"), "0-9,100-109")
    assert [("range" in h) for _, h in seen(origin, "multi")] == [True]
    script(workdir, "nocache", headers=[("Cache-Control", "no-store")], body_bytes=SIZE)
    r = ranged(larder, origin.url("/res/nocache"), f"{2 << 20}-{(2 << 20) + 9}")
    # (This origin ignores Range: its whole 200 is the answer.)
    assert r.status == 200 and r.body == pattern(SIZE)
    # First the whole object (then found not storable), then the range itself.
    assert [("range" in h) for _, h in seen(origin, "nocache")] == [False, True]


def test_the_206_keeps_the_requesting_clients_own_qualified_fields_and_the_origins_age(larder, origin, workdir):
    script(workdir, "qual", headers=[("Cache-Control", 'max-age=600, private="X-Mine"'), ("X-Mine", "secret"),
                                     ("Age", "100")], body_bytes=10_000)
    plain = proxy_exchange(larder.port, "GET", origin.url("/res/qual?plain"))
    assert plain.header("X-Mine") == "secret" and plain.header("Age") == "100"
    r = ranged(larder, origin.url("/res/qual"), "0-9")
    assert r.status == 206 and r.body == pattern(10_000)[:10]
    assert r.header("X-Mine") == "secret", r.headers
    assert int(r.header("Age") or 0) >= 100, r.header("Age")


def test_a_range_far_into_a_storable_object_is_asked_for_at_once_and_the_object_still_stored(larder, origin,
                                                                                              workdir):
    script(workdir, "far", headers=[("Cache-Control", "max-age=600")], body_bytes=SIZE)
    url = origin.url("/res/far")
    start = SIZE - 10
    ranged(larder, url, f"{start}-")
    # The client's range went to the origin as sent (this origin ignores Range), and the whole
    # object was fetched for the store meanwhile.
    assert sorted("range" in h for _, h in seen(origin, "far")) == [False, True]
    assert eventually_a_hit(larder, url, f"{start}-").body == pattern(SIZE)[start:]
