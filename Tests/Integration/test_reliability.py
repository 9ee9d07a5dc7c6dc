"""Downloads are never cut short by Larder's own timers or by a graceful shutdown.

Slow readers keep their whole answer (the idle timer starts only once it is written, and the send
timeout forgives a client that acknowledged 16 KiB or more since it last looked), a client that
reads nothing at all, or stops reading midway, is dropped by the send timeout, and SIGTERM lets
answers being written finish within the grace period, logging what it had to cut when the grace
ends.
"""

import hashlib
import os
import signal
import socket
import threading
import time

from helpers import LOCALHOST, RawClient, SockReader, pace, proxy_exchange, read_response, std_request, wait_until
from test_admin import wait_stats


def slow_download(port, url, rate, results, index, rcvbuf=65536, reading=None, resume=None):
    """Fetches `url` through Larder reading about `rate` bytes a second; stores (status, sha256, length).
    `reading` (a semaphore), when given, is released once the answer's first bytes are in. With
    `resume` (an event), the client reads nothing more after those until it is set, then the rest
    as fast as it comes (`rate` is not used)."""
    s = socket.create_connection((LOCALHOST, port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.sendall(std_request("GET", url))
    reader = SockReader(s)
    digest = hashlib.sha256()
    got = [0]
    started = []
    piece = 65536 if rate is None else max(1024, rate // 10)

    def sink(data):
        digest.update(data)
        got[0] += len(data)

    # Pace the socket reads themselves: SockReader pulls at most 256 KiB a call, so throttle _fill.
    original = reader._fill

    def paced_fill():
        data = s.recv(piece)
        if not data:
            reader.eof = True
            return False
        if reading is not None and not started:
            started.append(True)
            reading.release()
        if resume is not None:
            assert resume.wait(30), "never told to go on reading"
        else:
            pace(len(data) / rate)
        reader.buf += data
        return True

    reader._fill = paced_fill
    try:
        r = read_response(reader, "GET", sink=sink)
        results[index] = (r.status, digest.hexdigest(), got[0])
    except (EOFError, ConnectionResetError, OSError) as e:
        results[index] = ("cut", repr(e), got[0])
    finally:
        reader._fill = original
        s.close()


def test_a_slow_reader_gets_the_whole_answer_past_the_idle_timeout(larder_factory, origin, report_metric):
    # The kernel holds about 200 KiB of the answer (the client's small receive buffer and Larder's
    # send buffer): Larder writes the rest for about 0.65 s, twice its idle timeout.
    size = 1 << 20
    lr = larder_factory(config={"limits": {"client_idle_timeout": "300ms"}})
    url = origin.url(f"/unique/1/{size}")
    full = proxy_exchange(lr.port, "GET", url, timeout=30)
    assert len(full.body) == size
    expected = hashlib.sha256(full.body).hexdigest()
    results = [None]
    t0 = time.monotonic()
    slow_download(lr.port, url, 1280 * 1024, results, 0)
    elapsed = time.monotonic() - t0
    report_metric(f"slow reader, 1 MiB at 1.25 MiB/s with a 0.3 s idle timeout: {results[0][2]} bytes "
                  f"in {elapsed:.1f} s")
    assert results[0] == (200, expected, size), results


def download_left_unread(larder_factory, origin, rcvbuf):
    """A Larder whose send timeout is 1 s, and a client socket that asked it for a 4 MiB memory hit."""
    lr = larder_factory(config={"limits": {"client_idle_timeout": "1s"}, "cache": {"memory_max_object_size": "8MiB"}})
    url = origin.url(f"/unique/1/{4 << 20}")
    assert len(proxy_exchange(lr.port, "GET", url, timeout=30).body) == 4 << 20
    s = socket.create_connection((LOCALHOST, lr.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.sendall(std_request("GET", url))
    return lr, s


def wait_for_send_timeout(lr, within=8):
    lr.wait_for_text("KiB of its answer in 1.0 s", within)


def test_a_client_that_reads_nothing_is_dropped_by_the_send_timeout(larder_factory, origin):
    lr, s = download_left_unread(larder_factory, origin, rcvbuf=4096)
    wait_for_send_timeout(lr)
    s.close()


def test_a_client_that_stops_reading_midway_is_dropped_by_the_send_timeout(larder_factory, origin):
    # The send timeout forgives a slow reader (16 KiB or more acknowledged since the last look),
    # so it must still catch one that read for a while and then went silent with the socket full.
    lr, s = download_left_unread(larder_factory, origin, rcvbuf=65536)
    got = 0
    while got < 512 * 1024:
        data = s.recv(65536)
        assert data, "closed before the client stopped reading"
        got += len(data)
        pace(0.01)
    wait_for_send_timeout(lr)
    s.close()


def refused(port):
    """True when a connection to `port` is refused (nothing listens there any more)."""
    try:
        socket.create_connection((LOCALHOST, port), timeout=5).close()
        return False
    except (ConnectionRefusedError, ConnectionResetError):
        # Reset: the connect raced the listener's close and was in its backlog.
        return True


def test_sigterm_lets_answers_being_written_finish_within_the_grace(larder_factory, origin, report_metric):
    size = 1 << 20
    lr = larder_factory(config={"shutdown_grace": "10s", "cache": {"memory_max_object_size": "2MiB"}})
    url = origin.url(f"/unique/1/{size}")
    full = proxy_exchange(lr.port, "GET", url, timeout=30)
    expected = hashlib.sha256(full.body).hexdigest()
    results = [None] * 8
    reading = threading.Semaphore(0)
    resume = threading.Event()
    threads = [threading.Thread(target=slow_download, args=(lr.port, url, None, results, i),
                                kwargs={"reading": reading, "resume": resume}) for i in range(8)]
    for t in threads:
        t.start()
    for _ in threads:  # every download is under way, and waits for its client
        assert reading.acquire(timeout=10)
    t0 = time.monotonic()
    os.kill(lr.pid, signal.SIGTERM)
    # The clients read on once Larder drains: its listeners are closed.
    lr.wait_for_text("shutting down")
    assert wait_until(lambda: refused(lr.port)), "Larder still accepts connections after SIGTERM"
    resume.set()
    rc = lr.stop(timeout=20)
    for t in threads:
        t.join(20)
    elapsed = time.monotonic() - t0
    complete = sum(r == (200, expected, size) for r in results)
    report_metric(f"SIGTERM during 8 downloads of 1 MiB: {complete} of 8 complete, exit {rc} after {elapsed:.1f} s")
    assert rc == 0
    assert complete == 8, results


def test_the_grace_period_ending_cuts_what_is_left_and_says_so(larder_factory, origin):
    size = 4 << 20
    lr = larder_factory(config={"shutdown_grace": "1s", "cache": {"memory_max_object_size": "8MiB"}})
    url = origin.url(f"/unique/1/{size}")
    assert len(proxy_exchange(lr.port, "GET", url, timeout=30).body) == size
    s = socket.create_connection((LOCALHOST, lr.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(std_request("GET", url))
    assert s.recv(1, socket.MSG_PEEK)  # the answer is being written
    assert lr.stop(timeout=20) == 0
    # What the client can still read is what the kernel had buffered: less than the whole answer.
    got = 0
    s.settimeout(1)
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            data = s.recv(1 << 20)
            if not data:
                break
            got += len(data)
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    assert got < size
    assert "shutdown grace over: cutting the answer to" in lr.log_text()


def test_a_hit_being_sent_survives_its_entry_being_purged_or_evicted(larder_factory, origin, report_metric):
    """The entry goes for everyone else at once; the response already reading it keeps its bytes."""
    # Larger than what the kernel's socket buffers can hold, so most of it is read from disk after
    # the purge.
    size = 16 << 20
    lr = larder_factory(config={"cache": {"memory_max_object_size": "64KiB", "disk_capacity": "96MiB"},
                                "admin_listen": "127.0.0.1:0"})
    url = origin.url(f"/unique/7/{size}")
    full = proxy_exchange(lr.port, "GET", url, timeout=30)
    expected = hashlib.sha256(full.body).hexdigest()
    s = wait_stats(lr, lambda s: s["cache_entries"]["disk"] >= 1)  # committed to disk
    assert s["cache_entries"]["disk"] >= 1, s["cache_entries"]
    results = [None, None]
    reading = threading.Semaphore(0)
    resume = threading.Event()
    readers = [threading.Thread(target=slow_download, args=(lr.port, url, None, results, i),
                                kwargs={"reading": reading, "resume": resume}) for i in range(2)]
    for t in readers:
        t.start()
    for _ in readers:  # both hits are being read, and wait for their clients
        assert reading.acquire(timeout=10)
    with RawClient(lr.port) as c:
        c.send(std_request("PURGE", url))
        assert c.response().status == 200
    # And churn: far more than the capacity stored behind it, so eviction runs too.
    for i in range(40):
        assert proxy_exchange(lr.port, "GET", origin.url(f"/unique/{100 + i}/{2 << 20}"), timeout=30).status == 200
    resume.set()  # the rest of both answers is read after the purge and the evictions
    for t in readers:
        t.join(30)
    report_metric(f"16 MiB hits read while purged and evicted: {[r[0] for r in results]}")
    assert results == [(200, expected, size)] * 2, results
    assert "vanished" not in lr.log_text()
    again = proxy_exchange(lr.port, "GET", url, timeout=30)
    assert "hit" not in again.header("Cache-Status")
