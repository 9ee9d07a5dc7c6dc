"""Warming the cache: ``larder warm FILE|-`` through a running Larder or straight into a cache
directory, and the admin endpoint's ``POST /warm`` with its progress in /stats, /metrics and
the dashboard. Hostile lists (garbage bytes, huge lines, other schemes, denied destinations)
are failures in the report, never crashes; a warm job meets the same access rules as clients."""

import json
import os
import pty
import re
import select
import socket
import subprocess
import time

from helpers import _ThreadedServer, child_env, larder_bin, proxy_exchange, spawn, stop_process, wait_process
from test_cache import cache_status
from test_security_admin import ask

ADMIN = {"admin_listen": "127.0.0.1:0"}


def warm(*args, stdin=None, timeout=60, env=None):
    """Runs ``larder warm``; returns (exit code, stdout, stderr)."""
    proc = spawn([larder_bin(), "warm", *args], stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**child_env(), **(env or {})})
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_process(proc, timeout=5)
        raise AssertionError(f"larder warm {args} did not end within {timeout} s")
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def unique_urls(origin, n, size=2048, first=1):
    return [origin.url(f"/unique/{i}/{size}") for i in range(first, first + n)]


def write_list(workdir, lines, name="urls.txt"):
    path = workdir / name
    data = lines if isinstance(lines, bytes) else ("\n".join(lines) + "\n").encode()
    path.write_bytes(data)
    return path


def summary_counts(text):
    m = re.search(r"warmed (\d+) of (\d+) URLs in \S+: (\d+) stored, (\d+) already fresh, (\d+) revalidated, "
                  r"(\d+) not stored, (\d+) failed", text)
    assert m, text
    keys = ["done", "total", "stored", "fresh", "revalidated", "not_stored", "failed"]
    return dict(zip(keys, map(int, m.groups())))


def test_warm_stores_then_finds_everything_fresh(larder, origin, workdir):
    urls = unique_urls(origin, 40)
    path = write_list(workdir, ["# build artefacts", ""] + urls)
    rc, out, err = warm(str(path), "--proxy", larder.proxy_url, "--concurrency", "4")
    assert rc == 0, (out, err)
    assert summary_counts(out) == dict(done=40, total=40, stored=40, fresh=0, revalidated=0, not_stored=0, failed=0)
    assert "80.0 KiB" in out
    assert len(origin.wait_requests(40)) == 40

    rc, out, err = warm(str(path), "--proxy", larder.proxy_url)
    assert rc == 0, (out, err)
    assert summary_counts(out)["fresh"] == 40
    # A client now gets hits, and the origin is not asked again.
    r = proxy_exchange(larder.port, "GET", urls[7])
    assert r.status == 200 and "hit" in cache_status(r) and len(r.body) == 2048
    assert len(origin.requests()) == 40


def test_failures_are_reported_with_reasons_and_exit_1(larder, origin, workdir):
    huge = "http://127.0.0.1/" + "a" * 20000
    lines = [origin.url("/unique/1/100"), origin.url("/status/404"), origin.url("/headers?Cache-Control=no-store"),
             "ftp://example.com/file", "http://exa mple.com/", huge, "http://169.254.169.254/latest/meta-data/",
             f"http://127.0.0.1:{larder.port}/loop", "not a url at all"]
    data = ("\n".join(lines) + "\n").encode() + b"\xff\xfe\x00\x1b[31m\n" + origin.url("/unique/2/100").encode() + b"\n"
    path = write_list(workdir, data)
    rc, out, err = warm(str(path), "--proxy", larder.proxy_url)
    assert rc == 1, (out, err)
    counts = summary_counts(out)
    assert counts == dict(done=11, total=11, stored=2, fresh=0, revalidated=0, not_stored=1, failed=8), out
    assert "1 × no-store" in out
    assert "HTTP 404 Not Found" in out
    assert "not an http:// or https:// URL" in out
    assert "longer than 8192 bytes" in out
    assert "spaces, control characters or non-ASCII bytes" in out
    assert re.search(r"169\.254\.169\.254/latest/meta-data/: HTTP 403", out), out
    # Nothing but the valid, allowed URLs reached the origin; Larder never forwarded to itself.
    paths = sorted(r["path"] for r in origin.wait_requests(4))
    assert paths == ["/headers", "/status/404", "/unique/1/100", "/unique/2/100"], paths
    assert larder.proc.poll() is None


def test_standard_input_and_usage_errors(larder, origin, workdir):
    data = ("\n".join(unique_urls(origin, 3)) + "\n").encode()
    rc, out, err = warm("-", "--proxy", f"127.0.0.1:{larder.port}", stdin=data)
    assert rc == 0 and summary_counts(out)["stored"] == 3, (out, err)

    for args in (["-", "--concurrency", "0"], ["-", "--concurrency", "65"], ["-", "--proxy", "https://127.0.0.1:1"],
                 ["-", "--proxy", "127.0.0.1"], [str(workdir / "missing.txt"), "--proxy", larder.proxy_url],
                 ["-", "--proxy", larder.proxy_url, "--cache-dir", str(workdir / "x")], []):
        rc, out, err = warm(*args, stdin=b"")
        assert rc == 2, (args, rc, out, err)
        assert err.strip(), args


def test_an_unreachable_proxy_fails_every_url(origin, workdir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        path = write_list(workdir, unique_urls(origin, 3))
        rc, out, err = warm(str(path), "--proxy", f"http://127.0.0.1:{port}", timeout=30)
    assert rc == 1
    assert summary_counts(out)["failed"] == 3
    assert "cannot connect to the proxy 127.0.0.1" in out
    assert origin.requests() == []


class HostileProxy(_ThreadedServer):
    """Answers each request by what its path asks for, the way a broken or hostile proxy might; one
    request per connection (its one good answer says so: a client that reused the connection would
    find it closed, or reset when its next request was already there)."""

    ANSWERS = {
        "garbage": b"\x00\xffnot http at all\r\n\r\n",
        "bad-status": b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
        "huge-head": b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 200_000 + b"\r\n\r\n",
        "two-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "short": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nCache-Status: larder; fwd=miss; stored\r\n\r\nonly this",
        "bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        "no-answer": b"",
        "until-close": b"HTTP/1.1 200 OK\r\nCache-Status: larder; fwd=miss; stored\r\n\r\n" + b"b" * 100_000,
        "interim-then-ok": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                           b"Connection: close\r\nCache-Status: larder; hit\r\n\r\nok",
    }

    def handle(self, sock, peer):
        data = b""
        while b"\r\n\r\n" not in data:
            piece = sock.recv(65536)
            if not piece:
                return
            data += piece
        name = data.split(b" ")[1].rsplit(b"/", 1)[1].decode()
        if name == "silent":
            self._stop.wait(3)  # says nothing for longer than the client's --timeout (or until the test ends)
            return
        sock.sendall(self.ANSWERS[name])


def test_a_hostile_proxy_gets_failures_never_a_hang(workdir):
    proxy = HostileProxy()
    try:
        names = list(HostileProxy.ANSWERS) + ["silent"]
        path = write_list(workdir, [f"http://origin.invalid/{n}" for n in names])
        rc, out, err = warm(str(path), "--proxy", f"127.0.0.1:{proxy.port}", "--timeout", "1", "--concurrency", "3",
                            timeout=30)
    finally:
        proxy.stop()
    assert rc == 1, (out, err)
    counts = summary_counts(out)
    assert (counts["fresh"], counts["stored"], counts["failed"]) == (1, 1, 8), out
    assert "invalid answer from the proxy" in out
    assert "cut short after 9 of 100 bytes" in out
    assert "invalid chunked body from the proxy" in out
    assert "closed the connection without answering" in out
    assert "no answer from the proxy for 1.0s" in out


def test_progress_is_plain_lines_off_a_terminal_and_one_redrawn_line_on_one(larder, origin, workdir):
    path = write_list(workdir, unique_urls(origin, 20))
    rc, out, err = warm(str(path), "--proxy", larder.proxy_url)
    assert rc == 0
    assert "\r" not in err and "\x1b" not in err
    assert re.search(r"^progress \[20/20\] 100%  .*/s  ETA -  stored 20 ", err, re.M), err

    # Standard error on a terminal: the line is redrawn in place.
    master, slave = pty.openpty()
    try:
        path = write_list(workdir, unique_urls(origin, 20, first=100), name="more.txt")
        proc = spawn([larder_bin(), "warm", str(path), "--proxy", larder.proxy_url],
                     stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        slave = None
        seen = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    piece = os.read(master, 4096)
                except OSError:
                    break
                if not piece:
                    break
                seen += piece
            elif proc.poll() is not None:
                break
        out = proc.stdout.read().decode()
        assert wait_process(proc, 10) == 0
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    text = seen.decode(errors="replace")
    assert "\r\x1b[K[20/20] 100%" in text, text
    assert "progress " not in text
    assert summary_counts(out)["stored"] == 20


def test_warming_a_cache_directory_that_no_larder_uses(larder_factory, origin, workdir):
    cache_dir = workdir / "larder1-cache"  # the directory larder_factory() gives its first Larder
    urls = unique_urls(origin, 30, size=300_000)
    path = write_list(workdir, urls)
    rc, out, err = warm(str(path), "--cache-dir", str(cache_dir), timeout=120)
    assert rc == 0, (out, err)
    assert summary_counts(out)["stored"] == 30
    assert (cache_dir / "data.mdb").exists()
    assert len(origin.wait_requests(30)) == 30

    lr = larder_factory()
    for u in urls[:5]:
        r = proxy_exchange(lr.port, "GET", u)
        assert r.status == 200 and "hit" in cache_status(r), cache_status(r)
    assert len(origin.requests()) == 30

    # The directory is now held by that Larder: warming it directly is refused, clearly.
    rc, out, err = warm(str(path), "--cache-dir", str(cache_dir))
    assert rc == 2
    assert "in use by another Larder" in err, err
    assert lr.proc.poll() is None


def test_warming_a_directory_takes_the_configurations_cache_and_destination_rules(origin, workdir):
    # Clients and credentials of the configuration do not apply to the private instance; its
    # cache settings and destination rules do.
    config = workdir / "warm.yaml"
    config.write_text("allow_clients: [10.0.0.0/8]\n"
                      "deny_destinations: [\"127.0.0.1/32\"]\n"
                      "cache:\n  max_object_size: 1000\n")
    lines = [origin.url("/unique/1/500"), f"http://localhost:{origin.port}/unique/2/5000"]
    path = write_list(workdir, lines)
    rc, out, err = warm(str(path), "--cache-dir", str(workdir / "c"), "--config", str(config))
    assert rc == 1, (out, err)
    assert "127.0.0.1 is in deny_destinations" in out
    config.write_text("allow_clients: [10.0.0.0/8]\ncache:\n  max_object_size: 1000\n")
    rc, out, err = warm(str(path), "--cache-dir", str(workdir / "c"), "--config", str(config))
    assert rc == 0, (out, err)
    counts = summary_counts(out)
    assert (counts["stored"], counts["not_stored"]) == (1, 1), out
    assert "1 × too-large" in out


def admin_post_warm(lr, body, headers=(), query=""):
    return ask(lr.admin_port, "POST", "/warm" + query, headers=[("Content-Type", "text/uri-list"), *headers], body=body)


def admin_json(lr, path, headers=()):
    r = ask(lr.admin_port, "GET", path, headers=headers)
    assert r.status == 200, r
    return json.loads(r.body)


def wait_job(lr, headers=(), timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        w = admin_json(lr, "/warm", headers)
        if w["state"] != "running" or time.monotonic() > deadline:
            return w
        time.sleep(0.02)


def test_post_warm_runs_in_the_background_and_reports_progress(larder_factory, origin):
    lr = larder_factory(config=ADMIN)
    assert admin_json(lr, "/warm") == {"state": "idle"}
    urls = unique_urls(origin, 50, size=1000)
    body = ("# list\n" + "\n".join(urls) + "\nftp://nope/\n" + origin.url("/status/500") + "\n").encode()
    r = admin_post_warm(lr, body, query="?concurrency=4")
    assert r.status == 202, r
    started = json.loads(r.body)
    assert started == {"job": 1, "state": "running", "total": 52, "invalid": 1, "concurrency": 4}
    w = wait_job(lr)
    assert w["state"] == "finished"
    assert (w["total"], w["done"], w["stored"], w["failed"], w["bytes"]) == (52, 52, 50, 2, 50_000 + len(b"status 500\n"))
    reasons = {x["reason"] for x in w["failure_reasons"]}
    assert "not an http:// or https:// URL" in reasons and any(x.startswith("HTTP 500") for x in reasons), reasons

    s = admin_json(lr, "/stats")
    assert s["warm"]["job"] == 1 and s["warm"]["stored"] == 50
    assert s["warm_running"] == 0 and s["warm_urls"]["done"] == 52 and s["warm_urls"]["failed"] == 2
    metrics = ask(lr.admin_port, "GET", "/metrics").body.decode()
    assert 'larder_warm_urls{state="stored"} 50' in metrics and "larder_warm_running 0" in metrics
    assert lr.wait_for_log(r"warm job 1 finished: warmed 52 of 52 URLs")

    # A second job finds them fresh.
    assert admin_post_warm(lr, "\n".join(urls).encode()).status == 202
    w = wait_job(lr)
    assert (w["job"], w["fresh"], w["stored"]) == (2, 50, 0)


def test_one_job_at_a_time_and_delete_stops_it(larder_factory, origin):
    lr = larder_factory(config=ADMIN)
    slow = [origin.url(f"/unique/{i}/100?delay=1") for i in range(40)]
    assert admin_post_warm(lr, "\n".join(slow).encode(), query="?concurrency=2").status == 202
    r = admin_post_warm(lr, origin.url("/unique/999/10").encode())
    assert r.status == 409 and b"is running" in r.body, r
    assert admin_json(lr, "/stats")["warm_running"] == 1
    r = ask(lr.admin_port, "DELETE", "/warm")
    assert r.status == 200 and json.loads(r.body)["state"] == "cancelled"
    w = wait_job(lr, timeout=10)
    assert w["state"] == "cancelled" and w["done"] == 40 and w["stored"] < 40
    assert ask(lr.admin_port, "DELETE", "/warm").status == 404
    assert admin_post_warm(lr, origin.url("/unique/999/10").encode()).status == 202
    assert wait_job(lr)["stored"] == 1


def test_post_warm_refuses_bad_requests(larder_factory, origin):
    lr = larder_factory(config=ADMIN)
    # Empty lists, bad parameters, bodies too large or without a length.
    assert admin_post_warm(lr, b"").status == 411
    assert admin_post_warm(lr, b"# nothing\n\n").status == 400
    assert admin_post_warm(lr, b"http://h/\n", query="?concurrency=0").status == 400
    assert admin_post_warm(lr, b"http://h/\n", query="?concurrency=999").status == 400
    assert admin_post_warm(lr, ("http://h/x\n" * 100_001).encode()).status == 413
    with socket.create_connection(("127.0.0.1", lr.admin_port), timeout=10) as s:
        s.sendall(f"POST /warm HTTP/1.1\r\nHost: 127.0.0.1:{lr.admin_port}\r\nContent-Length: 9000000\r\n\r\n".encode())
        assert s.recv(100).startswith(b"HTTP/1.1 413")
    with socket.create_connection(("127.0.0.1", lr.admin_port), timeout=10) as s:
        s.sendall(f"POST /warm HTTP/1.1\r\nHost: 127.0.0.1:{lr.admin_port}\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "0\r\n\r\n".encode())
        assert s.recv(100).startswith(b"HTTP/1.1 411")
    # A cross-site form is refused before anything is read.
    r = ask(lr.admin_port, "POST", "/warm", headers=[("Content-Type", "application/x-www-form-urlencoded")],
            body=origin.url("/unique/1/10").encode())
    assert r.status == 403 and b"text/uri-list" in r.body
    assert ask(lr.admin_port, "PUT", "/warm").status == 405
    assert admin_json(lr, "/warm") == {"state": "idle"}
    assert origin.requests() == []
    # A body sent slowly, in pieces, on a kept-alive connection, then another request on it.
    with socket.create_connection(("127.0.0.1", lr.admin_port), timeout=10) as s:
        body = (origin.url("/unique/5/10") + "\n").encode()
        s.sendall(f"POST /warm HTTP/1.1\r\nHost: 127.0.0.1:{lr.admin_port}\r\n"
                  f"Content-Type: text/uri-list\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        for i in range(0, len(body), 7):
            s.sendall(body[i:i + 7])
            time.sleep(0.01)
        s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{lr.admin_port}\r\n\r\n".encode())
        got = b""
        deadline = time.monotonic() + 10
        while got.count(b"HTTP/1.1 ") < 2 and time.monotonic() < deadline:
            got += s.recv(4096)
        assert got.startswith(b"HTTP/1.1 202") and b"HTTP/1.1 200" in got, got
    assert wait_job(lr)["stored"] == 1


def test_post_warm_takes_a_large_list_and_answers_100_continue(larder_factory):
    lr = larder_factory(config=ADMIN)
    line = b"ftp://mirror.example/" + b"p" * 100 + b"\n"
    count = (8 << 20) // len(line) - 10
    body = line * count
    assert len(body) < 8 << 20 and count < 100_000
    with socket.create_connection(("127.0.0.1", lr.admin_port), timeout=20) as s:
        s.sendall(f"POST /warm HTTP/1.1\r\nHost: 127.0.0.1:{lr.admin_port}\r\nContent-Type: text/uri-list\r\n"
                  f"Expect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        started = time.monotonic()
        s.sendall(body)
        got = b""
        while b"}" not in got:
            piece = s.recv(4096)
            assert piece, got
            got += piece
        assert got.startswith(b"HTTP/1.1 202"), got
        assert time.monotonic() - started < 10
    assert json.loads(got.split(b"\r\n\r\n", 1)[1])["invalid"] == count
    w = wait_job(lr)
    assert (w["failed"], w["done"]) == (count, count)
    assert len(w["failed_urls"]) == 20


def test_post_warm_needs_the_token(larder_factory, origin):
    token = "warm-secret-token"
    lr = larder_factory(config={**ADMIN, "admin_token": token})
    body = origin.url("/unique/1/10").encode()
    assert admin_post_warm(lr, body).status == 401
    auth = [("Authorization", f"Bearer {token}")]
    assert admin_post_warm(lr, body, headers=auth).status == 202
    assert wait_job(lr, headers=auth)["stored"] == 1
    assert ask(lr.admin_port, "GET", "/warm").status == 401


def test_a_warm_job_meets_the_access_rules_clients_meet(larder_factory, origin):
    # This machine's own services are off limits to clients here, so to warm jobs too.
    lr = larder_factory(config={**ADMIN, "protect_this_host": "on"})
    lines = [origin.url("/unique/1/10"), "http://169.254.169.254/latest/meta-data/",
             f"http://127.0.0.1:{lr.admin_port}/stats", "http://localhost:22/"]
    assert admin_post_warm(lr, "\n".join(lines).encode()).status == 202
    w = wait_job(lr)
    assert (w["failed"], w["stored"]) == (4, 0), w
    assert all(x["reason"].startswith("HTTP 403") for x in w["failure_reasons"]), w
    assert origin.requests() == []


def test_the_dashboard_shows_warming(larder_factory):
    lr = larder_factory(config=ADMIN)
    html = ask(lr.admin_port, "GET", "/").body.decode()
    assert 'id="warm"' in html and "s.warm" in html
