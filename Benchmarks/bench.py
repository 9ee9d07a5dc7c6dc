#!/usr/bin/env python3
"""Peer benchmark: Larder against Squid, Apache Traffic Server, Varnish and nginx proxy_cache, with
wrk straight at the origin nginx as the ceiling.

    python3 Benchmarks/bench.py                 # the full run (about 40 minutes on two cores)
    python3 Benchmarks/bench.py --quick         # 1 s runs, one round, 64 connections
    python3 Benchmarks/bench.py --peers larder,squid --scenarios hit-small,many-keys --connections 64

Installs what is missing from Debian (wrk, nginx, squid, varnish, trafficserver, matplotlib), writes
every server's configuration into a temporary directory, starts everything on 127.0.0.1 with ports
picked at run time, pins the servers to core 0 and wrk to core 1, checks that each proxy caches
what it should before measuring it, interleaves the targets round by round and reports medians:
a table on standard output, TSV files, a PNG of the ratios and machine.txt in the results
directory. The scaling scenario measures Larder alone with one worker (pinned, as above) and with two
(Larder and wrk -t2 both unpinned, sharing the cores). The tunnel scenarios use tunnel_load.c
(compiled here) instead of wrk, which cannot CONNECT, against the proxies that tunnel (Larder,
Squid, ATS); hit-disk runs Larder with a memory tier too small for its objects (larder-disk).
Every process it starts runs in its own process group and is stopped by that group's id at the
end. See Benchmarks/README.md for the peers' settings."""

import argparse
import contextlib
import datetime
import json
import os
import pwd
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import http.client
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LARDER_BIN = REPO / ".build" / "release" / "larder"

PEERS = ["larder", "squid", "ats", "varnish", "nginx"]   # the proxies, in run order
OTHER_PEERS = ["squid", "ats", "varnish", "nginx"]       # "best peer" is the fastest of these
FORWARD = {"larder", "larder-cget", "larder-disk", "larder-1w", "larder-2w", "squid", "ats"}
TUNNELLING = {"larder", "squid", "ats"}   # forward proxies with CONNECT (Varnish, nginx: reverse only)
CONNECTIONS = [1, 64, 1024]
MANY_KEYS = 10_000
# hit-disk: DISK_KEYS distinct 64 KiB objects at random, against larder-disk (Larder with a memory
# tier far too small for them, so every hit is read from LMDB) in place of larder.
DISK_KEYS = 2_000
DISK_MEMORY_CAPACITY = "1MiB"
DISK_MEMORY_MAX_OBJECT_SIZE = "16KiB"
# The scaling scenario: Larder alone, hit-small at SCALING_CONNECTIONS, `--workers 1` pinned to
# core 0 (wrk -t1 on core 1) against `--workers 2` unpinned (wrk -t2 unpinned too, so on a
# two-core machine wrk takes its share of the same cores). SCALING_TARGET is the ratio aimed for.
SCALING = ["larder-1w", "larder-2w"]
SCALING_CONNECTIONS = 64
SCALING_TARGET = 1.8

# name -> (kind, origin path). kind: hit (stored once, then served), keys (MANY_KEYS URLs at
# random), disk (DISK_KEYS 64 KiB URLs at random, larder-disk for Larder), pass (no-store), reval
# (max-age=0 with validators), storm (a new URL every request), tunnel (keep-alive GETs inside
# CONNECT tunnels to the origin, by tunnel_load.c; the tunnelling peers only).
# scaling is hit-small for the two Larder worker counts (SCALING) only.
SCENARIOS = {
    "hit-small": ("hit", "/files/1k"),
    "hit-16k": ("hit", "/files/16k"),
    "hit-large": ("hit", "/files/256k"),
    "hit-4m": ("hit", "/files/4m"),
    "many-keys": ("keys", "/keys/"),
    "hit-disk": ("disk", "/disk/"),
    "pass-through": ("pass", "/nostore/1k"),
    "revalidation": ("reval", "/reval/1k"),
    "miss-storm": ("storm", "/storm/1k"),
    "tunnel-small": ("tunnel", "/files/1k"),
    "tunnel-bulk": ("tunnel", "/files/4m"),
    "scaling": ("hit", "/files/1k"),
}
KEY_COUNT = {"keys": MANY_KEYS, "disk": DISK_KEYS}
# Scenarios whose ratios (vs best, vs origin) compare MiB/s rather than requests/s: tunnel-bulk's
# requests still on their way when a run ends are not counted, but their bytes are.
RATIO_OF = {"tunnel-bulk": "mibs"}
FILES = {"1k": 1024, "16k": 16 * 1024, "64k": 64 * 1024, "256k": 256 * 1024, "4m": 4 * 1024 * 1024}
SIZE_OF = {"/files/1k": 1024, "/files/16k": 16384, "/files/64k": 65536, "/files/256k": 262144,
           "/files/4m": 4194304, "/keys/": 1024, "/disk/": 65536, "/nostore/1k": 1024,
           "/reval/1k": 1024, "/storm/1k": 1024}

# What a measured run may send to the origin per request, by scenario kind: hits almost nothing,
# pass-through, revalidation, misses and requests inside tunnels one request each.
ORIGIN_SHARE = {"hit": (0.0, 0.01), "keys": (0.0, 0.01), "disk": (0.0, 0.01), "pass": (0.9, 1.5),
                "reval": (0.9, 1.5), "storm": (0.9, 1.5), "tunnel": (0.9, 1.5)}

APT = {"wrk": "wrk", "nginx": "nginx-light", "squid": "squid", "varnishd": "varnish",
       "traffic_server": "trafficserver"}


def log(msg=""):
    print(msg, flush=True)


def warn(msg):
    print(f"ERROR: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Setting up: packages, limits, ports


def which(name):
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}")
                                       if os.access(p, os.X_OK)), None)


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def install_missing(peers):
    """apt-get install what the selected targets need; then re-run under Debian's python3 when
    matplotlib is only there (a python3 earlier on PATH may not see Debian's packages)."""
    needed = ["wrk", "nginx"]
    for peer, binary in (("squid", "squid"), ("varnish", "varnishd"), ("ats", "traffic_server")):
        if peer in peers:
            needed.append(binary)
    packages = [APT[b] for b in needed if not which(b)]
    system_python = Path("/usr/bin/python3")
    if not have_matplotlib() and not (system_python.exists() and subprocess.run(
            [str(system_python), "-c", "import matplotlib"], capture_output=True).returncode == 0):
        packages.append("python3-matplotlib")
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
    if not have_matplotlib() and system_python.exists() and \
            Path(sys.executable).resolve() != system_python.resolve() and \
            not os.environ.get("BENCH_PY_REEXEC"):
        os.environ["BENCH_PY_REEXEC"] = "1"
        os.execv(str(system_python), [str(system_python), *sys.argv])
    if not have_matplotlib():
        sys.exit("matplotlib is not importable (apt-get install python3-matplotlib)")


def raise_nofile():
    """Raise RLIMIT_NOFILE for this process and so for every child (wrk at 1,024 connections, the
    servers behind it). Root may raise the hard limit too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (262144, 65536):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
            return want
        except (ValueError, OSError):
            continue
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30.0, server=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server is not None and not server.alive():
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


# ---------------------------------------------------------------------------------------------
# Processes: each server in its own process group, pinned to core 0 (larder-2w: not pinned),
# stopped by group id


def group_pids(pgid):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid:          # field 5, pgrp
            pids.append(int(entry))
    return pids


def cpu_ticks(pgid):
    total = 0
    for pid in group_pids(pgid):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])   # utime + stime (fields 14 and 15)
    return total


def memory_kib(pgid):
    rss = anon = 0
    for pid in group_pids(pgid):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon += int(line.split()[1])
        except OSError:
            continue
    return rss, anon


class Server:
    def __init__(self, name, argv, logfile, env=None, cwd=None, cpus="0"):
        self.name = name
        self.logfile = logfile
        out = open(logfile, "ab")
        pin = ["taskset", "-c", cpus] if cpus is not None else []   # None: every core
        self.proc = subprocess.Popen([*pin, *argv], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                     start_new_session=True)
        out.close()
        self.pgid = self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.alive():
            try:
                os.killpg(self.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        for pid in group_pids(self.pgid):   # stragglers of our own group, by PID
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def tail(self, n=15):
        try:
            return "\n".join(Path(self.logfile).read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


# ---------------------------------------------------------------------------------------------
# Configurations


def write_origin(work, port, nofile, access_log=False):
    www = work / "www"
    (www / "files").mkdir(parents=True)
    rnd = random.Random(1)
    for name, size in FILES.items():
        (www / "files" / name).write_bytes(rnd.randbytes(size))
    conf = work / "origin.conf"
    access = "access_log off;"
    if access_log:
        access = (f'log_format bench "$request_method $request_uri $status '
                  f'[$http_if_none_match] [$http_via]";\n'
                  f'    access_log {work}/origin-access.log bench;')
    conf.write_text(f"""
user nobody nogroup;
worker_processes 1;
worker_rlimit_nofile {nofile};
daemon off;
pid {work}/origin.pid;
error_log {work}/origin-error.log;
events {{ worker_connections 16384; }}
http {{
    {access}
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    open_file_cache max=1000 inactive=300s;
    client_body_temp_path {work}/origin-tmp/body;
    proxy_temp_path {work}/origin-tmp/proxy;
    fastcgi_temp_path {work}/origin-tmp/fastcgi;
    uwsgi_temp_path {work}/origin-tmp/uwsgi;
    scgi_temp_path {work}/origin-tmp/scgi;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root {www};
        location /files/ {{ add_header Cache-Control "max-age=3600"; }}
        location /keys/ {{ rewrite ^ /files/1k break; add_header Cache-Control "max-age=3600"; }}
        location /disk/ {{ rewrite ^ /files/64k break; add_header Cache-Control "max-age=3600"; }}
        location /storm/ {{ rewrite ^ /files/1k break; add_header Cache-Control "max-age=3600"; }}
        location /nostore/ {{ rewrite ^ /files/1k break; add_header Cache-Control "no-store"; }}
        location /reval/ {{ rewrite ^ /files/1k break; add_header Cache-Control "max-age=0"; }}
        location = /bench-stub-status {{ stub_status; }}
    }}
}}
""")
    (work / "origin-tmp").mkdir()
    return ["nginx", "-c", str(conf)]


def start_larder(work, name, port, admin, origin, nofile, cget, workers=1, disk=False):
    d = work / name
    d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LARDER_")}
    env.update(LARDER_LIMITS_MAX_CONNECTIONS_PER_CLIENT="0",   # 1,024 connections from one address,
               LARDER_LIMITS_ORIGIN_FETCHES_PER_CLIENT="0",    # each with a request at the origin
               LARDER_LIMITS_MAX_CONNECTIONS="100000",
               LARDER_CACHE_MEMORY_CAPACITY="1GiB",
               LARDER_CACHE_MEMORY_MAX_OBJECT_SIZE="8MiB",
               LARDER_CACHE_DISK_CAPACITY="4GiB",
               # CONNECT to the origin's plain HTTP port (the tunnel scenarios); 127.0.0.1 is
               # allowed as a destination because allow_clients admits loopback only
               # (protect_this_host: auto)
               LARDER_CONNECT_PORTS=f"[443, {origin}]",
               LARDER_LOG_LEVEL="warning")
    if cget:
        env["LARDER_CACHE_REVALIDATION"] = "conditional-get"
    if disk:   # hit-disk: a memory tier that holds none of the 64 KiB objects
        env.update(LARDER_CACHE_MEMORY_CAPACITY=DISK_MEMORY_CAPACITY,
                   LARDER_CACHE_MEMORY_MAX_OBJECT_SIZE=DISK_MEMORY_MAX_OBJECT_SIZE)
    argv = [str(LARDER_BIN), "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
            "--access-log", "off", "--cache-dir", str(d / "cache"), "--workers", str(workers)]
    return argv, env


def write_squid(work, port, nofile, origin):
    d = work / "squid"
    d.mkdir()
    user = "proxy"
    pw = pwd.getpwnam(user)
    os.chown(d, pw.pw_uid, pw.pw_gid)
    conf = d / "squid.conf"
    conf.write_text(f"""
http_port 127.0.0.1:{port}
workers 1
cache_effective_user {user}
pid_filename {d}/squid.pid
cache_log {d}/cache.log
access_log none
cache_store_log none
logfile_rotate 0
coredump_dir {d}
visible_hostname bench
# CONNECT to the origin's plain HTTP port (the tunnel scenarios): this configuration has none of
# the default squid.conf's SSL_ports/Safe_ports denials, and says so explicitly
acl bench_connect_port port {origin}
http_access allow CONNECT bench_connect_port
http_access allow all
# memory cache only (no cache_dir): large enough for every scenario's working set
cache_mem 1024 MB
maximum_object_size_in_memory 16 MB
maximum_object_size 64 MB
memory_cache_shared off
memory_replacement_policy lru
client_persistent_connections on
server_persistent_connections on
max_filedescriptors {nofile}
pinger_enable off
icp_port 0
htcp_port 0
shutdown_lifetime 1 seconds
""")
    return ["squid", "-N", "-f", str(conf)]


def write_ats(work, port, nofile, origin, overrides=None):
    """records.config for a forward proxy; ``overrides`` (name -> (type, value)) replaces or adds
    records (h2_bench.py: a reverse proxy with a TLS port)."""
    d = work / "ats"
    for sub in ("etc", "run", "log", "cache", "var", "body_factory"):
        (d / sub).mkdir(parents=True)
    runroot = d / "runroot.yaml"
    runroot.write_text("\n".join([
        f"prefix: {d}", "exec_prefix: /usr", "bindir: /usr/bin", "sbindir: /usr/sbin",
        f"sysconfdir: {d}/etc", f"datadir: {d}/var", "includedir: /usr/include",
        "libdir: /usr/lib/trafficserver", "libexecdir: /usr/lib/trafficserver/modules",
        f"localstatedir: {d}/var", f"runtimedir: {d}/run", f"logdir: {d}/log",
        f"cachedir: {d}/cache", ""]))
    etc = d / "etc"
    records = {
        "proxy.config.http.server_ports": ("STRING", f"{port}:ipv4:ip-in=127.0.0.1"),
        "proxy.config.admin.user_id": ("STRING", "#-1"),        # stay the user we are
        "proxy.config.url_remap.remap_required": ("INT", 0),      # forward proxy
        "proxy.config.http.connect_ports": ("STRING", f"443 {origin}"),   # the tunnel scenarios
        "proxy.config.reverse_proxy.enabled": ("INT", 0),
        "proxy.config.http.cache.http": ("INT", 1),
        "proxy.config.http.cache.required_headers": ("INT", 0),
        "proxy.config.http.cache.cache_urls_that_look_dynamic": ("INT", 1),
        "proxy.config.http.cache.when_to_revalidate": ("INT", 0),
        "proxy.config.http.wait_for_cache": ("INT", 1),
        "proxy.config.cache.ram_cache.size": ("INT", 1 << 30),
        "proxy.config.cache.ram_cache_cutoff": ("INT", 16 << 20),
        "proxy.config.cache.ram_cache.algorithm": ("INT", 1),       # LRU: everything fits
        "proxy.config.cache.ram_cache.use_seen_filter": ("INT", 0),
        "proxy.config.cache.max_doc_size": ("INT", 0),
        # Read-while-writer makes concurrent requests for one URL wait on its cache write lock with
        # 10 ms retries; without it, pass-through and revalidation of one hot URL run 1.5-3 times
        # faster, and the hits (warmed before measuring) do not need it.
        "proxy.config.cache.enable_read_while_writer": ("INT", 0),
        "proxy.config.exec_thread.autoconfig": ("INT", 0),
        "proxy.config.exec_thread.limit": ("INT", 1),
        "proxy.config.accept_threads": ("INT", 0),
        "proxy.config.task_threads": ("INT", 1),
        "proxy.config.log.logging_enabled": ("INT", 0),
        "proxy.config.http.keep_alive_enabled_in": ("INT", 1),
        "proxy.config.http.keep_alive_enabled_out": ("INT", 1),
        "proxy.config.http.keep_alive_no_activity_timeout_in": ("INT", 300),
        "proxy.config.http.server_session_sharing.match": ("STRING", "both"),
        "proxy.config.net.connections_throttle": ("INT", max(1000, nofile - 1000)),
        "proxy.config.http.insert_age_in_response": ("INT", 1),
        "proxy.config.http.negative_caching_enabled": ("INT", 0),
        "proxy.config.diags.debug.enabled": ("INT", 0),
        "proxy.config.crash_log_helper": ("STRING", "/bin/true"),
        "proxy.config.body_factory.template_sets_dir": ("STRING", f"{d}/body_factory"),
    }
    records.update(overrides or {})
    (etc / "records.config").write_text(
        "".join(f"CONFIG {k} {t} {v}\n" for k, (t, v) in records.items()))
    (etc / "storage.config").write_text(f"{d}/cache 1G\n")
    (etc / "ip_allow.yaml").write_text(
        "ip_allow:\n  - apply: in\n    ip_addrs: 127.0.0.1\n    action: allow\n"
        "  - apply: out\n    ip_addrs: 0/0\n    action: allow\n")
    for empty in ("remap.config", "plugin.config", "cache.config", "hosting.config", "volume.config",
                  "parent.config", "logging.yaml", "sni.yaml", "splitdns.config",
                  "ssl_multicert.config", "strategies.yaml", "socks.config"):
        (etc / empty).touch()
    return ["traffic_server", f"--run-root={runroot}"], d


def write_varnish(work, port, origin):
    d = work / "varnish"
    d.mkdir()
    # Built-in VCL, the origin as the backend; one thread pool, enough threads for 1,024 busy
    # connections (each needs a worker thread), memory storage.
    return ["varnishd", "-F", "-a", f"127.0.0.1:{port}", "-b", f"127.0.0.1:{origin}",
            "-n", str(d / "work"), "-s", "malloc,1G", "-T", "none", "-P", str(d / "varnishd.pid"),
            "-p", "thread_pools=1", "-p", "thread_pool_min=100", "-p", "thread_pool_max=5000",
            "-p", "listen_depth=4096"]


def write_nginx_proxy(work, port, origin, nofile):
    d = work / "nginx-proxy"
    (d / "cache").mkdir(parents=True)
    (d / "tmp").mkdir()
    pw = pwd.getpwnam("nobody")
    for p in (d / "cache", d / "tmp"):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    conf = d / "nginx.conf"
    conf.write_text(f"""
user nobody nogroup;
worker_processes 1;
worker_rlimit_nofile {nofile};
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 16384; }}
http {{
    access_log off;
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
        listen 127.0.0.1:{port} backlog=4096;
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
    return ["nginx", "-c", str(conf)]


# ---------------------------------------------------------------------------------------------
# Targets


class Target:
    """One thing wrk is pointed at: origin-direct, or a proxy (in forward or reverse mode)."""

    def __init__(self, name, port, server, forward):
        self.name, self.port, self.server, self.forward = name, port, server, forward
        self.admin = None
        self.broken = {}      # scenario -> reason it is not measured
        self.wrk_cpus = "1"   # wrk's taskset core list (None: not pinned)
        self.wrk_threads = 1

    def url(self, origin, path):
        return f"http://127.0.0.1:{origin}{path}" if self.forward else path


class Origin:
    def __init__(self, port):
        self.port = port

    def requests(self):
        """Requests the origin has answered (stub_status counts itself, which callers allow for)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/bench-stub-status")
        body = c.getresponse().read().decode()
        c.close()
        return int(body.splitlines()[2].split()[2])


def fetch_many(target, origin_port, paths, threads=8):
    """GET every path through the target on a few keep-alive connections; returns problems."""
    problems = []
    lock = threading.Lock()
    chunks = [paths[i::threads] for i in range(threads)]

    def worker(chunk):
        conn = None
        for path in chunk:
            for attempt in range(3):
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection("127.0.0.1", target.port, timeout=30)
                    headers = {"Host": f"127.0.0.1:{origin_port}"} if target.forward else {}
                    conn.request("GET", target.url(origin_port, path), headers=headers)
                    r = conn.getresponse()
                    body = r.read()
                    base = path.split("?")[0]
                    want = SIZE_OF.get(base) or SIZE_OF.get(base[:base.rindex("/") + 1])
                    if r.status != 200 or (want and len(body) != want):
                        with lock:
                            problems.append(f"{path}: status {r.status}, {len(body)} bytes")
                    if r.getheader("Connection", "").lower() == "close":
                        conn.close()
                        conn = None
                    break
                except (OSError, http.client.HTTPException) as e:
                    if conn:
                        conn.close()
                    conn = None
                    if attempt == 2:
                        with lock:
                            problems.append(f"{path}: {e!r}")
        if conn:
            conn.close()

    ts = [threading.Thread(target=worker, args=(c,)) for c in chunks if c]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return problems


def fetch_tunnelled(target, origin_port, path, count):
    """CONNECT 127.0.0.1:origin_port through the target, then ``count`` keep-alive GETs of path
    inside the tunnel; returns problems."""
    conn = http.client.HTTPConnection("127.0.0.1", target.port, timeout=30)
    conn.set_tunnel("127.0.0.1", origin_port)
    problems = []
    try:
        for _ in range(count):
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200 or len(body) != SIZE_OF[path]:
                problems.append(f"{path}: status {r.status}, {len(body)} bytes")
    except (OSError, http.client.HTTPException) as e:
        problems.append(f"{path}: {e!r}")
    finally:
        conn.close()
    return problems


def larder_stats(target):
    c = http.client.HTTPConnection("127.0.0.1", target.admin, timeout=10)
    try:
        c.request("GET", "/stats")
        return json.loads(c.getresponse().read())
    finally:
        c.close()


def larder_memory_tier_bytes(target):
    """Bytes Larder's memory tier holds (/stats cache_bytes.memory), or None."""
    try:
        return int(larder_stats(target)["cache_bytes"]["memory"])
    except (OSError, ValueError, KeyError, TypeError, http.client.HTTPException):
        return None


def origin_delta(origin, fn):
    before = origin.requests()
    result = fn()
    after = origin.requests()
    return after - before - 1, result


def verify(target, origin, scenario, run_tag):
    """Warm the target for a scenario and check that it does what the scenario needs: hits must
    not reach the origin, pass-through/revalidation/misses must. Returns None or the reason."""
    kind, path = SCENARIOS[scenario]
    op = origin.port
    if kind == "hit":
        problems = fetch_many(target, op, [path] * 2, threads=1)
        time.sleep(0.3)   # stores may complete just after the response
        problems += fetch_many(target, op, [path], threads=1)
        n, problems2 = origin_delta(origin, lambda: fetch_many(target, op, [path] * 20, threads=1))
        problems += problems2
        if problems:
            return f"bad answers while warming {path}: {problems[:3]}"
        if n > 0:
            return f"does not cache {path}: {n} of 20 requests after warm-up reached the origin"
    elif kind in ("keys", "disk"):
        count = KEY_COUNT[kind]
        paths = [f"{path}{i}" for i in range(count)]
        problems = fetch_many(target, op, paths)
        time.sleep(0.5)
        # a second pass catches entries a proxy stored only after answering
        problems += fetch_many(target, op, paths)
        sample = random.Random(7).sample(paths, 500)
        n, problems2 = origin_delta(origin, lambda: fetch_many(target, op, sample))
        problems += problems2
        if problems:
            return f"bad answers while warming {count} keys: {problems[:3]}"
        if n > 0:
            return f"does not keep {count} keys: {n} of 500 warm keys reached the origin"
        if kind == "disk" and target.admin:
            # larder-disk's hits must come from LMDB: its memory tier may hold next to nothing
            held = larder_memory_tier_bytes(target)
            total = count * SIZE_OF[path]
            if held is None:
                return "its /stats has no cache_bytes.memory"
            if held > total / 100:
                return (f"its memory tier holds {held / 2**20:.1f} MiB of the "
                        f"{total / 2**20:.0f} MiB working set: hits would not all come from disk")
    elif kind == "tunnel":
        n, problems = origin_delta(origin, lambda: fetch_tunnelled(target, op, path, 5))
        if problems:
            return f"bad answers inside a CONNECT tunnel to 127.0.0.1:{op}: {problems[:3]}"
        if n < 5:
            return f"requests inside the tunnel did not reach the origin: {n} of 5"
    elif kind in ("pass", "reval"):
        fetch_many(target, op, [path] * 2, threads=1)
        n, problems = origin_delta(origin, lambda: fetch_many(target, op, [path] * 20, threads=1))
        if problems:
            return f"bad answers for {path}: {problems[:3]}"
        if n < 20:
            return (f"answers {path} ({'no-store' if kind == 'pass' else 'max-age=0'}) from its "
                    f"cache: only {n} of 20 requests reached the origin")
    elif kind == "storm":
        paths = [f"{path}?verify={run_tag}-{i}" for i in range(20)]
        n, problems = origin_delta(origin, lambda: fetch_many(target, op, paths, threads=1))
        if problems:
            return f"bad answers for {path}: {problems[:3]}"
        if n < 20:
            return f"new URLs did not reach the origin: {n} of 20"
        time.sleep(0.3)
        n, problems = origin_delta(origin, lambda: fetch_many(target, op, paths, threads=1))
        if n > 0:
            return f"does not store miss-storm responses: {n} of 20 repeated URLs reached the origin"
    return None


# ---------------------------------------------------------------------------------------------
# wrk


def lua_script(work, target, origin_port, scenario, tag):
    kind, path = SCENARIOS[scenario]
    prefix = f"http://127.0.0.1:{origin_port}" if target.forward else ""
    host = f'wrk.headers["Host"] = "127.0.0.1:{origin_port}"\n' if target.forward else ""
    if kind in ("keys", "disk"):
        count = KEY_COUNT[kind]
        body = f"""{host}local reqs = {{}}
init = function(args)
    for i = 0, {count - 1} do reqs[i + 1] = wrk.format("GET", "{prefix}{path}" .. i) end
    math.randomseed({random.randrange(1 << 30)})
end
request = function() return reqs[math.random({count})] end
"""
    elif kind == "storm":
        body = f"""{host}local n = 0
local prefix = "{prefix}{path}?run={tag}&n="
request = function()
    n = n + 1
    return wrk.format("GET", prefix .. n)
end
"""
    else:   # one static request, built once by wrk
        body = f'{host}wrk.method = "GET"\nwrk.path = "{prefix}{path}"\n'
    f = work / "lua" / f"{target.name}-{scenario}.lua"
    f.parent.mkdir(exist_ok=True)
    f.write_text(body)
    return f


UNITS_TIME = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
UNITS_SIZE = {"B": 1 / 1024 ** 2, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0, "TB": 1024.0 ** 2}


def parse_wrk(out):
    r = {"requests": 0, "rps": 0.0, "mibs": 0.0, "p50": None, "p99": None,
         "non2xx": 0, "sockerr": 0, "sockerr_text": "", "complete": "Requests/sec" in out}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+), ([\d.]+)(\w+) read", out)
    if m:
        r["requests"] = int(m.group(1))
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
    if m:
        r["mibs"] = float(m.group(1)) * UNITS_SIZE.get(m.group(2), 0)
    for pct, key in (("50", "p50"), ("99", "p99")):
        m = re.search(rf"^\s+{pct}%\s+([\d.]+)(\w+)", out, re.M)
        if m:
            r[key] = float(m.group(1)) * UNITS_TIME.get(m.group(2), float("nan"))
    if r["requests"] == 0:
        r["p50"] = r["p99"] = None
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if m:
        r["non2xx"] = int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        r["sockerr"] = sum(int(x) for x in m.groups())
        r["sockerr_text"] = m.group(0)
    return r


def settle(pgid, limit=15.0):
    """Wait until the target is idle again (it may still be writing to connections wrk closed),
    so its leftover work does not run during the next target's measurement. Returns the wait."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        before = cpu_ticks(pgid)
        time.sleep(0.2)
        if cpu_ticks(pgid) - before <= 2:      # under 10 % of a core
            break
    return time.monotonic() - start


def children_cpu_s():
    """utime + stime of this process's children that have been waited for (here: wrk)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@contextlib.contextmanager
def others_paused(servers, keep):
    """SIGSTOPs the process groups of every server but ``keep``, and SIGCONTs them afterwards."""
    paused = [s for s in servers if s not in keep and s.alive()]
    for s in paused:
        try:
            os.killpg(s.pgid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
    try:
        yield
    finally:
        for s in paused:
            try:
                os.killpg(s.pgid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def run_wrk(target, script, conns, seconds, cpu_group, origin):
    pin = ["taskset", "-c", target.wrk_cpus] if target.wrk_cpus is not None else []
    argv = [*pin, "wrk", f"-t{target.wrk_threads}", f"-c{conns}", f"-d{seconds}s", "--latency",
            "--timeout", "10s", "-s", str(script), f"http://127.0.0.1:{target.port}/"]
    return run_load(argv, seconds, cpu_group, origin, parse_wrk, "wrk")


def parse_tunnel_load(out):
    """tunnel_load's one line, in parse_wrk's terms (bytes over the run's seconds as MiB/s)."""
    r = {"requests": 0, "rps": 0.0, "mibs": 0.0, "p50": None, "p99": None,
         "non2xx": 0, "sockerr": 0, "sockerr_text": "", "complete": False}
    m = re.search(r"requests (\d+) non2xx (\d+) errors (\d+) connects (\d+) bytes (\d+) "
                  r"seconds ([\d.]+) p50_ms (-?[\d.]+) p90_ms (-?[\d.]+) p99_ms (-?[\d.]+)", out)
    if not m:
        return r
    requests, non2xx, errors, connects, nbytes = (int(m.group(i)) for i in range(1, 6))
    secs = float(m.group(6))
    r.update(requests=requests, non2xx=non2xx, sockerr=errors, complete=True,
             rps=requests / secs if secs > 0 else 0.0,
             mibs=nbytes / secs / 2 ** 20 if secs > 0 else 0.0)
    if errors:
        r["sockerr_text"] = f"connection errors {errors} ({connects} connections opened)"
    if requests:
        r["p50"], r["p99"] = float(m.group(7)), float(m.group(9))
    return r


def run_tunnel_load(loader, target, origin_port, path, conns, seconds, cpu_group, origin):
    """tunnel_load (tunnel_load.c): CONNECT through a forward proxy, or straight to the origin
    for origin-direct, then keep-alive GETs of path; pinned like wrk."""
    pin = ["taskset", "-c", target.wrk_cpus] if target.wrk_cpus is not None else []
    proxy = 0 if target.name == "origin-direct" else target.port
    argv = [*pin, str(loader), str(proxy), str(origin_port), path, str(seconds), str(conns)]
    return run_load(argv, seconds, cpu_group, origin, parse_tunnel_load, "tunnel_load")


def compile_tunnel_load(work):
    """Compiles tunnel_load.c (next to this script) into the temporary directory."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        sys.exit("no C compiler (cc) for tunnel_load.c, which the tunnel scenarios need")
    loader = work / "tunnel_load"
    subprocess.run([compiler, "-O2", "-o", str(loader), str(Path(__file__).resolve().parent /
                                                              "tunnel_load.c")], check=True)
    return loader


def run_load(argv, seconds, cpu_group, origin, parse, tool):
    """Runs one load generator (wrk or tunnel_load) and reads the target's CPU, the origin's
    request counter and the generator's own CPU around it."""
    before_cpu = cpu_ticks(cpu_group)
    before_origin = origin.requests()
    before_wrk = children_cpu_s()
    before_wall = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        out += f"\n{tool} did not finish in time"
    wall = time.monotonic() - before_wall
    wrk_cpu = children_cpu_s() - before_wrk
    after_cpu = cpu_ticks(cpu_group)
    after_origin = origin.requests()
    r = parse(out)
    r["settle_s"] = settle(cpu_group)
    r["out"] = out
    r["ok"] = p.returncode == 0 and r.pop("complete")   # the generator printed its summary
    r["cpu_s"] = (after_cpu - before_cpu) / os.sysconf("SC_CLK_TCK")
    r["wrk_cpu_s"] = wrk_cpu
    r["cores"] = r["cpu_s"] / wall if wall > 0 else None        # cores the target kept busy
    r["wrk_cores"] = wrk_cpu / wall if wall > 0 else None       # and wrk
    n = r["requests"]
    r["cpu_us"] = r["cpu_s"] / n * 1e6 if n else None
    r["wrk_cpu_us"] = wrk_cpu / n * 1e6 if n else None
    r["origin_share"] = (after_origin - before_origin - 1) / n if n else None
    return r


# ---------------------------------------------------------------------------------------------
# Reporting


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def summarise(runs, scenario, conns, target):
    rs = runs.get((scenario, conns, target), [])
    if not rs:
        return None
    kind = SCENARIOS[scenario][0]
    lo, hi = ORIGIN_SHARE[kind]
    flags = []
    non2xx = sum(r["non2xx"] for r in rs)
    sockerr = sum(r["sockerr"] for r in rs)
    if non2xx:
        flags.append(f"NON2XX={non2xx}")
    if sockerr:
        flags.append(f"SOCKERR={sockerr}")
    if any(not r["ok"] for r in rs):
        flags.append("WRK-FAILED")
    elif any(r["requests"] == 0 for r in rs):
        flags.append("NO-ANSWER-COMPLETED")
    share = med([r["origin_share"] for r in rs])
    if target != "origin-direct" and share is not None and not (lo <= share <= hi):
        flags.append(f"ORIGIN/REQ={share:.2f}")
    return {"scenario": scenario, "connections": conns, "target": target, "runs": len(rs),
            "rps": med([r["rps"] for r in rs]), "mibs": med([r["mibs"] for r in rs]),
            "p50": med([r["p50"] for r in rs]), "p99": med([r["p99"] for r in rs]),
            "cpu_us": med([r["cpu_us"] for r in rs]), "origin_share": share,
            "wrk_cpu_us": med([r["wrk_cpu_us"] for r in rs]),
            "cores": med([r["cores"] for r in rs]), "wrk_cores": med([r["wrk_cores"] for r in rs]),
            "non2xx": non2xx, "sockerr": sockerr, "flags": ",".join(flags),
            "all_rps": [r["rps"] for r in rs]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, help="duration of each measured run, whole seconds (5)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds per scenario (2)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="comma-separated subset (all: %(default)s); scaling is Larder alone, "
                         f"1 worker pinned against 2 unpinned, at {SCALING_CONNECTIONS} connections")
    ap.add_argument("--connections", help="comma-separated connection counts (1,64,1024; "
                                          f"scaling always uses {SCALING_CONNECTIONS})")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="comma-separated proxies (larder,squid,ats,varnish,nginx); "
                         "origin-direct always runs")
    ap.add_argument("--quick", action="store_true",
                    help="for development: 1 s runs, 1 round, 64 connections (unless given)")
    ap.add_argument("--out", help="results directory (Benchmarks/results/DATE-HOSTNAME/)")
    ap.add_argument("--larder-bin", help="the Larder executable to measure "
                                         "(.build/release/larder, built if missing)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--origin-log", action="store_true",
                    help="debugging: the origin logs every request (method, URI, status, "
                         "If-None-Match, Via) to origin-access.log in the temporary directory; "
                         "slows the origin, so the numbers are not comparable")
    args = ap.parse_args()
    quick = (1, 1, "64") if args.quick else (5, 2, ",".join(map(str, CONNECTIONS)))
    args.seconds = quick[0] if args.seconds is None else args.seconds
    args.rounds = quick[1] if args.rounds is None else args.rounds
    args.connections = args.connections or quick[2]
    scenarios = [s for s in args.scenarios.split(",") if s]
    peers = [p for p in args.peers.split(",") if p]
    conn_list = [int(c) for c in args.connections.split(",") if c]
    for s in scenarios:
        if s not in SCENARIOS:
            sys.exit(f"unknown scenario {s!r}; choose from {', '.join(SCENARIOS)}")
    for p in peers:
        if p not in PEERS:
            sys.exit(f"unknown peer {p!r}; choose from {', '.join(PEERS)}")
    peers = [p for p in PEERS if p in peers]
    if args.seconds <= 0 or args.rounds < 1:
        sys.exit("--seconds must be positive and --rounds at least 1")
    if os.geteuid() != 0:
        sys.exit("run as root: it installs packages and starts Squid and Varnish, which change user")
    if os.cpu_count() < 2:
        sys.exit("needs two cores: the servers on core 0, wrk on core 1")
    if "scaling" in scenarios and "larder" not in peers:
        log("note: the scaling scenario measures Larder only; left out because --peers has no larder")
        scenarios.remove("scaling")
    if not scenarios:
        sys.exit("no scenario left to run")
    global LARDER_BIN
    if args.larder_bin:
        LARDER_BIN = Path(args.larder_bin).resolve()
        if not os.access(LARDER_BIN, os.X_OK):
            sys.exit(f"--larder-bin {args.larder_bin}: not an executable file")
    tunnels = [s for s in scenarios if SCENARIOS[s][0] == "tunnel"]
    untunnelled = [p for p in peers if p not in TUNNELLING]

    install_missing(peers)   # may run this script again under Debian's python3
    if tunnels and untunnelled:
        log(f"note: {', '.join(untunnelled)} "
            f"{'is a reverse proxy' if len(untunnelled) == 1 else 'are reverse proxies'} "
            f"without CONNECT: left out of {', '.join(tunnels)}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "larder" in peers and not LARDER_BIN.exists():
        log("building Larder (swift build -c release --product larder)")
        subprocess.run(["swift", "build", "-c", "release", "--product", "larder"], cwd=REPO,
                       check=True)
    nofile = raise_nofile()

    # Targets per scenario, in interleaving order: origin-direct and the peers; larder-cget next to
    # larder for revalidation; larder-disk instead of larder for hit-disk; only the tunnelling
    # peers for the tunnel scenarios; the two Larder worker counts alone for scaling.
    def names_for(scenario):
        if scenario == "scaling":
            return list(SCALING)
        kind = SCENARIOS[scenario][0]
        names = ["origin-direct"] + [p for p in peers if kind != "tunnel" or p in TUNNELLING]
        if scenario == "revalidation" and "larder" in peers:
            names.insert(names.index("larder") + 1, "larder-cget")
        if kind == "disk" and "larder" in peers:
            names[names.index("larder")] = "larder-disk"
        return names

    def targets_for(scenario, live):
        return [live[n] for n in names_for(scenario) if n in live]

    def conns_for(scenario):
        return [SCALING_CONNECTIONS] if scenario == "scaling" else conn_list

    n_targets = {s: len(names_for(s)) for s in scenarios}
    warm_secs = 1
    n_warm = sum(n_targets[s] * len(conns_for(s)) for s in scenarios)
    n_runs = n_warm * args.rounds
    # per run: wrk's start and the readings before and after; per peer: warming and checking
    # (10,000 keys for many-keys, 2,000 of 64 KiB for hit-disk); then starting and stopping the
    # servers
    est = (n_runs * (args.seconds + 0.5) + n_warm * (warm_secs + 0.5)
           + (3 * len(peers) if "many-keys" in scenarios else 0)
           + (2 * len(peers) if "hit-disk" in scenarios else 0)
           + 0.5 * sum(n_targets[s] - 1 for s in scenarios) + 15)
    log(f"{n_runs} measured runs of {args.seconds:g} s ({args.rounds} rounds), {n_warm} warm-up runs "
        f"of {warm_secs:g} s: expect about {est / 60:.1f} minutes")

    host = socket.gethostname()
    out_dir = Path(args.out) if args.out else \
        REPO / "Benchmarks" / "results" / f"{datetime.datetime.now():%Y-%m-%d-%H%M%S}-{host}"
    out_dir.mkdir(parents=True, exist_ok=True)
    load_before = Path("/proc/loadavg").read_text().strip()
    if float(load_before.split()[0]) > 0.5:
        log(f"note: load average {load_before.split()[0]} before starting; other work on this "
            "machine makes the numbers noisy")

    work = Path(tempfile.mkdtemp(prefix="larder-peers."))
    work.chmod(0o755)   # nginx workers, Squid and Varnish run unprivileged and need to get in
    servers = []
    started = time.monotonic()
    try:
        origin_port = free_port()
        origin_srv = Server("origin", write_origin(work, origin_port, nofile, args.origin_log), work / "origin.log")
        servers.append(origin_srv)
        if not wait_port(origin_port, 30, origin_srv):
            sys.exit(f"the origin nginx did not start:\n{origin_srv.tail()}")
        origin = Origin(origin_port)
        live = {"origin-direct": Target("origin-direct", origin_port, origin_srv, False)}

        def start(name):
            port = free_port()
            if name in ("larder", "larder-cget", "larder-disk", *SCALING):
                admin = free_port()
                workers = 2 if name == "larder-2w" else 1
                argv, env = start_larder(work, name, port, admin, origin_port, nofile,
                                         name == "larder-cget", workers, name == "larder-disk")
                srv = Server(name, argv, work / f"{name}.log", env=env,
                             cpus=None if workers > 1 else "0")
            elif name == "squid":
                srv = Server(name, write_squid(work, port, nofile, origin_port), work / "squid.log")
            elif name == "ats":
                argv, d = write_ats(work, port, nofile, origin_port)
                srv = Server(name, argv, work / "ats.log", cwd=d)
            elif name == "varnish":
                srv = Server(name, write_varnish(work, port, origin_port), work / "varnish.log")
            elif name == "nginx":
                srv = Server(name, write_nginx_proxy(work, port, origin_port, nofile),
                             work / "nginx-proxy.log")
            servers.append(srv)
            t = Target(name, port, srv, name in FORWARD)
            if name.startswith("larder"):
                t.admin = admin
            if name == "larder-2w":   # wrk on every core too, with a thread per worker
                t.wrk_cpus, t.wrk_threads = None, 2
            if not wait_port(port, 60, srv):
                warn(f"{name} did not start; it is left out. Its log:\n{srv.tail()}")
                return
            live[name] = t

        needed = {n for s in scenarios for n in names_for(s)}
        order = [n for p in peers for n in ([p, "larder-cget", "larder-disk"] if p == "larder"
                                             else [p])] + SCALING
        for name in [n for n in order if n in needed]:
            start(name)
        time.sleep(1)   # ATS opens its cache, Varnish its child, after they accept

        versions = peer_versions(live)
        runs = {}
        memory = {}
        verdicts = {}
        loader = compile_tunnel_load(work) if tunnels else None
        for si, scenario in enumerate(scenarios):
            kind = SCENARIOS[scenario][0]
            log(f"\n== {scenario}")
            if kind == "tunnel" and untunnelled:
                log(f"  {', '.join(untunnelled)}: reverse prox{'y' if len(untunnelled) == 1 else 'ies'}"
                    f" without CONNECT, not part of this scenario")
            targets = targets_for(scenario, live)
            measured = []
            for t in targets:
                if t.name == "origin-direct":
                    measured.append(t)
                    continue
                if not t.server.alive():
                    t.broken[scenario] = "the process has exited"
                else:
                    reason = verify(t, origin, scenario, f"{si}{random.randrange(1 << 30)}")
                    if reason:
                        t.broken[scenario] = reason
                if scenario in t.broken:
                    warn(f"{t.name}, {scenario}: {t.broken[scenario]}; not measured")
                    verdicts[(scenario, t.name)] = t.broken[scenario]
                else:
                    log(f"  {t.name}: verified")
                    measured.append(t)
            for conns in conns_for(scenario):
                for rnd in range(args.rounds):
                    for t in measured:
                        if not t.server.alive():
                            if scenario not in t.broken:
                                t.broken[scenario] = "the process died during the runs"
                                warn(f"{t.name} died during {scenario}:\n{t.server.tail()}")
                            continue
                        tag = f"{t.name}-{conns}-{rnd}-{random.randrange(1 << 30)}"
                        if kind == "tunnel":   # tunnel_load: CONNECT, then GETs inside
                            path = SCENARIOS[scenario][1]

                            def load(secs, _tag):
                                return run_tunnel_load(loader, t, origin_port, path, conns, secs,
                                                       t.server.pgid, origin)
                        else:
                            def load(secs, tag):
                                script = lua_script(work, t, origin_port, scenario, tag)
                                return run_wrk(t, script, conns, secs, t.server.pgid, origin)
                        # Every other proxy is stopped (SIGSTOP) while this one runs: they all
                        # share core 0, and idle peers' housekeeping threads would steal from it.
                        with others_paused(servers, keep=(t.server, origin_srv)):
                            if rnd == 0:   # unmeasured: connections, threads and buffers come up
                                load(warm_secs, tag)
                            r = load(args.seconds, tag + "m")
                        runs.setdefault((scenario, conns, t.name), []).append(r)
                        flag = ""
                        if r["settle_s"] > 1:
                            flag += f"  (busy {r['settle_s']:.1f} s after wrk ended)"
                        if r["ok"] and not r["requests"]:
                            flag += (f"  <-- FLAGGED: no answer completed in {args.seconds} s "
                                    f"({r['cpu_s']:.1f} s of CPU used)")
                        if r["non2xx"] or r["sockerr"] or not r["ok"]:
                            flag += (f"  <-- FLAGGED: non-2xx {r['non2xx']}, "
                                    f"{r['sockerr_text'] or 'no socket errors'}")
                            if not r["ok"]:
                                flag += (f"; {'tunnel_load' if kind == 'tunnel' else 'wrk'} "
                                         f"failed:\n" + r["out"])
                        log(f"  {conns:>5} conns  round {rnd + 1}  {t.name:<13} "
                            f"{r['rps']:>11.0f} req/s  {r['mibs']:>9.1f} MiB/s  "
                            f"origin/req {fmt(r['origin_share'], '.2f')}{flag}")
            if scenario == "many-keys":
                for t in targets:
                    rss, anon = memory_kib(t.server.pgid)
                    # Larder: also the memory tier's bytes, to show its RSS without them
                    tier = larder_memory_tier_bytes(t) if t.admin else None
                    memory[t.name] = (rss, anon, tier)
        load_after = Path("/proc/loadavg").read_text().strip()
        elapsed = time.monotonic() - started

        rows = []
        for scenario in scenarios:
            for conns in conns_for(scenario):
                srows = [summarise(runs, scenario, conns, t.name)
                         for t in targets_for(scenario, live)]
                srows = [r for r in srows if r]
                by = {r["target"]: r for r in srows}
                valid_peers = [by[p] for p in OTHER_PEERS if p in by and not by[p]["flags"]]
                # the ratios compare requests/s, or MiB/s where that is the figure to read
                key = RATIO_OF.get(scenario, "rps")
                best = max(valid_peers, key=lambda r: r[key] or 0, default=None)
                ceiling = by.get("origin-direct")
                one = by.get("larder-1w")
                for r in srows:
                    r["best_peer"] = best["target"] if best else ""
                    r["vs_best"] = r["vs_origin"] = r["vs_1w"] = None
                    if r["target"] == "larder-2w" and r["rps"] and one and one["rps"]:
                        r["vs_1w"] = r["rps"] / one["rps"]
                    if r["target"].startswith("larder") and r[key]:
                        if best and best[key]:
                            r["vs_best"] = r[key] / best[key]
                        if ceiling and ceiling[key]:
                            r["vs_origin"] = r[key] / ceiling[key]
                rows.extend(srows)
                for t in targets_for(scenario, live):
                    if scenario in t.broken and t.name not in by:
                        rows.append({"scenario": scenario, "connections": conns, "target": t.name,
                                     "runs": 0, "rps": None, "mibs": None, "p50": None,
                                     "p99": None, "cpu_us": None, "origin_share": None,
                                     "non2xx": 0, "sockerr": 0,
                                     "flags": "NOT-MEASURED: " + t.broken[scenario],
                                     "all_rps": [], "best_peer": "", "vs_best": None,
                                     "vs_origin": None, "vs_1w": None, "wrk_cpu_us": None,
                                     "cores": None, "wrk_cores": None})

        print_table([r for r in rows if r["scenario"] != "scaling"], memory)
        if "scaling" in scenarios:
            print_scaling([r for r in rows if r["scenario"] == "scaling"], args.rounds)
        write_outputs(out_dir, rows, runs, memory, plt, scenarios, conn_list)
        write_machine(out_dir, args, versions, load_before, load_after, nofile, elapsed, live,
                      scenarios)
        log(f"\nresults in {out_dir} ({elapsed / 60:.1f} minutes)")
        problems = [r for r in rows if r["flags"]]
        if problems:
            log(f"{len(problems)} rows are flagged (see the flags column)")
    finally:
        for srv in reversed(servers):
            srv.stop()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def peer_versions(live):
    def first_line(argv):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
            text = (p.stdout + p.stderr).strip().splitlines()
            return text[0].strip() if text else "?"
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    v = {"wrk": first_line(["wrk", "-v"]), "nginx": first_line(["nginx", "-v"])}
    larder = next((live[n] for n in ("larder", "larder-cget", "larder-disk", *SCALING)
                   if n in live), None)
    if larder:
        try:
            c = http.client.HTTPConnection("127.0.0.1", larder.admin, timeout=10)
            c.request("GET", "/stats")
            v["larder"] = "larder " + json.loads(c.getresponse().read())["version"]
        except (OSError, ValueError, KeyError, http.client.HTTPException):
            v["larder"] = "?"
    if "squid" in live:
        v["squid"] = first_line(["squid", "-v"])
    if "varnish" in live:
        v["varnish"] = first_line(["varnishd", "-V"])
    if "ats" in live:
        v["ats"] = first_line(["traffic_server", "-V"]).replace("NOTE: using command line path as RUNROOT", "").strip()
        if v["ats"] in ("", "?"):
            p = subprocess.run(["traffic_server", "-V"], capture_output=True, text=True)
            v["ats"] = next((l for l in (p.stdout + p.stderr).splitlines() if "Traffic Server" in l), "?")
    return v


COLUMNS = ["scenario", "connections", "target", "runs", "rps", "mibs", "p50", "p99", "cpu_us",
           "origin_share", "vs_best", "best_peer", "vs_origin", "non2xx", "sockerr", "flags", "all_rps",
           "wrk_cpu_us", "vs_1w"]


def print_table(rows, memory):
    if not rows:
        return
    head = (f"{'scenario':<13} {'conns':>5} {'target':<13} {'req/s':>10} {'MiB/s':>8} {'p50 ms':>8} "
            f"{'p99 ms':>8} {'CPU us/req':>10} {'orig/req':>8} {'vs best':>16} {'vs origin':>9}  flags")
    log("\n" + head)
    log("-" * len(head))
    last = None
    for r in rows:
        if last and (r["scenario"], r["connections"]) != last:
            log("")
        last = (r["scenario"], r["connections"])
        vs_best = fmt(r["vs_best"], ".2f") + (f" ({r['best_peer']})" if r["vs_best"] else "")
        log(f"{r['scenario']:<13} {r['connections']:>5} {r['target']:<13} {fmt(r['rps'], '.0f'):>10} "
            f"{fmt(r['mibs'], '.1f'):>8} {fmt(r['p50'], '.3f'):>8} {fmt(r['p99'], '.3f'):>8} "
            f"{fmt(r['cpu_us'], '.1f'):>10} {fmt(r['origin_share'], '.2f'):>8} {vs_best:>16} "
            f"{fmt(r['vs_origin'], '.2f'):>9}  {r['flags']}")
    if memory:
        log("\nresident memory after many-keys (MiB, summed over each target's processes; "
            "Larder: also its memory tier's bytes from /stats, and VmRSS and RssAnon without them)")
        log(f"{'target':<13} {'VmRSS':>8} {'RssAnon':>8} {'mem tier':>8} {'RSS-tier':>8} "
            f"{'Anon-tier':>9}")
        for name, (rss, anon, tier) in memory.items():
            tier_mib = None if tier is None else tier / 2 ** 20
            log(f"{name:<13} {rss / 1024:>8.1f} {anon / 1024:>8.1f} {fmt(tier_mib, '.1f'):>8} "
                f"{fmt(None if tier is None else rss / 1024 - tier_mib, '.1f'):>8} "
                f"{fmt(None if tier is None else anon / 1024 - tier_mib, '.1f'):>9}")
    log("\ncpu: utime+stime of the target's processes per request (origin-direct: the origin's); "
        "orig/req: origin requests per request; vs best: Larder / fastest unflagged peer; "
        "vs origin: Larder / origin-direct (both of requests/s; tunnel-bulk: of MiB/s)")


def print_scaling(rows, rounds):
    """The scaling scenario's own table, its caveat and one summary line."""
    by = {r["target"]: r for r in rows}
    head = (f"{'scaling':<10} {'target':<10} {'req/s':>10} {'p99 ms':>8} {'CPU us/req':>10} "
            f"{'cores':>6} {'wrk us/req':>10} {'wrk cores':>9}  placement, flags")
    log(f"\nscaling: Larder alone, hit-small (1 KiB) at {SCALING_CONNECTIONS} connections, "
        f"medians of {rounds} round{'s' if rounds != 1 else ''}")
    log(head)
    log("-" * len(head))
    placement = {"larder-1w": "--workers 1 on core 0, wrk -t1 on core 1",
                 "larder-2w": "--workers 2 and wrk -t2, neither pinned"}
    for name in SCALING:
        r = by.get(name)
        if not r:
            continue
        log(f"{'':<10} {name:<10} {fmt(r['rps'], '.0f'):>10} {fmt(r['p99'], '.3f'):>8} "
            f"{fmt(r['cpu_us'], '.1f'):>10} {fmt(r.get('cores'), '.2f'):>6} "
            f"{fmt(r.get('wrk_cpu_us'), '.1f'):>10} {fmt(r.get('wrk_cores'), '.2f'):>9}  "
            f"{placement[name]}{', ' + r['flags'] if r['flags'] else ''}")
    one, two = by.get("larder-1w"), by.get("larder-2w")
    used = ""
    if two and two.get("cores") is not None and two.get("wrk_cores") is not None:
        used = (f"; at 2 workers Larder used {two['cores']:.2f} and wrk {two['wrk_cores']:.2f} of "
                f"{os.cpu_count()} cores")
    log(f"note: with {os.cpu_count()} cores the load generator shares the cores with Larder's two "
        f"workers, so the ratio is bounded by what wrk leaves free (cores: CPU time / wall time){used}")
    if one and two and one["rps"] and two["rps"]:
        flagged = " (FLAGGED rows, see above)" if one["flags"] or two["flags"] else ""
        log(f"scaling: 1 worker {one['rps']:,.0f} req/s, 2 workers {two['rps']:,.0f} req/s, "
            f"ratio {two['rps'] / one['rps']:.2f}x (target {SCALING_TARGET:g}x){flagged}")
    else:
        log("scaling: not measured (see the errors above)")


def write_outputs(out_dir, rows, runs, memory, plt, scenarios, conn_list):
    def cell(v):
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.6g}"
        if isinstance(v, list):
            return ",".join(f"{x:.0f}" for x in v)
        return str(v)
    with open(out_dir / "results.tsv", "w") as f:
        f.write("\t".join(COLUMNS) + "\n")
        for r in rows:
            f.write("\t".join(cell(r.get(c)) for c in COLUMNS) + "\n")
    with open(out_dir / "runs.tsv", "w") as f:
        f.write("scenario\tconnections\ttarget\trun\trequests\trps\tmibs\tp50_ms\tp99_ms\tcpu_us\t"
                "origin_share\tnon2xx\tsocket_errors\tbusy_after_s\twrk_cpu_us\n")
        for (s, c, t), rs in runs.items():
            for i, r in enumerate(rs):
                f.write("\t".join(map(cell, [s, c, t, i + 1, r["requests"], r["rps"], r["mibs"],
                                             r["p50"], r["p99"], r["cpu_us"], r["origin_share"],
                                             r["non2xx"], r["sockerr"], r["settle_s"],
                                             r["wrk_cpu_us"]])) + "\n")
    if memory:
        with open(out_dir / "memory.tsv", "w") as f:
            f.write("target\tvmrss_kib\trssanon_kib\tmemory_tier_kib\tvmrss_without_tier_kib\t"
                    "rssanon_without_tier_kib\n")
            for name, (rss, anon, tier) in memory.items():
                extra = "\t\t\t" if tier is None else \
                    f"\t{tier // 1024}\t{rss - tier // 1024}\t{anon - tier // 1024}"
                f.write(f"{name}\t{rss}\t{anon}{extra}\n")

    # The ratios per scenario: one group of bars per scenario, one bar per connection count
    # (scaling has no peers and no origin-direct row; its ratio is in results.tsv, vs_1w).
    labels = []
    for s in scenarios:
        if s == "scaling":
            continue
        labels.append((s, "larder-disk", f"{s}\n(larder-disk)") if SCENARIOS[s][0] == "disk"
                      else (s, "larder", s))
        if s == "revalidation" and any(r["target"] == "larder-cget" for r in rows):
            labels.append((s, "larder-cget", "revalidation\n(cget)"))
    if not labels:   # only the scaling scenario ran: nothing to plot
        return
    by = {(r["scenario"], r["connections"], r["target"]): r for r in rows}
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.3 * len(labels) + 2), 8), sharex=True)
    width = 0.8 / max(1, len(conn_list))
    unit = "requests/s" + ("; tunnel-bulk: MiB/s" if any(s in RATIO_OF for s in scenarios) else "")
    for ax, key, title in ((axes[0], "vs_best", f"Larder / best peer ({unit})"),
                           (axes[1], "vs_origin", f"Larder / origin direct ({unit})")):
        for ci, conns in enumerate(conn_list):
            xs, ys, names = [], [], []
            for li, (s, target, _) in enumerate(labels):
                r = by.get((s, conns, target))
                if r and r.get(key):
                    xs.append(li + (ci - (len(conn_list) - 1) / 2) * width)
                    ys.append(r[key])
                    names.append(r["best_peer"] if key == "vs_best" else "")
            ax.bar(xs, ys, width, label=f"{conns} conn")
            for x, y, p in zip(xs, ys, names):
                ax.text(x, y, f"{y:.2f}" + (f"\n{p}" if p else ""), ha="center", va="bottom",
                        fontsize=6)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.margins(y=0.15)
        ax.set_title(title)
        ax.set_ylabel("ratio")
        ax.legend(fontsize=8)
    axes[1].set_xticks(range(len(labels)))
    axes[1].set_xticklabels([l[2] for l in labels], rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(out_dir / "ratios.png", dpi=110)
    plt.close(fig)


def write_machine(out_dir, args, versions, load_before, load_after, nofile, elapsed, live,
                  scenarios):
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
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
        f"seconds per run: {args.seconds:g}, rounds: {args.rounds}, connections: {args.connections}",
        f"elapsed: {elapsed:.0f} s",
        "pinning: servers on core 0 (taskset -c 0), wrk -t1 on core 1 (taskset -c 1)",
    ] + ([f"scaling: larder-1w pinned as above; larder-2w (--workers 2) and wrk -t2 not pinned, "
          f"sharing all {os.cpu_count()} cores; {SCALING_CONNECTIONS} connections"]
         if "scaling" in scenarios else []) + (
        ["tunnels: tunnel_load (tunnel_load.c, cc -O2, one epoll thread) on core 1 instead of wrk; "
         "CONNECT 127.0.0.1:ORIGIN, then keep-alive GETs inside; origin-direct: the same GETs "
         "without CONNECT"] if any(SCENARIOS[s][0] == "tunnel" for s in scenarios) else []) + (
        [f"hit-disk: larder-disk with cache.memory_capacity {DISK_MEMORY_CAPACITY}, "
         f"cache.memory_max_object_size {DISK_MEMORY_MAX_OBJECT_SIZE}; {DISK_KEYS} objects of 64 KiB"]
        if "hit-disk" in scenarios else []) + [
        f"larder: {LARDER_BIN}",
        "targets started: " + ", ".join(live),
        "versions:",
    ] + [f"  {k}: {v}" for k, v in versions.items()]
    (out_dir / "machine.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
