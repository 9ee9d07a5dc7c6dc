"""A cacheable download its client aborts is finished for the cache once most of it has arrived
(`cache.finish_aborted_fraction`, up to `cache.finish_aborted_max_size`), so the retry is a hit;
too little of it, or too large an object, and the fetch is dropped with the client."""

import socket
import struct
import time

from helpers import RawClient, _read_head, pattern, proxy_exchange, std_request
from test_cache import cache_status, methods, script

SIZE = 32 << 20
# The origin holds the rest of the body after this much until the client has left (a gate the test
# opens then), and what follows is more than socket buffers hold, so Larder sees the client gone
# while the body is still arriving.
MOST = 28 << 20


def abort_after(lr, origin, url, received, gate):
    """Reads the head and `received` body bytes, then goes away; then the origin sends the rest."""
    c = RawClient(lr.port, 15)
    c.send(std_request("GET", url))
    assert _read_head(c.reader).status == 200
    c.reader.read_exact(received)
    # A reset, as a client killed mid-download leaves.
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    origin.open_gate(gate)


def retry_is_a_hit(lr, origin, name, url):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        r = proxy_exchange(lr.port, "GET", url, headers=[("Cache-Control", "only-if-cached")], timeout=15)
        if r.status == 200:
            assert r.body == pattern(SIZE)
            return True
        time.sleep(0.05)
    return False


def test_a_mostly_downloaded_object_is_finished_for_the_cache(larder, origin, workdir):
    script(workdir, "most", headers=[("Cache-Control", "max-age=600")], body_bytes=SIZE,
           pause_after=MOST, pause_until="most")
    url = origin.url("/res/most")
    abort_after(larder, origin, url, MOST, "most")
    assert retry_is_a_hit(larder, origin, "most", url)
    assert methods(origin, "most") == ["GET"]
    r = proxy_exchange(larder.port, "GET", url, timeout=15)
    assert cache_status(r).startswith("larder; hit") and r.body == pattern(SIZE)


def test_an_object_barely_started_is_dropped_with_its_client(larder, origin, workdir):
    script(workdir, "little", headers=[("Cache-Control", "max-age=600")], body_bytes=SIZE,
           pause_after=4 << 20, pause_until="little")
    url = origin.url("/res/little")
    abort_after(larder, origin, url, 4 << 20, "little")
    # The fetch is dropped with its client: the origin's connection is closed (a finished fetch
    # would have kept it for the next request).
    assert len(origin.wait_ended(1)) == 1
    r = proxy_exchange(larder.port, "GET", url, headers=[("Cache-Control", "only-if-cached")])
    assert r.status == 504
    proxy_exchange(larder.port, "GET", url, timeout=15)
    assert methods(origin, "little") == ["GET", "GET"]


def test_objects_over_the_size_limit_or_with_the_feature_off_are_dropped(larder_factory, origin, workdir):
    script(workdir, "big", headers=[("Cache-Control", "max-age=600")], body_bytes=SIZE,
           pause_after=MOST, pause_until="big")
    for config in ({"cache": {"finish_aborted_max_size": "16MiB"}}, {"cache": {"finish_aborted_fraction": "off"}}):
        lr = larder_factory(config=config)
        url = origin.url("/res/big")
        before = len(origin.ended)
        origin.open_gate("big", shut=True)
        abort_after(lr, origin, url, MOST, "big")
        # Dropped with its client: the origin's connection is closed (a finished fetch would have
        # kept it for the next request).
        assert len(origin.wait_ended(before + 1)) == before + 1, config
        r = proxy_exchange(lr.port, "GET", url, headers=[("Cache-Control", "only-if-cached")])
        assert r.status == 504, config
        lr.stop()
