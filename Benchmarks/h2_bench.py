#!/usr/bin/env python3
"""HTTP/2 peer benchmark: cache hits served over h2 by Larder, nginx proxy_cache, Apache Traffic
Server and HAProxy's cache, each a reverse proxy in front of the same origin, measured with h2load.

    python3 Benchmarks/h2_bench.py                   # 4 scenarios x 4 peers, 5 s runs, 3 rounds
    python3 Benchmarks/h2_bench.py --quick           # 1 s runs, one round
    python3 Benchmarks/h2_bench.py --peers larder,haproxy --scenarios tls-1k --seconds 3

Scenarios: a 1 KiB and a 256 KiB object (`Cache-Control: max-age=3600`), each over TLS (h2 chosen
by ALPN, TLS 1.3 with TLS_AES_128_GCM_SHA256 for every peer, a test certificate made with openssl
here) and over cleartext h2 with prior knowledge (h2c), at 64 connections x 10 streams
(`h2load -t1 -c64 -m10 -D SECONDS`). Every peer is warmed so that every measured request is a hit,
checked before it is measured (h2 only, all 2xx, full bodies, nothing reaching the origin, its own
hit counter or log), and checked again around every measured run; a run with any non-2xx answer,
error, short body, other protocol or cipher, origin request or cache miss is flagged and never
counts as a peer's best. Rounds are interleaved: every peer once per round, then again.

Reuses bench.py's pieces: the origin nginx, the process groups pinned to core 0 (h2load on core 1),
the pausing of the idle peers (SIGSTOP) while one is measured, the CPU and origin counters, and
Traffic Server's records.config. Everything runs on 127.0.0.1 with ports picked at run time, in a
temporary directory with its own configurations, pids and logs; every process it starts is stopped
by its process group id. See Benchmarks/README.md ("HTTP/2: h2_bench.py")."""

import argparse
import datetime
import http.client
import json
import os
import pwd
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench       # noqa: E402  (the peer benchmark: origin, processes, counters)
import tls_bench   # noqa: E402  (the test CA and certificate)
from bench import log, warn, fmt, med   # noqa: E402

PEERS = ["larder", "nginx", "ats", "haproxy"]      # run order within a round
OTHER_PEERS = ["nginx", "ats", "haproxy"]          # "best peer" is the fastest unflagged of these
# name -> (transport, origin path). tls: h2 by ALPN over TLS; h2c: h2 with prior knowledge.
SCENARIOS = {
    "tls-1k": ("tls", "/files/1k"),
    "tls-256k": ("tls", "/files/256k"),
    "h2c-1k": ("h2c", "/files/1k"),
    "h2c-256k": ("h2c", "/files/256k"),
}
SIZE = {"/files/1k": 1024, "/files/256k": 256 * 1024}
# What each peer can do, and how it is set up to do it. A transport missing here leaves the peer
# out of that transport's scenarios (said at the start and in the table); all four do both today.
SUPPORTS = {"larder": {"tls", "h2c"}, "nginx": {"tls", "h2c"}, "ats": {"tls", "h2c"},
            "haproxy": {"tls", "h2c"}}
LIMITS = {
    "larder": "h2 by ALPN on tls.listen; prior knowledge on a plain listener, which keeps taking "
              "HTTP/1.1; Upgrade: h2c is refused (dropped as hop-by-hop)",
    "nginx": "1.22: prior knowledge only on a listener marked `http2` without `ssl`, which then "
             "answers no HTTP/1.1; no Upgrade: h2c; its default ssl_protocols stop at TLS 1.2, so "
             "TLSv1.3 is named here",
    "ats": "9.2: prior knowledge only on a plain port whose proto list names http2 (here "
           "proto=http2;http; the default port takes HTTP/1.x only and drops the preface); no "
           "Upgrade: h2c",
    "haproxy": "2.6: prior knowledge only on a bind with `proto h2`, which then answers no "
               "HTTP/1.1; no Upgrade: h2c; its cache is memory only (total-max-size at most "
               "4095 MB, objects up to max-object-size, at most half of it)",
}
# Every peer and h2load agree on this, and every TLS run checks that it was used.
TLS13_CIPHER = "TLS_AES_128_GCM_SHA256"
TLS12_CIPHER = "ECDHE-ECDSA-AES128-GCM-SHA256"
APT = {"h2load": "nghttp2-client", "nginx": "nginx-light", "traffic_server": "trafficserver",
       "haproxy": "haproxy", "openssl": "openssl", "curl": "curl"}


def install_missing(peers):
    needed = ["h2load", "nginx", "openssl"]   # nginx is also the origin
    needed += [b for p, b in (("ats", "traffic_server"), ("haproxy", "haproxy")) if p in peers]
    packages = [APT[b] for b in needed if not bench.which(b)]
    if packages:
        log(f"installing from Debian: {' '.join(packages)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        r = subprocess.run(["apt-get", "install", "-y", "-qq", *packages], env=env)
        if r.returncode != 0 and "nginx-light" in packages:   # nginx-light is gone on newer Debian
            packages = ["nginx" if p == "nginx-light" else p for p in packages]
            r = subprocess.run(["apt-get", "install", "-y", "-qq", *packages], env=env)
        if r.returncode != 0:
            sys.exit("apt-get install failed")


# ---------------------------------------------------------------------------------------------
# The peers: one process group each, pinned to core 0, a TLS port and a prior-knowledge port


class Peer:
    def __init__(self, name, server, ports):
        self.name, self.server, self.ports = name, server, ports   # ports: transport -> port
        self.admin = None         # Larder's admin port
        self.not_hit_log = None   # nginx: the log of answers that were not cache HITs
        self.stats_sock = None    # HAProxy: its stats socket
        self.broken = {}          # scenario -> reason it is not measured

    def url(self, scenario):
        transport, path = SCENARIOS[scenario]
        scheme = "https" if transport == "tls" else "http"
        return f"{scheme}://127.0.0.1:{self.ports[transport]}{path}"


def start_larder(work, tls_port, h2c_port, admin, origin, nofile, cert, key):
    # bench.py's Larder (one worker, 1 GiB memory tier, no access log, no per-client connection
    # limit), in reverse mode, with a TLS listener next to the plain one
    argv, env = bench.start_larder(work, "larder", h2c_port, admin, origin, nofile, cget=False)
    argv += ["--reverse-origin", f"http://127.0.0.1:{origin}"]
    env.update(LARDER_TLS_LISTEN=f"[127.0.0.1:{tls_port}]", LARDER_TLS_CERTIFICATE_FILE=str(cert),
               LARDER_TLS_KEY_FILE=str(key))
    return argv, env


def write_nginx(work, tls_port, h2c_port, origin, nofile, cert, key):
    d = work / "nginx-proxy"
    (d / "cache").mkdir(parents=True)
    (d / "tmp").mkdir()
    pw = pwd.getpwnam("nobody")
    for p in (d / "cache", d / "tmp"):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    not_hit = d / "not-hit.log"
    # bench.py's nginx proxy_cache, with two h2 listeners. Access log: only answers whose
    # $upstream_cache_status is not HIT (none, when every request is a hit: nothing is written).
    (d / "nginx.conf").write_text(f"""
user nobody nogroup;
worker_processes 1;
worker_rlimit_nofile {nofile};
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 16384; }}
http {{
    map $upstream_cache_status $bench_not_hit {{ HIT 0; default 1; }}
    log_format bench '$server_protocol $status [$upstream_cache_status] $request_uri';
    access_log {not_hit} bench if=$bench_not_hit;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    proxy_cache_path {d}/cache levels=1:2 keys_zone=bench:128m max_size=4g inactive=1d use_temp_path=off;
    upstream origin {{
        server 127.0.0.1:{origin};
        keepalive 1024;
        keepalive_requests 100000000;
    }}
    server {{
        listen 127.0.0.1:{tls_port} ssl http2 backlog=4096;
        listen 127.0.0.1:{h2c_port} http2 backlog=4096;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_valid 200 1h;
            proxy_cache_revalidate on;
            proxy_buffers 64 16k;
        }}
    }}
}}
""")
    not_hit.touch()
    os.chown(not_hit, pw.pw_uid, pw.pw_gid)
    return ["nginx", "-c", str(d / "nginx.conf")], not_hit


def write_ats(work, tls_port, h2c_port, origin, nofile, cert, key):
    # bench.py's Traffic Server (one exec thread, 1 GiB RAM cache, LRU, no log), as a reverse
    # proxy: a TLS port (h2 by ALPN) and a plain port that also takes the h2 preface
    # (proto=http2;http); stats_over_http for its cache counters
    overrides = {
        "proxy.config.http.server_ports": (
            "STRING", f"{h2c_port}:ipv4:proto=http2;http:ip-in=127.0.0.1 "
                      f"{tls_port}:ipv4:ssl:ip-in=127.0.0.1"),
        "proxy.config.url_remap.remap_required": ("INT", 1),
        "proxy.config.reverse_proxy.enabled": ("INT", 1),
        "proxy.config.http.connect_ports": ("STRING", "443"),
        # its counters are published every 5 s by default; every second here, so that they can
        # be read around each run
        "proxy.config.raw_stat_sync_interval_ms": ("INT", 1000),
    }
    argv, d = bench.write_ats(work, h2c_port, nofile, origin, overrides)
    etc = d / "etc"
    (etc / "remap.config").write_text(f"map / http://127.0.0.1:{origin}/\n")
    (etc / "ssl_multicert.config").write_text(
        f"dest_ip=* ssl_cert_name={cert} ssl_key_name={key}\n")
    (etc / "plugin.config").write_text("stats_over_http.so _stats\n")
    return argv, d


def write_haproxy(work, tls_port, h2c_port, origin, nofile, cert, key):
    d = work / "haproxy"
    d.mkdir()
    pem = d / "cert.pem"
    pem.write_bytes(Path(cert).read_bytes() + Path(key).read_bytes())
    sock = d / "stats.sock"
    # One thread, a 1 GiB memory cache admitting 8 MiB objects, keep-alive both ways, no log.
    (d / "haproxy.cfg").write_text(f"""
global
    nbthread 1
    maxconn {max(1000, nofile // 2 - 200)}
    pidfile {d}/haproxy.pid
    stats socket {sock} mode 600 level admin
defaults
    mode http
    timeout connect 10s
    timeout client 300s
    timeout server 300s
    timeout http-keep-alive 300s
    http-reuse always
cache bench
    total-max-size 1024
    max-object-size 8388608
    max-age 3600
frontend fe
    bind 127.0.0.1:{tls_port} ssl crt {pem} alpn h2,http/1.1
    bind 127.0.0.1:{h2c_port} proto h2
    default_backend be
backend be
    http-request cache-use bench
    http-response cache-store bench
    server origin 127.0.0.1:{origin}
""")
    return ["haproxy", "-db", "-f", str(d / "haproxy.cfg")], sock


# ---------------------------------------------------------------------------------------------
# Each peer's own count of cache hits and of everything else (misses, revalidations, no lookup)


def http_json(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        return json.loads(c.getresponse().read())
    finally:
        c.close()


def haproxy_stat(sock_path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(str(sock_path))
    s.sendall(b"show stat\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    lines = data.decode().splitlines()
    head = lines[0].lstrip("# ").split(",")
    return [dict(zip(head, line.split(","))) for line in lines[1:] if line]


def counters(peer):
    """(hits, not_hits) by the peer's own account; hits is None for nginx (its not-hit log
    counts every answer that was not a HIT). Traffic Server publishes its counters once a second
    (raw_stat_sync_interval_ms), so they are read until two readings 1.2 s apart agree."""
    if peer.name == "larder":
        s = bench.larder_stats(peer)["cache_lookups"]
        return s["hit"], sum(v for k, v in s.items() if k != "hit")
    if peer.name == "nginx":
        with open(peer.not_hit_log, "rb") as f:
            return None, sum(1 for _ in f)
    if peer.name == "ats":
        def read():
            g = http_json(peer.ports["h2c"], "/_stats")["global"]
            n = lambda k: int(g.get(f"proxy.process.http.{k}", 0))   # noqa: E731
            return n("cache_hit_fresh"), sum(n(k) for k in (
                "cache_miss_cold", "cache_miss_changed", "cache_miss_client_no_cache",
                "cache_hit_revalidated", "cache_hit_stale_served", "cache_hit_ims",
                "cache_miss_ims"))
        last = read()
        for _ in range(8):
            time.sleep(1.2)
            now = read()
            if now == last:
                break
            last = now
        return last
    if peer.name == "haproxy":
        be = next(r for r in haproxy_stat(peer.stats_sock)
                  if r["pxname"] == "be" and r["svname"] == "BACKEND")
        hits, lookups = int(be["cache_hits"] or 0), int(be["cache_lookups"] or 0)
        return hits, lookups - hits
    raise ValueError(peer.name)


# ---------------------------------------------------------------------------------------------
# h2load

SIZE_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
TIME_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def parse_h2load(out):
    """h2load's summary, in bench.run_load's terms (requests = answers done), plus its own."""
    r = {"requests": 0, "rps": 0.0, "mibs": 0.0, "p50": None, "p99": None, "non2xx": 0,
         "sockerr": 0, "sockerr_text": "", "complete": False, "proto": None, "tls": None,
         "cipher": None, "data_bytes": 0, "header_bytes": 0, "started": 0, "mean_ms": None, "status": ""}
    m = re.search(r"finished in ([\d.]+)(\w+), ([\d.]+) req/s", out)
    if m:
        r["complete"] = True
        r["seconds"] = float(m.group(1)) * TIME_UNITS.get(m.group(2), float("nan")) / 1e3
        r["rps"] = float(m.group(3))
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", out)
    if m:
        total, started, done, ok, failed, errored, timeout = map(int, m.groups())
        r.update(requests=done, started=started, sockerr=failed + errored + timeout)
        if r["sockerr"]:
            r["sockerr_text"] = f"failed {failed}, errored {errored}, timeout {timeout}"
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    if m:
        c2, c3, c4, c5 = map(int, m.groups())
        # statuses count every answer whose head arrived, those still in flight at the end too
        r["non2xx"] = c3 + c4 + c5 + max(0, r["requests"] - c2)
        r["status"] = f"{c2} 2xx, {c3} 3xx, {c4} 4xx, {c5} 5xx"
    elif r["complete"]:
        r["non2xx"] = r["requests"]
    m = re.search(r"traffic: \S+ \((\d+)\) total, \S+ \((\d+)\) headers .*? \((\d+)\) data", out)
    if m and r.get("seconds"):
        r["mibs"] = int(m.group(1)) / r["seconds"] / 2 ** 20
        r["header_bytes"], r["data_bytes"] = int(m.group(2)), int(m.group(3))
    m = re.search(r"time for request:\s+\S+\s+\S+\s+([\d.]+)(\w+)", out)
    if m:
        r["mean_ms"] = float(m.group(1)) * TIME_UNITS.get(m.group(2), float("nan"))
    for key, pat in (("proto", r"Application protocol: (\S+)"), ("tls", r"TLS Protocol: (\S+)"),
                     ("cipher", r"Cipher: (\S+)")):
        m = re.search(pat, out)
        if m:
            r[key] = m.group(1)
    return r


def h2load_argv(url, conns, streams, seconds=None, requests=None):
    argv = ["taskset", "-c", "1", "h2load", "-t1", f"-c{conns}", f"-m{streams}",
            f"--tls13-ciphers={TLS13_CIPHER}", f"--ciphers={TLS12_CIPHER}"]
    argv += ["-D", str(seconds)] if seconds else ["-n", str(requests)]
    return argv + [url]


def problems_of(r, scenario, expect_hits=True):
    """Why a run's answers cannot count: anything but h2, all 2xx, full bodies, TLS 1.3 with the
    agreed cipher, no origin request, no cache miss, a hit for every answer (where counted)."""
    transport, path = SCENARIOS[scenario]
    out = []
    if not r.get("ok", r.get("complete")):
        out.append("h2load failed")
    if r["requests"] == 0:
        out.append("no answer completed")
    want = "h2" if transport == "tls" else "h2c"
    if r["proto"] != want:
        out.append(f"protocol {r['proto']} (not {want})")
    if transport == "tls" and (r["tls"], r["cipher"]) != ("TLSv1.3", TLS13_CIPHER):
        out.append(f"TLS {r['tls']} {r['cipher']}")
    if r["non2xx"]:
        out.append(f"NON2XX={r['non2xx']} ({r['status']})")
    if r["sockerr"]:
        out.append(f"ERRORS ({r['sockerr_text']})")
    size = SIZE[path]
    if r["requests"] and not (r["requests"] * size <= r["data_bytes"] <= r["started"] * size):
        out.append(f"BODY-BYTES={r['data_bytes']} for {r['requests']} answers of {size}")
    if r.get("origin_share") is not None and r["origin_share"] > 0:
        out.append(f"ORIGIN-REQUESTS={round(r['origin_share'] * r['requests'])}")
    if expect_hits:
        if r.get("not_hits"):
            out.append(f"NOT-HITS={r['not_hits']} (its own count)")
        if r.get("hits") is not None and r["hits"] < r["requests"]:
            out.append(f"HITS={r['hits']} < answers {r['requests']} (its own count)")
    return out


# Process groups of ours besides the measured peer (the origin), for the CPU others used.
OURS = []


def machine_ticks():
    """(busy, steal) clock ticks of the whole machine so far (/proc/stat): user, nice, system,
    irq and softirq; the hypervisor's steal apart."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return f[0] + f[1] + f[2] + f[5] + f[6], f[7]


def own_ticks(pgid):
    t = os.times()
    return (bench.cpu_ticks(pgid) + sum(bench.cpu_ticks(g) for g in OURS)
            + (t.user + t.system + t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK"))


def wait_idle(budget, threshold=0.2):
    """Waits, at most ``budget`` seconds, for a second in which the machine's busy CPU (all
    processes, ours idle between runs) stays under ``threshold`` cores; returns the seconds
    waited and the last second's busy cores."""
    start = time.monotonic()
    while True:
        b0, t0 = machine_ticks()[0], time.monotonic()
        time.sleep(1)
        busy = (machine_ticks()[0] - b0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
        if busy < threshold or time.monotonic() - start >= budget:
            return time.monotonic() - start, busy


def run_h2load(peer, scenario, origin, conns, streams, seconds=None, requests=None):
    """One h2load run against the peer (bench.run_load: the peer's CPU, the origin's request
    counter and h2load's CPU around it), with the peer's own hit counters read around it too,
    and the CPU that processes not ours took meanwhile (another job on the machine)."""
    before = counters(peer)
    argv = h2load_argv(peer.url(scenario), conns, streams, seconds, requests)
    wall0, (busy0, steal0), own0 = time.monotonic(), machine_ticks(), own_ticks(peer.server.pgid)
    r = bench.run_load(argv, seconds or 10, peer.server.pgid, origin, parse_h2load, "h2load")
    wall, (busy1, steal1) = time.monotonic() - wall0, machine_ticks()
    own1 = own_ticks(peer.server.pgid)
    hz = os.sysconf("SC_CLK_TCK")
    r["other_cores"] = max(0.0, (busy1 - busy0) - (own1 - own0)) / hz / wall
    r["steal_cores"] = (steal1 - steal0) / hz / wall
    after = counters(peer)
    r["hits"] = None if before[0] is None else after[0] - before[0]
    r["not_hits"] = after[1] - before[1]
    r["problems"] = problems_of(r, scenario)
    return r


def verify(peer, scenario, origin):
    """Warm the peer for the scenario and check that it serves it from its cache over h2."""
    if SCENARIOS[scenario][0] not in SUPPORTS[peer.name]:
        return "cannot serve this transport"
    try:
        for n in (3, 2):   # the first stores it; the second pass reads it back after the store
            w = parse_h2load(subprocess.run(h2load_argv(peer.url(scenario), 1, 1, requests=n),
                                            capture_output=True, text=True, timeout=60).stdout)
            if w["requests"] != n or w["non2xx"]:
                return f"warming: {w['requests']} of {n} answered, {w['status'] or 'no status'}"
            time.sleep(0.3)
        r = run_h2load(peer, scenario, origin, 2, 5, requests=50)
    except (OSError, subprocess.SubprocessError, http.client.HTTPException, ValueError,
            KeyError, StopIteration) as e:
        return f"checking failed: {e!r}"
    if r["requests"] != 50:
        r["problems"].insert(0, f"{r['requests']} of 50 answered")
    return "; ".join(r["problems"]) or None


# ---------------------------------------------------------------------------------------------


def versions(peers):
    def first_line(argv):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
            lines = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()
                     and "RUNROOT" not in l and "using root directory" not in l]
            return lines[0].strip() if lines else "?"
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    v = {"h2load": first_line(["h2load", "--version"]), "openssl": first_line(["openssl", "version"]),
         "nginx": first_line(["nginx", "-v"])}
    if "larder" in peers:
        try:
            v["larder"] = "larder " + bench.larder_stats(peers["larder"])["version"]
        except (OSError, ValueError, KeyError, http.client.HTTPException):
            v["larder"] = "?"
    if "ats" in peers:
        v["ats"] = first_line(["traffic_server", "-V"])
    if "haproxy" in peers:
        v["haproxy"] = first_line(["haproxy", "-v"])
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, help="length of each measured h2load run (5)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds per scenario (3)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="comma-separated subset of %(default)s")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of "
                    "%(default)s")
    ap.add_argument("--connections", type=int, default=64, help="h2load -c (%(default)s)")
    ap.add_argument("--streams", type=int, default=10,
                    help="h2load -m, concurrent streams per connection (%(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="for development: 1 s runs, one round (unless given)")
    ap.add_argument("--out", help="results directory (Benchmarks/results/DATE-HOSTNAME-h2/)")
    ap.add_argument("--larder-bin", help="the Larder executable to measure "
                                         "(.build/release/larder, built if missing)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--idle-wait", type=int, default=0, metavar="SECONDS",
                    help="before each measured run, wait up to this long for a second in which "
                         "the machine is idle (under 0.2 busy cores), for a shared machine (0: "
                         "do not wait)")
    args = ap.parse_args()
    args.seconds = args.seconds or (1 if args.quick else 5)
    args.rounds = args.rounds or (1 if args.quick else 3)
    scenarios = [s for s in args.scenarios.split(",") if s]
    chosen = [p for p in args.peers.split(",") if p]
    for s in scenarios:
        if s not in SCENARIOS:
            sys.exit(f"unknown scenario {s!r}; choose from {', '.join(SCENARIOS)}")
    for p in chosen:
        if p not in PEERS:
            sys.exit(f"unknown peer {p!r}; choose from {', '.join(PEERS)}")
    names = [p for p in PEERS if p in chosen]
    if args.seconds <= 0 or args.rounds < 1 or args.connections < 1 or args.streams < 1:
        sys.exit("--seconds, --rounds, --connections and --streams must be positive")
    if os.geteuid() != 0:
        sys.exit("run as root: it installs packages, and nginx changes user")
    if os.cpu_count() < 2:
        sys.exit("needs two cores: the servers on core 0, h2load on core 1")
    if args.larder_bin:
        bench.LARDER_BIN = Path(args.larder_bin).resolve()
        if not os.access(bench.LARDER_BIN, os.X_OK):
            sys.exit(f"--larder-bin {args.larder_bin}: not an executable file")
    install_missing(names)
    if "larder" in names and not bench.LARDER_BIN.exists():
        log("building Larder (swift build -c release --product larder)")
        subprocess.run(["swift", "build", "-c", "release", "--product", "larder"],
                       cwd=bench.REPO, check=True)
    nofile = bench.raise_nofile()

    log("what each peer can do over h2 (and how it is set up here):")
    for p in names:
        cannot = [t for t in ("tls", "h2c") if t not in SUPPORTS[p]]
        log(f"  {p:<8} {'cannot: ' + ', '.join(cannot) + '; ' if cannot else 'TLS and h2c; '}"
            f"{LIMITS[p]}")
    pairs = [(s, p) for s in scenarios for p in names if SCENARIOS[s][0] in SUPPORTS[p]]
    # per scenario and peer: checking (about 3 s; Traffic Server's counters settle for about 3 s
    # more around every run), a 1 s warm-up run, then the measured runs and their readings
    est = sum(4 + 1 + args.rounds * (args.seconds + 1) + (args.rounds + 2) * 3 * (p == "ats")
              for _, p in pairs) + 20
    log(f"{len(pairs) * args.rounds} measured runs of {args.seconds} s ({args.rounds} rounds, "
        f"h2load -c{args.connections} -m{args.streams}), {len(pairs)} warm-up runs of 1 s: "
        f"expect about {est / 60:.1f} minutes"
        + (f" (plus up to {args.idle_wait} s of waiting for an idle machine before each run)"
           if args.idle_wait else ""))

    host = socket.gethostname()
    out_dir = Path(args.out) if args.out else \
        bench.REPO / "Benchmarks" / "results" / f"{datetime.datetime.now():%Y-%m-%d-%H%M%S}-{host}-h2"
    load_before = Path("/proc/loadavg").read_text().strip()
    log(f"load average before: {load_before}")
    if float(load_before.split()[0]) > 0.5:
        log(f"note: load average {load_before.split()[0]} before starting; other work on this "
            "machine makes the numbers noisy")

    work = Path(tempfile.mkdtemp(prefix="larder-h2-peers."))
    work.chmod(0o755)   # nginx's workers run as nobody and need to get in
    servers = []
    started = time.monotonic()
    try:
        tls_bench.make_pki(work)   # a test CA and a certificate for localhost (EC P-256)
        cert, key = work / "origin.pem", work / "origin.key"
        origin_port = bench.free_port()
        origin_srv = bench.Server("origin", bench.write_origin(work, origin_port, nofile),
                                  work / "origin.log")
        servers.append(origin_srv)
        if not bench.wait_port(origin_port, 30, origin_srv):
            sys.exit(f"the origin nginx did not start:\n{origin_srv.tail()}")
        origin = bench.Origin(origin_port)
        OURS.append(origin_srv.pgid)

        peers = {}
        for name in names:
            tls_port, h2c_port = bench.free_port(), bench.free_port()
            extra = {}
            if name == "larder":
                admin = bench.free_port()
                argv, env = start_larder(work, tls_port, h2c_port, admin, origin_port, nofile,
                                         cert, key)
                srv = bench.Server(name, argv, work / "larder.log", env=env)
                extra["admin"] = admin
            elif name == "nginx":
                argv, extra["not_hit_log"] = write_nginx(work, tls_port, h2c_port, origin_port,
                                                         nofile, cert, key)
                srv = bench.Server(name, argv, work / "nginx-proxy.log")
            elif name == "ats":
                argv, d = write_ats(work, tls_port, h2c_port, origin_port, nofile, cert, key)
                srv = bench.Server(name, argv, work / "ats.log", cwd=d)
            else:
                argv, extra["stats_sock"] = write_haproxy(work, tls_port, h2c_port, origin_port,
                                                          nofile, cert, key)
                srv = bench.Server(name, argv, work / "haproxy.log")
            servers.append(srv)
            peer = Peer(name, srv, {"tls": tls_port, "h2c": h2c_port})
            for k, v in extra.items():
                setattr(peer, k, v)
            if not all(bench.wait_port(p, 60, srv) for p in (tls_port, h2c_port)):
                warn(f"{name} did not start; it is left out. Its log:\n{srv.tail()}")
                continue
            peers[name] = peer
        time.sleep(1)   # ATS opens its cache after it accepts
        vers = versions(peers)

        runs = {}     # (scenario, peer) -> [run]
        for scenario in scenarios:
            transport = SCENARIOS[scenario][0]
            log(f"\n== {scenario} ({'h2 over TLS' if transport == 'tls' else 'h2 prior knowledge'}, "
                f"{SCENARIOS[scenario][1]}, -c{args.connections} -m{args.streams}); load average "
                f"{Path('/proc/loadavg').read_text().split()[0]}")
            measured = []
            for name in names:
                peer = peers.get(name)
                if peer is None:
                    continue
                if transport not in SUPPORTS[name]:
                    peer.broken[scenario] = f"{name} cannot serve h2 {transport}"
                elif not peer.server.alive():
                    peer.broken[scenario] = "the process has exited"
                else:
                    with bench.others_paused(servers, keep=(peer.server, origin_srv)):
                        reason = verify(peer, scenario, origin)
                    if reason:
                        peer.broken[scenario] = reason
                if scenario in peer.broken:
                    warn(f"{name}, {scenario}: {peer.broken[scenario]}; not measured")
                else:
                    log(f"  {name}: verified (h2, 2xx, full bodies, served from its cache)")
                    measured.append(peer)
            for rnd in range(args.rounds):
                for peer in measured:
                    if not peer.server.alive():
                        if scenario not in peer.broken:
                            peer.broken[scenario] = "the process died during the runs"
                            warn(f"{peer.name} died during {scenario}:\n{peer.server.tail()}")
                        continue
                    load1 = Path("/proc/loadavg").read_text().split()[0]
                    with bench.others_paused(servers, keep=(peer.server, origin_srv)):
                        if rnd == 0:   # unmeasured: connections and buffers come up
                            run_h2load(peer, scenario, origin, args.connections, args.streams,
                                       seconds=1)
                        waited = wait_idle(args.idle_wait) if args.idle_wait > 0 else (0.0, None)
                        r = run_h2load(peer, scenario, origin, args.connections, args.streams,
                                       seconds=args.seconds)
                    r["idle_wait_s"], r["busy_before"] = waited
                    r["load1"] = load1
                    runs.setdefault((scenario, peer.name), []).append(r)
                    flag = ("  <-- FLAGGED: " + "; ".join(r["problems"])) if r["problems"] else ""
                    if not r["ok"]:
                        flag += "\n" + r["out"][-2000:]
                    log(f"  round {rnd + 1}  {peer.name:<8} {r['rps']:>10.0f} req/s "
                        f"{r['mibs']:>8.1f} MiB/s  cpu {fmt(r['cpu_us'], '.1f'):>6} us/req  "
                        f"h2load {fmt(r['wrk_cores'], '.2f')} cores  "
                        f"hits {r['hits'] if r['hits'] is not None else 'n/a'}  "
                        f"not-hits {r['not_hits']}  load {load1}  others {r['other_cores']:.2f} "
                        f"cores{flag}")
        load_after = Path("/proc/loadavg").read_text().strip()
        elapsed = time.monotonic() - started

        rows = summarise(scenarios, names, peers, runs)
        table = format_table(rows, args)
        log("\n" + table)
        out_dir.mkdir(parents=True, exist_ok=True)
        write_outputs(out_dir, rows, runs, table)
        write_machine(out_dir, args, vers, load_before, load_after, nofile, elapsed, peers)
        log(f"\nresults in {out_dir} ({elapsed / 60:.1f} minutes); load average after: {load_after}")
    finally:
        for srv in reversed(servers):
            srv.stop()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def summarise(scenarios, names, peers, runs):
    rows = []
    for scenario in scenarios:
        srows = []
        for name in names:
            rs = runs.get((scenario, name), [])
            peer = peers.get(name)
            flags = sorted({p.split("=")[0].split(" (")[0] for r in rs for p in r["problems"]})
            if not rs:
                why = peer.broken.get(scenario, "not started") if peer else "did not start"
                srows.append({"scenario": scenario, "peer": name, "runs": 0, "rps": None,
                              "all_rps": [], "mibs": None, "mean_ms": None, "cpu_us": None,
                              "h2load_cores": None, "hits": None, "not_hits": None,
                              "origin_requests": None, "flags": "NOT-MEASURED: " + why,
                              "best_peer": "", "vs_best": None, "load1": "", "others": None})
                continue
            srows.append({
                "scenario": scenario, "peer": name, "runs": len(rs),
                "rps": med([r["rps"] for r in rs]), "all_rps": [r["rps"] for r in rs],
                "mibs": med([r["mibs"] for r in rs]), "mean_ms": med([r["mean_ms"] for r in rs]),
                "cpu_us": med([r["cpu_us"] for r in rs]),
                "h2load_cores": med([r["wrk_cores"] for r in rs]),
                "hits": sum(r["hits"] for r in rs) if rs[0]["hits"] is not None else None,
                "not_hits": sum(r["not_hits"] for r in rs),
                "origin_requests": sum(round((r["origin_share"] or 0) * r["requests"]) for r in rs),
                "answers": sum(r["requests"] for r in rs),
                "flags": ",".join(flags), "best_peer": "", "vs_best": None,
                "load1": ",".join(r["load1"] for r in rs),
                "others": med([r["other_cores"] for r in rs])})
        valid = [r for r in srows if r["peer"] in OTHER_PEERS and r["rps"] and not r["flags"]]
        best = max(valid, key=lambda r: r["rps"], default=None)
        for r in srows:
            r["best_peer"] = best["peer"] if best else ""
            if r["peer"] == "larder" and r["rps"] and best:
                r["vs_best"] = r["rps"] / best["rps"]
        rows.extend(srows)
    return rows


def format_table(rows, args):
    head = (f"{'scenario':<9} {'peer':<8} {'req/s':>9} {'rounds (req/s)':<26} {'MiB/s':>7} "
            f"{'mean ms':>7} {'CPU us/req':>10} {'h2load cores':>12} {'others':>6} {'vs best':>15}  flags")
    lines = [f"h2load -t1 -c{args.connections} -m{args.streams} -D {args.seconds}, medians of "
             f"{args.rounds} interleaved round{'s' if args.rounds != 1 else ''}; servers on core 0, "
             f"h2load on core 1; TLS: TLSv1.3 {TLS13_CIPHER}", head, "-" * len(head)]
    last = None
    for r in rows:
        if last and r["scenario"] != last:
            lines.append("")
        last = r["scenario"]
        vs = fmt(r["vs_best"], ".2f") + (f" ({r['best_peer']})" if r["vs_best"] else "")
        rounds = ",".join(f"{x:.0f}" for x in r["all_rps"])
        lines.append(f"{r['scenario']:<9} {r['peer']:<8} {fmt(r['rps'], '.0f'):>9} {rounds:<26} "
                     f"{fmt(r['mibs'], '.1f'):>7} {fmt(r['mean_ms'], '.2f'):>7} "
                     f"{fmt(r['cpu_us'], '.1f'):>10} {fmt(r['h2load_cores'], '.2f'):>12} "
                     f"{fmt(r['others'], '.2f'):>6} {vs:>15}  {r['flags']}")
    lines.append("\nCPU: utime+stime of the peer's processes per answer; h2load cores: its CPU time "
                 "over the run's wall time (1.00: the client was the limit); others: cores that "
                 "processes not started here kept busy meanwhile (/proc/stat; noise); vs best: Larder / "
                 "the fastest unflagged of nginx, ats, haproxy (requests/s). Every measured run was "
                 "checked: h2 (h2c), all 2xx, full bodies, no origin request, and the peer's own "
                 "count says cache hits (Larder /stats, Traffic Server stats_over_http, HAProxy's "
                 "cache_hits; nginx: its log of answers that were not HITs stayed empty).")
    return "\n".join(lines)


COLUMNS = ["scenario", "peer", "runs", "rps", "all_rps", "mibs", "mean_ms", "cpu_us",
           "h2load_cores", "vs_best", "best_peer", "answers", "hits", "not_hits",
           "origin_requests", "flags", "load1", "others"]


def cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list):
        return ",".join(f"{x:.0f}" for x in v)
    return str(v)


def write_outputs(out_dir, rows, runs, table):
    with open(out_dir / "results.tsv", "w") as f:
        f.write("\t".join(COLUMNS) + "\n")
        for r in rows:
            f.write("\t".join(cell(r.get(c)) for c in COLUMNS) + "\n")
    with open(out_dir / "runs.tsv", "w") as f:
        f.write("scenario\tpeer\trun\tanswers\trps\tmibs\tmean_ms\tcpu_us\th2load_cpu_us\t"
                "h2load_cores\thits\tnot_hits\torigin_share\tstatus\tprotocol\ttls\tcipher\t"
                "data_bytes\theader_bytes_per_answer\tloadavg1\tidle_wait_s\tbusy_cores_before\t"
                "other_cores\tsteal_cores\tproblems\n")
        for (s, p), rs in runs.items():
            for i, r in enumerate(rs):
                f.write("\t".join(map(cell, [
                    s, p, i + 1, r["requests"], r["rps"], r["mibs"], r["mean_ms"], r["cpu_us"],
                    r["wrk_cpu_us"], r["wrk_cores"], r["hits"], r["not_hits"], r["origin_share"],
                    r["status"], r["proto"], r["tls"], r["cipher"], r["data_bytes"],
                    r["header_bytes"] / r["requests"] if r["requests"] else None, r["load1"],
                    r["idle_wait_s"], r["busy_before"], r["other_cores"], r["steal_cores"],
                    "; ".join(r["problems"])])) + "\n")
    (out_dir / "table.txt").write_text(table + "\n")


def shown_path(p):
    """A path inside the repository as a relative one (the record does not name the checkout)."""
    try:
        return str(Path(os.path.abspath(p)).relative_to(bench.REPO))
    except ValueError:
        return str(p)


def write_machine(out_dir, args, vers, load_before, load_after, nofile, elapsed, peers):
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), "?")
    lines = [
        f"date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"host: {socket.gethostname()}",
        f"nproc: {os.cpu_count()}",
        f"cpu: {cpu}",
        f"kernel: {os.uname().release}",
        f"loadavg before: {load_before}",
        f"loadavg after: {load_after}",
        f"RLIMIT_NOFILE: {nofile}",
        f"command: {' '.join(sys.argv)}",
        f"seconds per run: {args.seconds}, rounds: {args.rounds}, "
        f"h2load -t1 -c{args.connections} -m{args.streams}",
        f"idle wait before each run: up to {args.idle_wait} s for a second under 0.2 busy cores",
        f"elapsed: {elapsed:.0f} s",
        "pinning: servers on core 0 (taskset -c 0), h2load -t1 on core 1 (taskset -c 1); the "
        "peers not being measured are stopped (SIGSTOP)",
        f"tls: TLSv1.3 {TLS13_CIPHER} (h2load --tls13-ciphers), EC P-256 test certificate",
        f"larder: {shown_path(bench.LARDER_BIN)}",
        "peers started: " + ", ".join(peers),
        "limitations:",
    ] + [f"  {p}: {LIMITS[p]}" for p in peers] + ["versions:"] + \
        [f"  {k}: {v}" for k, v in vers.items()]
    (out_dir / "machine.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
