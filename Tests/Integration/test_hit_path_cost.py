"""A regression gate on what a cache hit costs: user-space instructions per hit, counted by callgrind.

Instruction counts do not depend on how busy the machine is, so this can fail a change that makes
hits slower without timing anything. The release binary runs under callgrind with one worker; after
a warm-up the counters are zeroed, a fixed number of keep-alive hits for a 1 KiB memory-tier entry
are sent, and the counters dumped. The figure must stay within 10 % of HIT_PATH_BASELINE, the count
measured when the baseline was last set: lower it when hits get cheaper, so the gate keeps its edge.
Further gates count hits in reverse mode with h2load: over HTTP/1.1 with TLS, over HTTP/2 with
prior knowledge and with TLS, and a 256 KiB one with prior knowledge.
"""

import glob
import http.client
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from helpers import larder_bin, wait_for_file
from test_tls import PKI

# Instructions per 1 KiB memory-tier hit (release build, one worker), and the margin allowed.
# The baseline is nginx 1.22's count for the same hit with proxy_cache; Larder's is below it.
HIT_PATH_BASELINE = 18_700
ALLOWED_GROWTH = 1.10
HITS = 2_000
# The same over HTTP/2 with prior knowledge, in reverse mode (h2load: 4 connections x 10 streams).
H2_HIT_PATH_BASELINE = 29_000
H2_HITS = 4_000
# The same over TLS: what OpenSSL's records cost on top (several answers share one, written at
# the end of the loop's pass without libevent's write event).
H2_TLS_HIT_PATH_BASELINE = 36_800
# A 1 KiB hit over HTTP/1.1 with TLS (keep-alive, reverse mode): a head and a body in one record.
TLS_HIT_PATH_BASELINE = 42_900
TLS_HITS = 2_000
# A 256 KiB hit over h2c: what moving the body into DATA frames costs.
H2_LARGE_HIT_BASELINE = 111_500
H2_LARGE_HITS = 400
# The same over TLS: each DATA frame copied once, with its header, and encrypted at once, a record
# of its own (1,603,000 when it was copied into nghttp2's buffer and from there into the output).
H2_TLS_LARGE_HIT_BASELINE = 1_354_000


def within_baseline(report_metric, what, per_request, baseline):
    """Reports the figure and fails when it is over 110 % of its baseline."""
    report_metric(f"{what}: {per_request:,.0f} instructions (baseline {baseline:,})")
    assert per_request <= baseline * ALLOWED_GROWTH, (
        f"{what} now costs {per_request:,.0f} instructions, over 110 % of the baseline {baseline:,}: "
        "profile it (callgrind_annotate on a dump) before raising the baseline")


def script(workdir, name, headers, body):
    spec = {"status": 200, "headers": [list(h) for h in headers], "body": body}
    (workdir / f"res-{name}.json").write_text(json.dumps(spec))


def callgrind_total(path):
    """The instruction total of a dump, or None while it is not written whole."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(1))
    return None


def dump(pid, out_prefix):
    """Writes a callgrind dump of the costs since the last zeroing or dump; returns its total.
    With LARDER_PROFILE_DIR set, the dump is also copied there."""
    before = set(glob.glob(f"{out_prefix}*"))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True, timeout=60)
    fresh = wait_for_file(os.path.dirname(out_prefix), lambda: sorted(set(glob.glob(f"{out_prefix}*")) - before),
                          timeout=30)
    assert fresh, "callgrind wrote no dump"
    total = wait_for_file(fresh[-1], lambda: callgrind_total(fresh[-1]), timeout=30)
    assert total is not None, f"no instruction total in {fresh[-1]}"
    keep = os.environ.get("LARDER_PROFILE_DIR")
    if keep:  # for callgrind_annotate when a gate fails or a change is profiled
        os.makedirs(keep, exist_ok=True)
        shutil.copy(fresh[-1], os.path.join(keep, f"{os.path.basename(fresh[-1])}.pid{pid}"))
    return total


def larder_under_callgrind(larder_factory, workdir, args=(), listeners=1, **config):
    """One worker of the release build under callgrind (costs zeroed and dumped by `dump`); returns
    (the process, the dump files' prefix). `config`: more configuration keys."""
    if os.environ.get("SANITIZER_BUILD"):
        pytest.skip("instruction counts are measured on the release build, not a sanitizer build")
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        pytest.fail("valgrind is missing (scripts/install-deps.sh installs it)")
    out_prefix = str(workdir / "callgrind.out")
    # Debian's valgrind cannot read the Swift toolchain's DWARF: run a copy without it (symbols stay).
    binary = workdir / "larder-nodebug"
    subprocess.run(["objcopy", "--strip-debug", larder_bin(), str(binary)], check=True, timeout=60)
    lr = larder_factory(
        config={"workers": 1, "access_log": "off", **config}, args=args, listeners=listeners,
        # Names written in full, so a dump kept in LARDER_PROFILE_DIR can be annotated on its own.
        wrapper=("valgrind", "--tool=callgrind", f"--callgrind-out-file={out_prefix}", "--dump-instr=no",
                 "--compress-strings=no"),
        binary=binary, start_timeout=120)
    return lr, out_prefix


def instructions_for_gets(lr, out_prefix, url, warm_up, measured, settle=0.0):
    """Sends `warm_up` keep-alive GETs of `url` (each a 200 with 1 KiB), zeroes the counters, sends
    `measured` more and returns the instructions they cost (all of Larder's threads). `url` may be
    a function of the request's number, for a new URL each time. `settle` seconds pass before the
    dump, for work the requests left to other threads (the disk writer)."""
    conn = http.client.HTTPConnection("127.0.0.1", lr.port, timeout=60)
    sent = 0

    def gets(n):
        nonlocal sent
        for _ in range(n):
            sent += 1
            conn.request("GET", url(sent) if callable(url) else url)
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200 and len(body) == 1024

    gets(warm_up)
    subprocess.run(["callgrind_control", "-z", str(lr.pid)], check=True, capture_output=True, timeout=60)
    gets(measured)
    time.sleep(settle)
    total = dump(lr.pid, out_prefix)
    conn.close()
    return total


@pytest.mark.timeout_s(240)
def test_hit_path_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    lr, out_prefix = larder_under_callgrind(larder_factory, workdir)
    script(workdir, "hit", [("Cache-Control", "max-age=3600")], "x" * 1024)
    url = origin.url("/res/hit")
    # The first is a miss; the rest warm the hit path.
    total = instructions_for_gets(lr, out_prefix, url, warm_up=200, measured=HITS)
    assert sum(1 for r in origin.requests() if r.get("path") == "/res/hit") == 1, "the hits reached the origin"
    within_baseline(report_metric, "a 1 KiB hit", total / HITS, HIT_PATH_BASELINE)


def h2_hit_instructions(larder_factory, origin, workdir, size, hits, tls=False, h1=False):
    """User-space instructions per hit of a `size`-byte stored body over h2c (h2load, prior
    knowledge, reverse mode, 4 connections x 10 streams), or over TLS with `tls`; with `h1`, over
    HTTP/1.1 keep-alive connections (4, a request at a time on each)."""
    if not shutil.which("h2load"):
        pytest.fail("h2load is missing (scripts/install-deps.sh installs nghttp2-client)")
    script(workdir, "hit", [("Cache-Control", "max-age=3600")], "x" * size)
    args = ("--reverse-origin", origin.url("/").rstrip("/"))
    if tls:
        cert, key = PKI(workdir / "pki").leaf("proxy")
        lr, out_prefix = larder_under_callgrind(larder_factory, workdir, args=args, listeners=2,
                                                tls={"listen": ["127.0.0.1:0"], "certificate_file": cert,
                                                     "key_file": key})
        url = f"https://127.0.0.1:{lr.ports[1]}/res/hit"
    else:
        lr, out_prefix = larder_under_callgrind(larder_factory, workdir, args=args)
        url = f"http://127.0.0.1:{lr.port}/res/hit"

    def load(n):
        out = subprocess.run(["h2load", "-c4", *(["--h1", "-m1"] if h1 else ["-m10"]), f"-n{n}", url],
                             capture_output=True, text=True, timeout=180).stdout
        assert f"{n} succeeded" in out and "status codes: " + str(n) + " 2xx" in out, out

    load(max(400, hits // 10))  # the first is a miss; the rest warm the path
    subprocess.run(["callgrind_control", "-z", str(lr.pid)], check=True, capture_output=True, timeout=60)
    load(hits)
    total = dump(lr.pid, out_prefix)
    assert sum(1 for r in origin.requests() if r.get("path") == "/res/hit") == 1, "the hits reached the origin"
    return total / hits


@pytest.mark.timeout_s(240)
def test_h2_hit_path_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    per_hit = h2_hit_instructions(larder_factory, origin, workdir, 1024, H2_HITS)
    within_baseline(report_metric, "a 1 KiB hit over h2c", per_hit, H2_HIT_PATH_BASELINE)


@pytest.mark.timeout_s(240)
def test_h2_tls_hit_path_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    per_hit = h2_hit_instructions(larder_factory, origin, workdir, 1024, H2_HITS, tls=True)
    within_baseline(report_metric, "a 1 KiB hit over HTTP/2 with TLS", per_hit, H2_TLS_HIT_PATH_BASELINE)


@pytest.mark.timeout_s(240)
def test_tls_hit_path_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    per_hit = h2_hit_instructions(larder_factory, origin, workdir, 1024, TLS_HITS, tls=True, h1=True)
    within_baseline(report_metric, "a 1 KiB hit over HTTP/1.1 with TLS", per_hit, TLS_HIT_PATH_BASELINE)


@pytest.mark.timeout_s(240)
def test_h2_large_hit_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    per_hit = h2_hit_instructions(larder_factory, origin, workdir, 256 * 1024, H2_LARGE_HITS)
    within_baseline(report_metric, "a 256 KiB hit over h2c", per_hit, H2_LARGE_HIT_BASELINE)


@pytest.mark.timeout_s(240)
def test_h2_tls_large_hit_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    per_hit = h2_hit_instructions(larder_factory, origin, workdir, 256 * 1024, H2_LARGE_HITS, tls=True)
    within_baseline(report_metric, "a 256 KiB hit over HTTP/2 with TLS", per_hit, H2_TLS_LARGE_HIT_BASELINE)
