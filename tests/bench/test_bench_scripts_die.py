"""A benchmark script whose launched run dies says so in one line (the run, its exit code, the
last lines of its stderr) and exits 1: never a traceback of the script itself."""

import subprocess
import sys

import pytest
from conftest import REPO

BAD_ENV = "env.id=NoSuchEnv-v0"  # passes the config check, fails when es-train makes it
SUITE = f"""
[tasks.pendulum]
thresholds = [0]
budget_s = 30
strategies.openai = {{ config = "{REPO}/configs/pendulum.toml", set = ["{BAD_ENV}"] }}
"""


@pytest.mark.parametrize("args, what", [
    (["scripts/bench_solve.py", "configs/pendulum.toml", "--thresholds", "0", "--budget-s", "30",
      "--set", BAD_ENV], "es-train configs/pendulum.toml exited with 2"),
    (["scripts/bench_throughput.py", "--config", "configs/pendulum.toml", "--generations", "2",
      "--repeats", "1", "--set", BAD_ENV],
     f"es-train configs/pendulum.toml {BAD_ENV} exited with 2"),
    (["scripts/bench_throughput.py", "--suite", "SUITE"], "pendulum-openai-seed0: es-train "
     "exited with 2"),
], ids=["bench_solve", "bench_throughput", "bench_throughput --suite"])
def test_a_run_that_dies_is_one_line_naming_it_and_its_exit_code(tmp_path, args, what):
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    args = [str(suite) if arg == "SUITE" else arg for arg in args]
    done = subprocess.run([sys.executable, *args, "--out", str(tmp_path / "out")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    line, = done.stderr.strip().splitlines()
    assert what in line and "NoSuchEnv-v0" in line, line
    assert line.startswith(args[0].rsplit("/", 1)[-1] + ": ")
