"""A cache that runs out of room: the file system full (a small tmpfs as the cache directory) and
LMDB's map full. Requests keep being answered whole, nothing partial is ever served from the cache,
the operator is warned without a flood of log lines, and Larder neither crashes nor stops."""

import os
import uuid

import pytest

from helpers import mounted_tmpfs, pattern, proxy_exchange
from test_cache import cache_status, script

ONLY_IF_CACHED = [("Cache-Control", "only-if-cached")]


@pytest.fixture
def small_tmpfs(tmp_path):
    with mounted_tmpfs(tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}", "12m") as mount_point:
        yield mount_point


def check_cached_or_absent(lr, url, size):
    r = proxy_exchange(lr.port, "GET", url, headers=ONLY_IF_CACHED, timeout=30)
    assert r.status in (200, 504), (url, r.status)
    if r.status == 200:
        assert r.body == pattern(size), f"{url}: a stored body is not whole"
    return r.status == 200


@pytest.mark.timeout_s(120)
def test_file_system_full_keeps_serving_and_warns(larder_factory, origin, workdir, small_tmpfs):
    lr = larder_factory(config={"cache": {"disk_capacity": "1GiB", "memory_capacity": "0"}},
                        args=("--cache-dir", str(small_tmpfs / "cache")))
    sizes = {f"full{i}": (700_000 + 1_009 * i) for i in range(40)}   # ~28 MB into 12 MiB
    for name, size in sizes.items():
        script(workdir, name, headers=[("Cache-Control", "max-age=600")], body_bytes=size)
        r = proxy_exchange(lr.port, "GET", origin.url(f"/res/{name}"), timeout=30)
        assert r.status == 200 and r.body == pattern(size), name
    # Served whole from the cache, or absent: never a truncated copy.
    present = sum(check_cached_or_absent(lr, origin.url(f"/res/{name}"), size) for name, size in sizes.items())
    assert present < len(sizes)
    log = lr.log_text()
    assert "cache writes failing" in log and "bytes free on its file system" in log, log[-3000:]
    warnings = [line for line in log.splitlines() if " warning " in line or " error " in line]
    assert len(warnings) <= 20, f"{len(warnings)} warning lines:\n" + "\n".join(warnings[:30])
    assert "vanished" not in log, "an entry was committed without all of its body"
    # Still a proxy: something new goes through.
    assert proxy_exchange(lr.port, "GET", origin.url("/echo")).status == 200
    assert lr.stop() == 0
    print(f"file system full: {present}/{len(sizes)} entries kept, {len(warnings)} warning lines")


@pytest.mark.timeout_s(120)
def test_an_entry_larger_than_the_cache_can_hold_is_served_and_not_stored(larder_factory, origin, workdir):
    """Before this was guarded, a 100 MiB body into a 1 MiB cache filled LMDB's map with chunks that
    could not be evicted, and every later write failed with MDB_MAP_FULL."""
    lr = larder_factory(config={"cache": {"disk_capacity": "1MiB", "memory_capacity": "0"}})
    big = 100 << 20
    script(workdir, "huge", headers=[("Cache-Control", "max-age=600")], body_bytes=big)
    r = proxy_exchange(lr.port, "GET", origin.url("/res/huge"), timeout=60)
    assert r.status == 200 and len(r.body) == big and r.body == pattern(big)
    assert not check_cached_or_absent(lr, origin.url("/res/huge"), big)
    # Smaller entries still come and go under the tiny capacity (evictions, no map-full failures).
    for i in range(30):
        script(workdir, f"s{i}", headers=[("Cache-Control", "max-age=600")], body_bytes=200_000)
        assert proxy_exchange(lr.port, "GET", origin.url(f"/res/s{i}")).body == pattern(200_000)
    kept = sum(check_cached_or_absent(lr, origin.url(f"/res/s{i}"), 200_000) for i in range(30))
    assert 1 <= kept <= 10, kept
    assert "MAP_FULL" not in lr.log_text() and "cache writes failing" not in lr.log_text(), lr.log_text()[-2000:]
    assert lr.proc.poll() is None
    assert lr.stop() == 0
