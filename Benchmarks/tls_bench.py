#!/usr/bin/env python3
"""TLS hits through interception, next to a CONNECT tunnel and the origin itself.

Makes a test CA and an origin certificate with openssl, starts an https nginx origin and two
Larders (one intercepting `localhost`, one plain) on 127.0.0.1 with free ports, all pinned to core
0, and runs `tls_load` (Benchmarks/tls_load.c, compiled here; wrk cannot use a proxy's CONNECT) on
core 1 against three targets, interleaved per round, medians reported:

  direct     TLS keep-alive GETs straight to nginx (the ceiling)
  tunnel     the same through Larder's CONNECT, tunnelled: TLS end to end with nginx
  intercept  the same through Larder's CONNECT, intercepted: Larder's TLS, answered from its cache

Each connection does one handshake and then keep-alive requests, so the figures are request
throughput, not handshake rate. Prints requests/s, Larder's CPU per request, and the ratios.
Everything is stopped by PID at the end; nothing outside a temporary directory is touched.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LARDER = HERE.parent / ".build" / "release" / "larder"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port} after {timeout} s")


def run(*cmd, cwd=None):
    subprocess.run([str(c) for c in cmd], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, timeout=120)


def make_pki(d):
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", d / "ca.key", "-out", d / "ca.pem", "-days", "2", "-subj", "/CN=bench CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", d / "origin.key", "-out", d / "origin.csr", "-subj", "/CN=localhost")
    (d / "ext").write_text("subjectAltName=DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", d / "origin.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key",
        "-set_serial", "7", "-days", "2", "-extfile", d / "ext", "-out", d / "origin.pem")


def cpu_seconds(pid):
    """utime + stime of ``pid`` and its children (nginx's workers)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--path", default="/files/1k", help="/files/1k or /files/16k")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    for tool in ("nginx", "openssl", "taskset"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (apt-get install -y nginx openssl util-linux)")
    if not LARDER.exists():
        raise SystemExit(f"{LARDER} is missing: swift build -c release --product larder")
    compiler = shutil.which("clang") or shutil.which("cc")
    if not compiler:
        raise SystemExit("no C compiler (clang or cc) for tls_load.c")

    work = Path(tempfile.mkdtemp(prefix="larder-tls-bench."))
    work.chmod(0o755)   # nginx's workers run unprivileged and must read the files
    procs = []
    try:
        make_pki(work)
        load = work / "tls_load"
        run(compiler, "-O2", "-o", load, HERE / "tls_load.c", "-lssl", "-lcrypto", "-lpthread")
        www = work / "www" / "files"
        www.mkdir(parents=True)
        (www / "1k").write_bytes(b"x" * 1024)
        (www / "16k").write_bytes(b"x" * 16384)
        origin_port = free_port()
        (work / "nginx.conf").write_text(f"""
daemon off; worker_processes 1; pid {work}/nginx.pid; error_log {work}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    server {{
        listen 127.0.0.1:{origin_port} ssl;
        ssl_certificate {work}/origin.pem;
        ssl_certificate_key {work}/origin.key;
        root {work}/www;
        location /files/ {{ add_header Cache-Control "max-age=3600"; }}
    }}
}}
""")
        (work / "nginx-tmp").mkdir()
        procs.append(subprocess.Popen(["taskset", "-c", "0", "nginx", "-c", str(work / "nginx.conf"),
                                       "-p", str(work / "nginx-tmp")], stderr=subprocess.DEVNULL))
        wait_port(origin_port)

        larders = {}
        for name, intercept in (("intercept", "[localhost]"), ("tunnel", "[]")):
            port = free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("LARDER_")}
            env.update(LARDER_LIMITS_MAX_CONNECTIONS_PER_CLIENT="0", LARDER_LOG_LEVEL="warning",
                       LARDER_CONNECT_PORTS=f"[{origin_port}]", LARDER_TLS_INTERCEPT=intercept,
                       LARDER_TLS_CA_FILE=str(work / "ca.pem"))
            p = subprocess.Popen(["taskset", "-c", "0", LARDER, "--listen", f"127.0.0.1:{port}",
                                  "--admin-listen", "off", "--access-log", "off", "--workers", "1",
                                  "--cache-dir", str(work / f"cache-{name}")], env=env, stderr=subprocess.DEVNULL)
            procs.append(p)
            wait_port(port)
            larders[name] = (port, p.pid)
        larder_ca = work / "cache-intercept" / "ca" / "larder-ca.pem"

        def load_run(target, seconds):
            if target == "direct":
                argv = [load, "localhost", origin_port, args.path, seconds, args.connections, work / "ca.pem", "localhost"]
            elif target == "tunnel":
                argv = [load, "localhost", origin_port, args.path, seconds, args.connections, work / "ca.pem",
                        "localhost", larders["tunnel"][0]]
            else:
                argv = [load, "localhost", origin_port, args.path, seconds, args.connections, larder_ca,
                        "localhost", larders["intercept"][0]]
            pid = larders[target][1] if target in larders else procs[0].pid
            before = cpu_seconds(pid)
            out = subprocess.run(["taskset", "-c", "1", *map(str, argv)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, timeout=seconds + 60, text=True)
            used = cpu_seconds(pid) - before
            parts = out.stdout.split()
            if out.returncode != 0 or len(parts) < 6:
                raise SystemExit(f"tls_load failed for {target}: {out.stdout} {out.stderr}")
            requests, errors, elapsed = int(parts[1]), int(parts[3]), float(parts[5])
            return requests / elapsed, errors, used / max(requests, 1) * 1e6

        targets = ["direct", "tunnel", "intercept"]
        for t in targets:
            load_run(t, 1)   # warm-up: handshakes, the minted certificate, the cached entry
        results = {t: [] for t in targets}
        for r in range(args.rounds):
            for t in targets:
                rps, errors, cpu = load_run(t, args.seconds)
                results[t].append((rps, errors, cpu))
                print(f"round {r + 1}  {t:10s} {rps:10.0f} req/s  errors {errors}  cpu {cpu:6.1f} us/req", flush=True)

        med = {t: statistics.median(x[0] for x in results[t]) for t in targets}
        cpu = {t: statistics.median(x[2] for x in results[t]) for t in targets}
        lines = [f"TLS keep-alive GET {args.path}, {args.connections} connections, {args.seconds} s x {args.rounds} "
                 f"rounds (medians); servers on core 0, tls_load on core 1",
                 f"{'target':10s} {'req/s':>10s} {'cpu us/req':>11s}  (cpu: nginx for direct, Larder otherwise)"]
        for t in targets:
            lines.append(f"{t:10s} {med[t]:10.0f} {cpu[t]:11.1f}")
        lines.append(f"intercept / tunnel: {med['intercept'] / med['tunnel']:.2f}x;  "
                     f"intercept / direct: {med['intercept'] / med['direct']:.2f}x")
        print("\n".join(lines))
        if args.out:
            Path(args.out).write_text("\n".join(lines) + "\n")
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
