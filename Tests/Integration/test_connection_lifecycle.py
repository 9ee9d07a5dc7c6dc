"""A client connection's life cycle at its edges: a tunnel's close, and the head and idle timers
around pipelined requests that wait while the client is not reading its answers.

Each of these once went wrong in the state machine (a read of freed buffers when a tunnel closed;
a 408 for a complete pipelined request; a partial head never timed out), so each is kept here.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import time

import pytest

from helpers import RawClient, SockReader, build_request, larder_bin, proxy_exchange, read_response, std_request
from test_admin import ADMIN, wait_stats

BIG = 8 << 20  # a memory hit larger than loopback's socket buffers, so most of it stays queued


def script(workdir, name, headers=(), **extra):
    spec = {"status": 200, "headers": [list(h) for h in headers], "body": ""}
    spec.update(extra)
    (workdir / f"res-{name}.json").write_text(json.dumps(spec))


def slow_reader(port):
    """A client socket whose small receive buffer leaves the answers queued in Larder."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(15)
    s.connect(("127.0.0.1", port))
    return s


@pytest.mark.timeout_s(300)
def test_a_tunnels_close_reads_no_freed_memory(larder_factory, echo_server, workdir):
    if os.environ.get("SANITIZER_BUILD"):
        pytest.skip("memcheck runs the release build; a sanitizer build has its own checks")
    if not shutil.which("valgrind"):
        pytest.fail("valgrind is missing (scripts/install-deps.sh installs it)")
    # Debian's valgrind cannot read the Swift toolchain's DWARF: run a copy without it (symbols stay).
    binary = workdir / "larder-nodebug"
    subprocess.run(["objcopy", "--strip-debug", larder_bin(), str(binary)], check=True, timeout=60)
    log = workdir / "memcheck.log"
    lr = larder_factory(config={**ADMIN, "connect_ports": [echo_server.port], "workers": 1},
                        wrapper=("valgrind", "--error-limit=no", f"--log-file={log}"), binary=binary,
                        start_timeout=180)
    for _ in range(2):
        c = RawClient(lr.port, 30)
        c.send(build_request("CONNECT", f"127.0.0.1:{echo_server.port}", [("Host", f"127.0.0.1:{echo_server.port}")]))
        assert c.response("CONNECT").status == 200
        c.sock.sendall(b"ping")
        assert c.reader.read_exact(4) == b"ping"
        c.sock.shutdown(socket.SHUT_WR)
        c.reader.read_to_eof()
        c.close()
    # Both tunnels closed on their own (not by the shutdown) before Larder stops.
    s = wait_stats(lr, lambda s: s["client_connections_open"] == 0, timeout=30)
    assert s["client_connections_open"] == 0, s
    lr.stop(timeout=60)
    # Error blocks are separated by "==PID== " lines; only those on a tunnel's path count here.
    blocks = re.split(r"==\d+== \n", log.read_text())
    bad = [b for b in blocks if ("Invalid read" in b or "Invalid write" in b) and "Tunnel" in b]
    assert not bad, bad[0][:4000]


def test_a_pipelined_request_waiting_for_the_client_to_read_survives_the_head_timer(larder_factory, origin, workdir):
    lr = larder_factory(config={"limits": {"client_header_timeout": "500ms"}, "workers": 1,
                                "cache": {"memory_max_object_size": "16MB"}})
    script(workdir, "big", headers=[("Cache-Control", "max-age=600")], body_bytes=BIG)
    url = origin.url("/res/big")
    first = proxy_exchange(lr.port, "GET", url, timeout=15)
    assert first.status == 200 and len(first.body) == BIG
    s = slow_reader(lr.port)
    # Both requests in one write; the client then reads nothing for longer than the head time.
    s.sendall(std_request("GET", url) + std_request("GET", origin.url("/bytes/10")))
    time.sleep(0.8)
    r = SockReader(s)
    statuses = [read_response(r).status for _ in range(2)]
    s.close()
    assert statuses == [200, 200], statuses


def test_a_partial_head_sent_while_an_answer_is_queued_is_still_timed_out(larder_factory, origin, workdir):
    lr = larder_factory(config={"limits": {"client_header_timeout": "1s", "client_idle_timeout": "2s"},
                                "workers": 1, "cache": {"memory_max_object_size": "16MB"}})
    script(workdir, "big", headers=[("Cache-Control", "max-age=600")], body_bytes=BIG)
    url = origin.url("/res/big")
    assert proxy_exchange(lr.port, "GET", url, timeout=15).status == 200
    s = slow_reader(lr.port)
    s.sendall(std_request("GET", url))
    assert s.recv(1, socket.MSG_PEEK)  # the answer is under way, most of it queued in Larder
    # Part of the next head arrives while the answer is still queued (reading pauses), then the
    # client reads its answer and sends nothing more: slowloris, which the head timer must end.
    s.sendall(b"GET http://127.0.0.1/ HTTP/1.1\r\nX-Partial: ")
    r = SockReader(s)
    first = read_response(r)
    assert first.status == 200 and len(first.body) == BIG
    s.settimeout(6)
    try:
        got = read_response(r).status
    except socket.timeout:
        got = "no answer, the connection still open after 6 s"
    s.close()
    assert got == 408, got


def cpu_seconds(pid):
    """User and system time a process has used, from /proc/PID/stat (fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_keep_alive_connection_idle_after_a_queued_answer_costs_no_cpu(larder_factory, origin):
    # The large answer waits for the socket: its write event is added with the send timeout. The
    # small one after it goes out at once, through the event activated by hand. libevent re-adds
    # a persistent event with the timeout it last had, so that event stayed registered once the
    # answer was written and fired on every turn of the loop while the connection idled.
    lr = larder_factory(config={"workers": 1})
    with RawClient(lr.port) as c:
        r = c.request("GET", origin.url(f"/unique/1/{4 << 20}"))
        assert r.status == 200 and len(r.body) == 4 << 20
        r = c.request("GET", origin.url("/unique/2/1024"))
        assert r.status == 200 and len(r.body) == 1024
        # Spinning, the worker's loop takes whatever share of a core it gets (two thirds of one
        # next to two busy loops on two cores); idle, next to nothing.
        before = cpu_seconds(lr.pid)
        time.sleep(1)
        used = cpu_seconds(lr.pid) - before
        assert used < 0.1, f"{used:.2f} s of CPU in 1 s while the one connection idled"
        r = c.request("GET", origin.url("/unique/3/1024"))
        assert r.status == 200 and len(r.body) == 1024
