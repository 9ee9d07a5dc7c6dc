"""A real Prometheus (Debian's) scrapes Larder's /metrics with the bearer token, and its query API
returns Larder's counters with their labels."""

import json
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from helpers import free_port, proxy_exchange, spawn, stop_process
from test_cache import script

TOKEN = "scrape-secret"


def prometheus_api(port, path, **params):
    url = f"http://127.0.0.1:{port}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=5) as resp:
        return json.loads(resp.read())["data"]


@pytest.mark.timeout_s(90)
def test_prometheus_scrapes_metrics(larder_factory, origin, workdir):
    binary = shutil.which("prometheus")
    assert binary, "prometheus is needed (Debian package prometheus; scripts/install-deps.sh installs it)"
    # At debug, where Larder logs each scrape it answers (below).
    lr = larder_factory(config={"admin_listen": "127.0.0.1:0", "admin_token": TOKEN, "log_level": "debug"})
    script(workdir, "scraped", headers=[("Cache-Control", "max-age=600")], body="s" * 500)
    for _ in range(3):
        assert proxy_exchange(lr.port, "GET", origin.url("/res/scraped")).status == 200

    config = workdir / "prometheus.yml"
    config.write_text(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: larder
    authorization:
      credentials: {TOKEN}
    static_configs:
      - targets: ["127.0.0.1:{lr.admin_port}"]
""")
    port = free_port()
    log = open(workdir / "prometheus.log", "wb")
    proc = spawn([binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
                  f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                 stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 45
        target = None
        # Larder logs each scrape it answers: after each, ask Prometheus whether it took it.
        for scrapes in range(1, 40):
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                break
            if lr.wait_for_count("GET /metrics", scrapes, timeout=left) < scrapes:
                break
            try:
                targets = prometheus_api(port, "/api/v1/targets")["activeTargets"]
                target = targets[0] if targets else None
                if target and target["health"] == "up":
                    break
            except OSError:
                pass
        assert target and target["health"] == "up", (target, (workdir / "prometheus.log").read_text()[-2000:])
        assert target["lastError"] == ""

        result = prometheus_api(port, "/api/v1/query", query='larder_cache_lookups_total{job="larder"}')["result"]
        by_result = {r["metric"]["result"]: float(r["value"][1]) for r in result}
        assert by_result["hit"] == 2 and by_result["miss"] == 1, by_result
        # Every family Larder exposes was ingested, none rejected.
        series = prometheus_api(port, "/api/v1/label/__name__/values")
        assert {"larder_uptime_seconds", "larder_cache_bytes", "larder_build_info",
                "larder_loop_lag_seconds"} <= set(series)
        scraped = prometheus_api(port, "/api/v1/query", query="scrape_samples_post_metric_relabeling")["result"]
        assert float(scraped[0]["value"][1]) > 50
    finally:
        stop_process(proc, signal.SIGTERM, 10)
        log.close()
