"""PROXY protocol listeners: a load balancer's v1 or v2 header names the real client, which is then
the one allow_clients, the per-client limits, purge_allowed_from and the access log see; headers
are believed only from proxy_protocol_from, and a connection without a valid header is closed."""

import json
import re
import socket
import ssl
import struct
import time

import pytest

from helpers import SockReader, pace, read_response, std_request
from test_access_log import read_lines
from test_admin import stats
from test_scale_out import HAProxy

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def v1(source="10.1.2.3", sport=51234, family="TCP4", destination="127.0.0.1", dport=3128):
    return f"PROXY {family} {source} {destination} {sport} {dport}\r\n".encode()


def v2(source="10.1.2.3", sport=51234, destination="127.0.0.1", dport=3128, command=1, tlvs=b""):
    if ":" in source:
        addresses = socket.inet_pton(socket.AF_INET6, source) + socket.inet_pton(socket.AF_INET6, destination)
        family = 0x21
    else:
        addresses = socket.inet_aton(source) + socket.inet_aton(destination)
        family = 0x11
    payload = addresses + struct.pack("!HH", sport, dport) + tlvs
    return V2_SIGNATURE + bytes([0x20 | command, family]) + struct.pack("!H", len(payload)) + payload


def v2_local():
    return V2_SIGNATURE + bytes([0x20, 0x00]) + struct.pack("!H", 0)


def start(larder_factory, workdir, extra=None, tls=False):
    """One Larder whose only proxy listener takes PROXY headers; its access log as JSON lines."""
    log = workdir / "access.jsonl"
    entry = {"address": "127.0.0.1:0", "proxy_protocol": True}
    config = {"access_log": str(log), "access_log_format": "json", "protect_this_host": "off",
              "allow_clients": ["127.0.0.0/8", "10.0.0.0/8", "2001:db8::/32"], "admin_listen": "127.0.0.1:0",
              "limits": {"client_header_timeout": "2s"}}
    if tls:
        config["listen"] = ["127.0.0.1:0"]
        config["tls"] = {"listen": [entry]}
    else:
        config["listen"] = [entry]
    config.update(extra or {})
    lr = larder_factory(config=config, listen_flag=False, listeners=1)
    if tls:
        lr.wait_for_text("(TLS) (PROXY protocol)", 10)
        line = next(l for l in lr.log_text().splitlines() if "(TLS) (PROXY protocol)" in l)
        lr.tls_port = int(line.split("127.0.0.1:")[1].split()[0])
    return lr, log


class Client:
    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = SockReader(self.sock)

    def send(self, data):
        self.sock.sendall(data)

    def get(self, url, method="GET"):
        self.send(std_request(method, url))
        return read_response(self.reader, method)

    def closed_without_answer(self, timeout=5.0):
        """True if Larder closes (EOF or reset) within `timeout` without sending a byte."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(65536) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def clients_logged(log, n):
    return sorted(json.loads(line)["client"] for line in read_lines(log, n))


def test_v1_and_v2_headers_name_the_client_in_the_access_log(larder_factory, origin, workdir):
    lr, log = start(larder_factory, workdir)
    url = origin.url("/bytes/10")
    with Client(lr.port) as c:
        # The header and the request in one packet: the request's bytes are not lost.
        c.send(v1() + std_request("GET", url))
        r = read_response(c.reader)
        assert r.status == 200 and len(r.body) == 10
        # The same connection carries on as 10.1.2.3.
        assert c.get(url).status == 200
    with Client(lr.port) as c:
        c.send(v2(source="10.9.8.7", tlvs=b"\x04\x00\x02ab") + std_request("GET", url))
        assert read_response(c.reader).status == 200
    with Client(lr.port) as c:
        c.send(v1(family="TCP6", source="2001:db8::7", destination="::1"))
        assert c.get(url).status == 200
    with Client(lr.port) as c:
        c.send(v2(source="2001:db8::8", destination="::1"))
        assert c.get(url).status == 200
    assert clients_logged(log, 5) == ["10.1.2.3", "10.1.2.3", "10.9.8.7", "2001:db8::7", "2001:db8::8"]


def test_a_header_split_across_writes_and_pipelined_requests(larder_factory, origin, workdir):
    lr, log = start(larder_factory, workdir)
    url = origin.url("/bytes/3")
    for header in (v1(source="10.4.4.4"), v2(source="10.5.5.5")):
        with Client(lr.port) as c:
            c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no piece waits for an ACK
            for i in range(0, len(header), 5):
                c.send(header[i:i + 5])
                pace(0.01)  # each piece in a segment of its own
            assert c.get(url).status == 200
    # Header, two pipelined requests and the start of a third, all in one write.
    with Client(lr.port) as c:
        third = std_request("GET", url)
        c.send(v2(source="10.6.6.6") + std_request("GET", url) + std_request("GET", url) + third[:7])
        assert read_response(c.reader).status == 200
        assert read_response(c.reader).status == 200
        c.send(third[7:])
        assert read_response(c.reader).status == 200
    assert clients_logged(log, 5) == ["10.4.4.4", "10.5.5.5", "10.6.6.6", "10.6.6.6", "10.6.6.6"]


def test_local_and_unknown_headers_use_the_connections_own_address(larder_factory, origin, workdir):
    lr, log = start(larder_factory, workdir)
    url = origin.url("/bytes/1")
    for header in (v2_local(), b"PROXY UNKNOWN\r\n", b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"):
        with Client(lr.port) as c:
            c.send(header)
            assert c.get(url).status == 200
    assert clients_logged(log, 3) == ["127.0.0.1"] * 3


def test_allow_clients_and_purge_judge_the_headers_client(larder_factory, origin, workdir):
    lr, _ = start(larder_factory, workdir)
    url = origin.url("/bytes/1")
    with Client(lr.port) as c:
        c.send(v1(source="192.0.2.7"))
        r = c.get(url)
        assert r.status == 403 and b"192.0.2.7" in r.body
    # 10.1.2.3 may use the proxy but not PURGE (purge_allowed_from is loopback).
    with Client(lr.port) as c:
        c.send(v1())
        assert c.get(url).status == 200
        assert c.get(url, method="PURGE").status == 403
    with Client(lr.port) as c:
        c.send(v1(source="127.0.0.1"))
        assert c.get(url, method="PURGE").status in (200, 404)  # 404: nothing was stored
    assert lr.wait_for_log("403 to 192.0.2.7:51234")


def test_per_client_limits_count_the_headers_client(larder_factory, origin, workdir):
    lr, _ = start(larder_factory, workdir, {"limits": {"max_connections_per_client": 1, "client_header_timeout": "2s"}})
    url = origin.url("/bytes/1")
    with Client(lr.port) as first, Client(lr.port) as second, Client(lr.port) as other:
        first.send(v1(source="10.1.2.3"))
        assert first.get(url).status == 200
        second.send(v1(source="10.1.2.3", sport=2))
        assert second.get(url).status == 429
        # All three come from 127.0.0.1, yet another client behind the balancer is served.
        other.send(v2(source="10.7.7.7"))
        assert other.get(url).status == 200
    assert stats(lr)["client_connections_refused"]["max_connections_per_client"] == 1


def test_headers_from_outside_proxy_protocol_from_are_never_read(larder_factory, origin, workdir):
    lr, _ = start(larder_factory, workdir, {"proxy_protocol_from": ["10.0.0.0/8"]})
    for header in (v1(), v2(), b""):
        with Client(lr.port) as c:
            c.send(header + std_request("GET", origin.url("/bytes/1")))
            assert c.closed_without_answer()
    assert stats(lr)["client_connections_refused"]["proxy_untrusted"] == 3
    assert lr.wait_for_log("from outside proxy_protocol_from, latest from 127.0.0.1")
    assert origin.requests() == []


@pytest.mark.parametrize("sent,reason", [
    (b"GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "no PROXY protocol header"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "no PROXY protocol header"),
    (b"PROXY TCP4  10.1.2.3 127.0.0.1 1 2\r\n", "single spaces"),
    (b"PROXY TCP4 10.1.2.3 127.0.0.1 70000 2\r\n", "ports"),
    (b"PROXY TCP4 10.1.2.300 127.0.0.1 1 2\r\n", "not an IPv4"),
    (b"PROXY UNKNOWN " + b"x" * 120 + b"\r\n", "longer than 107"),
    (V2_SIGNATURE + b"\x21\x11\xff\xff", "more than 1024"),
    (V2_SIGNATURE + b"\x22\x11\x00\x0c" + b"\x00" * 12, "unknown command"),
    (V2_SIGNATURE + b"\x21\x12\x00\x0c" + b"\x00" * 12, "datagram"),
    (V2_SIGNATURE + b"\x21\x11\x00\x04\x00\x00\x00\x00", "too few for IPv4"),
])
def test_missing_or_hostile_headers_are_closed(larder_factory, origin, workdir, sent, reason):
    lr, _ = start(larder_factory, workdir)
    with Client(lr.port) as c:
        c.send(sent)
        assert c.closed_without_answer()
    assert lr.wait_for_log(re.escape(reason)), lr.log_text()[-2000:]
    assert stats(lr)["client_connections_refused"]["proxy_header"] == 1
    assert origin.requests() == []


def test_a_late_or_cut_header_is_closed(larder_factory, workdir):
    lr, _ = start(larder_factory, workdir, {"limits": {"client_header_timeout": "1s"}})
    began = time.monotonic()
    with Client(lr.port) as silent, Client(lr.port) as slow, Client(lr.port) as cut:
        slow.send(b"PROXY TCP4 ")
        cut.send(v2()[:20])
        cut.sock.shutdown(socket.SHUT_WR)
        assert cut.closed_without_answer(5)
        # A byte now and then does not stretch the header's deadline.
        for _ in range(3):
            pace(0.3)
            slow.send(b"1")
        assert silent.closed_without_answer(5) and slow.closed_without_answer(5)
    assert time.monotonic() - began < 3
    assert lr.wait_for_log(r"within 1(\.0)? s")
    assert lr.wait_for_log("closed before a complete PROXY protocol header")


def test_an_ordinary_listener_does_not_believe_headers(larder_factory, origin, workdir):
    log = workdir / "access.jsonl"
    lr = larder_factory(config={"access_log": str(log), "access_log_format": "json"})
    with Client(lr.port) as c:
        c.send(v1(source="127.0.0.9") + std_request("GET", origin.url("/bytes/1")))
        assert read_response(c.reader).status == 400


def test_the_header_comes_before_tls_on_an_https_listener(larder_factory, origin, workdir, tls_cert):
    cert, key = tls_cert
    lr, log = start(larder_factory, workdir, {"tls": {"listen": [{"address": "127.0.0.1:0", "proxy_protocol": True}],
                                                       "certificate_file": str(cert), "key_file": str(key)}},
                    tls=True)
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.check_hostname = False
    for header in (v1(source="10.3.3.3"), v2(source="10.3.3.4")):
        raw = socket.create_connection(("127.0.0.1", lr.tls_port), timeout=10)
        raw.sendall(header)
        with ctx.wrap_socket(raw) as s:
            s.sendall(std_request("GET", origin.url("/bytes/2")))
            r = read_response(SockReader(s))
            assert r.status == 200 and len(r.body) == 2
    assert clients_logged(log, 2) == ["10.3.3.3", "10.3.3.4"]


def test_behind_haproxy_with_send_proxy_v2_the_log_shows_the_real_client(larder_factory, origin, workdir):
    """Docker/haproxy.cfg as committed (send-proxy-v2), all three servers pointing at one Larder;
    the client connects from 127.0.0.2, HAProxy from 127.0.0.1."""
    lr, log = start(larder_factory, workdir, {"workers": 1})
    haproxy = HAProxy(workdir, [lr, lr, lr])
    try:
        haproxy.wait_states({"larder1": "UP", "larder2": "UP", "larder3": "UP"})
        s = socket.socket()
        s.settimeout(10)
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", haproxy.port))
        with s:
            s.sendall(std_request("GET", origin.url("/bytes/4")))
            r = read_response(SockReader(s))
            assert r.status == 200 and len(r.body) == 4
        assert clients_logged(log, 1) == ["127.0.0.2"]
    finally:
        haproxy.stop()


def test_shutdown_closes_connections_still_sending_their_header(larder_factory, workdir):
    lr, _ = start(larder_factory, workdir, {"limits": {"client_header_timeout": "30s"}})
    with Client(lr.port) as waiting:
        waiting.send(b"PROXY TCP4 10.1.")
        time.sleep(0.2)  # the partial header reaches the proxy
        began = time.monotonic()
        assert lr.stop() == 0
        assert time.monotonic() - began < 5
        assert waiting.closed_without_answer(2)
