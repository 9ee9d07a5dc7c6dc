"""Larder's own interception CA is configuration, not cache: it lives in ``tls.intercept_ca_dir``,
apart from ``cache_dir``. A cache wiped or moved aside keeps it, one kept in ``cache_dir/ca`` by
earlier versions is moved out, a damaged one stops Larder instead of being replaced, and only
``larder ca init --force`` makes a new one where one exists. The certificate clients import is
readable by them (0644, in a 0755 directory); the key is not (0600)."""

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from helpers import curl, larder_bin
from test_tls import PKI, fingerprint, origin_with, pki, servers  # noqa: F401 (fixtures)

CERT, KEY = "larder-ca.pem", "larder-ca-key.pem"


def intercepting(pki, origin):
    return {"workers": 1, "connect_ports": [origin.port], "tls": {"ca_file": str(pki.ca), "intercept": ["localhost"]}}


def fetch_through(lr, origin, trusted, path):
    """An intercepted https fetch by a client that trusts ``trusted``; the curl result."""
    return curl("--proxy", f"http://127.0.0.1:{lr.port}", "--cacert", trusted,
                f"https://localhost:{origin.port}{path}", "-D", "-")


def generated_ca(lr):
    """The certificate path the start log names as generated, or None."""
    m = lr.wait_for_log(r"generated a CA in (\S+?\.pem)", timeout=0)
    return Path(m.group(1)) if m else None


def ca_init(*args, env=None):
    return subprocess.run([larder_bin(), "ca", "init", *map(str, args)], capture_output=True, text=True,
                          timeout=60, env=env)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("how", ["wiped", "moved-aside"])
def test_the_ca_survives_a_cache_wiped_or_moved_aside(larder_factory, pki, servers, workdir, how):
    origin = origin_with(servers, *pki.leaf("good"))
    lr = larder_factory(config=intercepting(pki, origin))
    ca = generated_ca(lr)
    assert ca is not None, lr.log_text()
    # A client imports the certificate once and keeps trusting that one.
    trusted = workdir / "client-trusts.pem"
    shutil.copy(ca, trusted)
    before = fingerprint(trusted)
    r = fetch_through(lr, origin, trusted, "/first")
    assert r.returncode == 0 and b"body of /first" in r.stdout, r.stderr
    assert lr.stop() == 0

    if how == "wiped":
        shutil.rmtree(lr.cache_dir)
    else:
        data = lr.cache_dir / "data.mdb"
        os.truncate(data, data.stat().st_size // 2)
    again = larder_factory(name=lr.name, config=intercepting(pki, origin))
    if how == "moved-aside":
        assert "moved to" in again.log_text(), again.log_text()
    assert "generated a CA" not in again.log_text(), again.log_text()
    assert fingerprint(ca) == before
    assert again.wait_for_log(rf"interception: CA {re.escape(str(ca))}, SHA-256 {before}"), again.log_text()
    r = fetch_through(again, origin, trusted, "/second")
    assert r.returncode == 0 and b"body of /second" in r.stdout, r.stderr
    assert origin.paths == ["/first", "/second"]
    assert not ca.is_relative_to(lr.cache_dir), "the CA is configuration: never in the cache directory"


def test_a_ca_kept_in_the_cache_directory_by_an_earlier_version_is_copied_out(larder_factory, pki, servers, workdir):
    origin = origin_with(servers, *pki.leaf("good"))
    name = "upgraded"
    cache_dir, ca_dir = workdir / f"{name}-cache", workdir / f"{name}-ca"
    legacy = cache_dir / "ca"
    made = ca_init("--dir", legacy)
    assert made.returncode == 0, made.stderr
    trusted = workdir / "client-trusts.pem"
    shutil.copy(legacy / CERT, trusted)
    key_text = (legacy / KEY).read_text()

    lr = larder_factory(name=name, config=intercepting(pki, origin))
    log = lr.log_text()
    assert f"copied the CA from {legacy / CERT} to {ca_dir / CERT}" in log, log
    assert "generated a CA" not in log
    assert fingerprint(ca_dir / CERT) == fingerprint(trusted)
    assert (ca_dir / KEY).read_text() == key_text
    assert (mode(ca_dir), mode(ca_dir / CERT), mode(ca_dir / KEY)) == (0o755, 0o644, 0o600)
    # The copy in the cache stays, with a note saying where the CA is now.
    assert fingerprint(legacy / CERT) == fingerprint(trusted) and str(ca_dir / CERT) in (legacy / "MOVED.txt").read_text()
    r = fetch_through(lr, origin, trusted, "/after-upgrade")
    assert r.returncode == 0 and b"body of /after-upgrade" in r.stdout, r.stderr

    # The next start uses the CA directory's and copies nothing.
    assert lr.stop() == 0
    again = larder_factory(name=name, config=intercepting(pki, origin))
    assert "copied the CA" not in again.log_text() and "generated a CA" not in again.log_text()
    assert "still holds the copy of this CA" in again.log_text(), again.log_text()

    # A CA directory lost (a container re-created without a volume for it) is copied again, not replaced.
    assert again.stop() == 0
    shutil.rmtree(ca_dir)
    third = larder_factory(name=name, config=intercepting(pki, origin))
    assert "copied the CA" in third.log_text() and "generated a CA" not in third.log_text()
    assert fingerprint(ca_dir / CERT) == fingerprint(trusted)


def test_the_ca_files_are_readable_by_clients_and_the_key_by_larder_only(larder_factory, pki, servers):
    origin = origin_with(servers, *pki.leaf("good"))
    old = os.umask(0o077)  # even under a strict umask, inherited by Larder
    try:
        lr = larder_factory(config=intercepting(pki, origin))
    finally:
        os.umask(old)
    ca = generated_ca(lr)
    assert ca is not None, lr.log_text()
    assert (mode(ca.parent), mode(ca), mode(ca.parent / KEY)) == (0o755, 0o644, 0o600)


def _another_ca(workdir):
    other = workdir / "other"
    assert ca_init("--dir", other).returncode == 0
    return other


DAMAGE = {
    "certificate without its key": lambda d, w: (d / KEY).unlink(),
    "key without its certificate": lambda d, w: (d / CERT).unlink(),
    "unparsable certificate": lambda d, w: (d / CERT).write_text("-----BEGIN CERTIFICATE-----\nnot base64\n"),
    "empty key": lambda d, w: (d / KEY).write_text(""),
    "key of another CA": lambda d, w: shutil.copy(_another_ca(w) / KEY, d / KEY),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_ca_stops_larder_and_is_never_replaced(larder_factory, pki, servers, workdir, damage):
    origin = origin_with(servers, *pki.leaf("good"))
    ca_dir = workdir / "damaged-ca"
    assert ca_init("--dir", ca_dir).returncode == 0
    DAMAGE[damage](ca_dir, workdir)
    before = {p.name: p.read_bytes() for p in ca_dir.iterdir()}

    lr = larder_factory(name="damaged", config=intercepting(pki, origin), wait=False)
    assert lr.wait_exit(30) not in (None, 0), lr.log_text()
    log = lr.log_text()
    assert "interception CA" in log and str(ca_dir) in log and "larder ca init --force" in log, log
    assert "generated a CA" not in log
    assert {p.name: p.read_bytes() for p in ca_dir.iterdir()} == before, "the damaged CA must be left as it was"


def test_half_a_ca_left_in_the_cache_directory_stops_larder(larder_factory, pki, servers, workdir):
    origin = origin_with(servers, *pki.leaf("good"))
    legacy = workdir / "half-cache" / "ca"
    assert ca_init("--dir", legacy).returncode == 0
    (legacy / CERT).unlink()
    lr = larder_factory(name="half", config=intercepting(pki, origin), wait=False)
    assert lr.wait_exit(30) not in (None, 0), lr.log_text()
    assert f"{legacy} holds {KEY} without {CERT}" in lr.log_text(), lr.log_text()
    assert not (workdir / "half-ca").exists() and (legacy / KEY).exists()


def test_ca_init_writes_where_larder_looks_and_replaces_only_with_force(workdir):
    cache_dir, ca_dir = workdir / "c", workdir / "state" / "ca"
    config = workdir / "larder.yaml"
    config.write_text(f"cache_dir: {cache_dir}\ntls:\n  intercept_ca_dir: {ca_dir}\n")
    first = ca_init("--config", config)
    assert first.returncode == 0, first.stderr
    assert str(ca_dir / CERT) in first.stdout and not cache_dir.exists()
    before = fingerprint(ca_dir / CERT)
    assert (mode(ca_dir), mode(ca_dir / CERT), mode(ca_dir / KEY)) == (0o755, 0o644, 0o600)

    again = ca_init("--config", config)
    assert again.returncode != 0 and "--force" in again.stderr and fingerprint(ca_dir / CERT) == before
    (ca_dir / CERT).unlink()  # half a CA is still one not to overwrite
    again = ca_init("--config", config)
    assert again.returncode != 0 and "--force" in again.stderr and not (ca_dir / CERT).exists()
    shutil.rmtree(ca_dir)

    # One an earlier version kept in cache_dir/ca counts: Larder would move it here at its next start.
    assert ca_init("--dir", cache_dir / "ca").returncode == 0
    legacy = fingerprint(cache_dir / "ca" / CERT)
    refused = ca_init("--config", config)
    assert refused.returncode != 0 and str(cache_dir / "ca") in refused.stderr and "--force" in refused.stderr
    assert not ca_dir.exists()
    forced = ca_init("--config", config, "--force")
    assert forced.returncode == 0, forced.stderr
    assert fingerprint(ca_dir / CERT) != legacy and not (cache_dir / "ca" / CERT).exists()
