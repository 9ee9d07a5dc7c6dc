"""Joining a download at any point: requests for a URL whose response is being fetched and
stored on disk read what the disk holds and follow the rest, however far along the download is,
and the origin sees one GET. Nobody waits for a client that stops reading, not even for the
first client, whose request started the fetch.

Clients join when an earlier client has received a given number of bytes (never after a fixed
time), so where each one joins is the same on a fast machine and a slow one. The origin holds the
body at each join point until the client starting there has joined (a gate the test opens), so
the download is always under way when it joins, however fast the machine. Set
LARDER_LATE_JOIN_FULL=1 for the sizes and rates of the published targets (8.7 MB at 2 MiB/s for
six clients, 64 MiB at 8 MiB/s for twenty); the default sizes are smaller and the origin sends as
fast as it can, for the suite's sake."""

import hashlib
import os
import socket
import threading

from helpers import _read_head, connect, pattern_sha256, proxy_exchange, SockReader, std_request
from test_admin import ADMIN, stats, wait_stats
from test_cache import methods, script

FULL = os.environ.get("LARDER_LATE_JOIN_FULL") == "1"
MiB = 1 << 20


class Download(threading.Thread):
    """A client reading the whole answer and hashing it; `milestones` are (byte count, event)
    pairs set as the body passes them."""

    def __init__(self, port, url, milestones=(), stop_after=None, resume=None, timeout=120):
        super().__init__(daemon=True)
        self.port, self.url, self.timeout = port, url, timeout
        self.milestones = sorted(milestones, key=lambda m: m[0])
        self.stop_after = stop_after
        # Set: a client stopped after `stop_after` bytes reads the rest.
        self.resume = resume
        self.stopped = threading.Event()
        self.done = threading.Event()
        self.received = 0
        self.digest = None
        self.status = None
        self.cache_status = ""
        self.error = None
        self.sock = None

    def run(self):
        try:
            if self.resume is not None:
                # A small receive window, so what the stopped client leaves unread is held back by
                # Larder, not by the kernel's buffers.
                self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
                self.sock.settimeout(self.timeout)
                self.sock.connect(("127.0.0.1", self.port))
            else:
                self.sock = connect(self.port, self.timeout)
            self.sock.sendall(std_request("GET", self.url))
            reader = SockReader(self.sock)
            head = _read_head(reader)
            self.status = head.status
            self.cache_status = head.header("Cache-Status") or ""
            length = int(head.header("Content-Length"))
            h = hashlib.sha256()
            pending = list(self.milestones)

            def take(piece):
                h.update(piece)
                self.received += len(piece)
                while pending and self.received >= pending[0][0]:
                    pending.pop(0)[1].set()

            if self.stop_after is not None:
                # Stops reading with the connection open: its socket fills and stays full.
                reader.read_exact(min(self.stop_after, length), sink=take)
                self.stopped.set()
                if self.resume is None:
                    return
                assert self.resume.wait(self.timeout), "never told to read on"
            reader.read_exact(length - self.received, sink=take)
            for _, event in pending:
                event.set()
            self.digest = h.hexdigest()
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            # A client that failed lets the others start all the same: the test then reports it.
            if self.error is not None:
                for _, event in self.milestones:
                    event.set()
            if (self.stop_after is None or self.resume is not None) and self.sock is not None:
                self.sock.close()
            self.done.set()


def joiners(port, url, pacer, join_points):
    """A client starting as `pacer` passes each of `join_points` bytes."""
    out = []
    for point in join_points:
        went = threading.Event()
        pacer.milestones.append((point, went))
        out.append((went, Download(port, url)))
    pacer.milestones.sort(key=lambda m: m[0])
    return out


def assert_everyone_got_it(everyone, size, timeout):
    """Every client ended with a 200 and every byte of the `size`-byte pattern body."""
    for d in everyone:
        assert d.done.wait(timeout)
    want = pattern_sha256(size)
    for d in everyone:
        assert d.error is None, d.error
        assert d.status == 200 and d.digest == want, (d.received, d.cache_status)


def run_joiners(pending, timeout, larder, origin, gates):
    """Starts each client as the pacer passes its join point, waits until it has joined the
    download, then opens the origin's gate there (``gates``: a name or None for each)."""
    joined = stats(larder)["collapsed_requests"]
    for (went, d), gate in zip(pending, gates):
        assert went.wait(timeout), "the first client stopped short of a join point"
        d.start()
        joined += 1
        got = wait_stats(larder, lambda s: s["collapsed_requests"] >= joined, timeout=30)["collapsed_requests"]
        assert got >= joined, f"a client did not join the download ({got} of {joined})"
        if gate is not None:
            origin.open_gate(gate)


def test_six_index_downloads_starting_one_after_another_make_one_origin_fetch(larder_factory, origin, workdir):
    size = 8_700_000 if FULL else 3_000_000
    larder = larder_factory({**ADMIN, "cache": {"memory_max_object_size": "1MiB"}})
    # The others start as the first has 2 %, 20 %, 35 %, 70 % and 95 % of it: in the full size,
    # the last three well past the first 2 MiB after which an earlier version fetched again.
    points = [int(size * f) for f in (0.02, 0.2, 0.35, 0.7, 0.95)]
    gates = [f"join{i}" for i in range(len(points))]
    script(workdir, "packages", headers=[("Cache-Control", "max-age=600"), ("Content-Type", "text/plain")],
           body_bytes=size, rate=2 * MiB if FULL else None, hold_at=[[p, g] for p, g in zip(points, gates)])
    url = origin.url("/res/packages")
    first = Download(larder.port, url)
    pending = joiners(larder.port, url, first, points)
    first.start()
    run_joiners(pending, 120, larder, origin, gates)
    everyone = [first] + [d for _, d in pending]
    assert_everyone_got_it(everyone, size, 120)
    assert methods(origin, "packages") == ["GET"]
    assert sum("collapsed" in d.cache_status for d in everyone) == 5, [d.cache_status for d in everyone]


def test_twenty_clients_joining_a_large_download_stored_on_disk_while_its_first_client_stalls(
        larder_factory, origin, workdir):
    size = 64 * MiB if FULL else 16 * MiB
    # The memory tier is smaller than the object: it is stored on disk as it downloads. The
    # stalled client is not cut for a minute, far longer than the others need.
    larder = larder_factory({**ADMIN, "cache": {"memory_max_object_size": "1MiB"},
                             "limits": {"client_idle_timeout": "120s"}})
    # Nineteen more join while the pacer reads the first three eighths; the origin holds the body
    # at each of those points past the first 2 MiB (the first client reads 1 MiB before the pacer
    # starts) until the client starting there has joined.
    points = [int(size * 3 / 8 * i / 19) + 1 for i in range(1, 20)]
    gates = [f"join{i}" if p > 2 * MiB else None for i, p in enumerate(points)]
    script(workdir, "image", headers=[("Cache-Control", "max-age=600"),
                                      ("Content-Type", "application/octet-stream")],
           body_bytes=size, rate=8 * MiB if FULL else None,
           hold_at=[[p, g] for p, g in zip(points, gates) if g is not None])
    url = origin.url("/res/image")
    # The first client (whose request starts the fetch) reads 1 MiB and stops reading.
    stalled = Download(larder.port, url, stop_after=MiB)
    stalled.start()
    assert stalled.stopped.wait(60)
    pacer = Download(larder.port, url)
    pending = joiners(larder.port, url, pacer, points)
    pacer.start()
    wait_stats(larder, lambda s: s["collapsed_requests"] >= 1)  # the pacer joined
    run_joiners(pending, 120, larder, origin, gates)
    everyone = [pacer] + [d for _, d in pending]
    assert_everyone_got_it(everyone, size, 180)
    assert methods(origin, "image") == ["GET"]
    # The stalled client was never cut: nobody waited for it, nor for its timeout.
    stalled.sock.setblocking(False)
    try:
        peeked = stalled.sock.recv(1, socket.MSG_PEEK)
        assert peeked, "the stalled client's connection was closed"
    finally:
        stalled.sock.close()


def test_a_purge_during_a_download_lets_nobody_new_join_it(larder_factory, origin, workdir):
    size = 3_000_000
    larder = larder_factory({"cache": {"memory_max_object_size": "1MiB"}})
    # The origin holds each answer after 1 MiB until the test has purged the URL and asked again.
    script(workdir, "purged", headers=[("Cache-Control", "max-age=600")], body_bytes=size,
           hold_at=[[MiB, "purged"]])
    url = origin.url("/res/purged")
    first = Download(larder.port, url)
    passed = threading.Event()
    first.milestones.append((MiB, passed))
    first.start()
    assert passed.wait(60)
    assert proxy_exchange(larder.port, "PURGE", url).status in (200, 404)
    # Asked after the purge: answered by a fetch of its own, not from what came before it.
    after = Download(larder.port, url)
    after.start()
    origin.wait_requests(2, timeout=10)
    origin.open_gate("purged")
    assert_everyone_got_it([first, after], size, 120)
    assert "collapsed" not in after.cache_status, after.cache_status
    assert methods(origin, "purged") == ["GET", "GET"]


def test_a_hand_over_the_detached_budget_has_no_room_for_is_refused_and_the_first_client_stays_the_leader(
        larder_factory, origin, workdir):
    """A slow first client hands its download over only when its share of the detached budget has
    room for the bytes still to come: with `limits.detached_bytes` smaller than that, the hand-over
    is refused (logged with the limit, counted once), nothing runs detached, the follower moves at the first
    client's pace, and once that client reads on everyone gets every byte of the one GET."""
    size = 24 * MiB
    larder = larder_factory(dict(ADMIN, cache={"memory_max_object_size": "1MiB"},
                                 limits={"client_idle_timeout": "120s", "detached_bytes": "1MiB"}))
    # The origin holds the body after 8 MiB (more than the stopped client's buffers take) until the
    # first client reads on.
    script(workdir, "refused", headers=[("Cache-Control", "max-age=600"),
                                        ("Content-Type", "application/octet-stream")],
           body_bytes=size, hold_at=[[8 * MiB, "refused"]])
    url = origin.url("/res/refused")
    read_on = threading.Event()
    first = Download(larder.port, url, stop_after=MiB, resume=read_on)
    first.start()
    assert first.stopped.wait(20)
    follower = Download(larder.port, url)
    follower.start()
    refused = larder.wait_for_log(
        r"download of \S+ not handed over to its followers: limits\.detached_bytes reached; 127\.0\.0\.1 goes on pacing it",
        timeout=20)
    assert refused, larder.log_text()[-2000:]
    # Refused, not taken: no claim is held and nothing was cut, and the follower waits for the
    # first client, which still holds the origin read back.
    s = stats(larder)
    assert s["detached_fetches_in_flight"] == 0, s
    assert sum(s["detached_fetches_cut"].values()) == 0, s["detached_fetches_cut"]
    assert not follower.done.is_set() and follower.received < size, follower.received
    read_on.set()
    origin.open_gate("refused")
    assert_everyone_got_it([first, follower], size, 30)
    assert methods(origin, "refused") == ["GET"]
    assert "collapsed" not in first.cache_status and "collapsed" in follower.cache_status, \
        (first.cache_status, follower.cache_status)
    s = wait_stats(larder, lambda s: s["detached_fetches_in_flight"] == 0)
    assert s["detached_fetches_in_flight"] == 0 and sum(s["detached_fetches_cut"].values()) == 0, s
    # Counted once for the download, under the limit that refused it, however often it was tried.
    assert s["hand_overs_refused"]["detached_bytes"] == 1, s["hand_overs_refused"]
    assert sum(s["hand_overs_refused"].values()) == 1, s["hand_overs_refused"]
