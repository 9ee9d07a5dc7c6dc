"""Configuration reload (POST /config/reload and SIGHUP): what can change in a running proxy
changes for new requests without dropping connections or the cache; what cannot is reported;
an invalid file is rejected whole and the old configuration stays."""

import json
import os
import signal

from helpers import RawClient, concurrently, deep_merge, proxy_exchange, to_yaml
from test_admin import ADMIN, admin, stats
from test_cache import script
from test_tls import fingerprint, peer_certificate_fingerprint, pki  # noqa: F401 (pki is a fixture)


def rewrite(lr, changes):
    lr.config = deep_merge(lr.config, changes)
    lr.config_path.write_text(to_yaml(lr.config) + "\n")


def wait_log(lr, text, timeout=5.0):
    lr.wait_for_text(text, timeout)


def test_reload_applies_live_keys_and_reports_the_rest(larder_factory, origin, workdir):
    lr = larder_factory(config=ADMIN)
    script(workdir, "rl", headers=[("Cache-Control", "max-age=600")], body="kept")
    url = origin.url("/res/rl")
    proxy_exchange(lr.port, "GET", url)
    with RawClient(lr.port) as kept:
        first = kept.request("GET", url)
        assert first.header("Via") == "1.1 larder"
        status, _, body = admin(lr, "POST", "/config/reload")
        assert status == 200 and json.loads(body) == {"status": "unchanged", "applied": [], "needs_restart": [],
                                                      "failed": []}

        rewrite(lr, {"via_name": "edge", "cache": {"offline": True, "memory_capacity": "32MiB"}})
        status, _, body = admin(lr, "POST", "/config/reload")
        outcome = json.loads(body)
        # Not "applied": the memory capacity is not in force until a restart.
        assert status == 200 and outcome["status"] == "partly applied", body
        assert outcome["applied"] == ["via_name", "cache.offline"]
        assert outcome["needs_restart"] == ["cache.memory_capacity"]
        wait_log(lr, "configuration partly applied: applied via_name, cache.offline; "
                     "needs a restart to change: cache.memory_capacity")
        # The reload was answered once every worker had applied it: the connection opened before
        # it goes on, with the new settings.
        again = kept.request("GET", url)
        assert again.status == 200 and again.body == b"kept" and again.header("Via") == "1.1 edge"
    # Offline now: what is not cached is a 504, what is cached is served.
    assert proxy_exchange(lr.port, "GET", origin.url("/res/elsewhere")).status == 504
    assert proxy_exchange(lr.port, "GET", url).body == b"kept"
    # The restart-only key is still reported next time: it has not taken effect.
    outcome = json.loads(admin(lr, "POST", "/config/reload")[2])
    assert outcome == {"status": "not applied", "applied": [], "needs_restart": ["cache.memory_capacity"], "failed": []}
    wait_log(lr, "configuration not applied: needs a restart to change: cache.memory_capacity")
    # What is in force: the new live values, the old restart-only one.
    cfg = json.loads(admin(lr, "GET", "/config")[2])
    assert (cfg["via_name"], cfg["cache.offline"], cfg["cache.memory_capacity"]) == ("edge", True, "64MiB")


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
    # Logged once every worker has applied it.
    wait_log(lr, "configuration reloaded: applied via_name")
    assert proxy_exchange(lr.port, "GET", origin.url("/bytes/3")).header("Via") == "1.1 hup"


def test_a_reload_is_answered_only_once_every_worker_applied_it(larder_factory, origin, workdir):
    # Many workers, and a request on new connections right after each answer: SO_REUSEPORT spreads
    # them over the workers, and every one must already see the new configuration.
    lr = larder_factory(config={**ADMIN, "workers": 4})
    url = origin.url("/bytes/3")
    for n in range(6):
        name = f"edge{n}"
        rewrite(lr, {"via_name": name})
        status, _, body = admin(lr, "POST", "/config/reload")
        assert status == 200 and json.loads(body)["applied"] == ["via_name"], body
        vias = concurrently(16, lambda i: proxy_exchange(lr.port, "GET", url).header("Via"))
        assert vias == [f"1.1 {name}"] * 16, (n, vias)
    # SIGHUP: the log line (the seventh such) comes once every worker has applied it.
    rewrite(lr, {"via_name": "hupped"})
    os.kill(lr.pid, signal.SIGHUP)
    assert lr.wait_for_count("configuration reloaded: applied via_name", 7) == 7, lr.log_text()[-2000:]
    vias = concurrently(16, lambda i: proxy_exchange(lr.port, "GET", url).header("Via"))
    assert vias == ["1.1 hupped"] * 16, vias


def test_sighup_reports_what_waits_for_a_restart(larder_factory, origin):
    lr = larder_factory(config=ADMIN)
    rewrite(lr, {"via_name": "hup2", "workers": 1})
    os.kill(lr.pid, signal.SIGHUP)
    wait_log(lr, "configuration partly applied: applied via_name; needs a restart to change: workers")
    assert proxy_exchange(lr.port, "GET", origin.url("/bytes/3")).header("Via") == "1.1 hup2"
    rewrite(lr, {"workers": 3})
    os.kill(lr.pid, signal.SIGHUP)
    wait_log(lr, "configuration not applied: needs a restart to change: workers")
    assert lr.count_in_log("configuration reloaded: applied") == 0
    assert json.loads(admin(lr, "GET", "/config")[2])["workers"] == 2


def test_a_reload_names_the_presets_it_puts_in_force(larder_factory):
    lr = larder_factory(config=ADMIN)
    assert stats(lr)["presets"] == []
    rewrite(lr, {"cache": {"presets": ["npm", "pypi"]}})
    status, _, body = admin(lr, "POST", "/config/reload")
    assert status == 200 and json.loads(body)["status"] == "applied", body
    wait_log(lr, "cache presets in force: npm, pypi")
    assert stats(lr)["presets"] == ["npm", "pypi"]


def test_a_certificate_that_does_not_load_is_not_reported_applied(larder_factory, pki, workdir):
    cert, key = pki.leaf("proxy-a")
    lr = larder_factory(config={**ADMIN, "workers": 1,
                                "tls": {"listen": ["127.0.0.1:0"], "certificate_file": str(cert), "key_file": str(key)}},
                        listeners=2)
    tls_port = lr.ports[1]
    broken = workdir / "broken.pem"
    broken.write_text("not a certificate\n")
    rewrite(lr, {"via_name": "certs", "tls": {"certificate_file": str(broken)}})
    status, _, body = admin(lr, "POST", "/config/reload")
    outcome = json.loads(body)
    assert status == 200 and outcome["status"] == "partly applied" and outcome["applied"] == ["via_name"], body
    [failure] = outcome["failed"]
    assert failure["keys"] == ["tls.certificate_file", "tls.key_file"] and "the old one stays in use" in failure["error"]
    wait_log(lr, "configuration partly applied: applied via_name; TLS certificate not reloaded, the old one stays in use")
    # The old certificate is served, and named as in force.
    assert json.loads(admin(lr, "GET", "/config")[2])["tls.certificate_file"] == str(cert)
    assert peer_certificate_fingerprint(tls_port, pki.ca) == fingerprint(cert)
    # Back to the good file: nothing changed in force, and the certificate is read again.
    rewrite(lr, {"tls": {"certificate_file": str(cert)}})
    outcome = json.loads(admin(lr, "POST", "/config/reload")[2])
    assert outcome["status"] == "unchanged" and outcome["failed"] == [], outcome
    wait_log(lr, "TLS certificate reloaded from")  # the log reader may lag the answer
