#!/usr/bin/env python3
"""A large randomized run of the h11 differential check (Tests/Integration/test_differential.py).

Starts the release larder (or $LARDER_BIN) in reverse mode in front of the test's h11 origin,
mutates the test's corpus (requests and responses), compares Larder's reading of every input with
h11's, and prints the disagreements no rule of the test's allow-list explains. Bounded by count and
time; everything stays on 127.0.0.1 (names resolve to nothing, other addresses are denied).

    python3 scripts/differential.py [--count 100000] [--seconds 600] [--seed 1] [--workers 64]

Exit status 1 when something is not explained (all of them are written to --out when given).
"""

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "Tests" / "Integration"))

import helpers  # noqa: E402
import test_differential as td  # noqa: E402


def start_larder(workdir, echo_port, dns_port):
    """Reverse mode to the echo origin when `echo_port` is given (requests), else a forward proxy
    (responses: a reverse proxy serves only its own origin)."""
    config = td.larder_config(dns_port)
    if echo_port is not None:
        config["reverse_origin"] = f"http://{td.LOCALHOST}:{echo_port}"
    name = "reverse" if echo_port is not None else "forward"
    config.update({"admin_listen": helpers.Raw("off"), "workers": 2, "cache_dir": str(workdir / f"cache-{name}"),
                   "shutdown_grace": "2s"})
    path = workdir / f"larder-{name}.yaml"
    path.write_text(helpers.to_yaml(config) + "\n")
    binary = os.environ.get("LARDER_BIN") or str(REPO / ".build" / "release" / "larder")
    proc = subprocess.Popen([binary, "--config", str(path), "--listen", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=helpers.child_env(),
                            preexec_fn=helpers._die_with_parent)
    port = None
    deadline = time.monotonic() + 15
    for raw in iter(proc.stderr.readline, b""):
        m = helpers.LISTEN_RE.search(raw.decode("utf-8", "replace"))
        if m:
            port = int(m.group(1))
            break
        if time.monotonic() > deadline:
            break
    if port is None:
        proc.kill()
        sys.exit(f"larder did not start ({binary})")
    # Keep draining its log so it never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in iter(proc.stderr.readline, b"")], daemon=True).start()
    return proc, port


def request_bases(origin_port):
    bases = [c.data for c in td.build_request_corpus(origin_port)]
    return [b for b in bases if len(b) < 20000]


def response_bases():
    return [c.data for c in td.build_response_corpus() if c.method == "GET" and len(c.data) < 20000]


def mutants(bases, rng, n, localize=None):
    out = []
    for _ in range(n):
        data = rng.choice(bases)
        for _ in range(rng.choice((1, 1, 2, 3))):
            data = td.mutate(data, rng)
        out.append(localize(data) if localize else data)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=100_000, help="inputs in all (requests and responses)")
    ap.add_argument("--seconds", type=float, default=600, help="stop after this long")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--out", default="", help="write the full report to this file")
    args = ap.parse_args()
    if not td.h11_version_ok():
        sys.exit(f"h11 {td.h11.__version__} is too old (0.16 or newer)")

    rng = random.Random(args.seed)
    t0 = time.monotonic()
    echo = td.EchoOrigin()
    raw = td.RawOrigin({})
    dns = helpers.FakeDNS()
    with tempfile.TemporaryDirectory(prefix="larder-differential-") as tmp:
        proc, port = start_larder(Path(tmp), echo.port, dns.port)
        forward_proc, forward_port = start_larder(Path(tmp), None, dns.port)
        done = {"request": 0, "response": 0}
        unexplained, by_rule = [], {}
        next_id = 0
        try:
            reqs = request_bases(echo.port)
            resps = response_bases()
            local = lambda d: td._localize(d, echo.port)  # noqa: E731
            while sum(done.values()) < args.count and time.monotonic() - t0 < args.seconds:
                n = min(args.batch, args.count - sum(done.values()))
                n_resp = n // 4
                req_cases = [td.Case(f"request #{done['request'] + i} (seed {args.seed})", d)
                             for i, d in enumerate(mutants(reqs, rng, n - n_resp, local))]
                resp_cases = [td.Case(f"response #{done['response'] + i} (seed {args.seed})", d)
                              for i, d in enumerate(mutants(resps, rng, n_resp))]
                findings = td.run_requests(req_cases, port, echo.port, workers=args.workers, quiet=0.05)
                findings += td.run_responses(resp_cases, forward_port, raw, first_id=next_id, workers=args.workers)
                next_id += len(resp_cases)
                for cid in list(raw.responses):
                    if cid < next_id:
                        del raw.responses[cid]
                done["request"] += len(req_cases)
                done["response"] += len(resp_cases)
                for f in findings:
                    key = f.rule.name if f.rule else "NOT ALLOWED"
                    by_rule[key] = by_rule.get(key, 0) + 1
                    if f.rule is None:
                        unexplained.append(f)
                if proc.poll() is not None:
                    print(f"larder exited with {proc.returncode}", file=sys.stderr)
                    break
                print(f"{sum(done.values())} inputs, {len(unexplained)} not explained, "
                      f"{time.monotonic() - t0:.0f} s", flush=True)
        finally:
            for p in (proc, forward_proc):
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGTERM)
                    try:
                        p.wait(10)
                    except subprocess.TimeoutExpired:
                        os.kill(p.pid, signal.SIGKILL)
                        p.wait(5)
            echo.stop()
            raw.stop()
            dns.stop()

    lines = [f"{done['request']} requests and {done['response']} responses in {time.monotonic() - t0:.0f} s"]
    lines += [f"  {k}: {v}" for k, v in sorted(by_rule.items())]
    for f in unexplained:
        lines += [f"- {f.case.name} [{f.kind}] {f.detail}", f"    input:  {f.case.data[:400]!r}",
                  f"    h11:    {f.h11}", f"    Larder: {f.larder}"]
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[: 40 + len(by_rule)]))
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
