"""Other spellings of an IPv4 address. Browsers, the C library and parent proxies such as Squid read
`2130706437`, `127.5`, `0x7f.0.0.5` or `0177.0.0.5` as 127.0.0.5. Larder reads them the same way,
once, when the target is parsed, and every rule, the cache key and what it forwards use the one
dotted spelling: through a parent proxy (where Larder checks destinations itself, before asking
the parent) no spelling walks past `deny_destinations`, and direct mode says the same."""

import json
import socket
import threading

import pytest

from helpers import RawClient, build_request, proxy_exchange
from test_cache import script
from test_parent_proxy import Parent, child_of, servers, start  # noqa: F401  (fixture)

SPELLINGS = ["2130706437", "127.5", "127.0.5", "0x7f.0.0.5", "0X7F000005", "0177.0.0.5", "017700000005",
             "0x7f.0.0.5."]
DENIED = b"127.0.0.5 is in deny_destinations (127.0.0.5/32)"


class Listening:
    """A socket on 127.0.0.5 that counts the connections it is offered."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.5", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def stop(self):
        self.running = False
        self.thread.join(2)
        self.sock.close()


@pytest.fixture
def denied_service():
    s = Listening()
    yield s
    s.stop()


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_no_spelling_of_a_denied_address_reaches_it_through_a_parent(larder_factory, servers, workdir,  # noqa: F811
                                                                      denied_service, spelling):
    parent = start(servers, Parent(required=None))
    lr = child_of(larder_factory, parent, None, workdir, credentials=None, deny_destinations=["127.0.0.5/32"])
    resp = proxy_exchange(lr.port, "GET", f"http://{spelling}:{denied_service.port}/latest/meta-data/")
    assert resp.status == 403 and DENIED in resp.body, (resp.status, resp.body)
    with RawClient(lr.port) as c:
        c.send(build_request("CONNECT", f"{spelling}:443", [("Host", f"{spelling}:443")]))
        assert c.response("CONNECT").status == 403
    assert parent.heads == [] and denied_service.accepted == 0


@pytest.mark.parametrize("spelling", ["2130706437", "0x7f.0.0.5", "0177.0.0.5"])
def test_direct_mode_refuses_the_same_spellings_with_the_same_answer(larder_factory, denied_service, spelling):
    lr = larder_factory(config={"deny_destinations": ["127.0.0.5/32"]})
    resp = proxy_exchange(lr.port, "GET", f"http://{spelling}:{denied_service.port}/")
    assert resp.status == 403 and DENIED in resp.body, (resp.status, resp.body)
    assert denied_service.accepted == 0


def test_a_spelling_that_is_no_address_is_a_400(larder_factory, denied_service):
    lr = larder_factory(config={"deny_destinations": ["127.0.0.5/32"]})
    for host in ("256.0.0.1", "0x7g.0.0.5", "1.2.3.4.5", "example.1", "4294967296"):
        resp = proxy_exchange(lr.port, "GET", f"http://{host}:{denied_service.port}/")
        assert resp.status == 400, (host, resp.status, resp.body)
    assert denied_service.accepted == 0


def test_every_spelling_is_one_cache_key_and_one_host_upstream(larder_factory, origin, workdir):
    script(workdir, "spelt", headers=[("Cache-Control", "max-age=600")], body="one entry")
    lr = larder_factory()
    first = proxy_exchange(lr.port, "GET", f"http://0x7f000001:{origin.port}/res/spelt")
    assert first.status == 200 and first.body == b"one entry"
    for spelling in ("127.0.0.1", "2130706433", "127.1", "0177.0.0.1"):
        again = proxy_exchange(lr.port, "GET", f"http://{spelling}:{origin.port}/res/spelt")
        assert again.header("Cache-Status").startswith("larder; hit"), (spelling, again.header("Cache-Status"))
    echoed = json.loads(proxy_exchange(lr.port, "GET", f"http://2130706433:{origin.port}/echo").body)
    hosts = [v for n, v in echoed["headers"] if n.lower() == "host"]
    assert hosts == [f"127.0.0.1:{origin.port}"], echoed["headers"]


def test_a_denied_address_that_comes_late_in_a_second_family_is_still_refused_through_a_parent(
        larder_factory, servers, workdir):  # noqa: F811
    """Through a parent, Larder's lookup only checks the destination: the IPv6 answer naming a
    denied address may come a while after the IPv4 one, and must still be waited for."""
    from helpers import FakeDNS
    dns = FakeDNS(records={"split.test": "127.0.0.1"}, records6={"split.test": "::1"},
                  slow6=r"split\.test", slow_delay=1.5)
    try:
        parent = start(servers, Parent(required=None))
        lr = child_of(larder_factory, parent, None, workdir, credentials=None, deny_destinations=["::1/128"],
                      session={"proxy": f"http://127.0.0.1:{parent.port}", "dns_servers": [f"127.0.0.1:{dns.port}"],
                               "connect_timeout": "10s", "timeout_interval_for_request": "10s"})
        resp = proxy_exchange(lr.port, "GET", "http://split.test/secret", timeout=20)
        assert resp.status == 403 and b"::1 is in deny_destinations" in resp.body, (resp.status, resp.body)
        assert parent.heads == []
    finally:
        dns.stop()
