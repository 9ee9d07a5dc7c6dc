#!/usr/bin/env python3
"""What a PROXY protocol listener costs: one Larder with a plain listener and a `proxy_protocol`
one, a cached 1 KiB answer, a new connection for every request (the header is read once per
connection, so this is its worst case). Rounds are interleaved, plain then PROXY v2; prints the
best and median connections-with-a-request per second of each.

Uses the integration tests' helpers (the binary from LARDER_BIN or .build/release/larder, the test
origin); everything runs on 127.0.0.1 with ports picked at run time and is stopped by PID.
"""

import argparse
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "Integration"))
from helpers import Larder, OriginProcess, SockReader, read_response, std_request  # noqa: E402
from test_cache import script  # noqa: E402


def v2_header():
    # A client on loopback, so the default allow_clients admits it.
    payload = socket.inet_aton("127.0.0.9") + socket.inet_aton("127.0.0.1") + struct.pack("!HH", 1234, 3128)
    return b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack("!H", len(payload)) + payload


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000, help="connections per round and listener")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="larder-pp-bench."))
    origin = OriginProcess(work)
    larder = None
    try:
        script(work, "b", headers=[("Cache-Control", "max-age=600")], body="x" * 1024)
        larder = Larder(work, config={"listen": ["127.0.0.1:0", {"address": "127.0.0.1:0", "proxy_protocol": True}],
                                      "access_log": "off", "workers": 1, "admin_listen": "off"},
                        listeners=2, listen_flag=False)
        url = origin.url("/res/b")
        request = std_request("GET", url)

        def one(port, header):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(header + request)
                status = read_response(SockReader(s)).status
            if status != 200:
                raise SystemExit(f"answer {status}, expected 200")

        one(larder.ports[0], b"")  # fills the cache
        rates = {"plain": [], "proxy-v2": []}
        for _ in range(args.rounds):
            for name, port, header in (("plain", larder.ports[0], b""), ("proxy-v2", larder.ports[1], v2_header())):
                began = time.perf_counter()
                for _ in range(args.requests):
                    one(port, header)
                rates[name].append(args.requests / (time.perf_counter() - began))
        for name, r in rates.items():
            print(f"{name}: best {max(r):.0f}, median {statistics.median(r):.0f} connections+requests/s "
                  f"({len(r)} rounds of {args.requests}, interleaved)")
    finally:
        if larder:
            larder.stop()
        origin.stop()


if __name__ == "__main__":
    main()
