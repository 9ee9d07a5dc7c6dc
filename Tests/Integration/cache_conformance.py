"""Runs HTTP's cache conformance suite (http-tests/cache-tests, the suite behind cache-tests.fyi)
against Larder, the way that site runs caches: the suite's own origin on loopback, Larder in front
of it, the suite's client asking Larder, and each result classified by the suite's own
`determineTestResult` (dependencies honoured). Nothing of the suite is kept here: it is found at
run time (`CACHE_TESTS_DIR`, or a `cache-tests` directory next to the repository) and skipped where
it is absent.

Two modes: `reverse` (Larder in reverse mode for the origin, as cache-tests.fyi runs every cache)
and `forward` (the client's requests go to the origin's URL through Larder as its HTTP proxy).

As a script: `python3 Tests/Integration/cache_conformance.py [--mode reverse|forward|both]
[--larder-bin PATH] [--json FILE]` prints the counts per result kind and the tests that did not
pass; `test_cache_conformance.py` holds Larder to them.
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# The suite's two tests that require storing Set-Cookie, which Larder never stores in a shared cache.
SET_COOKIE_TESTS = {"headers-store-Set-Cookie", "headers-store-Set-Cookie2"}


def find_suite():
    """The cache-tests checkout, or None."""
    given = os.environ.get("CACHE_TESTS_DIR")
    candidates = [Path(given)] if given else sorted(REPO.parent.glob("*/cache-tests")) + [REPO.parent / "cache-tests"]
    for c in candidates:
        if (c / "test-engine" / "cli.mjs").is_file() and (c / "tests" / "index.mjs").is_file():
            return c.resolve()
    return None


def node_ok():
    if not shutil.which("node"):
        return False
    out = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"v(\d+)", out)
    return bool(m) and int(m.group(1)) >= 18


class SuiteOrigin:
    """The suite's origin server on a port picked at run time, stopped by PID."""

    def __init__(self, suite, workdir):
        env = dict(os.environ, npm_config_port="0", npm_config_protocol="http",
                   npm_config_pidfile=str(Path(workdir) / "origin.pid"))
        self.proc = subprocess.Popen(["node", "test-engine/server/server.mjs"], cwd=suite, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r":(\d+)/\s*$", line)
        if not m:
            self.stop()
            raise RuntimeError(f"the suite's origin did not start: {line!r}")
        self.port = int(m.group(1))
        self.base = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def run_client(suite, base, workdir, proxy=None, timeout=600):
    """The suite's client against `base` (through `proxy` if given); its raw results by test id."""
    env = dict(os.environ, npm_config_base=base, npm_config_id="", npm_package_config_id="")
    argv = ["node", "--no-warnings"]
    if proxy:
        # Every fetch of the client goes through Larder as its HTTP proxy.
        preload = Path(workdir) / "through-proxy.mjs"
        preload.write_text(
            f"import {{ ProxyAgent, setGlobalDispatcher, fetch }} from "
            f"{json.dumps(str(suite / 'node_modules' / 'undici' / 'index.js'))}\n"
            # Plain forwarding (absolute-form requests), not CONNECT tunnels, for http:// URLs.
            f"setGlobalDispatcher(new ProxyAgent({{ uri: {json.dumps(proxy)}, proxyTunnel: false }}))\n"
            "globalThis.fetch = fetch\n")
        argv += ["--import", str(preload)]
    argv.append("test-engine/cli.mjs")
    out = subprocess.run(argv, cwd=suite, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"the suite's client failed ({out.returncode}): {out.stderr[-2000:]}")
    start = out.stdout.index("{")
    return json.loads(out.stdout[start:])


def classify(suite, raw, workdir):
    """Each test's result as cache-tests.fyi shows it: {id: (kind, suite id, result name)}."""
    results = Path(workdir) / "raw.json"
    results.write_text(json.dumps(raw))
    script = f"""
import {{ determineTestResult, resultTypes }} from {json.dumps(str(suite / 'test-engine/lib/results.mjs'))}
import tests from {json.dumps(str(suite / 'tests/index.mjs'))}
import fs from 'fs'
const raw = JSON.parse(fs.readFileSync({json.dumps(str(results))}, 'utf8'))
const names = new Map(Object.entries(resultTypes).map(([k, v]) => [v, k]))
const out = {{}}
for (const s of tests) for (const t of s.tests) {{
  if (!(t.id in raw)) continue
  out[t.id] = [t.kind || 'required', s.id, names.get(determineTestResult(tests, t.id, raw))]
}}
console.log(JSON.stringify(out))
"""
    out = subprocess.run(["node", "--no-warnings", "--input-type=module", "-e", script], cwd=suite,
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"classifying failed: {out.stderr[-2000:]}")
    return {k: tuple(v) for k, v in json.loads(out.stdout).items()}


def larder_config(revalidation="conditional-get"):
    """Larder as the suite measures it: revalidation by conditional GET unless told otherwise (with
    HEAD, a stale entry's check and its GET are two requests the suite's origin counts as a retry),
    and ranged misses asked for as sent and stored as pieces (`range_misses: pieces`; the suite
    checks that a range reaches its origin unchanged)."""
    return {"cache": {"revalidation": revalidation, "range_misses": "pieces"}}


def summary(classified):
    """Counts per result name, and the tests in each group."""
    counts = collections.Counter(v[2] for v in classified.values())
    return counts


def passed(classified):
    return sum(1 for v in classified.values() if v[2] in ("pass", "yes"))


def run_mode(suite, larder_start, mode, workdir):
    """Starts the suite's origin and a Larder (`larder_start(args)` returns an object with `port`
    and `stop()`), runs the suite in `mode`, returns the classified results."""
    origin = SuiteOrigin(suite, workdir)
    larder = None
    try:
        if mode == "reverse":
            larder = larder_start(("--reverse-origin", origin.base))
            raw = run_client(suite, f"http://127.0.0.1:{larder.port}", workdir)
        else:
            larder = larder_start(())
            raw = run_client(suite, origin.base, workdir, proxy=f"http://127.0.0.1:{larder.port}")
        return classify(suite, raw, workdir)
    finally:
        if larder:
            larder.stop()
        origin.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=["reverse", "forward", "both"], default="both")
    ap.add_argument("--larder-bin", help="the Larder executable (LARDER_BIN, else .build/release/larder)")
    ap.add_argument("--json", help="write the classified results here")
    ap.add_argument("--revalidation", choices=["conditional-get", "head"], default="conditional-get",
                    help="how Larder revalidates (%(default)s, as cache-tests.fyi runs caches)")
    args = ap.parse_args()
    suite = find_suite()
    if suite is None:
        sys.exit("cache-tests not found: set CACHE_TESTS_DIR to a checkout of http-tests/cache-tests")
    if not node_ok():
        sys.exit("needs Node.js 18 or later")
    if args.larder_bin:
        os.environ["LARDER_BIN"] = str(Path(args.larder_bin).resolve())
    sys.path.insert(0, str(HERE))
    from helpers import Larder

    everything = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in (["reverse", "forward"] if args.mode == "both" else [args.mode]):
            work = Path(tmp) / mode
            work.mkdir()

            def start(extra, work=work):
                return Larder(work, config=larder_config(args.revalidation), args=extra)

            classified = run_mode(suite, start, mode, work)
            everything[mode] = classified
            counts = summary(classified)
            print(f"{mode}: {passed(classified)} passed of {len(classified)}; " +
                  ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
            for tid, (kind, group, result) in sorted(classified.items()):
                if result not in ("pass", "yes"):
                    print(f"  {result:16} {kind:9} {group:20} {tid}")
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
