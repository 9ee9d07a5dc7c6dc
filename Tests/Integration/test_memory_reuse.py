"""Memory a response frees is reused by the next one, not handed back to the kernel and faulted in
again: disk-only hits of 64 KiB bodies (each queued in a buffer of 128 KiB, glibc's default mmap
threshold) cost no page faults once warm. Before Larder set glibc's thresholds itself, every such
hit mapped, zeroed and unmapped its buffer: a fifth of its CPU in disk-only hits."""

import threading
from pathlib import Path

from helpers import RawClient
from test_cache import script

CLIENTS = 32
ROUNDS = 20


def minor_faults(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[7])   # field 10, minflt


def test_disk_hits_do_not_fault_in_fresh_memory_for_each_body(larder_factory, origin, workdir):
    # A memory tier too small for the bodies: every hit is read from LMDB.
    lr = larder_factory(config={"workers": 1, "cache": {"memory_capacity": "64KiB",
                                                        "memory_max_object_size": "16KiB"}})
    script(workdir, "disk64", headers=[("Cache-Control", "max-age=3600")], body="d" * 65536)
    urls = [origin.url(f"/res/disk64?k={i}") for i in range(16)]
    failures = []

    def hits(rounds):
        # Many responses at once, as under load: their buffers come and go together. The clients
        # start as their threads do, not at one barrier: a burst that starts all at once can peak
        # above the heap's trim threshold and measure trimming after a burst, not steady load.
        def client(i):
            try:
                with RawClient(lr.port) as c:
                    for r in range(rounds):
                        resp = c.request("GET", urls[(i + r) % len(urls)])
                        if resp.status != 200 or len(resp.body) != 65536:
                            failures.append((i, resp.status, len(resp.body)))
            except Exception as e:   # noqa: BLE001 - reported below
                failures.append((i, repr(e)))
        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)

    for url in urls:   # stored
        with RawClient(lr.port) as c:
            assert c.request("GET", url).status == 200
    hits(ROUNDS)       # warm: the map's pages and the heap reach their working size
    before = minor_faults(lr.pid)
    hits(ROUNDS)
    faults = minor_faults(lr.pid) - before
    assert not failures, failures[:5]
    assert sum(1 for r in origin.requests() if r.get("path") == "/res/disk64") == len(urls), "not disk hits"
    assert faults < CLIENTS * ROUNDS // 8, f"{faults} page faults for {CLIENTS * ROUNDS} disk hits of 64 KiB"
