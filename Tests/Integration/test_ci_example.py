"""Config/examples/ci-cache.yaml, the file a CI farm copies, started as it is: only the listen
addresses and the cache directory are overridden on the command line (this machine's test ports
and scratch space), and the admin token comes from LARDER_ADMIN_TOKEN as its comments say.

Its log level is notice, and the operator still sees where Larder listens; with the file's
placeholder token Larder refuses to start and says what to set; its cache is sized for package
files of several GB."""

import json
import re
import subprocess
import threading

from helpers import REPO_ROOT, child_env, larder_bin, spawn, stop_process, wait_process
from test_security_admin import ask

EXAMPLE = REPO_ROOT / "Config" / "examples" / "ci-cache.yaml"
TOKEN = "ci-cache-test-0123456789abcdef"


class ExampleLarder:
    """The binary on the example file; its standard error read line by line in a thread."""

    def __init__(self, tmp_path, env, admin_listen="127.0.0.1:0"):
        cmd = [larder_bin(), "--config", EXAMPLE, "--listen", "127.0.0.1:0", "--admin-listen", admin_listen,
               "--cache-dir", tmp_path / "cache"]
        self.proc = spawn(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env={**child_env(), "LARDER_TLS_INTERCEPT_CA_DIR": str(tmp_path / "ca"), **env})
        self.lines = []
        self.changed = threading.Condition()
        self.ended = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.proc.stderr.readline, b""):
            with self.changed:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def wait_for(self, pattern, timeout=15):
        """The first match in the log, waiting for it until the process's standard error ends."""
        with self.changed:
            self.changed.wait_for(lambda: self.ended or re.search(pattern, "\n".join(self.lines)), timeout)
            return re.search(pattern, "\n".join(self.lines))

    def text(self):
        with self.changed:
            return "\n".join(self.lines)


def test_the_ci_example_says_where_it_listens_at_its_log_level_notice(tmp_path):
    lr = ExampleLarder(tmp_path, {"LARDER_ADMIN_TOKEN": TOKEN})
    try:
        proxy = lr.wait_for(r"notice larder: .*proxy listening on 127\.0\.0\.1:(\d+)")
        admin = lr.wait_for(r"notice larder: .*admin endpoint listening on 127\.0\.0\.1:(\d+)")
        assert proxy and admin, lr.text()
        assert " info " not in lr.text(), "the example's log level is notice"
        # The limits it was started with, as the admin endpoint reports them.
        port = int(admin.group(1))
        answer = ask(port, "GET", "/stats", [("Authorization", f"Bearer {TOKEN}")])
        assert answer.status == 200, answer
        stats = json.loads(answer.body)
        assert stats["cache_capacity_bytes"]["disk"] == 200 << 30
        assert stats["cache_capacity_bytes"]["memory"] == 512 << 20
    finally:
        assert stop_process(lr.proc)[0] == 0, lr.text()


def test_the_ci_example_refuses_to_start_with_its_placeholder_token(tmp_path):
    # Off loopback, as the file says; the check comes before anything is bound.
    lr = ExampleLarder(tmp_path, {}, admin_listen="0.0.0.0:0")
    try:
        assert wait_process(lr.proc, 15) == 2, lr.text()
    finally:
        stop_process(lr.proc)
    lr.wait_for(r"LARDER_ADMIN_TOKEN")
    text = lr.text()
    assert 'ci-cache.yaml: admin_token: "change-me" is a placeholder' in text, text
    assert "set LARDER_ADMIN_TOKEN" in text, text
    assert "listening" not in text, text


def test_check_config_says_the_same_about_the_ci_example(tmp_path):
    run = lambda env: subprocess.run([larder_bin(), "check-config", "--config", EXAMPLE], capture_output=True, text=True,
                                     env={**child_env(), **env}, timeout=20)
    refused = run({})
    assert refused.returncode == 1 and "admin_token" in refused.stdout and "LARDER_ADMIN_TOKEN" in refused.stdout, refused
    assert run({"LARDER_ADMIN_TOKEN": TOKEN}).returncode == 0
    short = run({"LARDER_ADMIN_TOKEN": "abc123"})
    assert short.returncode == 1 and "LARDER_ADMIN_TOKEN: is 6 characters" in short.stdout, short
    assert "abc123" not in short.stdout, "a real token stays out of the message"
