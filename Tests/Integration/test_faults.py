"""Broken origins and vanishing clients. Every response here is marked cacheable, so storing a
broken one would show: the client gets a clean 502/504 or a cut connection, the proxy keeps
serving, nothing is stored (the next request reaches the origin again), and no descriptor leaks."""

import collections
import os
import socket
import threading
import time

import pytest

from helpers import RawClient, proxy_exchange, std_request

CACHEABLE = b"Cache-Control: max-age=600\r\n"

# What the origin sends for each path; `None` in a script means "stop sending, keep the socket".
BROKEN = {
    "garbage": [b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"],
    "http09": [b"<html>hello from 1991</html>\n"],
    "bad-status": [b"HTTP/1.1 2OO OK\r\n" + CACHEABLE + b"Content-Length: 2\r\n\r\nok"],
    "bad-length": [b"HTTP/1.1 200 OK\r\n" + CACHEABLE + b"Content-Length: -1\r\n\r\n"],
    "cl-and-te": [b"HTTP/1.1 200 OK\r\n" + CACHEABLE + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nhello\r\n0\r\n\r\n"],
    "bad-chunk": [b"HTTP/1.1 200 OK\r\n" + CACHEABLE + b"Transfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nhello\r\nzz\r\nworld\r\n0\r\n\r\n"],
    "short-body": [b"HTTP/1.1 200 OK\r\n" + CACHEABLE + b"Content-Length: 100000\r\n\r\n" + b"s" * 5000],
    "reset-mid-body": [b"HTTP/1.1 200 OK\r\n" + CACHEABLE + b"Content-Length: 100000\r\n\r\n" + b"r" * 5000, "RST"],
    "hang-after-head": [b"HTTP/1.1 200 OK\r\n" + CACHEABLE + b"Content-Length: 1000\r\n\r\n", None],
    "hang-mid-chunk": [b"HTTP/1.1 200 OK\r\n" + CACHEABLE + b"Transfer-Encoding: chunked\r\n\r\n100\r\nabc", None],
    "good": [b"HTTP/1.1 200 OK\r\n" + CACHEABLE + b"Content-Length: 4\r\n\r\ngood"],
}


class BrokenOrigin:
    """Answers /NAME with BROKEN[NAME], counting requests per name."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(64)
        self.port = self.srv.getsockname()[1]
        self.hits = collections.Counter()
        self.held = []
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, name):
        return f"http://127.0.0.1:{self.port}/{name}"

    def _accept(self):
        while not self.stopping:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        conn.settimeout(30)
        buf = b""
        try:
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    conn.close()
                    return
                buf += chunk
            name = buf.split(b" ", 2)[1].decode().rsplit("/", 1)[-1]
            self.hits[name] += 1
            for part in BROKEN[name]:
                if part is None:
                    self.held.append(conn)   # silent from now on
                    return
                if part == "RST":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    break
                conn.sendall(part)
        except OSError:
            pass
        conn.close()

    def stop(self):
        self.stopping = True
        self.srv.close()
        for c in self.held:
            c.close()


@pytest.fixture
def broken():
    b = BrokenOrigin()
    yield b
    b.stop()


def fetch(port, url):
    """(status or None when cut, body bytes received)."""
    with RawClient(port, timeout=15) as c:
        c.send(std_request("GET", url))
        got = []
        try:
            resp = c.response(sink=got.append)
        except (EOFError, ConnectionResetError, OSError):
            return None, b"".join(got)
        return resp.status, b"".join(got) or resp.body


@pytest.mark.parametrize("name,status", [
    ("garbage", 502), ("http09", 502), ("bad-status", 502), ("bad-length", 502), ("cl-and-te", 502),
])
def test_unusable_origin_answers_are_502_and_never_stored(larder_factory, broken, name, status):
    lr = larder_factory(config={"session": {"timeout_interval_for_request": "2s"}})
    got, body = fetch(lr.port, broken.url(name))
    assert got == status, (got, body)
    assert b"invalid response from upstream" in body or b"closed the connection" in body, body
    assert fetch(lr.port, broken.url(name))[0] == status
    assert broken.hits[name] == 2, "a broken answer was served from the cache"
    assert fetch(lr.port, broken.url("good")) == (200, b"good")
    assert "invalid response" in lr.log_text() or "closed the connection" in lr.log_text()


@pytest.mark.parametrize("name", ["bad-chunk", "short-body", "reset-mid-body", "hang-after-head", "hang-mid-chunk"])
def test_origin_failing_after_its_head_cuts_the_response_and_stores_nothing(larder_factory, broken, name):
    lr = larder_factory(config={"session": {"timeout_interval_for_request": "1s"}})
    t0 = time.monotonic()
    got, body = fetch(lr.port, broken.url(name))
    # The head was already forwarded: the only honest signal left is a cut connection.
    assert got is None, (name, got, body[:200])
    assert time.monotonic() - t0 < 6
    assert fetch(lr.port, broken.url(name))[0] is None
    assert broken.hits[name] == 2, "a partial body was stored"
    assert fetch(lr.port, broken.url("good")) == (200, b"good")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_fds(pid, target, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        n = open_fds(pid)
        if n <= target or time.monotonic() > deadline:
            return n
        time.sleep(0.02)


def test_clients_vanishing_mid_download_and_mid_upload_leak_nothing(larder_factory, origin):
    # Idle origin connections are not kept, so the baseline is exact.
    lr = larder_factory(config={"session": {"max_idle_connections_per_host": 0}})
    assert proxy_exchange(lr.port, "GET", origin.url("/echo")).status == 200
    assert len(origin.wait_ended(1)) == 1  # Larder closed its origin connection (none is kept idle)
    baseline = open_fds(lr.pid)

    for _ in range(10):
        # Mid-download: 50 MB requested, 64 KiB read, gone.
        s = socket.create_connection(("127.0.0.1", lr.port), timeout=10)
        s.sendall(std_request("GET", origin.url("/bytes/50000000")))
        s.recv(65536)
        s.close()
        # Mid-upload: 10 MB announced, 1 MB sent, gone.
        s = socket.create_connection(("127.0.0.1", lr.port), timeout=10)
        s.sendall(std_request("POST", origin.url("/echo"), headers=[("Content-Length", "10000000")]))
        s.sendall(b"u" * 1_000_000)
        s.close()
    left = wait_fds(lr.pid, baseline)
    assert left <= baseline, f"{left} descriptors open, {baseline} before"
    assert proxy_exchange(lr.port, "GET", origin.url("/echo")).status == 200
