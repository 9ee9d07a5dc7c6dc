"""Damaged, shared and unusable cache directories, against the real binary.

A truncated data.mdb or a corrupt page is moved aside at start (logged) and Larder serves from an
empty cache, instead of dying at every start; an LMDB assertion moves the cache aside before LMDB
aborts, so the restart is clean. Errors that say nothing about the files (a file where the
directory should be, an immutable data file, a read-only directory) stop Larder with a clear message
and leave the files alone. Two instances never share a directory: the second refuses to start,
naming the holder's PID, and a kill -9 leaves no stale lock. The directory's size on disk stays
within disk_capacity plus a small margin however much is stored.
"""

import os
import signal
import struct
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import mounted_tmpfs, pattern, proxy_exchange
from test_admin import wait_stats
from test_cache import cache_status, methods, script

ONLY_IF_CACHED = [("Cache-Control", "only-if-cached")]
PAGE_HEADER = 16          # mp_pgno u64, mp_pad u16, mp_flags u16, mp_lower u16, mp_upper u16
P_BRANCH, P_LEAF = 0x01, 0x02
F_SUBDATA = 0x02


def fill(lr, origin, workdir, count=12, size=120_000, prefix="e"):
    """Stores `count` entries through the proxy; returns {name: size}."""
    stored = {}
    for i in range(count):
        name = f"{prefix}{i}"
        script(workdir, name, headers=[("Cache-Control", "max-age=600")], body_bytes=size + i)
        assert proxy_exchange(lr.port, "GET", origin.url(f"/res/{name}")).body == pattern(size + i)
        stored[name] = size + i
    return stored


def assert_serves_miss_then_hit(lr, origin, workdir, name="after"):
    script(workdir, name, headers=[("Cache-Control", "max-age=600")], body_bytes=50_000)
    first = proxy_exchange(lr.port, "GET", origin.url(f"/res/{name}"))
    assert first.status == 200 and first.body == pattern(50_000)
    # With no memory tier the entry is visible once the disk writer has committed it.
    deadline = time.monotonic() + 10
    while proxy_exchange(lr.port, "HEAD", origin.url(f"/res/{name}"), headers=ONLY_IF_CACHED).status != 200:
        assert time.monotonic() < deadline, "the new entry was never stored"
        time.sleep(0.05)
    second = proxy_exchange(lr.port, "GET", origin.url(f"/res/{name}"))
    assert second.body == pattern(50_000)
    assert cache_status(second).startswith("larder; hit"), cache_status(second)
    assert methods(origin, name) == ["GET"], methods(origin, name)


def moved_aside_directories(cache_dir):
    return sorted(p for p in Path(cache_dir).parent.iterdir() if p.name.startswith(Path(cache_dir).name + ".broken-"))


# ---------------------------------------------------------------------------
# Reading LMDB's file layout (64-bit), just enough to damage chosen pages.


def page_size(data):
    # Meta page 0: header, then mm_magic u32, mm_version u32, mm_address, mm_mapsize, two MDB_db
    # (48 bytes each: pad u32, flags u16, depth u16, branch, leaf, overflow pages, entries, root).
    # LMDB writes the page size into the free DB's md_pad.
    return struct.unpack_from("<I", data, PAGE_HEADER + 24)[0]


def newest_main_root(data, psize):
    best = None
    for pg in (0, 1):
        base = pg * psize + PAGE_HEADER
        txnid = struct.unpack_from("<Q", data, base + 128)[0]
        root = struct.unpack_from("<Q", data, base + 24 + 48 + 40)[0]
        if best is None or txnid > best[0]:
            best = (txnid, root)
    return best[1]


def named_db_root(data, psize, name):
    """The root page of a named database, from the main DB's (single) leaf page."""
    main = newest_main_root(data, psize) * psize
    flags, lower = struct.unpack_from("<HH", data, main + 10)
    assert flags & P_LEAF, f"main DB root is not a leaf (flags {flags:#x})"
    for i in range((lower - PAGE_HEADER) // 2):
        off = struct.unpack_from("<H", data, main + PAGE_HEADER + 2 * i)[0]
        node = main + off
        node_flags, ksize = struct.unpack_from("<HH", data, node + 4)
        key = data[node + 8:node + 8 + ksize]
        if key == name.encode() and node_flags & F_SUBDATA:
            return struct.unpack_from("<Q", data, node + 8 + ksize + 40)[0]
    raise AssertionError(f"no database named {name}")


def damage_entries_root(cache_dir, flags, lower=None):
    path = Path(cache_dir) / "data.mdb"
    data = path.read_bytes()
    psize = page_size(data)
    root = named_db_root(data, psize, "entries")
    with open(path, "r+b") as f:
        f.seek(root * psize + 10)
        f.write(struct.pack("<H", flags))
        if lower is not None:
            f.write(struct.pack("<H", lower))
    return root


# ---------------------------------------------------------------------------
# 1. Truncated or corrupt files


@pytest.mark.parametrize("cut", ["half", "last-pages"])
def test_truncated_data_file_is_moved_aside_and_larder_serves(larder_factory, origin, workdir, cut):
    lr = larder_factory(config={"cache": {"memory_capacity": "0"}})
    fill(lr, origin, workdir)
    assert lr.stop() == 0
    data = Path(lr.cache_dir) / "data.mdb"
    size = data.stat().st_size
    new_size = size // 2 if cut == "half" else size - 2 * 4096
    os.truncate(data, new_size)

    lr2 = larder_factory(name=lr.name, config={"cache": {"memory_capacity": "0"}})
    log = lr2.log_text()
    assert "truncated" in log and "moved to" in log, log
    aside = moved_aside_directories(lr.cache_dir)
    assert len(aside) == 1 and (aside[0] / "data.mdb").stat().st_size == new_size
    r = proxy_exchange(lr2.port, "GET", origin.url("/res/e0"), headers=ONLY_IF_CACHED)
    assert r.status == 504  # the old entries went with the damaged file
    assert_serves_miss_then_hit(lr2, origin, workdir)
    print(f"data.mdb cut from {size} to {new_size} bytes: moved aside, serving from an empty cache")


def test_corrupt_page_in_the_start_up_sweep_is_moved_aside(larder_factory, origin, workdir):
    lr = larder_factory(config={"cache": {"memory_capacity": "0"}})
    fill(lr, origin, workdir)
    assert lr.stop() == 0
    damage_entries_root(lr.cache_dir, flags=0)   # neither branch nor leaf: MDB_CORRUPTED

    lr2 = larder_factory(name=lr.name)
    log = lr2.log_text()
    assert "MDB_CORRUPTED" in log and "moved to" in log, log
    assert len(moved_aside_directories(lr.cache_dir)) == 1
    assert_serves_miss_then_hit(lr2, origin, workdir)


def test_lmdb_assertion_moves_the_cache_aside_before_the_abort(larder_factory, origin, workdir):
    lr = larder_factory(config={"cache": {"memory_capacity": "0"}})
    fill(lr, origin, workdir)
    assert lr.stop() == 0
    # A branch page without keys: LMDB asserts (and aborts) when it walks into it.
    damage_entries_root(lr.cache_dir, flags=P_BRANCH, lower=PAGE_HEADER)

    crashed = larder_factory(name=lr.name, wait=False)
    rc = crashed.wait_exit(20)
    assert rc == -signal.SIGABRT, (rc, crashed.log_text())
    log = crashed.log_text()
    assert "LMDB assertion failed" in log and "moved to" in log, log
    assert len(moved_aside_directories(lr.cache_dir)) == 1

    lr3 = larder_factory(name=lr.name)
    assert "moved to" not in lr3.log_text()
    assert_serves_miss_then_hit(lr3, origin, workdir)


def test_a_fault_inside_lmdb_moves_the_cache_aside_before_the_process_ends(larder_factory, origin, workdir):
    """A damaged page LMDB's checks let through makes it read through a wild offset: a SIGSEGV
    inside liblmdb, not an assertion. The cache is moved aside then too, so the next start begins
    empty instead of meeting the same page (the test hook makes the fault, in a worker)."""
    lr = larder_factory(config={"cache": {"memory_capacity": "0"}})
    fill(lr, origin, workdir)
    assert lr.stop() == 0

    crashed = larder_factory(name=lr.name, config={"cache": {"memory_capacity": "0"}},
                             env={"LARDER_TEST_CRASH": "lmdb:0.2"}, wait=False)
    rc = crashed.wait_exit(20)
    assert rc == -signal.SIGSEGV, (rc, crashed.log_text()[-3000:])
    log = crashed.log_text()
    assert "inside LMDB" in log and "moved to" in log, log[-3000:]
    assert len(moved_aside_directories(lr.cache_dir)) == 1

    lr3 = larder_factory(name=lr.name, config={"cache": {"memory_capacity": "0"}})
    assert "moved to" not in lr3.log_text()
    r = proxy_exchange(lr3.port, "GET", origin.url("/res/e0"), headers=ONLY_IF_CACHED)
    assert r.status == 504  # the old entries went with the cache moved aside
    assert_serves_miss_then_hit(lr3, origin, workdir)


def test_a_fault_outside_lmdb_leaves_the_cache_alone(larder_factory, origin, workdir):
    """Only a fault inside LMDB says the cache is damaged: any other crash keeps it."""
    lr = larder_factory(config={"cache": {"memory_capacity": "0"}}, env={"LARDER_TEST_CRASH": "segv:0.2"}, wait=False)
    rc = lr.wait_exit(20)
    assert rc == -signal.SIGSEGV, (rc, lr.log_text()[-3000:])
    assert "inside LMDB" not in lr.log_text()
    assert not moved_aside_directories(lr.cache_dir)


# ---------------------------------------------------------------------------
# 2. Errors that are not damage


def expect_refusal(larder_factory, name, *, args=(), config=None):
    lr = larder_factory(name=name, args=args, config=config, wait=False)
    rc = lr.wait_exit(20)
    assert rc == 2, (rc, lr.log_text())
    return lr.log_text()


def test_a_file_where_the_cache_directory_should_be_stops_larder_and_is_kept(larder_factory, workdir):
    blocker = workdir / "not-a-directory"
    blocker.write_bytes(b"precious")
    log = expect_refusal(larder_factory, "filecase", args=("--cache-dir", str(blocker)))
    assert str(blocker) in log and "Not a directory" in log, log
    assert blocker.read_bytes() == b"precious"
    assert not moved_aside_directories(blocker)


def test_a_data_file_that_cannot_be_opened_stops_larder_and_is_kept(larder_factory, origin, workdir):
    lr = larder_factory(config={"cache": {"memory_capacity": "0"}})
    fill(lr, origin, workdir, count=3)
    assert lr.stop() == 0
    data = Path(lr.cache_dir) / "data.mdb"
    if os.geteuid() == 0:
        # Root ignores permission bits; an immutable file refuses even root's writes.
        r = subprocess.run(["chattr", "+i", str(data)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"running as root and chattr +i is not available here: {r.stderr.decode().strip()}")
        expected = "Operation not permitted"
    else:
        os.chmod(data, 0o400)
        expected = "Permission denied"
    try:
        log = expect_refusal(larder_factory, lr.name)
        assert str(lr.cache_dir) in log and expected in log, log
        assert not moved_aside_directories(lr.cache_dir)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(data)], capture_output=True)
        else:
            os.chmod(data, 0o600)
    # The cache is intact: the next start serves what was stored.
    lr3 = larder_factory(name=lr.name)
    r = proxy_exchange(lr3.port, "GET", origin.url("/res/e0"), headers=ONLY_IF_CACHED)
    assert r.status == 200 and r.body == pattern(120_000)


@pytest.fixture
def read_only_bind(tmp_path):
    """A directory and a read-only bind mount of it (root only)."""
    source = tmp_path / f"rw-{uuid.uuid4().hex[:8]}"
    target = tmp_path / f"ro-{uuid.uuid4().hex[:8]}"
    source.mkdir()
    target.mkdir()
    r = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root): {r.stderr.decode().strip()}")
    try:
        r = subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {r.stderr.decode().strip()}")
        yield source, target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def test_a_read_only_cache_directory_stops_larder_and_is_kept(larder_factory, origin, workdir, read_only_bind):
    source, target = read_only_bind
    cache = source / "cache"
    lr = larder_factory(args=("--cache-dir", str(cache)), config={"cache": {"memory_capacity": "0"}})
    fill(lr, origin, workdir, count=3)
    assert lr.stop() == 0
    log = expect_refusal(larder_factory, "ro", args=("--cache-dir", str(target / "cache")))
    assert str(target / "cache") in log and "Read-only file system" in log, log
    assert (cache / "data.mdb").exists() and not moved_aside_directories(cache)


# ---------------------------------------------------------------------------
# 3. One instance per directory


def test_a_second_instance_on_the_same_directory_refuses_to_start(larder_factory, origin, workdir):
    first = larder_factory(config={"cache": {"memory_capacity": "0"}})
    fill(first, origin, workdir, count=2)
    log = expect_refusal(larder_factory, first.name)
    assert f"pid {first.pid}" in log and str(first.cache_dir) in log and "in use by another Larder" in log, log
    assert (Path(first.cache_dir) / "larder.lock").read_text().strip() == str(first.pid)
    # The first one is untouched and still serves from its cache.
    r = proxy_exchange(first.port, "GET", origin.url("/res/e0"), headers=ONLY_IF_CACHED)
    assert r.status == 200 and r.body == pattern(120_000)

    # kill -9 leaves no lock behind: the restart opens the same cache.
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait_exit(10) == -signal.SIGKILL
    again = larder_factory(name=first.name)
    assert "in use" not in again.log_text() and "moved to" not in again.log_text()
    r = proxy_exchange(again.port, "GET", origin.url("/res/e0"), headers=ONLY_IF_CACHED)
    assert r.status == 200 and r.body == pattern(120_000)


# ---------------------------------------------------------------------------
# 5. Size on disk


def disk_usage(directory):
    """What du counts: allocated blocks of every file under the directory."""
    total = 0
    for root, _, files in os.walk(directory):
        for f in files:
            total += os.lstat(os.path.join(root, f)).st_blocks * 512
    return total


@pytest.mark.timeout_s(180)
def test_the_cache_directory_stays_within_disk_capacity_on_disk(larder_factory, origin, workdir, report_metric):
    capacity = 20 << 20
    margin = max(capacity // 10, 4 << 20)
    # With the admin endpoint: its statistics say when the writer has committed.
    lr = larder_factory(config={"cache": {"disk_capacity": "20MiB", "memory_capacity": "0"},
                                "admin_listen": "127.0.0.1:0"})
    sizes = {f"fill{i}": 900_000 + 4_099 * i for i in range(120)}   # ~110 MB through a 20 MiB cache
    for name, size in sizes.items():
        script(workdir, name, headers=[("Cache-Control", "max-age=600")], body_bytes=size)

    def fetch(name):
        r = proxy_exchange(lr.port, "GET", origin.url(f"/res/{name}"), timeout=30)
        assert r.status == 200 and r.body == pattern(sizes[name]), name

    # Four clients at once, so stores overlap and readers hold snapshots while the writer commits.
    peak = 0
    names = list(sizes)
    with ThreadPoolExecutor(4) as pool:
        for start in range(0, len(names), 12):
            list(pool.map(fetch, names[start:start + 12]))
            peak = max(peak, disk_usage(lr.cache_dir))
    s = wait_stats(lr, lambda s: s["cache_pending_write_bytes"] == 0)  # the last stores are committed
    assert s["cache_pending_write_bytes"] == 0, s["cache_pending_write_bytes"]
    peak = max(peak, disk_usage(lr.cache_dir))
    assert peak <= capacity + margin, f"{peak} bytes on disk for a {capacity}-byte capacity"
    # Still a working cache: a good part of the capacity holds entries (eviction is by last use,
    # to the second, so which of these same-second entries stay is not said), and no write failed.
    kept = [name for name in names
            if proxy_exchange(lr.port, "HEAD", origin.url(f"/res/{name}"), headers=ONLY_IF_CACHED).status == 200]
    kept_bytes = sum(sizes[name] for name in kept)
    assert kept_bytes >= capacity // 2, (len(kept), kept_bytes)
    log = lr.log_text()
    assert "cache writes failing" not in log and "eviction failed" not in log, log[-3000:]
    report_metric(f"disk_capacity 20 MiB after ~110 MB stored by 4 clients: du at most {peak / (1 << 20):.1f} MiB "
                  f"(limit {(capacity + margin) / (1 << 20):.0f} MiB), {len(kept)} entries ({kept_bytes / (1 << 20):.1f} MiB) kept")


def test_pass_through_serves_uncached_when_the_directory_cannot_be_used(larder_factory, origin, workdir):
    from test_admin import ADMIN, stats
    blocker = workdir / "not-a-directory"
    blocker.write_bytes(b"precious")
    stand_ins_before = set(Path("/tmp").glob("larder-uncached-*"))
    lr = larder_factory(name="uncached", config=dict(ADMIN, cache={"on_unusable_dir": "pass-through"}),
                        args=("--cache-dir", str(blocker)))
    log = lr.log_text()
    assert "SERVING WITHOUT A CACHE" in log and str(blocker) in log, log
    url = origin.url("/unique/3/2048")
    statuses = [cache_status(proxy_exchange(lr.port, "GET", url)) for _ in range(2)]
    assert all("detail=cache-disabled" in s for s in statuses), statuses
    assert len([r for r in origin.requests() if r["path"].startswith("/unique/3/")]) == 2
    assert stats(lr)["cache_disabled"] == 1
    assert blocker.read_bytes() == b"precious"
    assert set(Path("/tmp").glob("larder-uncached-*")) - stand_ins_before, "the stand-in store lives in /tmp"
    assert lr.stop() == 0
    assert set(Path("/tmp").glob("larder-uncached-*")) <= stand_ins_before, "and is removed at exit"


def test_pass_through_also_covers_a_directory_another_larder_holds(larder_factory, origin, workdir):
    first = larder_factory(name="holder")
    second = larder_factory(name="second", config={"cache": {"on_unusable_dir": "pass-through"}},
                            args=("--cache-dir", str(first.cache_dir)))
    assert "is in use by another Larder" in second.log_text() and "SERVING WITHOUT A CACHE" in second.log_text()
    url = origin.url("/unique/4/2048")
    for _ in range(2):
        assert "cache-disabled" in cache_status(proxy_exchange(second.port, "GET", url))
    assert "hit" in (cache_status(proxy_exchange(first.port, "GET", url)) + cache_status(proxy_exchange(first.port, "GET", url)))


@pytest.fixture
def mount_point(tmp_path):
    """A tmpfs mounted on a fresh directory (root only), as a container volume is mounted on cache_dir."""
    with mounted_tmpfs(tmp_path / f"volume-{uuid.uuid4().hex[:8]}", "64m") as target:
        yield target


def test_a_damaged_cache_on_a_mount_point_has_its_files_moved_aside(larder_factory, origin, workdir, mount_point,
                                                                    proxy_clock):
    """A mount point cannot be renamed: its files go into <cache_dir>/broken-<time>/ instead."""
    args = ("--cache-dir", str(mount_point))
    lr = larder_factory(args=args, config={"cache": {"memory_capacity": "0"}})
    fill(lr, origin, workdir, count=6)
    assert lr.stop() == 0
    data = mount_point / "data.mdb"
    size = data.stat().st_size
    os.truncate(data, size // 2)
    for attempt in range(2):  # a second damaged start replaces the one copy kept
        lr2 = larder_factory(name=f"{lr.name}-again{attempt}", args=args, config={"cache": {"memory_capacity": "0"}})
        log = lr2.log_text()
        assert "moved to" in log and f"{mount_point}/broken-" in log, log
        broken = [p for p in mount_point.iterdir() if p.name.startswith("broken-")]
        assert len(broken) == 1 and (broken[0] / "data.mdb").exists(), broken
        assert_serves_miss_then_hit(lr2, origin, workdir, name=f"after{attempt}")
        assert lr2.stop() == 0
        os.truncate(mount_point / "data.mdb", (mount_point / "data.mdb").stat().st_size // 2)
        proxy_clock.advance(1.1)  # a new second for the next copy's name
