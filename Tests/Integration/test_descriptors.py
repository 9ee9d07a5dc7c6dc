"""Descriptors are a budget. Started at systemd's default soft limit of 1,024, Larder raises the soft
limit to the hard one, derives its connection limits from what it gets (and says so at start), keeps
idle origin connections within a share of it across all origins (the longest idle closed first),
and closes idle ones before refusing anyone when the limit is reached anyway. One client visiting
1,100 hosts used to leave 1,008 idle origin connections behind, and the next client got no answer."""

import re

import pytest

from helpers import RawClient, proxy_exchange
from test_admin import ADMIN, stats, wait_stats


def limited(soft, hard):
    return ("prlimit", f"--nofile={soft}:{hard}", "--")


@pytest.mark.timeout_s(120)
def test_one_client_visiting_many_hosts_cannot_use_up_the_descriptors(larder_factory, origin, fake_dns):
    hosts = [f"h{i}.test" for i in range(1100)]
    fake_dns.records.update({h: "127.0.0.1" for h in hosts})
    lr = larder_factory(config=dict(ADMIN, workers=1, session={"dns_servers": [f"127.0.0.1:{fake_dns.port}"]}),
                        wrapper=limited(1024, 1024))
    said = lr.wait_for_log(r"descriptors: 1024 open files allowed \(the hard limit is 1024\): "
                           r"at most (\d+) client connections \(limits.max_connections 10000\), (\d+) idle")
    assert said, lr.log_text()[-2000:]
    clients, idle_cap = int(said.group(1)), int(said.group(2))
    assert clients * 2 + idle_cap < 1024
    with RawClient(lr.port, timeout=30) as c:
        for i, h in enumerate(hosts):
            r = c.request("GET", f"http://{h}:{origin.port}/bytes/10")
            assert r.status == 200, (h, r.status, r.body[:200])
            if i == 700:
                # Fewer hosts than descriptors so far: only the cap keeps the idle ones down.
                # /stats has every worker publish its levels first: they are taken after this request.
                s = stats(lr)
                assert 0 < s["origin_connections_idle"] <= idle_cap, (s["origin_connections_idle"], idle_cap)
    assert "Too many open files" not in lr.log_text()
    # Room is left for everyone else: a burst of new clients is answered.
    for i in range(50):
        assert proxy_exchange(lr.port, "GET", origin.url(f"/bytes/10?n={i}")).status == 200


def test_the_soft_limit_is_raised_to_the_hard_limit_and_said(larder_factory):
    lr = larder_factory(wrapper=limited(1024, 8192))
    assert lr.wait_for_log(r"descriptors: 8192 open files allowed \(raised from 1024\)"), lr.log_text()[-2000:]
    pid = lr.pid
    limits = open(f"/proc/{pid}/limits").read()
    assert re.search(r"Max open files\s+8192\s+8192", limits), limits


def test_a_configured_connection_limit_above_the_budget_is_brought_down(larder_factory, origin):
    lr = larder_factory(config=dict(ADMIN, workers=1, limits={"max_connections": 100000}), wrapper=limited(512, 512))
    said = lr.wait_for_log(r"at most (\d+) client connections \(limits.max_connections 100000\)")
    assert said and int(said.group(1)) < 256, lr.log_text()[-2000:]
    assert proxy_exchange(lr.port, "GET", origin.url("/bytes/10")).status == 200
