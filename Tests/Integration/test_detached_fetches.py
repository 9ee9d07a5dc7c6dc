"""What a client can make Larder download for nobody. A fill from a ranged miss, a download
finished for the cache after its client left, a collapsed fetch whose readers all left and a
background refresh run with no client attached: such a download goes on only as an aborted one
would (most of it in, and not large), and only within the client's share of the detached budget
(`limits.detached_*`). Each attack here was once an amplifier: 1 byte asked for, megabytes fetched."""

import socket
import threading
import time

import pytest

from helpers import RawClient, _ThreadedServer, _read_head, SockReader, std_request
from test_admin import ADMIN, stats, wait_stats

MiB = 1 << 20
# A budget no test here reaches, to show a rule other than the budget at work.
UNBOUNDED = {"detached_fetches_per_client": 1000, "detached_bytes_per_client": "16GiB",
             "detached_fetches": 1000, "detached_bytes": "16GiB"}


class PacedOrigin(_ThreadedServer):
    """Answers every GET with a cacheable response: `size` bytes with Content-Length (or chunked
    and of unknown length with `chunked=True`), the first `first` bytes at once, then the rest in
    64 KiB pieces `pace` seconds apart. Counts the body bytes it managed to send on each
    connection, and notes when each answer ended (all sent, or the peer went away)."""

    def __init__(self, size, first=MiB, pace=0.01, chunked=False):
        self.size, self.first, self.pace, self.chunked = size, first, pace, chunked
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
                    time.sleep(self.pace)
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
    origin = paced(size, first=MiB, pace=0.02)
    lr = larder_factory(config=dict(ADMIN, limits={"detached_fetches_per_client": 2}))
    held = [one_byte_of(lr, origin.url(f"/big-{i}.iso")) for i in range(5)]
    try:
        s = wait_stats(lr, lambda s: s["detached_fetches_cut"]["detached_fetches_per_client"] >= 3)
        assert s["detached_fetches_cut"]["detached_fetches_per_client"] == 3, s["detached_fetches_cut"]
        assert s["detached_fetches_in_flight"] <= 2
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
