"""Many small entries in a small cache: LMDB's map holds far more than their stored bytes (a page
or more per body, three B-trees, the free list), so eviction must follow the map's pages in use, keep
room for the deletions themselves, and a map that is full anyway must be recovered at run time, at
start and by a purge. Before this, such a load filled the map, every batch and every eviction failed
with MDB_MAP_FULL (one log line each), nothing was stored again (not after a restart either), and
DELETE /cache answered {"purged":"all"} while every entry stayed."""

import re
import threading
import time

from helpers import RawClient, proxy_exchange
from test_admin import admin, stats

SMALL = {"admin_listen": "127.0.0.1:0", "cache": {"disk_capacity": "8MiB", "memory_capacity": "0"}}
ONLY_IF_CACHED = [("Cache-Control", "only-if-cached")]
# Lines that report failed cache writes or evictions.
FAILURE_LINE = re.compile(r"MAP_FULL|cache writes failing|eviction failed|cache map full")


def size_of(n):
    """1 to 3 KiB, as package indexes and registry metadata are."""
    return 1024 + (n * 613) % 2048


def fill(lr, origin, first, count, clients=8, seconds=30):
    """Fetches `count` distinct cacheable objects through `clients` keep-alive connections (bounded
    in count and time); returns how many were fetched."""
    done = [0] * clients
    errors = []
    deadline = time.monotonic() + seconds

    def run(c):
        client = RawClient(lr.port, timeout=10)
        try:
            for n in range(first + c, first + count, clients):
                if time.monotonic() > deadline:
                    return
                r = client.request("GET", origin.url(f"/unique/{n}/{size_of(n)}"))
                if r.status != 200 or len(r.body) != size_of(n):
                    errors.append((n, r.status, len(r.body)))
                    return
                done[c] += 1
        except Exception as e:  # reported below
            errors.append((c, repr(e)))
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 15)
    assert not errors, errors[:5]
    return sum(done)


def is_cached(lr, origin, n, wait=5.0):
    """Whether object n is answered from the cache, waiting up to `wait` s for its commit."""
    deadline = time.monotonic() + wait
    while True:
        r = proxy_exchange(lr.port, "GET", origin.url(f"/unique/{n}/{size_of(n)}"), headers=ONLY_IF_CACHED)
        if r.status == 200:
            return True
        assert r.status == 504, r.status
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def new_objects_are_stored(lr, origin, first, count=10):
    """Fetches `count` objects never asked before and counts those served from the cache after.

    The LRU order has a resolution of one second (entries used in the same second go in key
    order), and in a map this small one eviction removes a quarter of it: after a fill that took
    a second or two, it can reach into the current second and take a just-stored object. So the
    new objects start in a second of their own, after every object of the fill."""
    start = time.time()
    while int(time.time()) == int(start):
        time.sleep(0.02)
    for n in range(first, first + count):
        r = proxy_exchange(lr.port, "GET", origin.url(f"/unique/{n}/{size_of(n)}"))
        assert r.status == 200
    return sum(is_cached(lr, origin, n) for n in range(first, first + count))


def failure_lines(lr):
    return [line for line in lr.log_text().splitlines() if FAILURE_LINE.search(line)]


def test_many_small_entries_keep_being_stored_and_purge_empties_the_cache(larder_factory, origin):
    lr = larder_factory(config=SMALL)
    # About 6,000 objects of 1-3 KiB: some 12 MB stored, and at least twice that in LMDB pages,
    # against a map of under 12 MiB: full several times over without eviction by pages.
    fetched = fill(lr, origin, 0, 6_000)
    assert fetched == 6_000
    assert new_objects_are_stored(lr, origin, 100_000) == 10, "the cache stopped storing:\n" + lr.log_text()[-3000:]
    s = first_run = stats(lr)
    assert s["cache_evictions"]["disk"] > 0, s
    assert s["cache_bytes"]["disk"] <= 8 << 20, s["cache_bytes"]
    lines = failure_lines(lr)
    assert len(lines) <= 3, f"{len(lines)} failure lines:\n" + "\n".join(lines[:10])

    # A restart stores again.
    cache_dir = lr.cache_dir
    assert lr.stop() == 0
    lr = larder_factory(config=SMALL, args=("--cache-dir", str(cache_dir)))
    fill(lr, origin, 200_000, 1_500)
    assert new_objects_are_stored(lr, origin, 300_000) == 10, "not stored after a restart:\n" + lr.log_text()[-3000:]

    # Purge-all really empties the cache, and says so only once it has.
    assert stats(lr)["cache_entries"]["disk"] > 0
    status, _, body = admin(lr, "DELETE", "/cache")
    assert status == 200 and b'"purged":"all"' in body, (status, body)
    s = stats(lr)
    assert s["cache_entries"]["disk"] == 0 and s["cache_bytes"]["disk"] == 0, s["cache_entries"]
    assert not is_cached(lr, origin, 300_000, wait=0)
    assert new_objects_are_stored(lr, origin, 400_000, count=3) == 3
    lines = failure_lines(lr)
    assert len(lines) <= 3, f"{len(lines)} failure lines:\n" + "\n".join(lines[:10])
    print(f"map full: {first_run['cache_evictions']['disk']} evictions, {first_run['cache_bytes']['disk']} bytes "
          f"stored in {first_run['lmdb_map_used_bytes']} of a {first_run['lmdb_map_size_bytes']}-byte map")


def test_a_cache_directory_with_a_full_map_recovers_at_start(larder_factory, origin):
    # A larger cache fills a map of over 12 MiB; the same directory opened with 8 MiB has a map
    # whose every page is in use (LMDB keeps a map at least as large as its pages in use).
    big = larder_factory(config={"cache": {"disk_capacity": "32MiB", "memory_capacity": "0"}})
    fill(big, origin, 0, 4_000)
    cache_dir = big.cache_dir
    assert big.stop() == 0
    lr = larder_factory(config=SMALL, args=("--cache-dir", str(cache_dir)))
    assert new_objects_are_stored(lr, origin, 100_000) == 10, "a full map at start stays full:\n" + lr.log_text()[-3000:]
    fill(lr, origin, 200_000, 1_500)
    assert new_objects_are_stored(lr, origin, 300_000) == 10, lr.log_text()[-3000:]
    s = stats(lr)
    assert s["cache_evictions"]["disk"] > 0 and s["cache_bytes"]["disk"] <= 8 << 20, s
    lines = failure_lines(lr)
    assert len(lines) <= 3, f"{len(lines)} failure lines:\n" + "\n".join(lines[:10])
    note = lr.wait_for_log(r"cache map over its budget at start[^\n]*", timeout=0)
    assert note and "evicted" in note.group(0), lr.log_text()[-3000:]
    print(note.group(0))
