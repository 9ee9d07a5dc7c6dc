"""Ephemeral mode (``--ephemeral``, ``cache.ephemeral: true``): the memory tier only. No cache
directory is created or locked, nothing is written to disk, responses up to
``memory_max_object_size`` are kept, larger ones forwarded unstored, and a restart starts empty."""

import json
import os
import subprocess

from helpers import larder_bin, proxy_exchange
from test_cache import cache_status
from test_security_admin import ask

ADMIN = {"admin_listen": "127.0.0.1:0"}


def files_under(path):
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]


def test_hits_work_and_nothing_reaches_the_disk(larder_factory, origin, workdir):
    lr = larder_factory(config={**ADMIN, "cache": {"memory_max_object_size": "64KiB"}}, args=["--ephemeral"])
    assert not lr.cache_dir.exists()
    assert lr.wait_for_log(r"ephemeral cache \(cache\.ephemeral\): memory only, \d+ bytes, responses up to 65536 bytes")
    assert "cache in " not in lr.log_text()

    url = origin.url("/unique/1/4096")
    first = proxy_exchange(lr.port, "GET", url)
    assert first.status == 200 and "stored" in cache_status(first)
    second = proxy_exchange(lr.port, "GET", url)
    assert "hit" in cache_status(second) and second.body == first.body
    assert len(origin.requests()) == 1

    # Larger than memory_max_object_size: forwarded, never stored; chunked too.
    for big in (origin.url("/unique/2/70000"), origin.url("/chunked/70000")):
        for _ in range(2):
            r = proxy_exchange(lr.port, "GET", big)
            assert r.status == 200 and len(r.body) == 70000 and "hit" not in cache_status(r)
    assert len(origin.requests()) == 5

    status = ask(lr.admin_port, "GET", "/stats")
    s = json.loads(status.body)
    assert s["cache_ephemeral"] == 1 and s["cache_entries"]["disk"] == 0 and s["cache_entries"]["memory"] == 1
    assert s["lmdb_map_size_bytes"] == 0
    metrics = ask(lr.admin_port, "GET", "/metrics").body.decode()
    assert "larder_cache_ephemeral 1" in metrics
    assert "s.cache_ephemeral" in ask(lr.admin_port, "GET", "/").body.decode()

    # Purging works without a disk.
    assert ask(lr.admin_port, "DELETE", "/cache?url=" + url).status == 200
    assert "hit" not in cache_status(proxy_exchange(lr.port, "GET", url))

    assert lr.stop() == 0
    assert not lr.cache_dir.exists(), files_under(lr.cache_dir)
    assert not any(p.name.startswith("larder1-cache") for p in workdir.iterdir())


def test_a_restart_starts_empty(larder_factory, origin):
    url = origin.url("/unique/7/100")
    for name in ("first", "second"):
        lr = larder_factory(config={"cache": {"ephemeral": True}}, name="eph")
        r = proxy_exchange(lr.port, "GET", url)
        assert "stored" in cache_status(r), (name, cache_status(r))
        assert "hit" in cache_status(proxy_exchange(lr.port, "GET", url))
        assert lr.stop() == 0
        assert not lr.cache_dir.exists()
    assert len(origin.requests()) == 2


def test_two_ephemeral_larders_may_name_the_same_directory(larder_factory, origin):
    # Nothing is locked: the directory is never used.
    a = larder_factory(args=["--ephemeral"], name="same")
    b = larder_factory(args=["--ephemeral"], name="same", config={"log_level": "info"})
    assert a.proc.poll() is None and b.proc.poll() is None
    assert not a.cache_dir.exists()


def test_a_non_ephemeral_larder_still_uses_its_directory(larder_factory):
    lr = larder_factory(config=ADMIN)
    assert (lr.cache_dir / "data.mdb").exists()
    assert json.loads(ask(lr.admin_port, "GET", "/stats").body)["cache_ephemeral"] == 0


def test_interception_uses_the_ca_directory_and_never_the_cache_directory(larder_factory, workdir):
    """The CA is configuration, not cache: an ephemeral Larder keeps its own in tls.intercept_ca_dir
    (generated on first use, the same one after a restart) and creates nothing under cache_dir."""
    lr = larder_factory(config={"tls": {"intercept": ["localhost"]}}, args=["--ephemeral"])
    assert lr.wait_for_log(r"interception on for localhost")
    made = lr.wait_for_log(r"generated a CA in (\S+?\.pem) \(SHA-256 (\w+)\)")
    assert made and made.group(1) == str(lr.ca_dir / "larder-ca.pem"), lr.log_text()
    assert lr.stop() == 0
    assert not lr.cache_dir.exists()

    again = larder_factory(name=lr.name, config={"tls": {"intercept": ["localhost"]}}, args=["--ephemeral"])
    assert again.wait_for_log(rf"interception: CA \S+, SHA-256 {made.group(2)}"), again.log_text()
    assert "generated a CA" not in again.log_text()

    # A given one works as before.
    ca = workdir / "ca"
    made = subprocess.run([larder_bin(), "ca", "init", "--dir", str(ca)], capture_output=True, timeout=30)
    assert made.returncode == 0, made.stderr
    lr = larder_factory(name="given", args=["--ephemeral"], config={"tls": {
        "intercept": ["localhost"], "intercept_ca_certificate": str(ca / "larder-ca.pem"),
        "intercept_ca_key": str(ca / "larder-ca-key.pem")}})
    assert lr.wait_for_log(r"interception on for localhost")
    assert lr.stop() == 0
    assert not lr.cache_dir.exists() and not lr.ca_dir.exists()
