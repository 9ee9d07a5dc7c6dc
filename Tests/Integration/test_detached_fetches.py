"""What a client can make Larder download for nobody. A fill from a ranged miss, a download
finished for the cache after its client left, a collapsed fetch whose readers all left and a
background refresh run with no client attached: such a download goes on only as an aborted one
would (most of it in, and not large), and only within the client's share of the detached budget
(`limits.detached_*`). Each attack here was once an amplifier: 1 byte asked for, megabytes fetched."""

import socket
import threading
import time

import pytest

from helpers import RawClient, SockReader, _ThreadedServer, _read_head, pace, proxy_exchange, std_request
from test_admin import ADMIN, stats, wait_stats

MiB = 1 << 20
# A budget no test here reaches, to show a rule other than the budget at work.
UNBOUNDED = {"detached_fetches_per_client": 1000, "detached_bytes_per_client": "16GiB",
             "detached_fetches": 1000, "detached_bytes": "16GiB"}


class PacedOrigin(_ThreadedServer):
    """Answers every GET with a cacheable response: `size` bytes with Content-Length (or chunked
    and of unknown length with `chunked=True`), the first `first` bytes at once, then the rest in
    64 KiB pieces `pace` seconds apart (with `hold`, an event: once it is set, all at once).
    Counts the body bytes it managed to send on each connection, and notes when each answer ended
    (all sent, or the peer went away)."""

    def __init__(self, size, first=MiB, pace=0.01, chunked=False, hold=None):
        self.size, self.first, self.pace, self.chunked, self.hold = size, first, pace, chunked, hold
        self.sent = []
        self.lock = threading.Lock()
        self.ended = threading.Condition(self.lock)
        super().__init__()

    def handle(self, sock, peer):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return
            data += chunk
        framing = "Transfer-Encoding: chunked" if self.chunked else f"Content-Length: {self.size}"
        sock.sendall(f"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nETag: \"e\"\r\n{framing}\r\n\r\n".encode())
        sent = 0
        try:
            while sent < self.size:
                n = min(self.first - sent if sent < self.first else 65536, self.size - sent)
                piece = b"x" * n
                sock.sendall(b"%x\r\n%s\r\n" % (n, piece) if self.chunked else piece)
                sent += n
                if sent >= self.first:
                    if self.hold is not None:
                        self.hold.wait(30)
                    else:
                        pace(self.pace)
            if self.chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        finally:
            with self.lock:
                self.sent.append(sent)
                self.ended.notify_all()

    def wait_ended(self, n, timeout):
        with self.lock:
            self.ended.wait_for(lambda: len(self.sent) >= n, timeout)
            return list(self.sent)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def paced():
    started = []

    def start(*args, **kw):
        o = PacedOrigin(*args, **kw)
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()


def one_byte_of(lr, url):
    c = RawClient(lr.port, timeout=15)
    r = c.request("GET", url, headers=[("Range", "bytes=0-0")])
    assert r.status == 206 and len(r.body) == 1, (r.status, r.body[:20])
    return c


@pytest.mark.timeout_s(90)
def test_hanging_up_after_a_one_byte_range_leaves_no_fill_running(larder_factory, paced):
    """8 objects of 8 MiB, 1 byte asked of each, then a hang-up: without the rule Larder fetched
    all 64 MiB (63,000 times what the client received) and evicted others to store them."""
    size = 8 * MiB
    origin = paced(size, first=MiB, pace=0.02)   # the rest would take 2.5 s per object
    lr = larder_factory(config=dict(ADMIN, limits=UNBOUNDED))
    for i in range(8):
        one_byte_of(lr, origin.url(f"/big-{i}.iso")).close()
    sent = origin.wait_ended(8, timeout=60)
    assert len(sent) == 8, sent
    # Each fetch ends soon after its client left, at a fraction of the object.
    assert sum(sent) < 8 * size / 4, sent
    assert wait_stats(lr, lambda s: s["detached_fetches_in_flight"] == 0)["detached_fetches_in_flight"] == 0
    assert stats(lr)["cache_entries"]["disk"] == 0


@pytest.mark.timeout_s(90)
def test_a_client_that_stays_connected_gets_its_share_of_fills_and_no_more(larder_factory, paced):
    size = 8 * MiB
    rest = threading.Event()
    origin = paced(size, first=MiB, hold=rest)   # the first MiB of each, the rest once the cuts are seen
    lr = larder_factory(config=dict(ADMIN, limits={"detached_fetches_per_client": 2}))
    held = [one_byte_of(lr, origin.url(f"/big-{i}.iso")) for i in range(5)]
    try:
        s = wait_stats(lr, lambda s: s["detached_fetches_cut"]["detached_fetches_per_client"] >= 3)
        assert s["detached_fetches_cut"]["detached_fetches_per_client"] == 3, s["detached_fetches_cut"]
        assert s["detached_fetches_in_flight"] <= 2
        rest.set()
        sent = origin.wait_ended(5, timeout=60)
        # Two fills ran to the end for the cache; three were cut at about what had arrived.
        assert sorted(sent)[-2:] == [size, size] and sum(sorted(sent)[:3]) < 3 * size / 2, sent
        assert wait_stats(lr, lambda s: s["cache_entries"]["disk"] + s["cache_entries"]["memory"] >= 2)
    finally:
        for c in held:
            c.close()
    assert "detached_fetches_per_client reached" in lr.log_text()


@pytest.mark.timeout_s(90)
def test_a_collapsed_download_of_unknown_length_stops_when_its_last_reader_leaves(larder_factory, paced):
    """Ten clients share one chunked download, read 2 MiB each and leave: the fetch must stop as it
    does for one client, not run on to max_object_size for nobody."""
    origin = paced(256 * MiB, first=256 * 1024, pace=0.005, chunked=True)
    lr = larder_factory(config=dict(ADMIN, workers=1, cache={"max_object_size": "128MiB"}, limits=UNBOUNDED))
    url = origin.url("/stream")
    done = []

    def reader(i):
        s = socket.create_connection(("127.0.0.1", lr.port), timeout=15)
        try:
            s.sendall(std_request("GET", url))
            r = SockReader(s)
            head = _read_head(r)
            got = 0
            while got < 2 * MiB:
                piece = r.read_some(65536)
                if not piece:
                    break
                got += len(piece)
            done.append((head.status, got))
        finally:
            s.close()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(done) == 10 and all(status == 200 for status, _ in done), done
    sent = origin.wait_ended(origin.connections, timeout=30)
    # The readers took 2 MiB each; a few MiB of lag and socket buffers at most, never 128 MiB.
    assert len(sent) == origin.connections and max(sent) < 24 * MiB, sent
    s = stats(lr)
    assert s["collapsed_requests"] >= 1, s["collapsed_requests"]


class RefreshOrigin(_ThreadedServer):
    """`/r`: version 1 (stale at once: `Age` past `max-age`, with `stale-while-revalidate`), then a
    HEAD that says it changed, then version 2, chunked, `size` bytes (None: without end)."""

    def __init__(self, size):
        self.size = size
        self.gets = 0
        self.sent = []
        super().__init__()

    def handle(self, sock, peer):
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            method = head.split(b" ", 1)[0]
            fields = b"Cache-Control: max-age=1, stale-while-revalidate=600\r\nAge: 5\r\n"
            if method == b"HEAD":
                sock.sendall(b'HTTP/1.1 200 OK\r\nETag: "2"\r\n' + fields + b"Content-Length: 1\r\n\r\n")
                continue
            self.gets += 1
            if self.gets == 1:
                sock.sendall(b'HTTP/1.1 200 OK\r\nETag: "1"\r\n' + fields + b"Content-Length: 9\r\n\r\nversion 1")
                continue
            sock.sendall(b'HTTP/1.1 200 OK\r\nETag: "2"\r\n' + fields + b"Transfer-Encoding: chunked\r\n\r\n")
            sent = 0
            try:
                while self.size is None or sent < self.size:
                    piece = b"2" * 65536
                    sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                    sent += len(piece)
                    if self.size is None and sent > 512 * MiB:
                        break
                sock.sendall(b"0\r\n\r\n")
            except OSError:
                pass
            finally:
                self.sent.append(sent)
            return

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"


def stale_then_refreshed(lr, url):
    assert proxy_exchange(lr.port, "GET", url).body == b"version 1"
    stale = proxy_exchange(lr.port, "GET", url)   # served stale; the refresh starts
    assert stale.body == b"version 1", stale.header("Cache-Status")


@pytest.mark.timeout_s(60)
def test_a_background_refresh_of_unknown_length_is_stored_within_the_default_budget(larder_factory):
    origin = RefreshOrigin(size=2 * MiB)
    try:
        lr = larder_factory(config=ADMIN)
        url = origin.url("/r")
        stale_then_refreshed(lr, url)
        # Nobody asks meanwhile (a request could join the download and keep it going itself).
        deadline = time.monotonic() + 20
        while not origin.sent and time.monotonic() < deadline:
            time.sleep(0.05)
        assert origin.sent == [2 * MiB], origin.sent
        assert sum(stats(lr)["detached_fetches_cut"].values()) == 0, lr.log_text()[-1500:]
        deadline = time.monotonic() + 10
        while True:   # visible once the disk writer has committed it
            r = proxy_exchange(lr.port, "GET", url, headers=[("Cache-Control", "max-stale, only-if-cached")])
            if r.body.startswith(b"2") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.body == b"2" * (2 * MiB), (len(r.body), r.header("Cache-Status"))
    finally:
        origin.stop()


@pytest.mark.timeout_s(60)
def test_a_detached_download_whose_store_is_given_up_stops(larder_factory):
    """A background refresh's new response grows past `cache.max_object_size`: nothing is stored
    and nobody reads it, so the download stops rather than run on with no client for days."""
    origin = RefreshOrigin(size=None)
    try:
        lr = larder_factory(config=dict(ADMIN, cache={"max_object_size": "1MiB"}))
        stale_then_refreshed(lr, origin.url("/r"))
        deadline = time.monotonic() + 30
        while not origin.sent and time.monotonic() < deadline:
            time.sleep(0.05)
        assert origin.sent and origin.sent[0] < 16 * MiB, origin.sent
        assert wait_stats(lr, lambda s: s["detached_fetches_in_flight"] == 0)["detached_fetches_in_flight"] == 0
    finally:
        origin.stop()
