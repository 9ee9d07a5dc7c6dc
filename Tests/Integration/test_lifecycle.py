"""Start-up, configuration checking, graceful shutdown, reverse mode, listeners, timeouts,
and memory use while streaming large bodies."""

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from helpers import (Larder, RawClient, RSSSampler, child_env, curl, larder_bin, pattern, pattern_chunks,
                     pattern_sha256, proxy_exchange, std_request, wait_until)
from test_cache import script

MiB = 1024 * 1024
RSS_LIMIT_KIB = 64 * 1024

# ---------------------------------------------------------------------------
# Graceful shutdown


def test_graceful_shutdown_finishes_in_flight_download(larder_factory, origin, workdir):
    lr = larder_factory(config={"shutdown_grace": "10s"})
    total = 5 * MiB
    # The origin holds the rest of the body after 256 KiB until the test has seen the listener close.
    script(workdir, "download", body_bytes=total, pause_after=256 * 1024, pause_until="rest")
    state = {"received": 0, "resp": None, "error": None}
    h = hashlib.sha256()
    progress = threading.Condition()

    def sink(piece):
        h.update(piece)
        with progress:
            state["received"] += len(piece)
            progress.notify_all()

    c = RawClient(lr.port, timeout=15)
    c.send(std_request("GET", origin.url("/res/download")))

    def read():
        try:
            state["resp"] = c.response(sink=sink)
        except Exception as e:  # reported below
            state["error"] = e

    t = threading.Thread(target=read, daemon=True)
    t.start()
    with progress:
        progress.wait_for(lambda: state["received"] >= 200 * 1024, timeout=5)
    at_signal = state["received"]
    assert 0 < at_signal < total, f"{at_signal} bytes when about to signal"
    os.kill(lr.pid, signal.SIGTERM)

    def refused():
        try:
            socket.create_connection(("127.0.0.1", lr.port), timeout=1).close()
            return False
        except (ConnectionRefusedError, ConnectionResetError):
            # Reset: the connect raced the listener's close and was in its backlog.
            return True

    refused = wait_until(refused, timeout=2, interval=0.05)
    at_refused = state["received"]
    origin.open_gate("rest")

    t.join(15)
    c.close()
    assert not t.is_alive(), "download did not finish within 15 s of SIGTERM"
    assert state["error"] is None, f"download broken by shutdown: {state['error']!r}"
    assert state["resp"].status == 200
    assert state["received"] == total
    assert h.hexdigest() == pattern_sha256(total)
    assert refused, "new connections were still accepted 2 s after SIGTERM"
    assert at_refused < total, "listener closed only after the download had finished"
    rc = lr.wait_exit(15)
    assert rc == 0, f"exit code {rc} after SIGTERM\n{lr.log_text()[-3000:]}"


def test_sigterm_when_idle_exits_zero_promptly(larder_factory):
    lr = larder_factory(config={"shutdown_grace": "10s"})
    t0 = time.monotonic()
    os.kill(lr.pid, signal.SIGTERM)
    rc = lr.wait_exit(15)
    elapsed = time.monotonic() - t0
    assert rc == 0, lr.log_text()[-3000:]
    assert elapsed < 3, f"idle shutdown took {elapsed:.1f}s"


# ---------------------------------------------------------------------------
# Reverse mode


def test_reverse_mode_via_flag(larder_factory, origin):
    lr = larder_factory(args=["--reverse-origin", origin.base])
    r = curl(f"http://127.0.0.1:{lr.port}/bytes/1234?x=1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == pattern(1234)
    reqs = origin.wait_requests(1)
    assert [q["target"] for q in reqs] == ["/bytes/1234?x=1"]
    r2 = curl(f"http://127.0.0.1:{lr.port}/status/299")
    assert r2.stdout == b"status 299\n"


def test_reverse_mode_via_config(larder_factory, origin):
    lr = larder_factory(config={"reverse_origin": origin.base})
    with RawClient(lr.port) as c:
        resp = c.request("POST", "/echo", [("Host", f"127.0.0.1:{lr.port}")], b"reverse body")
    assert resp.status == 200
    echoed = json.loads(resp.body)
    assert echoed["target"] == "/echo"
    assert echoed["body"] == "reverse body"


# ---------------------------------------------------------------------------
# Configuration


GOOD_CONFIG = """\
listen:
  - "127.0.0.1:0"
admin_listen: off
workers: 2
cache_dir: "{cache}"
shutdown_grace: 5s
connect_ports: [443, 8443]
via_name: larder
log_level: info
limits:
  max_head_bytes: 64KiB
  max_header_count: 100
  max_uri_bytes: 8KiB
  client_header_timeout: 30s
  client_idle_timeout: 60s
  max_response_head_bytes: 64KiB
session:
  http_additional_headers:
    X-Team: cache
  timeout_interval_for_request: 1s
  timeout_interval_for_resource: 7d
  connect_timeout: 10s
  http_maximum_connections_per_host: 8
  max_idle_connections_per_host: 4
  idle_connection_timeout: 60s
  dns_servers:
    - "127.0.0.1:5353"
"""

BAD_CONFIG = """\
admin_listen: off
workers: 2
bogus_key: 1
shutdown_grace: 5 parsecs
session:
  timeout_interval_for_request: forever
"""


def _run(cmd, timeout=20):
    return subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, env=child_env(), timeout=timeout)


def test_check_config_accepts_a_good_file(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD_CONFIG.format(cache=tmp_path / "cache"))
    r = _run([larder_bin(), "check-config", "--config", path])
    assert r.returncode == 0, (r.stdout + r.stderr).decode(errors="replace")


def test_check_config_reports_every_error_with_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_CONFIG)
    r = _run([larder_bin(), "check-config", "--config", path])
    out = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 1, out
    name = re.escape(path.name)
    for line, key in ((3, "bogus_key"), (4, "shutdown_grace"), (6, "session.timeout_interval_for_request")):
        pattern_ = rf"(?m)^\S*{name}:{line}: {re.escape(key)}: \S"
        assert re.search(pattern_, out), f"no '{path.name}:{line}: {key}: ...' line in:\n{out}"
    assert "Fatal error" not in out and "Stack dump" not in out


def test_bad_config_at_start_exits_2_with_a_clear_message(tmp_path):
    lr = Larder(tmp_path, config={"shutdown_grace": "5 parsecs"}, wait=False, name="bad")
    rc = lr.wait_exit(15)
    if rc is None:
        lr.stop()
    err = lr.log_text()
    assert rc == 2, f"exit code {rc}\n{err}"
    assert "shutdown_grace" in err, err
    for marker in ("Fatal error", "Stack dump", "Backtrace", "Segmentation fault", "#0 0x"):
        assert marker not in err, err
    assert len([l for l in err.splitlines() if l.strip()]) <= 5, err


def test_bad_flag_at_start_exits_2_naming_the_flag(tmp_path):
    lr = Larder(tmp_path, args=["--log-level", "loud"], wait=False, name="badflag")
    rc = lr.wait_exit(15)
    if rc is None:
        lr.stop()
    err = lr.log_text()
    assert rc == 2, f"exit code {rc}\n{err}"
    assert "--log-level" in err and "loud" in err, err


# ---------------------------------------------------------------------------
# Listeners, workers, client timeouts


def test_two_listeners_both_serve(larder_factory, origin):
    lr = larder_factory(args=["--listen", "127.0.0.1:0"], listeners=2)
    assert len(set(lr.ports)) == 2
    for port in lr.ports:
        resp = proxy_exchange(port, "GET", origin.url("/bytes/11"))
        assert resp.status == 200
        assert resp.body == pattern(11)


def test_one_worker_serves_concurrent_slow_requests(larder_factory, origin):
    lr = larder_factory(args=["--workers", "1"])
    results = []

    def one(i):
        try:
            resp = proxy_exchange(lr.port, "GET", origin.url(f"/bytes/{1000 + i}?hold=slow"), timeout=10)
            results.append((i, resp.status, resp.body == pattern(1000 + i)))
        except Exception as e:
            results.append((i, repr(e), False))

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    # The origin answers none until all eight are there at once.
    assert len(origin.wait_requests(8, timeout=10)) == 8, "the one worker did not forward the requests side by side"
    origin.open_gate("slow")
    for t in threads:
        t.join(15)
    assert sorted(results) == [(i, 200, True) for i in range(8)]


def test_idle_client_connection_is_closed_after_client_idle_timeout(larder_factory, origin):
    lr = larder_factory(config={"limits": {"client_idle_timeout": "1s"}})
    with RawClient(lr.port) as c:
        resp = c.request("GET", origin.url("/bytes/5"))
        assert resp.status == 200
        t0 = time.monotonic()
        assert c.closed_by_peer(5), "idle connection still open 5 s after a 1 s idle timeout"
        elapsed = time.monotonic() - t0
    assert 0.7 <= elapsed <= 3.0, f"closed after {elapsed:.2f}s"


# ---------------------------------------------------------------------------
# Streaming with bounded memory


@pytest.mark.timeout_s(150)
def test_200_mib_download_streams_in_bounded_memory(larder, origin, report_metric, memory_bound):
    total = 200 * MiB
    expected = pattern_sha256(total)
    h = hashlib.sha256()
    count = [0]

    def sink(piece):
        h.update(piece)
        count[0] += len(piece)

    t0 = time.monotonic()
    with RSSSampler(larder) as rss:
        with RawClient(larder.port, timeout=20) as c:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            c.send(std_request("GET", origin.url(f"/bytes/{total}")))
            resp = c.response(sink=sink)
    elapsed = time.monotonic() - t0
    report_metric(f"200 MiB download: peak larder VmRSS {rss.peak_kib / 1024:.1f} MiB "
                  f"({rss.samples} samples), {total / MiB / elapsed:.0f} MiB/s")
    assert resp.status == 200
    assert count[0] == total
    assert h.hexdigest() == expected
    assert rss.samples > 0
    assert rss.peak_kib < RSS_LIMIT_KIB, f"peak VmRSS {rss.peak_kib} KiB"


@pytest.mark.timeout_s(90)
def test_20_mib_upload_streams_in_bounded_memory(larder, origin, report_metric, memory_bound):
    total = 20 * MiB
    t0 = time.monotonic()
    with RSSSampler(larder) as rss:
        with RawClient(larder.port, timeout=20) as c:
            c.send(std_request("POST", origin.url("/echo"),
                               [("Content-Length", str(total)), ("Content-Type", "application/octet-stream")]))
            for piece in pattern_chunks(total):
                c.send(piece)
            resp = c.response()
    elapsed = time.monotonic() - t0
    report_metric(f"20 MiB upload: peak larder VmRSS {rss.peak_kib / 1024:.1f} MiB "
                  f"({rss.samples} samples), {total / MiB / elapsed:.0f} MiB/s")
    assert resp.status == 200
    echoed = json.loads(resp.body)
    assert echoed["body_len"] == total
    assert echoed["body_sha256"] == pattern_sha256(total)
    assert rss.peak_kib < RSS_LIMIT_KIB, f"peak VmRSS {rss.peak_kib} KiB"


def test_kubernetes_service_variables_do_not_stop_larder(larder_factory):
    # A Service named `larder` puts these into every pod of its namespace.
    links = {"LARDER_PORT": "tcp://10.0.0.1:3128", "LARDER_PORT_3128_TCP": "tcp://10.0.0.1:3128",
             "LARDER_PORT_3128_TCP_ADDR": "10.0.0.1", "LARDER_PORT_3128_TCP_PORT": "3128",
             "LARDER_PORT_3128_TCP_PROTO": "tcp", "LARDER_SERVICE_HOST": "10.0.0.1",
             "LARDER_SERVICE_PORT": "3128", "LARDER_SERVICE_PORT_PROXY": "3128",
             "LARDER_WORKER": "2"}
    lr = larder_factory(env=links)
    log = lr.log_text()
    # Service links are ignored silently; an unknown variable is a warning with a suggestion.
    assert "LARDER_PORT" not in log and "LARDER_SERVICE" not in log, log
    assert "LARDER_WORKER: unknown setting, ignored; did you mean LARDER_WORKERS?" in log, log
    # The cache directory is named absolutely in the start-up line.
    assert re.search(r"cache in /\S+: ", log), log
