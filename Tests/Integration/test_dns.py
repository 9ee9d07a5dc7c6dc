"""Name lookups: a name server that never answers for some names must not stall lookups of the
others; lookups are bounded per client and per domain, answered from a cache within their TTLs,
and their failures are told apart (502 for a name that does not exist, 504 for no answer, 503 for
a lookup not started)."""

import re
import socket
import threading
import time

import pytest

from helpers import FakeDNS, SockReader, read_response, std_request

HOLES = r"(.+\.)?hole(-\d+)?\.test"
# The resolver's own timeout for a name server that never answers (3 s per query, 2 attempts).
LOOKUP_TIMEOUT = 6


def exchange(port, url, source="127.0.0.1", timeout=20.0):
    """One GET through the proxy on a new connection from `source` (a loopback address)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as s:
        s.settimeout(timeout)
        s.sendall(std_request("GET", url))
        return read_response(SockReader(s))


def run_threads(fns, join_timeout):
    """Runs each fn on its own thread; returns their results (an exception is a result)."""
    results = [None] * len(fns)

    def run(i):
        try:
            results[i] = fns[i]()
        except Exception as e:  # reported by the caller
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + join_timeout
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
    return results


def dns_larder(larder_factory, dns, workers=1, **session):
    return larder_factory(config={"workers": workers,
                                  "session": {"dns_servers": [f"127.0.0.1:{dns.port}"], **session}})


@pytest.mark.timeout_s(90)
def test_names_that_are_never_answered_do_not_stall_other_lookups(larder_factory, origin):
    """The report: 160 clients ask for names under dead domains while new healthy names are asked
    for by others. The healthy ones all succeed promptly, names that do not exist are 502, and
    the dead ones end in bounded time with an error that names DNS."""
    healthy = [f"ok-{i}.test" for i in range(20)]
    dns = FakeDNS(records={name: "127.0.0.1" for name in healthy}, silent=HOLES)
    try:
        lr = dns_larder(larder_factory, dns)
        # 160 dead names from four client addresses (40 each: under the per-client bound, so all
        # of them are really asked), one connection each.
        flood = [(lambda i=i: exchange(lr.port, f"http://hole-{i}.test/x", source=f"127.0.0.{10 + i % 4}"))
                 for i in range(160)]
        flood_results = []
        flood_thread = threading.Thread(target=lambda: flood_results.extend(run_threads(flood, 60)), daemon=True)
        t0 = time.monotonic()
        flood_thread.start()
        # Wait until the dead names are being asked for (64 queries: evdns's default in-flight
        # limit), well before their first retransmission.
        deadline = time.monotonic() + 20
        while dns.asked_matching(r"hole-\d+\.test", None) < 64 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert dns.asked_matching(r"hole-\d+\.test", None) >= 64, "the flood did not reach the name server"

        started = time.monotonic()
        ok = [(lambda n=n: exchange(lr.port, origin.url("/status/200").replace("127.0.0.1", n),
                                    source="127.0.0.2", timeout=15)) for n in healthy]
        nx = [(lambda i=i: exchange(lr.port, f"http://nx-{i}.test/x", source="127.0.0.3", timeout=15))
              for i in range(5)]
        results = run_threads(ok + nx, 30)
        healthy_elapsed = time.monotonic() - started

        for name, r in zip(healthy, results[:len(ok)]):
            assert not isinstance(r, Exception), (name, r)
            assert r.status == 200, (name, r.status, r.body[:200])
        # Well below the dead names' timeout: nothing waited behind them.
        assert healthy_elapsed < LOOKUP_TIMEOUT - 2, f"healthy lookups took {healthy_elapsed:.1f}s"
        for r in results[len(ok):]:
            assert not isinstance(r, Exception), r
            assert r.status == 502, (r.status, r.body)
            assert b"DNS" in r.body and b"NXDOMAIN" in r.body, r.body

        flood_thread.join(60)
        assert len(flood_results) == 160
        for r in flood_results:
            assert not isinstance(r, Exception), r
            assert r.status in (503, 504), (r.status, r.body)
            assert b"DNS lookup for hole-" in r.body, r.body
        assert sum(1 for r in flood_results if r.status == 504) >= 100
        assert b"timed out" in next(r.body for r in flood_results if r.status == 504)
        # Every dead name failed in bounded time: its own timeout, not the queue before it.
        assert time.monotonic() - t0 < 3 * LOOKUP_TIMEOUT
    finally:
        dns.stop()


@pytest.mark.timeout_s(60)
def test_one_client_cannot_take_every_lookup_slot(larder_factory, origin):
    """One client address asking for 100 dead names: beyond its bound the requests get a prompt
    503 naming the reason (logged once a second at most), and another client's lookups go on."""
    dns = FakeDNS(records={"fine.test": "127.0.0.1"}, silent=HOLES)
    try:
        lr = dns_larder(larder_factory, dns)
        started = time.monotonic()
        timed = []

        def ask(i):
            r = exchange(lr.port, f"http://hole-{i}.test/x")
            timed.append((r.status, time.monotonic() - started))
            return r

        flood_results = []
        flood_thread = threading.Thread(
            target=lambda: flood_results.extend(run_threads([(lambda i=i: ask(i)) for i in range(100)], 40)),
            daemon=True)
        flood_thread.start()
        assert lr.wait_for_log(r"503 to \d+ request\(s\)", timeout=15), lr.log_text()[-2000:]
        other = exchange(lr.port, origin.url("/status/200").replace("127.0.0.1", "fine.test"), source="127.0.0.2")
        assert other.status == 200, other.body
        flood_thread.join(40)

        refused = [r for r in flood_results if not isinstance(r, Exception) and r.status == 503]
        assert len(refused) >= 30, [getattr(r, "status", r) for r in flood_results]
        assert all(b"DNS lookup for hole-" in r.body and b"pending for this client" in r.body for r in refused)
        # Prompt: every 503 came before the first admitted lookup could have timed out.
        assert max(t for s, t in timed if s == 503) < LOOKUP_TIMEOUT
        assert all(not isinstance(r, Exception) and r.status in (503, 504) for r in flood_results)
        # One log line for many refusals, not one each.
        lines = [ln for ln in lr.log_text().splitlines() if "503 to " in ln and "name lookups" in ln]
        assert 1 <= len(lines) <= 10, lines
    finally:
        dns.stop()


@pytest.mark.timeout_s(60)
def test_one_dead_domain_cannot_take_every_lookup_slot(larder_factory, origin):
    """Dead names under one registered domain (hole.test), from several clients: beyond the
    per-domain bound they get a prompt 503 naming the domain; names elsewhere resolve."""
    dns = FakeDNS(records={"fine.test": "127.0.0.1"}, silent=HOLES)
    try:
        lr = dns_larder(larder_factory, dns)
        flood = [(lambda i=i: exchange(lr.port, f"http://n{i}.hole.test/x", source=f"127.0.0.{10 + i % 3}"))
                 for i in range(50)]
        results = run_threads(flood, 40)
        refused = [r for r in results if not isinstance(r, Exception) and r.status == 503]
        assert len(refused) >= 10, [getattr(r, "status", r) for r in results]
        assert all(b"pending under hole.test" in r.body for r in refused), refused[0].body
        # Only the admitted names were ever asked (each maybe more than once: retransmissions).
        asked = {n.lower() for n, _ in dns.queries if "hole.test" in n.lower()}
        assert len(asked) <= 50 - len(refused), sorted(asked)
        fine = exchange(lr.port, origin.url("/status/200").replace("127.0.0.1", "fine.test"))
        assert fine.status == 200
    finally:
        dns.stop()


def test_a_name_that_does_not_exist_is_502_naming_dns(larder_factory):
    dns = FakeDNS()
    try:
        lr = dns_larder(larder_factory, dns)
        r = exchange(lr.port, "http://missing.test/x")
        assert r.status == 502, (r.status, r.body)
        assert b"DNS lookup for missing.test failed" in r.body and b"NXDOMAIN" in r.body, r.body
    finally:
        dns.stop()


def test_a_name_never_answered_is_504_naming_dns(larder_factory):
    dns = FakeDNS(silent=HOLES)
    try:
        lr = dns_larder(larder_factory, dns)
        t0 = time.monotonic()
        r = exchange(lr.port, "http://hole-1.test/x")
        assert r.status == 504, (r.status, r.body)
        assert b"DNS lookup for hole-1.test timed out" in r.body, r.body
        assert time.monotonic() - t0 < LOOKUP_TIMEOUT + 4
    finally:
        dns.stop()


@pytest.mark.timeout_s(60)
def test_answers_are_kept_within_their_ttl_and_asked_again_after(larder_factory, origin, proxy_clock):
    """A name asked twice within its TTL is looked up once; a name whose TTL (1 s) has passed is
    asked again. Negative answers are kept too, briefly. One worker, no idle origin connections:
    every request opens a connection and needs the name."""
    dns = FakeDNS(records={"long.test": "127.0.0.1", "short.test": "127.0.0.1"}, ttls={"short.test": 1},
                  soa_minimum=30)
    try:
        lr = larder_factory(config={"workers": 1, "session": {"dns_servers": [f"127.0.0.1:{dns.port}"],
                                                              "max_idle_connections_per_host": 0}})

        def get(name, n):
            return exchange(lr.port, origin.url(f"/status/200?n={n}").replace("127.0.0.1", name))

        assert get("long.test", 1).status == 200
        assert get("long.test", 2).status == 200
        assert dns.asked("long.test") == 1, dns.queries

        assert exchange(lr.port, "http://gone.test/1").status == 502
        assert exchange(lr.port, "http://gone.test/2").status == 502
        assert dns.asked("gone.test") == 1, dns.queries

        assert get("short.test", 1).status == 200
        assert dns.asked("short.test") == 1
        # Once its second has passed on the proxy's clock, a request asks again.
        proxy_clock.advance(1.1)
        assert get("short.test", 2).status == 200
        assert dns.asked("short.test") == 2, "short.test was not asked again after its TTL"
    finally:
        dns.stop()


def test_concurrent_lookups_of_one_name_share_one_query(larder_factory, origin):
    """Twenty requests at once for a name whose answer takes a second and may not be kept (TTL 0):
    the name server is asked once, and every request is answered."""
    dns = FakeDNS(records={"slow.test": "127.0.0.1"}, ttls={"slow.test": 0}, slow=r"slow\.test", slow_delay=1.0)
    try:
        lr = dns_larder(larder_factory, dns)
        results = run_threads([(lambda i=i: exchange(lr.port, origin.url(f"/status/200?n={i}")
                                                     .replace("127.0.0.1", "slow.test"))) for i in range(20)], 30)
        assert all(not isinstance(r, Exception) and r.status == 200 for r in results), results
        assert dns.asked("slow.test") == 1, dns.queries
    finally:
        dns.stop()


@pytest.mark.timeout_s(60)
def test_one_client_cannot_block_a_shared_suffix_or_a_domain_for_others(larder_factory, origin):
    """Dead names under `evil.co.uk` from two clients: `co.uk` is a suffix, not one domain, and a
    client takes at most half of a domain's lookups, so other sites under it, and other clients'
    names under the same domain, still resolve."""
    dns = FakeDNS(records={"www.good.co.uk": "127.0.0.1", "ok.shared.test": "127.0.0.1"},
                  silent=r"(r\d+\.evil\.co\.uk|r\d+\.shared\.test)")
    try:
        lr = dns_larder(larder_factory, dns)
        # Two clients, 16 each: `co.uk` taken as one domain would be full.
        flood = [(lambda i=i: exchange(lr.port, f"http://r{i}.evil.co.uk/x", source=f"127.0.0.{10 + i % 2 * 2}"))
                 for i in range(32)]
        flood += [(lambda i=i: exchange(lr.port, f"http://r{i}.shared.test/x", source="127.0.0.10")) for i in range(32)]
        threads = [threading.Thread(target=f, daemon=True) for f in flood]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        # Every lookup admitted is pending: 32 under evil.co.uk, 16 of this client's under shared.test.
        while len({n.lower() for n, _ in dns.queries if re.search("evil|shared", n, re.I)}) < 48 \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        good = exchange(lr.port, origin.url("/status/200").replace("127.0.0.1", "www.good.co.uk"), source="127.0.0.11")
        assert good.status == 200, (good.status, good.body)
        other = exchange(lr.port, origin.url("/status/200").replace("127.0.0.1", "ok.shared.test"), source="127.0.0.11")
        assert other.status == 200, (other.status, other.body)
        for t in threads:
            t.join(LOOKUP_TIMEOUT + 10)
    finally:
        dns.stop()
