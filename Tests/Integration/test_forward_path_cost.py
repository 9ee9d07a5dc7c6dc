"""A regression gate on what a forwarded request costs: user-space instructions per pass-through
request (a `no-store` 1 KiB response, so every request goes to the origin and nothing is stored),
counted by callgrind as for hits (`test_hit_path_cost.py`). The origin connection is pooled, as in
steady use. The figure must stay within 10 % of FORWARD_PATH_BASELINE; lower the baseline when
forwarding gets cheaper, so the gate keeps its edge.
"""


import pytest

from test_hit_path_cost import instructions_for_gets, larder_under_callgrind, script

# Instructions per forwarded 1 KiB request (release build, one worker), and the margin allowed.
FORWARD_PATH_BASELINE = 50_000
ALLOWED_GROWTH = 1.10
REQUESTS = 1_000


@pytest.mark.timeout_s(300)
def test_forwarded_request_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    lr, out_prefix = larder_under_callgrind(larder_factory, workdir)
    script(workdir, "pass", [("Cache-Control", "no-store")], "x" * 1024)
    url = origin.url("/res/pass")
    # The warm-up fills the origin connection pool.
    total = instructions_for_gets(lr, out_prefix, url, warm_up=100, measured=REQUESTS)
    assert sum(1 for r in origin.requests() if r.get("path") == "/res/pass") == 100 + REQUESTS
    per_request = total / REQUESTS
    report_metric(f"forwarded path: {per_request:,.0f} instructions per 1 KiB pass-through request "
                  f"(baseline {FORWARD_PATH_BASELINE:,})")
    assert per_request <= FORWARD_PATH_BASELINE * ALLOWED_GROWTH, (
        f"a forwarded request now costs {per_request:,.0f} instructions, over 110 % of the baseline "
        f"{FORWARD_PATH_BASELINE:,}: profile it (callgrind_annotate on a dump) before raising the baseline")


# Instructions per revalidation of a stale 1 KiB entry that the origin says is unchanged (HEAD,
# the default), and per stored miss (a new URL each time, 1 KiB kept for an hour; the disk
# writer's work included).
REVALIDATION_BASELINE = 78_000
STORED_MISS_BASELINE = 133_000


@pytest.mark.timeout_s(300)
def test_revalidation_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    lr, out_prefix = larder_under_callgrind(larder_factory, workdir)
    script(workdir, "reval", [("Cache-Control", "max-age=0"), ("ETag", '"v1"')], "x" * 1024)
    url = origin.url("/res/reval")
    total = instructions_for_gets(lr, out_prefix, url, warm_up=100, measured=REQUESTS)
    methods = [r["method"] for r in origin.requests() if r.get("path") == "/res/reval"]
    assert methods.count("HEAD") == 100 + REQUESTS - 1, "every request after the first must be a HEAD revalidation"
    per_request = total / REQUESTS
    report_metric(f"revalidation: {per_request:,.0f} instructions per unchanged 1 KiB entry "
                  f"(baseline {REVALIDATION_BASELINE:,})")
    assert per_request <= REVALIDATION_BASELINE * ALLOWED_GROWTH, (
        f"a revalidation now costs {per_request:,.0f} instructions, over 110 % of the baseline "
        f"{REVALIDATION_BASELINE:,}: profile it before raising the baseline")


@pytest.mark.timeout_s(300)
def test_stored_miss_instructions_stay_within_the_baseline(larder_factory, origin, workdir, report_metric):
    lr, out_prefix = larder_under_callgrind(larder_factory, workdir)
    script(workdir, "storm", [("Cache-Control", "max-age=3600")], "x" * 1024)
    total = instructions_for_gets(lr, out_prefix, lambda n: origin.url(f"/res/storm?n={n}"), warm_up=100,
                                  measured=REQUESTS, settle=2.0)
    assert sum(1 for r in origin.requests() if r.get("path") == "/res/storm") == 100 + REQUESTS
    per_request = total / REQUESTS
    report_metric(f"stored miss: {per_request:,.0f} instructions per new 1 KiB URL, disk writer included "
                  f"(baseline {STORED_MISS_BASELINE:,})")
    assert per_request <= STORED_MISS_BASELINE * ALLOWED_GROWTH, (
        f"a stored miss now costs {per_request:,.0f} instructions, over 110 % of the baseline "
        f"{STORED_MISS_BASELINE:,}: profile it before raising the baseline")
