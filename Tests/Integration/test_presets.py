"""Cache presets for package registries (cache.presets), with the real clients: apt-get and pip
fetch from small repositories generated here, served by an origin that sends no caching fields
(static_origin.py), through Larder. Nothing leaves the machine: every URL is 127.0.0.1."""

import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from helpers import (HERE, START_TIMEOUT, child_env, deep_merge, proxy_exchange, spawn, stop_process, to_yaml,
                     wait_for_file)
from registries import AptClient
from test_admin import ADMIN, admin, stats
from test_cache import script
from test_mirrors import get, origins, pki, pypi_like  # noqa: F401 (origins and pki are fixtures)
from wheel_backend import write_wheel

CLIENT_TIMEOUT = 60


class StaticOrigin:
    def __init__(self, workdir, root, name="static"):
        self.log_path = Path(workdir) / f"{name}.jsonl"
        self.proc = spawn([sys.executable, HERE / "static_origin.py", "--root", root, "--log", self.log_path],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        got = []
        t = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(START_TIMEOUT)
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", got[0].decode() if got else "")
        if not m:
            stop_process(self.proc, signal.SIGKILL, 5)
            raise AssertionError(f"static origin did not start: {got!r}")
        self.port = int(m.group(1))
        self.base = f"http://127.0.0.1:{self.port}"

    def url(self, path):
        return self.base + path

    def requests(self):
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]

    def stop(self):
        stop_process(self.proc, signal.SIGTERM, 5)


@pytest.fixture
def static_origin_factory(workdir):
    started = []

    def start(root, name="static"):
        o = StaticOrigin(workdir, root, name)
        started.append(o)
        return o

    yield start
    for o in started:
        o.stop()


def settled_records(path, lr, timeout=8.0):
    """Every record, once there is one for each request Larder has counted (the client has exited,
    so every request it made is answered; the log is handed over about once a second)."""
    requests = sum(stats(lr)["requests"].values())

    def records():
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    got = wait_for_file(path, lambda: len(records()) >= requests, timeout)
    assert got, f"{len(records())} access-log records for {requests} requests"
    return records()


def with_access_log(workdir, config):
    """An access log in JSON, and the admin endpoint (settled_records asks it how many requests came)."""
    log = workdir / "access.jsonl"
    return log, deep_merge({**ADMIN, "access_log": str(log), "access_log_format": "json"}, config)


def cache_status(resp):
    return resp.header("Cache-Status") or ""


# ---------------------------------------------------------------------------
# The presets' rules, through raw requests


@pytest.fixture
def mirror(workdir, static_origin_factory):
    """A tree shaped like a Debian mirror and a PyPI mirror, served without caching fields."""
    root = workdir / "mirror"
    files = {
        "debian/pool/main/h/hello/hello_1.0_all.deb": b"deb bytes",
        "debian/dists/stable/Release": b"Release v1\n",
        "debian/dists/stable/Release.gpg": b"signature v1\n",
        "simple/hello/index.html": b"<a href='/packages/aa/hello-1.0.tar.gz'>hello-1.0.tar.gz</a>\n",
        "packages/aa/hello-1.0.tar.gz": b"sdist bytes",
        "other/hello.deb": b"not in a pool",
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return static_origin_factory(root)


def twice(lr, url):
    first = proxy_exchange(lr.port, "GET", url)
    second = proxy_exchange(lr.port, "GET", url)
    assert first.status == 200 and second.status == 200 and first.body == second.body
    return cache_status(first), cache_status(second)


def test_without_presets_package_files_have_no_freshness(larder_factory, mirror):
    lr = larder_factory()
    first, second = twice(lr, mirror.url("/debian/pool/main/h/hello/hello_1.0_all.deb"))
    assert "detail=no-freshness" in first and "hit" not in second, second


def test_debian_preset_keeps_pool_files_and_indexes_but_not_detached_signatures(larder_factory, mirror):
    lr = larder_factory(config={"cache": {"presets": ["debian"]}})
    _, second = twice(lr, mirror.url("/debian/pool/main/h/hello/hello_1.0_all.deb"))
    assert second.startswith("larder; hit"), second
    _, second = twice(lr, mirror.url("/debian/dists/stable/Release"))
    assert second.startswith("larder; hit"), second  # fresh for a few minutes
    first, second = twice(lr, mirror.url("/debian/dists/stable/Release.gpg"))
    assert "stored" not in first and "hit" not in second, (first, second)
    # A .deb outside a pool is not the preset's business.
    _, second = twice(lr, mirror.url("/other/hello.deb"))
    assert "hit" not in second, second
    # A query plays no part in the match, but keys its own entry.
    _, second = twice(lr, mirror.url("/debian/pool/main/h/hello/hello_1.0_all.deb?x=1"))
    assert second.startswith("larder; hit"), second
    # An error answer is not forced fresh: the next request asks again.
    first, second = twice_status(lr, mirror.url("/debian/pool/main/h/hello/hello_2.0_all.deb"), 404)
    assert "hit" not in second, second


def twice_status(lr, url, status):
    first = proxy_exchange(lr.port, "GET", url)
    second = proxy_exchange(lr.port, "GET", url)
    assert first.status == status and second.status == status
    return cache_status(first), cache_status(second)


def test_users_rules_come_before_presets(larder_factory, mirror):
    lr = larder_factory(config={"cache": {"presets": ["debian", "pypi"],
                                          "rules": [{"path": "**/pool/**", "storage": "not-allowed"}]}})
    _, second = twice(lr, mirror.url("/debian/pool/main/h/hello/hello_1.0_all.deb"))
    assert "hit" not in second, second
    _, second = twice(lr, mirror.url("/packages/aa/hello-1.0.tar.gz"))
    assert second.startswith("larder; hit"), second


def test_presets_apply_on_reload(larder_factory, mirror):
    lr = larder_factory()
    url = mirror.url("/packages/aa/hello-1.0.tar.gz")
    _, second = twice(lr, url)
    assert "hit" not in second
    lr.config = deep_merge(lr.config, {"cache": {"presets": ["pypi"]}})
    lr.config_path.write_text(to_yaml(lr.config) + "\n")
    os.kill(lr.pid, signal.SIGHUP)
    assert lr.wait_for_log("configuration reloaded: applied .*cache.presets"), lr.log_text()[-2000:]
    _, second = twice(lr, url)
    assert second.startswith("larder; hit"), second


def entry_lifetime(lr, url):
    """The stored entry's `lifetime_from_current_rules` and `freshness_lifetime` (one variant)."""
    status, _, body = admin(lr, "GET", "/cache?url=" + urllib.parse.quote(url, safe=""))
    assert status == 200, body
    [variant] = json.loads(body)["variants"]
    return variant["lifetime_from_current_rules"], variant["freshness_lifetime"]


def test_an_entry_says_which_rule_gave_its_lifetime(larder_factory, mirror, origin, workdir):
    own = {"path_prefix": "/res/own-", "freshness": {"forced": "2h"}}
    lr = larder_factory(config={**ADMIN, "cache": {"presets": ["debian", "pypi"], "rules": [own]}})
    script(workdir, "own-a", headers=[("Cache-Control", "max-age=5")], body="a")
    script(workdir, "plain", headers=[("Cache-Control", "max-age=600")], body="p")
    sdist, deb = mirror.url("/packages/aa/hello-1.0.tar.gz"), mirror.url("/debian/pool/main/h/hello/hello_1.0_all.deb")
    mine, plain = origin.url("/res/own-a"), origin.url("/res/plain")
    for url in (sdist, deb, mine, plain):
        assert proxy_exchange(lr.port, "GET", url).status == 200

    source, stored = entry_lifetime(lr, sdist)
    # pypi's third rule; rules are counted from 0 in their own list (`larder presets show pypi`).
    assert source == {"source": "preset", "preset": "pypi", "rule": 2, "path": "**/packages/**.tar.gz",
                      "as_written": '{path: "**/packages/**.tar.gz", status: [200], freshness: {forced: 365d}}',
                      "lifetime": 365 * 86400, "heuristic": False}, source
    assert stored == 365 * 86400
    source, _ = entry_lifetime(lr, deb)
    assert (source["source"], source["preset"], source["rule"], source["path"]) == ("preset", "debian", 3, "**/pool/**.deb")
    source, stored = entry_lifetime(lr, mine)
    assert source == {"source": "rules", "rule": 0, "as_written": "{path_prefix: /res/own-, freshness: {forced: 2h}}",
                      "lifetime": 7200, "heuristic": False}, source
    assert stored == 7200
    source, stored = entry_lifetime(lr, plain)
    assert source == {"source": "origin", "lifetime": 600, "heuristic": False} and stored == 600, source

    # Worked out from the rules in force now: without the presets the sdist's own fields (none)
    # decide, while the entry keeps the lifetime it was stored with.
    lr.config = deep_merge(lr.config, {"cache": {"presets": ["debian"]}})
    lr.config_path.write_text(to_yaml(lr.config) + "\n")
    status, _, body = admin(lr, "POST", "/config/reload")
    assert status == 200 and json.loads(body)["applied"] == ["cache.presets"], body
    source, stored = entry_lifetime(lr, sdist)
    assert source == {"source": "origin", "lifetime": 0, "heuristic": False} and stored == 365 * 86400, source


def test_an_entry_fetched_through_a_mirror_names_the_preset_the_mirror_turned_on(larder_factory, pki, origins):
    # No cache.presets: the pypi mirror turns the pypi preset on, and the rules in force are
    # numbered as the cache applies them.
    lr, _, files = pypi_like(pki, origins, larder_factory, admin_listen="127.0.0.1:0")
    assert get(lr.port, "/pypi/files/packages/aa/six-1.0-py3-none-any.whl").status == 200
    source, stored = entry_lifetime(lr, f"{files.base}/packages/aa/six-1.0-py3-none-any.whl")
    assert (source["source"], source["preset"], source["rule"], source["path"]) == ("preset", "pypi", 0, "**/packages/**.whl")
    assert source["lifetime"] == stored == 365 * 86400, source


def test_unknown_preset_is_refused_with_the_known_names(larder_factory, workdir):
    lr = larder_factory(config={"cache": {"presets": ["debian", "debain"]}}, wait=False)
    assert lr.wait_exit(START_TIMEOUT) not in (0, None)
    log = lr.log_text()
    assert 'unknown preset "debain"' in log and "debian, pypi, npm" in log, log


def test_hostile_paths_against_every_preset(larder_factory, mirror):
    """Long paths full of near-matches, dot segments, encoded bytes: each gets its answer promptly
    (matching is linear), nothing is kept for long by accident, and Larder stays up."""
    lr = larder_factory(config={"cache": {"presets": ["debian", "pypi", "npm", "crates", "go", "maven", "rubygems",
                                                      "docker"]}})
    paths = [
        "/pool/" + "pool/" * 1000 + "x.deb",
        "/" + "a-" * 3000 + ".jar",
        "/v2/" + "blobs/" * 900 + "sha256:" + "0" * 64,
        "/debian/pool/../dists/stable/Release.gpg",
        "/debian/pool/%2e%2e/x.deb",
        "/-/" + "*" * 2000 + ".tgz",
        "/packages/" + "%00" * 1000 + ".whl",
    ]
    for path in paths:
        started = time.monotonic()
        resp = proxy_exchange(lr.port, "GET", mirror.url(path))
        assert resp.status in (200, 404) and time.monotonic() - started < 5, (path[:60], resp)
        assert "hit" not in cache_status(proxy_exchange(lr.port, "GET", mirror.url(path)))
    assert lr.proc.poll() is None


def test_presets_command_needs_no_files_beside_the_binary(workdir):
    """The presets are embedded: shown from a directory with no Config/ in it, as shipped."""
    from helpers import REPO_ROOT, larder_bin
    listed = subprocess.run([larder_bin(), "presets"], cwd=workdir, capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == ["debian", "pypi", "npm", "crates", "go", "maven", "rubygems", "docker"]
    for name in names:
        shown = subprocess.run([larder_bin(), "presets", "show", name], cwd=workdir, capture_output=True, timeout=30)
        assert shown.returncode == 0 and shown.stdout == (REPO_ROOT / f"Config/presets/{name}.yaml").read_bytes()
    unknown = subprocess.run([larder_bin(), "presets", "show", "debain"], cwd=workdir, capture_output=True,
                             text=True, timeout=30)
    assert unknown.returncode != 0 and 'unknown preset "debain"' in unknown.stderr


# ---------------------------------------------------------------------------
# apt-get


def build_debian_repository(root):
    """One package, larder-hello 1.0 (all), in pool/, with Packages, Packages.gz and an unsigned Release."""
    work = root.parent / "deb-build"
    (work / "DEBIAN").mkdir(parents=True)
    (work / "usr/share/larder-hello").mkdir(parents=True)
    (work / "usr/share/larder-hello/README").write_text("larder-hello, a package for a test repository\n" * 200)
    (work / "DEBIAN/control").write_text(
        "Package: larder-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: Larder tests <tests@larder.invalid>\n"
        "Description: test package\n a package built by the tests\n")
    deb = root / "pool/main/l/larder-hello/larder-hello_1.0_all.deb"
    deb.parent.mkdir(parents=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(work), str(deb)], check=True,
                   stdout=subprocess.DEVNULL, timeout=CLIENT_TIMEOUT)
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True,
                          timeout=CLIENT_TIMEOUT).stdout.strip()
    binary = root / f"dists/stable/main/binary-{arch}"
    binary.mkdir(parents=True)
    packages = subprocess.run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], cwd=root,
                              capture_output=True, check=True, timeout=CLIENT_TIMEOUT).stdout
    (binary / "Packages").write_bytes(packages)
    (binary / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    lines = []
    for name in ("Packages", "Packages.gz"):
        data = (binary / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} main/binary-{arch}/{name}")
    (root / "dists/stable/Release").write_text(
        "Origin: Larder tests\nLabel: Larder tests\nSuite: stable\nCodename: stable\n"
        f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S UTC', time.gmtime())}\n"
        f"Architectures: {arch}\nComponents: main\nSHA256:\n" + "\n".join(lines) + "\n")
    return deb


def run_apt(workdir, run, origin, proxy_port, more=None):
    """apt-get update and apt-get download through Larder, all of apt's state fresh."""
    apt = AptClient(workdir / f"apt-{run}", f"deb [trusted=yes] {origin.url('/debian')} stable main\n",
                    options={"Acquire::http::Proxy": f"http://127.0.0.1:{proxy_port}",
                             "APT::Get::AllowUnauthenticated": "true", **(more or {})})
    apt.update()
    apt.download("larder-hello")
    return apt.out / "larder-hello_1.0_all.deb"


@pytest.mark.timeout_s(180)
def test_apt_get_second_run_comes_from_the_cache(larder_factory, static_origin_factory, workdir):
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb") and shutil.which("dpkg-scanpackages")):
        pytest.skip("apt-get, dpkg-deb or dpkg-scanpackages is not installed")
    root = workdir / "repo/debian"
    deb = build_debian_repository(root)
    origin = static_origin_factory(workdir / "repo")
    log, config = with_access_log(workdir, {"cache": {"presets": ["debian"]}})
    lr = larder_factory(config=config)

    first = run_apt(workdir, 1, origin, lr.port)
    first_records = settled_records(log, lr)
    assert first_records, "apt-get did not go through Larder"
    origin_count = len(origin.requests())
    second = run_apt(workdir, 2, origin, lr.port)
    records = settled_records(log, lr)[len(first_records):]

    assert first.read_bytes() == deb.read_bytes() == second.read_bytes()
    assert all(r["url"].startswith(origin.base) for r in records)
    by_url = {r["url"].removeprefix(origin.base): r for r in records}
    package = by_url["/debian/pool/main/l/larder-hello/larder-hello_1.0_all.deb"]
    assert package["cache"] == "hit" and package["status"] == 200, package
    # apt asks for its indexes with "Cache-Control: max-age=0" every time; the preset's index rules
    # ignore that reload for five minutes, so the second run is all hits but for the detached
    # signature, which is never kept (it must never outlive the Release it was made for).
    hits = [r for r in records if r["cache"] == "hit"]
    again = [r for r in origin.requests()[origin_count:]]
    misses = [u for u, r in sorted(by_url.items()) if r["cache"] != "hit"]
    print(f"apt second run: {len(records)} requests, {len(hits)} hits; "
          + ", ".join(f"{u} {r['status']} {r['cache']}" for u, r in sorted(by_url.items())))
    assert misses == ["/debian/dists/stable/Release.gpg"], records
    assert [r["path"] for r in again] == ["/debian/dists/stable/Release.gpg"], again


# ---------------------------------------------------------------------------
# pip


def build_wheel(directory):
    """larder_hello-1.0-py3-none-any.whl, written by hand: no build tools, no network."""
    source = b"GREETING = 'hello from a test wheel'\n" + b"# padding\n" * 500
    return Path(write_wheel(directory, "larder-hello", "1.0", {"larder_hello/__init__.py": source}))


def run_pip(workdir, run, origin, proxy_port):
    out = workdir / f"pip-{run}"
    out.mkdir()
    env = {**child_env(), "PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INPUT": "1", "HOME": str(workdir)}
    env = {k: v for k, v in env.items() if not (k.startswith("PIP_") and k not in ("PIP_CONFIG_FILE", "PIP_NO_INPUT"))}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--isolated", "--disable-pip-version-check", "--no-cache-dir",
         "--no-deps", "--index-url", origin.url("/simple"), "--proxy", f"http://127.0.0.1:{proxy_port}",
         "--retries", "0", "--timeout", "20", "-d", str(out), "larder-hello"],
        env=env, capture_output=True, text=True, timeout=CLIENT_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"pip download: {done.stdout}\n{done.stderr}"
    return out / "larder_hello-1.0-py3-none-any.whl"


@pytest.mark.timeout_s(120)
def test_pip_second_run_comes_from_the_cache(larder_factory, static_origin_factory, workdir):
    root = workdir / "pypi"
    wheel = build_wheel(root / "packages/3f/a1")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (root / "simple/larder-hello").mkdir(parents=True)
    (root / "simple/larder-hello/index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n"
        f'<a href="../../packages/3f/a1/{wheel.name}#sha256={digest}">{wheel.name}</a>\n</body></html>\n')
    origin = static_origin_factory(root)
    log, config = with_access_log(workdir, {"cache": {"presets": ["pypi"]}})
    lr = larder_factory(config=config)

    first = run_pip(workdir, 1, origin, lr.port)
    first_records = settled_records(log, lr)
    assert any(r["url"].endswith(".whl") for r in first_records), f"pip did not go through Larder: {first_records}"
    origin_count = len(origin.requests())
    second = run_pip(workdir, 2, origin, lr.port)
    records = settled_records(log, lr)[len(first_records):]

    assert first.read_bytes() == wheel.read_bytes() == second.read_bytes()
    hits = [r for r in records if r["cache"] == "hit"]
    print(f"pip second run: {len(records)} requests, {len(hits)} hits; "
          + ", ".join(f"{r['url'].removeprefix(origin.base)} {r['status']} {r['cache']}" for r in records))
    wheels = [r for r in records if r["url"].endswith(".whl")]
    assert wheels and all(r["cache"] == "hit" for r in wheels), records
    # pip asks for the index page with "max-age=0"; the preset ignores that reload for five minutes.
    assert records and len(hits) == len(records), records
    assert not any(r["path"].endswith(".whl") for r in origin.requests()[origin_count:])
