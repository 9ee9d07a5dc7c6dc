"""A port is one Larder's. Listeners share an address among one process's workers with
SO_REUSEPORT, which any process of the same user could join: a second Larder (a forgotten test, a
second container on the host network) would take half the connections, and /stats, reloads and
purges would land on either. Anything already listening on a configured port stops Larder at start
with a clear message, as Squid and nginx do."""

import socket

from helpers import Larder, free_port, proxy_exchange
from test_admin import stats

IN_USE = "another process is listening there"


def fixed_ports_config(proxy_port, admin_port):
    return {"listen": [f"127.0.0.1:{proxy_port}"], "admin_listen": f"127.0.0.1:{admin_port}", "workers": 2}


def test_a_second_larder_on_the_same_ports_stops_at_start_and_the_first_keeps_every_request(
        larder_factory, origin, workdir):
    proxy_port, admin_port = free_port(), free_port()
    first = larder_factory(config=fixed_ports_config(proxy_port, admin_port), listen_flag=False, name="first")
    second = Larder(workdir, config=fixed_ports_config(proxy_port, admin_port), listen_flag=False, name="second",
                    wait=False)
    try:
        assert second.wait_exit(30) == 2, second.log_text()[-2000:]
        assert IN_USE in second.log_text() and f"127.0.0.1:{proxy_port}" in second.log_text()
    finally:
        second.stop()
    for i in range(20):
        assert proxy_exchange(proxy_port, "GET", origin.url(f"/bytes/10?i={i}")).status == 200
    assert stats(first)["requests"]["GET"] == 20


def test_the_admin_port_alone_in_use_also_stops_larder(larder_factory, workdir):
    admin_port = free_port()
    larder_factory(config=fixed_ports_config(free_port(), admin_port), listen_flag=False, name="first")
    second = Larder(workdir, config=fixed_ports_config(free_port(), admin_port), listen_flag=False, name="second",
                    wait=False)
    try:
        assert second.wait_exit(30) == 2, second.log_text()[-2000:]
        assert "admin endpoint" in second.log_text() and IN_USE in second.log_text()
    finally:
        second.stop()


def test_a_port_held_by_another_server_with_reuseport_is_not_joined(workdir):
    """Any server that set SO_REUSEPORT itself (as Larder does) would otherwise have been joined."""
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    port = other.getsockname()[1]
    try:
        lr = Larder(workdir, config={"listen": [f"127.0.0.1:{port}"]}, listen_flag=False, name="joiner", wait=False)
        try:
            assert lr.wait_exit(30) == 2, lr.log_text()[-2000:]
            assert IN_USE in lr.log_text()
        finally:
            lr.stop()
    finally:
        other.close()


def test_a_restart_on_the_same_ports_is_not_refused(larder_factory, origin, workdir):
    """Connections of the previous Larder left in TIME_WAIT hold no port."""
    proxy_port, admin_port = free_port(), free_port()
    config = fixed_ports_config(proxy_port, admin_port)
    before = larder_factory(config=config, listen_flag=False, name="before")
    for i in range(5):
        assert proxy_exchange(proxy_port, "GET", origin.url(f"/bytes/10?i={i}")).status == 200
    assert before.stop() == 0
    after = larder_factory(config=config, listen_flag=False, name="after")
    assert proxy_exchange(after.port, "GET", origin.url("/bytes/10?i=0")).status == 200


def test_one_larder_may_listen_on_an_address_and_the_wildcard_on_one_port(larder_factory, origin):
    """Its own listeners are no other process: probed before any is bound."""
    # A port free on every address; on a busy machine a connection may still take it as its own
    # port before Larder binds it (Larder then refuses, rightly): another port is tried.
    for attempt in range(3):
        port = free_port(dual_stack=True)
        try:
            lr = larder_factory(config={"listen": [f"127.0.0.1:{port}", f"[::]:{port}"]}, listen_flag=False,
                                name=f"larder{attempt}")
            break
        except AssertionError as e:
            if "another process is listening there" not in str(e) or attempt == 2:
                raise
    assert lr.wait_for_log(rf"proxy listening on \[::\]:{port}"), lr.log_text()[-2000:]
    assert proxy_exchange(port, "GET", origin.url("/bytes/10")).status == 200
    assert lr.stop() == 0
