"""The admin endpoint over real HTTP: health, statistics as JSON and Prometheus text, entry
inspection and purging, the bearer token."""

import http.client
import json
import os
import re
import signal
import subprocess
import time
import urllib.parse

from prometheus_client.parser import text_string_to_metric_families

from helpers import RawClient, larder_bin, proxy_exchange, std_request, wait_until
from test_cache import cache_status, methods, script

ADMIN = {"admin_listen": "127.0.0.1:0"}


def admin(lr, method, path, token=None):
    conn = http.client.HTTPConnection("127.0.0.1", lr.admin_port, timeout=10)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), body
    finally:
        conn.close()


def stats(lr, token=None):
    status, headers, body = admin(lr, "GET", "/stats", token)
    assert status == 200 and headers["content-type"] == "application/json", (status, body)
    return json.loads(body)


def wait_stats(lr, check, timeout=5.0, interval=0.02):
    """Statistics once `check` holds (the workers' gauges are refreshed about once a second; the
    cache's are read when asked)."""
    deadline = time.monotonic() + timeout
    while True:
        s = stats(lr)
        if check(s) or time.monotonic() > deadline:
            return s
        time.sleep(interval)


def test_health_and_readiness(larder_factory):
    lr = larder_factory(config=ADMIN)
    assert admin(lr, "GET", "/healthz")[0] == 200
    status, headers, body = admin(lr, "GET", "/readyz")
    assert status == 200 and body == b"ready\n"
    assert admin(lr, "HEAD", "/healthz")[2] == b""
    status, headers, _ = admin(lr, "POST", "/stats")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    assert admin(lr, "GET", "/nope")[0] == 404


def test_stats_count_what_the_proxy_did(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "st", headers=[("Cache-Control", "max-age=60")], body="x" * 1000)
    url = origin.url("/res/st")
    assert proxy_exchange(lr.port, "GET", url).status == 200           # miss, stored
    assert cache_status(proxy_exchange(lr.port, "GET", url)).startswith("larder; hit")
    assert cache_status(proxy_exchange(lr.port, "GET", url)).startswith("larder; hit")
    proxy_exchange(lr.port, "POST", origin.url("/echo"), body=b"hi")   # pass
    cold = origin.url("/res/never")
    assert proxy_exchange(lr.port, "GET", cold, headers=[("Cache-Control", "only-if-cached")]).status == 504
    s = wait_stats(lr, lambda s: s["loop_lag_seconds"] and s["client_connections_open"] == 0)
    assert s["version"]
    assert s["cache_lookups"]["hit"] == 2
    assert s["cache_lookups"]["miss"] == 1
    assert s["cache_lookups"]["pass"] == 1
    assert s["cache_lookups"]["only_if_cached_miss"] == 1
    assert s["requests"]["GET"] == 4 and s["requests"]["POST"] == 1
    assert s["responses"]["2xx"] == 4 and s["responses"]["5xx"] == 1
    assert s["client_bytes"]["cache"] == 2000 and s["client_bytes"]["origin"] >= 1000
    assert abs(s["hit_ratio"]["requests"] - 2 / 4) < 1e-9
    assert s["client_connections"] == 5
    assert s["cache_entries"]["memory"] >= 1
    assert s["cache_capacity_bytes"]["disk"] == 1 << 30
    assert s["lmdb_map_size_bytes"] > s["cache_capacity_bytes"]["disk"]
    assert s["origin_requests"]["new"] + s["origin_requests"]["reused"] == 2
    assert sorted(s["loop_lag_seconds"]) == ["0", "1"]  # two workers
    assert s["uptime_seconds"] > 0


def test_metrics_parse_as_prometheus_text(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "pm", headers=[("Cache-Control", "max-age=60")], body="p")
    proxy_exchange(lr.port, "GET", origin.url("/res/pm"))
    proxy_exchange(lr.port, "GET", origin.url("/res/pm"))
    status, headers, body = admin(lr, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    # The parser drops the _total suffix from counter family names.
    lookups = {s.labels["result"]: s.value for s in families["larder_cache_lookups"].samples}
    assert families["larder_cache_lookups"].type == "counter"
    assert lookups["hit"] == 1 and lookups["miss"] == 1
    assert families["larder_cache_bytes"].type == "gauge"
    assert {s.labels["tier"] for s in families["larder_cache_bytes"].samples} == {"memory", "disk"}
    info = families["larder_build_info"].samples[0]
    assert info.labels["version"] == stats(lr)["version"]
    assert families["larder_origin_errors"].type == "counter"


def test_origin_errors_are_counted_by_kind(larder_factory):
    lr = larder_factory(config=ADMIN)
    # A port nothing listens on: connection refused.
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    assert proxy_exchange(lr.port, "GET", f"http://127.0.0.1:{dead}/x").status == 502
    assert stats(lr)["origin_errors"]["refused"] == 1


def test_inspect_and_purge_entries(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "a", headers=[("Cache-Control", "max-age=600"), ("X-Tag", "one")], body="aaa")
    script(workdir, "b", headers=[("Cache-Control", "max-age=600")], body="bbb")
    ua, ub = origin.url("/res/a"), origin.url("/res/b")
    proxy_exchange(lr.port, "GET", ua)
    proxy_exchange(lr.port, "GET", ub)
    q = urllib.parse.quote(ua, safe="")
    status, _, body = admin(lr, "GET", f"/cache?url={q}")
    assert status == 200, body
    entry = json.loads(body)
    assert entry["url"] == ua and len(entry["variants"]) == 1
    v = entry["variants"][0]
    assert v["status"] == 200 and v["size"] == 3 and v["fresh"] is True and v["freshness_lifetime"] == 600
    assert v["tier"] in ("memory", "disk")
    assert ["X-Tag", "one"] in v["headers"]
    assert admin(lr, "GET", "/cache")[0] == 400
    assert admin(lr, "GET", "/cache?url=" + urllib.parse.quote(origin.url("/res/zzz"), safe=""))[0] == 404
    assert admin(lr, "GET", "/cache?url=not-a-url")[0] == 400

    status, _, body = admin(lr, "DELETE", f"/cache?url={q}")
    assert status == 200 and json.loads(body)["purged"] == ua
    # Nothing stored: 404, as PURGE answers.
    status, _, body = admin(lr, "DELETE", f"/cache?url={q}")
    assert status == 404 and json.loads(body)["variants"] == 0
    only = [("Cache-Control", "only-if-cached")]
    assert proxy_exchange(lr.port, "GET", ua, headers=only).status == 504
    assert proxy_exchange(lr.port, "GET", ub, headers=only).status == 200

    assert admin(lr, "DELETE", "/cache?since=yesterday")[0] == 400
    # Stored since a minute ago: b goes.
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    assert admin(lr, "DELETE", f"/cache?since={since}")[0] == 200
    assert proxy_exchange(lr.port, "GET", ub, headers=only).status == 504

    proxy_exchange(lr.port, "GET", ua)
    assert proxy_exchange(lr.port, "GET", ua, headers=only).status == 200
    assert admin(lr, "DELETE", "/cache")[0] == 200
    assert proxy_exchange(lr.port, "GET", ua, headers=only).status == 504
    assert methods(origin, "a") == ["GET", "GET"]


def test_token_guards_everything_but_healthz(larder_factory):
    lr = larder_factory(config={**ADMIN, "admin_token": "s3cret-token"})
    assert admin(lr, "GET", "/healthz")[0] == 200
    status, headers, _ = admin(lr, "GET", "/stats")
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert admin(lr, "GET", "/stats", token="wrong")[0] == 401
    assert admin(lr, "DELETE", "/cache", token="s3cret-tokem")[0] == 401
    assert admin(lr, "GET", "/stats", token="s3cret-token")[0] == 200


def test_refuses_an_open_admin_endpoint_without_a_token(larder_factory):
    lr = larder_factory(config={"admin_listen": "0.0.0.0:0"}, wait=False)
    assert lr.wait_exit(15) == 2
    assert "admin_token" in lr.log_text()


def test_refuses_the_proxy_port_for_the_admin_endpoint(larder_factory):
    lr = larder_factory(config={"listen": ["127.0.0.1:3999"], "admin_listen": "127.0.0.1:3999"},
                        listen_flag=False, wait=False)
    assert lr.wait_exit(15) == 2
    assert "its own" in lr.log_text()


def test_purge_method_on_the_proxy_port(larder_factory, origin, workdir):
    lr = larder_factory()
    script(workdir, "pg", headers=[("Cache-Control", "max-age=600")], body="pg")
    url = origin.url("/res/pg")
    proxy_exchange(lr.port, "GET", url)
    only = [("Cache-Control", "only-if-cached")]
    assert proxy_exchange(lr.port, "GET", url, headers=only).status == 200
    r = proxy_exchange(lr.port, "PURGE", url)
    assert r.status == 200 and b"purged" in r.body, r
    assert proxy_exchange(lr.port, "GET", url, headers=only).status == 504
    assert proxy_exchange(lr.port, "PURGE", url).status == 404
    assert methods(origin, "pg") == ["GET"]


def test_purges_pipelined_with_other_requests_are_answered_in_order(larder_factory, origin, workdir):
    """A purge is answered once the disk writer has committed it, without holding the worker's
    loop: requests behind it on the same connection (and the proxy's) wait their turn."""
    lr = larder_factory(config=dict(ADMIN, workers=1))
    script(workdir, "pp", headers=[("Cache-Control", "max-age=600")], body="pp")
    url = origin.url("/res/pp")
    proxy_exchange(lr.port, "GET", url)
    host = f"127.0.0.1:{lr.admin_port}"
    quoted = urllib.parse.quote(url, safe="")
    with RawClient(lr.admin_port) as c:
        c.send((f"DELETE /cache?url={quoted} HTTP/1.1\r\nHost: {host}\r\n\r\n"
                f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n"
                f"DELETE /cache?url={quoted} HTTP/1.1\r\nHost: {host}\r\n\r\n"
                f"DELETE /cache HTTP/1.1\r\nHost: {host}\r\n\r\n").encode())
        answers = [c.response() for _ in range(4)]
    assert [a.status for a in answers] == [200, 200, 404, 200], [(a.status, a.body) for a in answers]
    assert b"purged" in answers[0].body and answers[1].body == b"ok\n" and b'"purged":"all"' in answers[3].body
    with RawClient(lr.port) as c:
        c.send(std_request("PURGE", url) + std_request("GET", origin.url("/bytes/5")) + std_request("PURGE", url))
        statuses = [c.response().status for _ in range(3)]
    assert statuses == [404, 200, 404], statuses


def test_purge_is_refused_from_other_addresses(larder_factory, origin, workdir):
    lr = larder_factory(config={"purge_allowed_from": ["10.0.0.0/8"]})
    script(workdir, "pg2", headers=[("Cache-Control", "max-age=600")], body="pg")
    url = origin.url("/res/pg2")
    proxy_exchange(lr.port, "GET", url)
    assert proxy_exchange(lr.port, "PURGE", url).status == 403
    assert proxy_exchange(lr.port, "GET", url, headers=[("Cache-Control", "only-if-cached")]).status == 200


def test_readyz_says_503_while_the_proxy_drains(larder_factory, origin):
    lr = larder_factory(config={**ADMIN, "shutdown_grace": "10s"})
    assert admin(lr, "GET", "/readyz")[0] == 200
    # A download that keeps the proxy draining after SIGTERM: the origin holds it at a gate.
    c = RawClient(lr.port, 15)
    c.send(std_request("GET", origin.url("/unique/1/65536?hold=drain")))
    assert len(origin.wait_requests(1)) == 1  # in flight
    os.kill(lr.pid, signal.SIGTERM)
    lr.wait_for_text("shutting down")
    # The proxy no longer accepts, but the admin endpoint still answers, to say it is not ready
    # (from the moment shutdown begins, just after that line).
    assert wait_until(lambda: admin(lr, "GET", "/readyz")[0] == 503, timeout=5)
    assert admin(lr, "GET", "/healthz")[0] == 200
    origin.open_gate("drain")
    c.close()
    assert lr.wait_exit(15) == 0


def test_an_admin_connection_opened_before_shutdown_still_gets_its_answer(larder_factory, origin):
    """A prober that connected just before SIGTERM and asks just after gets the 503, not a reset
    (draining closed every admin connection without a queued answer, a request on its way included)."""
    lr = larder_factory(config={**ADMIN, "shutdown_grace": "10s"})
    c = RawClient(lr.port, 15)
    c.send(std_request("GET", origin.url("/unique/2/65536?hold=drain2")))
    assert len(origin.wait_requests(1)) == 1  # keeps the proxy draining
    with RawClient(lr.admin_port, 15) as prober:
        os.kill(lr.pid, signal.SIGTERM)
        lr.wait_for_text("shutting down")
        resp = prober.request("GET", "/readyz", headers=[("Host", f"127.0.0.1:{lr.admin_port}")])
        assert resp.status == 503 and resp.header("connection") == "close"
    origin.open_gate("drain2")
    c.close()
    assert lr.wait_exit(15) == 0


# ---------------------------------------------------------------------------
# GET /config: the configuration in force, secrets redacted


def config_keys():
    """The keys as `larder config-keys` lists them, in its order."""
    out = subprocess.run([larder_bin(), "config-keys"], capture_output=True, text=True, check=True, timeout=30).stdout
    return re.findall(r"^\| `([^`]+)` \|", out, re.MULTILINE)


def test_config_shows_every_key_in_force_with_secrets_redacted(larder_factory):
    token = "adm1n-t0ken-for-config"
    lr = larder_factory(
        config={**ADMIN, "admin_token": token, "via_name": "fromfile", "shutdown_grace": "7s", "workers": 2,
                "session": {"http_additional_headers": {"Authorization": "Bearer upstream-s3cret", "X-Team": "builds"}},
                "tls": {"key_file": "/etc/larder/proxy.key"}},
        # The environment over the file, flags over both.
        env={"LARDER_VIA_NAME": "fromenv", "LARDER_CACHE_HEURISTIC_MAX": "2h", "LARDER_WORKERS": "3"},
        args=["--workers", "1"])
    assert admin(lr, "GET", "/config")[0] == 401
    assert admin(lr, "GET", "/config", token="wrong")[0] == 401
    status, headers, body = admin(lr, "GET", "/config", token=token)
    assert status == 200 and headers["content-type"] == "application/json", body
    assert token.encode() not in body and b"upstream-s3cret" not in body and b"builds" not in body
    cfg = json.loads(body)
    # Every key `larder config-keys` knows, in its order.
    assert list(cfg) == config_keys()
    assert cfg["via_name"] == "fromenv"                  # file < environment
    assert cfg["workers"] == 1                           # environment < flag
    assert cfg["shutdown_grace"] == "7s"                 # file
    assert cfg["cache.heuristic_max"] == "2h"            # environment
    assert cfg["cache_dir"] == str(lr.cache_dir)         # flag
    assert cfg["listen"] == ["127.0.0.1:0"]              # flag, as configured
    assert cfg["cache.offline"] is False and cfg["cache.presets"] == [] and cfg["session.proxy"] is None
    # Redacted: the token and every value of the outbound header fields; paths to keys are shown.
    assert cfg["admin_token"] == "REDACTED"
    assert cfg["session.http_additional_headers"] == {"Authorization": "REDACTED", "X-Team": "REDACTED"}
    assert cfg["tls.key_file"] == "/etc/larder/proxy.key"
    redacted = sorted(k for k, v in cfg.items() if v == "REDACTED" or (isinstance(v, dict) and "REDACTED" in v.values()))
    assert redacted == ["admin_token", "session.http_additional_headers"]
    # As the dashboard opens it, with the token in the URL; HEAD; nothing but GET and HEAD.
    assert json.loads(admin(lr, "GET", f"/config?token={token}")[2]) == cfg
    status, _, body = admin(lr, "HEAD", "/config", token=token)
    assert status == 200 and body == b""
    status, headers, _ = admin(lr, "POST", "/config", token=token)
    assert status == 405 and headers["allow"] == "GET, HEAD"
    assert token not in lr.log_text()


def test_config_without_a_token_says_none_is_set(larder_factory):
    lr = larder_factory(config=ADMIN)
    cfg = json.loads(admin(lr, "GET", "/config")[2])
    assert cfg["admin_token"] is None and cfg["session.http_additional_headers"] == {}
    assert cfg["admin_listen"] == "127.0.0.1:0"


# ---------------------------------------------------------------------------
# Presets in force; per-host hit ratio


def test_the_presets_in_force_are_named_in_the_start_log_and_stats(larder_factory):
    lr = larder_factory(config={**ADMIN, "cache": {"presets": ["debian", "pypi"]}})
    lr.wait_for_text("cache presets in force: debian, pypi")
    assert stats(lr)["presets"] == ["debian", "pypi"]
    plain = larder_factory(config=ADMIN)
    plain.wait_for_text("cache presets in force: none")
    assert stats(plain)["presets"] == []


POLLED = ["/healthz", "/readyz", "/stats", "/metrics", "/", "/stats/history", "/warm"]


def poll_then_reload(lr):
    """Every polled path read on one keep-alive connection, then a reload on it: the worker that
    logs the reload has logged the reads before it, if it logs them at all."""
    conn = http.client.HTTPConnection("127.0.0.1", lr.admin_port, timeout=10)
    try:
        for path in POLLED:
            for method in ("GET", "HEAD"):
                conn.request(method, path)
                resp = conn.getresponse()
                resp.read()
                assert resp.status == 200, (method, path, resp.status)
        conn.request("GET", "/nope")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 404
        conn.request("POST", "/config/reload")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200
    finally:
        conn.close()
    lr.wait_for_text("POST /config/reload 200")


def test_polling_is_logged_at_debug_and_changes_at_info(larder_factory):
    """A dashboard, Prometheus and health checks read the admin endpoint every few seconds: at
    info, their requests are not logged; a reload, a purge or a refused request is."""
    lr = larder_factory(config=ADMIN)
    poll_then_reload(lr)
    log = lr.log_text()
    polled = [line for line in log.splitlines() if re.search(r" admin \S+ (GET|HEAD) \S+ 200$", line)]
    assert polled == [], polled
    assert re.search(r"info larder: .* admin \S+ GET /nope 404", log), log[-2000:]
    assert re.search(r"info larder: .* admin \S+ POST /config/reload 200", log), log[-2000:]

    loud = larder_factory(config={**ADMIN, "log_level": "debug"})
    poll_then_reload(loud)
    for path in POLLED:
        for method in ("GET", "HEAD"):
            assert re.search(rf"debug larder: .* admin \S+ {method} {re.escape(path)} 200\n", loud.log_text() + "\n"), \
                (method, path)


def test_top_hosts_give_each_origins_hit_ratio(larder_factory, origin_factory, workdir):
    lr = larder_factory(config=ADMIN)
    a, b = origin_factory("a"), origin_factory("b")
    script(workdir, "ha", headers=[("Cache-Control", "max-age=600")], body="a")
    script(workdir, "hb", headers=[("Cache-Control", "max-age=600")], body="b")
    # a: one miss, three hits, and a POST (a pass: a request, neither hit nor miss).
    for _ in range(4):
        assert proxy_exchange(lr.port, "GET", a.url("/res/ha")).status == 200
    proxy_exchange(lr.port, "POST", a.url("/echo"), body=b"x")
    # b: one miss and a hit, and a response without freshness, fetched twice: two misses.
    for path in ("/res/hb", "/res/hb", "/bytes/7", "/bytes/7"):
        assert proxy_exchange(lr.port, "GET", b.url(path)).status == 200
    top = {h["host"]: h for h in stats(lr)["top_hosts"]}
    name_a, name_b = a.url("")[len("http://"):], b.url("")[len("http://"):]
    assert top[name_a] == {"host": name_a, "requests": 5, "hits": 3, "misses": 1, "hit_ratio": 0.75}, top
    assert top[name_b] == {"host": name_b, "requests": 4, "hits": 1, "misses": 3, "hit_ratio": 0.25}, top
    assert [h["host"] for h in stats(lr)["top_hosts"]] == [name_a, name_b]
