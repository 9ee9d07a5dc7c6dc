"""Damaged cache bytes are never served as good: random bytes of the LMDB file are flipped while
Larder is stopped, and after a restart every entry is either whole and right, fetched again from
the origin, or cut short so the client sees a truncated transfer. A flip can also land in one of
LMDB's own B-tree pages in a way its checks let through: LMDB then faults, and Larder ends with the
cache moved aside (README, damaged cache directories); that seed ends there, and the next starts
from a cache filled again."""

import random
import re
import signal

import pytest

from helpers import RawClient, _read_head, std_request
from origin import unique_body
from test_admin import ADMIN, stats, wait_stats

ENTRIES = 150
# Entries are numbered from here so their /unique/ bodies are not shared with other tests.
FIRST = 700_000
FLIPS = 64
SEEDS = (1, 2, 3)
# Bodies larger than the memory tier's object limit live only on disk. Every third one spans two
# or three 256 KiB chunks, so damage can also lie beyond the first chunk (after the head is sent).
CONFIG = {**ADMIN, "workers": 1, "cache": {"memory_max_object_size": "1KiB", "disk_capacity": "256MiB"}}


def size_of(n):
    if n % 3 == 0:
        return 300_000 + (n * 7919) % 400_000
    return 16_384 + (n * 7919) % 80_000


def url_of(origin, n):
    return origin.url(f"/unique/{FIRST + n}/{size_of(n)}")


def fetch(port, url):
    """(status, Cache-Status, body bytes received, whether the body arrived complete)."""
    with RawClient(port, 15) as c:
        c.send(std_request("GET", url))
        head = _read_head(c.reader)
        length = int(head.header("Content-Length"))
        got = bytearray()
        try:
            c.reader.read_exact(length, got.extend)
        except (EOFError, OSError):
            pass  # cut short
        return head.status, head.header("Cache-Status") or "", bytes(got), len(got) == length


def flip_bytes(path, seed, count):
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    for _ in range(count):
        data[rng.randrange(len(data))] ^= rng.randrange(1, 256)
    path.write_bytes(bytes(data))


def corruption_counter(lr):
    return stats(lr).get("cache_checksum_failures", 0)


def fill(lr, origin):
    """Every entry fetched once (stored), on disk only."""
    for n in range(ENTRIES):
        status, _, body, whole = fetch(lr.port, url_of(origin, n))
        assert status == 200 and whole and body == unique_body(FIRST + n, size_of(n))
    s = wait_stats(lr, lambda s: s["cache_entries"]["disk"] >= ENTRIES, timeout=20)
    assert s["cache_entries"]["disk"] >= ENTRIES, s["cache_entries"]
    assert s["cache_entries"]["memory"] == 0, "the bodies must live on disk only"
    wait_stats(lr, lambda s: s["cache_pending_write_bytes"] == 0)


def ended_by_a_fault_inside_lmdb(lr):
    """Whether Larder ended because LMDB faulted on a page its checks let through, having moved
    the cache aside first, as the README says it does."""
    rc = lr.wait_exit(20)
    log = lr.log_text()
    return rc in (-signal.SIGSEGV, -signal.SIGBUS) and "inside LMDB" in log and "moved to" in log


@pytest.mark.timeout_s(300)
def test_flipped_bytes_in_the_cache_file_are_never_served_as_a_good_body(larder_factory, origin, report_metric):
    lr = larder_factory(config=CONFIG)
    fill(lr, origin)
    name = lr.name

    totals = {"hit": 0, "refetched": 0, "cut": 0, "wrong": 0, "checksum failures": 0, "faults inside LMDB": 0}
    wrong = []
    for seed in SEEDS:
        assert lr.stop() == 0
        origin_before = len(origin.requests())
        flip_bytes(lr.cache_dir / "data.mdb", seed, FLIPS)
        lr = larder_factory(name=name, config=CONFIG)
        refetched = 0
        cut = 0
        faulted = False
        for n in range(ENTRIES):
            expected = unique_body(FIRST + n, size_of(n))
            try:
                status, cache_status, body, whole = fetch(lr.port, url_of(origin, n))
            except (EOFError, OSError):
                if not ended_by_a_fault_inside_lmdb(lr):
                    raise
                faulted = True
                break
            assert status == 200, (n, status)
            if not whole:
                # Cut mid-body: the client can tell the transfer failed. What did arrive is right.
                assert cache_status.startswith("larder; hit"), (n, cache_status)
                assert body == expected[:len(body)], f"entry {n}: wrong bytes before the cut (seed {seed})"
                cut += 1
            elif body != expected:
                wrong.append((seed, n, cache_status))
            elif "fwd=" in cache_status:
                refetched += 1
        assert not wrong, f"wrong bodies delivered whole (seed, entry, Cache-Status): {wrong[:10]} of {len(wrong)}"
        if faulted:
            # The damage was LMDB's own: the cache went aside, so the next seed needs it again.
            totals["faults inside LMDB"] += 1
            lr = larder_factory(name=name, config=CONFIG)
            fill(lr, origin)
            continue
        failures = corruption_counter(lr)
        totals["hit"] += ENTRIES - refetched - cut
        totals["refetched"] += refetched
        totals["cut"] += cut
        totals["checksum failures"] += failures
        if failures:
            assert re.search(r"failed its checksum", lr.log_text()), lr.log_text()[-3000:]
        # Every cut is a detected mismatch; each refetch went to the origin once.
        assert failures >= cut, (seed, failures, cut)
        assert len(origin.requests()) - origin_before == refetched, seed
        # The refetched entries are with the disk writer before the next seed stops Larder.
        wait_stats(lr, lambda s: s["cache_pending_write_bytes"] == 0)

    report_metric(f"{FLIPS} flipped bytes x {len(SEEDS)} seeds over {ENTRIES} disk entries: "
                  + ", ".join(f"{v} {k}" for k, v in totals.items()))
    assert totals["checksum failures"] > 0 and totals["cut"] > 0 and totals["refetched"] > 0, totals
