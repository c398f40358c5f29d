"""scripts/bench_peers.py: what CI can check without the peer (EvoTorch and Ray are not
installed here; its measurements are in docs/benchmarks.md with their commands): a python
without EvoTorch is refused in one line before any run, the bare loop reports a rate, the
memory watch counts a run's whole process tree, and a failed run is named by its exception,
not by the log lines Ray prints after it."""

import importlib
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        yield importlib.import_module("bench_peers")
    finally:
        sys.path.remove(str(REPO / "scripts"))


def test_a_python_without_evotorch_is_refused_before_any_run(tmp_path):
    done = subprocess.run([sys.executable, "scripts/bench_peers.py", "throughput",
                           "--evo-python", sys.executable, "--out", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"bench_peers.py: error: --evo-python {sys.executable}: not "
                                  "a python that imports evotorch, ray, gymnasium and mujoco; "
                                  "make one: python3 -m venv ~/evo"), done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_the_bare_loop_reports_its_rate(bench):
    assert bench.bare_rate(1, 0.3) > 100  # HalfCheetah steps a second, on any machine


def test_the_memory_watch_counts_the_whole_process_tree(bench):
    """A child that starts a grandchild: three processes, and their memory."""
    peak_mb, processes = bench.watched(
        ["bash", "-c", "python3 -c 'import time; time.sleep(1.5)' & sleep 1.5; wait"], "tree")
    assert processes >= 3
    assert peak_mb > 1


def test_a_failed_run_is_named_by_its_exception(bench):
    script = ("import sys; sys.stderr.write('Traceback (most recent call last):\\n"
              "RuntimeError: mat1 and mat2 must have the same dtype\\n"
              "(EvaluationActor pid=1) a log line Ray prints after it\\n'); sys.exit(1)")
    with pytest.raises(SystemExit) as stopped:
        bench.watched([sys.executable, "-c", script], "EvoTorch seed 0")
    assert str(stopped.value) == ("bench_peers.py: EvoTorch seed 0 exited with 1: RuntimeError: "
                                  "mat1 and mat2 must have the same dtype")
