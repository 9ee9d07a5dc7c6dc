"""The command line as an operator meets it: ``--version``, every subcommand's ``--help`` (help
only: nothing run, checked, read or written, and only the command's own flags), and
``larder healthcheck`` finding the admin endpoint in the configuration file however it is named."""

import json
import re
import subprocess

import pytest

from helpers import child_env, free_port, larder_bin
from test_admin import admin

# Each subcommand and the flags its help lists; a subcommand missing here fails
# test_every_subcommand_is_listed_here, so a new one gets its help checked too.
BOTH = {"--version", "--help"}
FLAGS = {
    "run": {"--config", "--listen", "--admin-listen", "--cache-dir", "--workers", "--reverse-origin", "--log-level",
            "--access-log", "--ca-file", "--ephemeral"},
    "check-config": {"--config"},
    "config-keys": set(),
    "metrics": set(),
    "warm": {"--proxy", "--concurrency", "--cache-dir", "--config", "--timeout", "--cache-name"},
    "healthcheck": {"--admin", "--config", "--timeout"},
    "passwd": {"--scheme", "--cost"},
    "ca": set(),
    "ca init": {"--config", "--dir", "--key-type", "--force"},
    "presets": set(),
    "presets list": set(),
    "presets show": set(),
    "version": set(),
}


def larder(*args, env=None, cwd=None, timeout=20):
    return subprocess.run([larder_bin(), *map(str, args)], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={**child_env(), **(env or {})}, cwd=cwd, timeout=timeout)


def listed_flags(help_text):
    return set(re.findall(r"(?m)^  (?:-\w, )?(--[a-z][a-z-]*)", help_text))


def subcommands(help_text):
    section = help_text.split("SUBCOMMANDS:", 1)[1]
    return [m.group(1) for m in re.finditer(r"(?m)^  ([a-z][a-z-]*)", section)]


def test_version_flag_and_command_print_the_version_the_admin_endpoint_reports(larder_factory):
    flag = larder("--version")
    assert flag.returncode == 0 and flag.stderr == "", flag
    assert re.fullmatch(r"larder \d+\.\d+\.\d+\n", flag.stdout), flag.stdout
    command = larder("version")
    assert command.returncode == 0 and command.stdout == flag.stdout, command
    # One version string: the admin endpoint's /stats and larder_build_info say the same.
    lr = larder_factory(config={"admin_listen": "127.0.0.1:0"})
    status, _, body = admin(lr, "GET", "/stats")
    assert status == 200 and json.loads(body)["version"] == flag.stdout.split()[1]


def test_every_subcommand_is_listed_here():
    top = larder("--help")
    assert top.returncode == 0, top
    assert set(subcommands(top.stdout)) == {name for name in FLAGS if " " not in name}, top.stdout
    for group in ("ca", "presets"):
        out = larder(group, "--help").stdout
        assert {f"{group} {name}" for name in subcommands(out)} == {n for n in FLAGS if n.startswith(group + " ")}, out


@pytest.mark.parametrize("command", sorted(FLAGS))
@pytest.mark.parametrize("form", ["--help", "help"])
def test_help_prints_only_help_and_only_the_commands_own_flags(command, form, tmp_path):
    """``larder warm --help`` used to check its arguments too and print a usage error beside the
    help; ``larder ca init --help`` listed the proxy's flags (--listen, --workers...), which it
    does not read. Help needs no configuration (LARDER_CONFIG names a file that is not there) and
    touches nothing (it runs in an empty directory that must stay empty)."""
    words = command.split()
    args = ["help", *words] if form == "help" else [*words, "--help"]
    work = tmp_path / "cwd"
    work.mkdir()
    r = larder(*args, env={"LARDER_CONFIG": str(tmp_path / "missing.yaml")}, cwd=work)
    assert r.returncode == 0, r
    assert r.stderr == "", r.stderr
    assert r.stdout.startswith("OVERVIEW: ") and f"USAGE: larder {command}" in r.stdout, r.stdout
    assert listed_flags(r.stdout) == FLAGS[command] | BOTH, r.stdout
    assert list(work.iterdir()) == []


def test_warm_help_with_bad_arguments_is_still_only_help(tmp_path):
    r = larder("warm", "--concurrency", "500", "--help", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout.startswith("OVERVIEW: "), r


def test_warm_usage_errors_still_exit_2_with_the_reason(tmp_path):
    r = larder("warm", "-", "--concurrency", "500", cwd=tmp_path)
    assert r.returncode == 2 and "--concurrency must be 1 to 64" in r.stderr, r


# ---------------------------------------------------------------------------
# healthcheck


def admin_on_a_fixed_port(larder_factory):
    """A Larder whose admin port is written only in its configuration file (not on its command
    line), as a container's HEALTHCHECK finds it."""
    port = free_port()
    lr = larder_factory(config={"admin_listen": f"127.0.0.1:{port}"})
    assert lr.admin_port == port
    return lr, port


@pytest.mark.parametrize("naming", ["--config", "LARDER_CONFIG"])
def test_healthcheck_finds_the_admin_endpoint_in_the_configuration_file(larder_factory, naming):
    lr, port = admin_on_a_fixed_port(larder_factory)
    if naming == "--config":
        r = larder("healthcheck", "--config", lr.config_path)
    else:
        r = larder("healthcheck", env={"LARDER_CONFIG": str(lr.config_path)})
    assert r.returncode == 0, r
    assert r.stderr == ""


def test_healthcheck_fails_when_the_file_names_an_endpoint_nobody_answers(tmp_path):
    config = tmp_path / "elsewhere.yaml"
    port = free_port()
    config.write_text(f"admin_listen: 127.0.0.1:{port}\n")
    r = larder("healthcheck", "--config", config)
    assert r.returncode == 1 and f"127.0.0.1:{port}" in r.stderr, r


def test_healthcheck_flag_and_environment_override_the_file(larder_factory, tmp_path):
    lr, port = admin_on_a_fixed_port(larder_factory)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(f"admin_listen: 127.0.0.1:{free_port()}\n")
    assert larder("healthcheck", "--config", wrong, "--admin", f"127.0.0.1:{port}").returncode == 0
    assert larder("healthcheck", "--config", wrong, env={"LARDER_ADMIN_LISTEN": f"127.0.0.1:{port}"}).returncode == 0
    # A wildcard admin_listen is asked on loopback.
    wildcard = tmp_path / "wildcard.yaml"
    wildcard.write_text(f"admin_listen: 0.0.0.0:{port}\nadmin_token: a-long-enough-admin-token\n")
    assert larder("healthcheck", "--config", wildcard).returncode == 0


@pytest.mark.parametrize("text, message", [
    ("admin_listen: off\n", "the admin endpoint is off"),
    ("admin_listen: 127.0.0.1:0\n", "picks its port at start"),
    ("workers: many\n", "workers"),
])
def test_healthcheck_says_why_it_cannot_ask(tmp_path, text, message):
    config = tmp_path / "c.yaml"
    config.write_text(text)
    r = larder("healthcheck", "--config", config)
    assert r.returncode == 1 and message in r.stderr, r


def test_healthcheck_reaches_an_ipv6_admin_endpoint(larder_factory):
    port = free_port()
    lr = larder_factory(config={"admin_listen": f"[::1]:{port}"})
    assert lr.wait_for_log(rf"admin endpoint listening on \[::1\]:{port}"), lr.log_text()
    r = larder("healthcheck", "--config", lr.config_path)
    assert r.returncode == 0, r


def test_check_config_reads_larder_config_like_the_other_commands(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("workers: 2\n")
    r = larder("check-config", env={"LARDER_CONFIG": str(config)})
    assert r.returncode == 0 and f"{config}: OK" in r.stdout, r
    r = larder("check-config")
    assert r.returncode == 2 and "LARDER_CONFIG" in r.stderr, r
