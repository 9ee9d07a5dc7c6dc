"""Budgets: what one client address may hold at origins at once. Each limit is a configuration
key, refuses with a clear answer and a log line, counts its refusals in /metrics, and gives its
room back when a fetch ends."""

import socket
import threading

import pytest

from helpers import _read_head, _ThreadedServer, SockReader, std_request
from test_admin import ADMIN, stats, wait_stats


class HeldOrigin(_ThreadedServer):
    """Holds every request until `let_go` is called, then answers each with a small response
    that is never stored. `arrived` counts the requests it holds or answered."""

    def __init__(self):
        self.arrived = 0
        self.changed = threading.Condition()
        self.gate = threading.Event()
        super().__init__()

    def handle(self, sock, peer):
        data = b""
        while b"\r\n\r\n" not in data:
            more = sock.recv(65536)
            if not more:
                return
            data += more
        with self.changed:
            self.arrived += 1
            self.changed.notify_all()
        self.gate.wait(30)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: no-store\r\n"
                     b"Connection: close\r\n\r\nok")

    def wait_arrived(self, n, timeout=15):
        with self.changed:
            assert self.changed.wait_for(lambda: self.arrived >= n, timeout), f"{self.arrived} of {n} arrived"

    def let_go(self):
        self.gate.set()

    def hold_again(self):
        self.gate.clear()


@pytest.fixture
def held_origin():
    o = HeldOrigin()
    yield o
    o.let_go()
    o.stop()


def request(port, url, source="127.0.0.1"):
    s = socket.create_connection(("127.0.0.1", port), timeout=15, source_address=(source, 0))
    s.sendall(std_request("GET", url))
    return s


def answer(sock):
    head = _read_head(SockReader(sock))
    sock.close()
    return head


def test_a_client_with_too_many_requests_at_origins_gets_429_and_its_room_back_when_they_end(
        larder_factory, held_origin):
    lr = larder_factory(config=dict(ADMIN, limits={"origin_fetches_per_client": 2}))
    url = f"http://127.0.0.1:{held_origin.port}/slow"
    held = [request(lr.port, url + str(i)) for i in range(2)]
    held_origin.wait_arrived(2)
    head = answer(request(lr.port, url + "3"))
    assert head.status == 429
    assert head.header("Retry-After") == "1"
    s = wait_stats(lr, lambda s: s["origin_fetches_refused"]["origin_fetches_per_client"] >= 1)
    assert s["origin_fetches_refused"]["origin_fetches_per_client"] == 1
    lr.wait_for_log(r"limits\.origin_fetches_per_client")
    # Another address has a share of its own.
    other = request(lr.port, url + "4", source="127.0.0.2")
    held_origin.wait_arrived(3)
    held_origin.let_go()
    assert [answer(s).status for s in held + [other]] == [200, 200, 200]
    # Their room is back: two more go to the origin at once, and only a third is refused again.
    held_origin.hold_again()
    again = [request(lr.port, url + str(5 + i)) for i in range(2)]
    held_origin.wait_arrived(5)
    assert answer(request(lr.port, url + "7")).status == 429
    held_origin.let_go()
    assert [answer(s).status for s in again] == [200, 200]
    assert stats(lr)["origin_fetches_refused"]["origin_fetches_per_client"] == 2


def test_the_per_client_origin_budget_can_be_switched_off(larder_factory, held_origin):
    lr = larder_factory(config=dict(ADMIN, limits={"origin_fetches_per_client": 0}))
    url = f"http://127.0.0.1:{held_origin.port}/slow"
    held = [request(lr.port, url + str(i)) for i in range(8)]
    held_origin.wait_arrived(8)
    held_origin.let_go()
    assert all(answer(s).status == 200 for s in held)
    assert stats(lr)["origin_fetches_refused"]["origin_fetches_per_client"] == 0
