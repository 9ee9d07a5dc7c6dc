"""The libFuzzer harness for HTTPWire still builds and runs (a short bounded run; the long runs are
`bash scripts/fuzz.sh`, reported in the README)."""

import subprocess

import pytest

from helpers import REPO_ROOT, child_env


@pytest.mark.timeout_s(300)
def test_fuzz_harness_builds_and_runs_the_seed_corpus():
    r = subprocess.run(["bash", "scripts/fuzz.sh", "-runs=30000", "-seed=1"], cwd=REPO_ROOT, env=child_env(),
                       capture_output=True, timeout=280)
    out = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 0, out[-4000:]
    assert "Done 30000 runs" in out, out[-2000:]
