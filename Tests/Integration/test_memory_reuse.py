"""Memory a response frees is reused by the next one, not handed back to the kernel and faulted in
again: disk-only hits of 64 KiB bodies (each queued in a buffer of 128 KiB, glibc's default mmap
threshold) cost no page faults once warm. Before Larder set glibc's thresholds itself, every such
hit mapped, zeroed and unmapped its buffer: a fifth of its CPU in disk-only hits."""

import socket
import threading
from pathlib import Path

from helpers import RawClient, std_request
from test_admin import ADMIN, stats, wait_stats
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


HELD = 32


def test_disk_only_bodies_are_queued_by_reference_not_copied(larder_factory, origin, workdir):
    # Clients that stop reading leave each response's window of the body queued in Larder. For a
    # body that lives only on disk, the window points into LMDB's map: it costs no heap, where a
    # copy would cost every held response its window (a quarter of a MiB).
    lr = larder_factory(config={**ADMIN, "workers": 1, "cache": {"memory_capacity": "64KiB",
                                                                 "memory_max_object_size": "16KiB"}})
    size = 4 << 20
    script(workdir, "disk4m", headers=[("Cache-Control", "max-age=3600")], body="m" * size)
    url = origin.url("/res/disk4m")
    with RawClient(lr.port) as c:
        assert len(c.request("GET", url).body) == size
    with RawClient(lr.port) as c:   # a disk hit, read whole, warms the map and the heap
        r = c.request("GET", url)
        assert len(r.body) == size and "hit" in r.header("Cache-Status")
    before = lr.rss_kib("RssAnon")
    answered = stats(lr)["responses"]["2xx"]
    held = []
    try:
        for _ in range(HELD):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)   # the kernel holds little
            s.connect(("127.0.0.1", lr.port))
            s.sendall(std_request("GET", url))
            held.append(s)
        # Every response has queued its window: its head went out with it.
        got = wait_stats(lr, lambda s: s["responses"]["2xx"] >= answered + HELD)["responses"]["2xx"]
        assert got >= answered + HELD, f"{got - answered} of {HELD} answers started"
        grown = lr.rss_kib("RssAnon") - before
        window_kib = 256
        assert grown < HELD * window_kib // 4, (
            f"anonymous memory grew {grown} KiB with {HELD} disk hits held: the bodies were copied")
        # And they are whole when read after all.
        for s in held[:2]:
            s.settimeout(10)
            got = b""
            while b"\r\n\r\n" not in got or len(got) - got.index(b"\r\n\r\n") - 4 < size:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
            body = got[got.index(b"\r\n\r\n") + 4:]
            assert body == b"m" * size, len(body)
    finally:
        for s in held:
            s.close()
    assert sum(1 for r in origin.requests() if r.get("path") == "/res/disk4m") == 1, "not disk hits"
