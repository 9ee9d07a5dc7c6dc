"""Configuration reload (POST /config/reload and SIGHUP): what can change in a running proxy
changes for new requests without dropping connections or the cache; what cannot is reported;
an invalid file is rejected whole and the old configuration stays."""

import json
import os
import signal
import time

from helpers import RawClient, deep_merge, proxy_exchange, to_yaml
from test_admin import ADMIN, admin
from test_cache import script


def rewrite(lr, changes):
    lr.config = deep_merge(lr.config, changes)
    lr.config_path.write_text(to_yaml(lr.config) + "\n")


def wait_log(lr, text, timeout=5.0):
    deadline = time.monotonic() + timeout
    while text not in lr.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{lr.log_text()[-2000:]}"
        time.sleep(0.05)


def test_reload_applies_live_keys_and_reports_the_rest(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "rl", headers=[("Cache-Control", "max-age=600")], body="kept")
    url = origin.url("/res/rl")
    proxy_exchange(lr.port, "GET", url)
    with RawClient(lr.port) as kept:
        first = kept.request("GET", url)
        assert first.header("Via") == "1.1 larder"
        status, _, body = admin(lr, "POST", "/config/reload")
        assert status == 200 and json.loads(body) == {"status": "unchanged", "applied": [], "needs_restart": []}

        rewrite(lr, {"via_name": "edge", "cache": {"offline": True, "memory_capacity": "32MiB"}})
        status, _, body = admin(lr, "POST", "/config/reload")
        outcome = json.loads(body)
        assert status == 200 and outcome["status"] == "applied", body
        assert outcome["applied"] == ["via_name", "cache.offline"]
        assert outcome["needs_restart"] == ["cache.memory_capacity"]
        wait_log(lr, "applied via_name, cache.offline; needs a restart to change: cache.memory_capacity")
        time.sleep(0.1)  # the workers pick the settings up on their loops
        # The connection opened before the reload goes on, with the new settings.
        again = kept.request("GET", url)
        assert again.status == 200 and again.body == b"kept" and again.header("Via") == "1.1 edge"
    # Offline now: what is not cached is a 504, what is cached is served.
    assert proxy_exchange(lr.port, "GET", origin.url("/res/elsewhere")).status == 504
    assert proxy_exchange(lr.port, "GET", url).body == b"kept"
    # The restart-only key is still reported next time: it has not taken effect.
    outcome = json.loads(admin(lr, "POST", "/config/reload")[2])
    assert outcome == {"status": "applied", "applied": [], "needs_restart": ["cache.memory_capacity"]}


def test_invalid_configuration_is_rejected_whole(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    rewrite(lr, {"via_name": "changed", "cache": {"offlline": True}})
    status, _, body = admin(lr, "POST", "/config/reload")
    outcome = json.loads(body)
    assert status == 422 and outcome["status"] == "rejected"
    assert "cache.offlline" in outcome["error"] and "offline" in outcome["error"]  # with a suggestion
    wait_log(lr, "configuration reload rejected, the old configuration stays in force")
    assert proxy_exchange(lr.port, "GET", origin.url("/bytes/3")).header("Via") == "1.1 larder"
    assert admin(lr, "GET", "/config/reload")[0] == 405


def test_sighup_reloads(larder_factory, origin, workdir):
    lr = larder_factory()
    rewrite(lr, {"via_name": "hup"})
    os.kill(lr.pid, signal.SIGHUP)
    wait_log(lr, "configuration reloaded: applied via_name")
    time.sleep(0.1)
    assert proxy_exchange(lr.port, "GET", origin.url("/bytes/3")).header("Via") == "1.1 hup"
