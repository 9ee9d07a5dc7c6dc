"""The access log: combined and JSON lines a log tool can parse, written to a file that SIGUSR1
reopens, or nowhere."""

import json
import os
import re
import signal
import socket
import time

import pytest

from helpers import RawClient, build_request, curl, proxy_exchange, wait_for_file
from test_cache import script
from test_tls import origin_with, pki, servers  # noqa: F401 (fixtures)

# The combined log format, then our two fields: cache result and seconds.
COMBINED = re.compile(r'^(?P<client>\S+) - - \[(?P<time>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000)\] '
                      r'"(?P<method>\S+) (?P<target>\S+) (?P<version>HTTP/1\.[01])" (?P<status>\d{3}|-) '
                      r'(?P<bytes>\d+) "(?P<referer>[^"]*)" "(?P<agent>[^"]*)" (?P<cache>\S+) (?P<seconds>\d+\.\d{6})$')


def read_lines(path, n, timeout=5.0):
    """The file's lines once there are at least n (workers hand lines over about once a second)."""
    def lines():
        return path.read_text().splitlines() if path.exists() else []
    wait_for_file(path, lambda: len(lines()) >= n, timeout)
    return lines()


def test_combined_lines_parse(larder_factory, origin, workdir):
    log = workdir / "access.log"
    lr = larder_factory(config={"access_log": str(log)})
    script(workdir, "lg", headers=[("Cache-Control", "max-age=60")], body="12345")
    url = origin.url("/res/lg")
    proxy_exchange(lr.port, "GET", url, headers=[("User-Agent", 'curl/8 "quoted"'), ("Referer", "http://r/")])
    proxy_exchange(lr.port, "GET", url)
    proxy_exchange(lr.port, "GET", origin.url("/status/404"))
    lines = read_lines(log, 3)
    assert len(lines) == 3, lines
    parsed = [COMBINED.match(l) for l in lines]
    assert all(parsed), lines
    # Each worker hands its lines over on its own, so lines of different workers may come out of order.
    first = next(p for p in parsed if p["agent"] != "-")
    second = next(p for p in parsed if p["agent"] == "-" and p["target"] == url)
    third = next(p for p in parsed if p["target"].endswith("/status/404"))
    assert first["client"] == "127.0.0.1" and first["method"] == "GET" and first["target"] == url
    assert first["status"] == "200" and first["bytes"] == "5" and first["cache"] == "miss"
    assert first["agent"] == 'curl/8 \\x22quoted\\x22' and first["referer"] == "http://r/"
    assert second["cache"] == "hit" and second["bytes"] == "5" and second["agent"] == "-"
    assert third["status"] == "404"
    assert float(first["seconds"]) < 5


def test_json_lines_and_rejected_requests(larder_factory, origin, workdir):
    log = workdir / "access.jsonl"
    lr = larder_factory(config={"access_log": str(log), "access_log_format": "json"})
    proxy_exchange(lr.port, "GET", origin.url("/bytes/100"))
    proxy_exchange(lr.port, "GET", "/relative", headers=[("Host", "x")])  # 400: origin-form to a forward proxy
    lines = read_lines(log, 2)
    records = sorted((json.loads(l) for l in lines), key=lambda r: r["status"])
    assert records[0]["status"] == 200 and records[0]["bytes"] == 100 and records[0]["cache"] == "miss"
    assert records[0]["method"] == "GET" and records[0]["url"] == origin.url("/bytes/100")
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", records[0]["time"])
    assert records[1]["status"] == 400 and records[1]["url"] == "/relative"


def test_sigusr1_reopens_the_file_after_rotation(larder_factory, origin, workdir):
    log = workdir / "access.log"
    lr = larder_factory(config={"access_log": str(log)})
    proxy_exchange(lr.port, "GET", origin.url("/bytes/1"))
    assert len(read_lines(log, 1)) == 1
    rotated = workdir / "access.log.1"
    os.rename(log, rotated)
    os.kill(lr.pid, signal.SIGUSR1)
    wait_for_file(log, log.exists)
    proxy_exchange(lr.port, "GET", origin.url("/bytes/2"))
    new = read_lines(log, 1)
    assert len(new) == 1 and '"GET ' + origin.url("/bytes/2") in new[0]
    assert len(rotated.read_text().splitlines()) == 1


def test_access_log_off_writes_nothing(larder_factory, origin, workdir):
    lr = larder_factory(config={"access_log": "off"})
    proxy_exchange(lr.port, "GET", origin.url("/bytes/1"))
    # Stopped, Larder hands over what its workers logged (a log file would be written by then).
    assert lr.stop() == 0
    assert not list(workdir.glob("*.log"))
    assert 'GET ' not in lr.log_text()


def test_local_answers_and_tunnels_log_the_bytes_they_sent(larder_factory, echo_server, workdir):
    log = workdir / "access.jsonl"
    lr = larder_factory(config={"access_log": str(log), "access_log_format": "json",
                                "connect_ports": [echo_server.port]})
    r = proxy_exchange(lr.port, "GET", "/relative", headers=[("Host", "x")])
    assert r.status == 400
    c = RawClient(lr.port, 10)
    c.send(build_request("CONNECT", f"127.0.0.1:{echo_server.port}", [("Host", f"127.0.0.1:{echo_server.port}")]))
    assert c.response("CONNECT").status == 200
    c.sock.sendall(b"x" * 1000)
    assert c.reader.read_exact(1000) == b"x" * 1000
    c.sock.shutdown(socket.SHUT_WR)
    rest = c.reader.read_to_eof()  # the echo server's own closing words
    c.close()
    records = [json.loads(line) for line in read_lines(log, 2)]
    local = next(r for r in records if r["status"] == 400)
    assert local["bytes"] == len(r.body) > 0, (local, len(r.body))
    tunnel = next(r for r in records if r["method"] == "CONNECT")
    assert tunnel["status"] == 200 and tunnel["bytes"] == 1000 + len(rest), tunnel
    assert tunnel["bytes_from_client"] == 1000, tunnel


@pytest.mark.parametrize("fmt", ["combined", "json"])
def test_intercepted_requests_log_their_https_url_and_the_tunnel_its_bytes(larder_factory, pki, servers, workdir, fmt):
    """Inside an intercepted CONNECT a client sends origin-form requests (GET /simple/six/): the
    log writes the URL they stand for. The CONNECT's own line comes when the connection ends, with
    the bytes that crossed the client's socket each way, as a tunnel's line does."""
    origin = origin_with(servers, *pki.leaf("good"))
    log = workdir / f"access.{fmt}"
    lr = larder_factory(config={"workers": 1, "connect_ports": [origin.port], "access_log": str(log),
                                "access_log_format": fmt, "tls": {"ca_file": str(pki.ca), "intercept": ["localhost"]}})
    first, second = (f"https://localhost:{origin.port}/simple/{name}/" for name in ("six", "wheel"))
    r = curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", lr.ca_dir / "larder-ca.pem", "--http1.1", first,
             second)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"body of /simple/six/\nbody of /simple/wheel/\n"
    lines = read_lines(log, 3)
    assert len(lines) == 3, lines
    if fmt == "json":
        records = [json.loads(line) for line in lines]
        requests = [(x["method"], x["url"], x["bytes"], x.get("bytes_from_client", 0)) for x in records]
    else:
        parsed = [COMBINED.match(line) for line in lines]
        assert all(parsed), lines
        requests = [(p["method"], p["target"], int(p["bytes"]), None) for p in parsed]
    gets = [q for q in requests if q[0] == "GET"]
    assert [q[1] for q in gets] == [first, second], requests
    assert requests[-1][0] == "CONNECT" and requests[-1][1] == f"localhost:{origin.port}", requests
    # TLS records and the handshake (the minted certificate among them) around the two answers.
    answered = sum(q[2] for q in gets)
    assert answered + 1_000 < requests[-1][2] < answered + 20_000, requests
    if fmt == "json":
        assert 500 < requests[-1][3] < 10_000, requests
