#!/usr/bin/env python3
"""Soak: Larder under a bounded, steady mix for minutes, watching for crashes, error answers and
growth. 1,000 keep-alive connections (by default) send a mix of cache hits, misses (new URLs,
stored, later evicted), revalidations (max-age=0 with an ETag) and CONNECT tunnels to an echo
server; resident memory and open descriptors are sampled every few seconds.

    python3 Benchmarks/soak.py --minutes 10 --connections 1000

Loopback only; every process it starts is stopped by PID. Exit status 1 when Larder died, any
answer was unexpected, or memory/descriptors grew after warm-up beyond the allowance."""

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORIGIN = REPO / "Tests" / "Integration" / "origin.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Stats:
    def __init__(self):
        self.by_kind = {"hit": 0, "miss": 0, "revalidate": 0, "connect": 0}
        self.unexpected = []
        self.samples = []


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value.strip())
    body = await reader.readexactly(length)
    return status, body


async def http_client(port, origin, stats, stop, warm, next_miss):
    reader = writer = None
    while not stop.is_set():
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            r = random.random()
            if r < 0.65:
                kind, path = "hit", f"/unique/{random.randrange(warm)}/{2048}"
            elif r < 0.82:
                next_miss[0] += 1
                kind, path = "miss", f"/unique/{next_miss[0]}/{4096}"
            else:
                kind, path = "revalidate", "/res/reval"
            writer.write(f"GET http://{origin}{path} HTTP/1.1\r\nHost: {origin}\r\n\r\n".encode())
            await writer.drain()
            status, _ = await asyncio.wait_for(read_response(reader), 30)
            if status != 200:
                stats.unexpected.append(f"{kind} {path}: {status}")
            stats.by_kind[kind] += 1
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as e:
            stats.unexpected.append(f"connection error: {e!r}")
            if writer is not None:
                writer.close()
            reader = writer = None
            await asyncio.sleep(0.1)
    if writer is not None:
        writer.close()


async def tunnel_client(port, echo_port, stats, stop):
    payload = os.urandom(1024)
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            target = f"127.0.0.1:{echo_port}"
            writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            if not head.startswith(b"HTTP/1.1 200"):
                stats.unexpected.append(f"CONNECT: {head[:40]!r}")
            else:
                for _ in range(5):
                    writer.write(payload)
                    echoed = await asyncio.wait_for(reader.readexactly(len(payload)), 30)
                    if echoed != payload:
                        stats.unexpected.append("CONNECT: echo differs")
                stats.by_kind["connect"] += 1
            writer.close()
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            stats.unexpected.append(f"tunnel error: {e!r}")
            await asyncio.sleep(0.1)


async def echo_server(port):
    async def handle(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        writer.close()
    return await asyncio.start_server(handle, "127.0.0.1", port)


async def sample(pid, stats, stop, t0, every):
    while not stop.is_set():
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            stats.samples.append((time.monotonic() - t0, proc_status(pid, "VmRSS"), proc_status(pid, "RssAnon"), fds,
                                  sum(stats.by_kind.values())))
        except FileNotFoundError:
            return
        try:
            await asyncio.wait_for(stop.wait(), every)
        except asyncio.TimeoutError:
            pass


async def run(args, larder_port, origin_host, pid, echo_port):
    stats = Stats()
    stop = asyncio.Event()
    server = await echo_server(echo_port)
    warm = 200
    # Warm the hit set first.
    reader, writer = await asyncio.open_connection("127.0.0.1", larder_port)
    for n in range(warm):
        writer.write(f"GET http://{origin_host}/unique/{n}/2048 HTTP/1.1\r\nHost: {origin_host}\r\n\r\n".encode())
        await read_response(reader)
    writer.close()
    t0 = time.monotonic()
    tunnels = max(1, args.connections // 20)
    next_miss = [10_000_000]
    tasks = [asyncio.create_task(http_client(larder_port, origin_host, stats, stop, warm, next_miss))
             for _ in range(args.connections - tunnels)]
    tasks += [asyncio.create_task(tunnel_client(larder_port, echo_port, stats, stop)) for _ in range(tunnels)]
    sampler = asyncio.create_task(sample(pid, stats, stop, t0, args.sample_every))
    deadline = t0 + args.minutes * 60
    while time.monotonic() < deadline:
        await asyncio.sleep(1)
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            stats.unexpected.append("larder exited during the soak")
            break
    stop.set()
    await asyncio.wait(tasks, timeout=40)
    await sampler
    server.close()
    return stats, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--sample-every", type=float, default=10)
    ap.add_argument("--larder", default=str(REPO / ".build" / "release" / "larder"))
    ap.add_argument("--growth-allowance", type=float, default=0.10,
                    help="largest allowed growth of RssAnon from the first to the last third (fraction)")
    args = ap.parse_args()
    assert args.minutes <= 60, "bounded: at most an hour"

    work = Path(tempfile.mkdtemp(prefix="larder-soak."))
    (work / "res-reval.json").write_text(json.dumps({
        "status": 200, "headers": [["Cache-Control", "max-age=0"], ["ETag", "\"v1\""]], "body": "r" * 1000,
        "conditional": True}))
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("LARDER_")}
    # Scripted resources live next to the origin's log; --quiet keeps the log itself empty.
    origin = subprocess.Popen([sys.executable, ORIGIN, "--port", "0", "--log", str(work / "origin.jsonl"), "--quiet"],
                              stdout=subprocess.PIPE, env=env)
    origin_host = origin.stdout.readline().decode().split("origin listening on ")[1].split()[0]
    port = free_port()
    echo_port = free_port()
    larder = subprocess.Popen([args.larder, "--listen", f"127.0.0.1:{port}", "--cache-dir", str(work / "cache"),
                               "--admin-listen", "off", "--access-log", "off"],
                              env=dict(env, LARDER_CONNECT_PORTS=str(echo_port), LARDER_CACHE_DISK_CAPACITY="64MiB",
                                       LARDER_LIMITS_MAX_CONNECTIONS_PER_CLIENT="0",
                                       LARDER_LIMITS_ORIGIN_FETCHES_PER_CLIENT="0"),
                              stderr=open(work / "larder.log", "wb"))
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        stats, elapsed = asyncio.run(run(args, port, origin_host, larder.pid, echo_port))
        alive = larder.poll() is None
    finally:
        for p in (larder, origin):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()

    total = sum(stats.by_kind.values())
    print(f"soak: {elapsed / 60:.1f} min, {args.connections} connections, {total} exchanges "
          f"({total / elapsed:.0f}/s): " + ", ".join(f"{k} {v}" for k, v in stats.by_kind.items()))
    print("   t(s)  VmRSS(MiB)  RssAnon(MiB)  fds  exchanges")
    for t, rss, anon, fds, n in stats.samples:
        print(f"{t:7.0f}  {rss / 1024:10.1f}  {anon / 1024:12.1f}  {fds:4d}  {n:9d}")
    problems = []
    if not alive:
        problems.append("larder is not running at the end")
    if larder.returncode not in (0, None):
        problems.append(f"larder exit status {larder.returncode}")
    if stats.unexpected:
        problems.append(f"{len(stats.unexpected)} unexpected answers, e.g. {stats.unexpected[:3]}")
    steady = [s for s in stats.samples if s[0] > elapsed / 3]
    if len(steady) >= 4:
        third = max(1, len(steady) // 3)
        first = sum(s[2] for s in steady[:third]) / third
        last = sum(s[2] for s in steady[-third:]) / third
        growth = (last - first) / first if first else 0
        print(f"RssAnon after warm-up: {first / 1024:.1f} MiB -> {last / 1024:.1f} MiB ({growth * 100:+.1f} %); "
              f"fds {steady[0][3]} -> {steady[-1][3]}")
        if growth > args.growth_allowance:
            problems.append(f"resident memory grew {growth * 100:.1f} % after warm-up")
        if steady[-1][3] > steady[0][3] * 1.1 + 20:
            problems.append(f"descriptors grew from {steady[0][3]} to {steady[-1][3]}")
    for p in problems:
        print("PROBLEM:", p)
    shutil.rmtree(work / "cache", ignore_errors=True)
    print("Larder's log:", work / "larder.log")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
