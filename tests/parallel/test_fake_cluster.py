"""Beyond one machine: a real multi-host MPI job on this box, each host a network namespace
with its own hostname and address (``es.parallel.fake_cluster``), MPICH's Hydra launching
across them and TCP between them. Bit-identical training, one noise table per host, a lost host, and
es.minimize across hosts. Needs root (CI runs as root); without it these skip."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    ONE_WORKER,
    REPO,
    load_params,
    minimize_spmd_reference,
    read_progress,
    run_cli,
    tool,
    wait_for_a_checkpoint,
)

from es.cli.fake_cluster import main
from es.parallel.fake_cluster import ClusterError, FakeCluster, check_can_run
from es.rl.checkpoint import load_latest_checkpoint

pytestmark = ONE_WORKER  # builds clusters: one test after another on one worker

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the fake cluster needs root (namespaces)")
SLEEPY = ["configs/cartpole.toml", "--set", "env.id=es/Sleep-v0", "--set",
          "env.kwargs.step_ms=0.1", "--set", "env.kwargs.lengths=pareto", "--set",
          "es.population=16", "--set", "run.eval_every=2", "--set", "run.eval_episodes=2",
          "--quiet"]


def on_cluster(hosts: int, ranks_per_host: int, command: list[str], timeout: float = 300):
    """Run ``command`` on every rank of a fake cluster built in this process, so that the
    cluster goes even when the job times out."""
    with FakeCluster(hosts) as cluster:
        return subprocess.run(cluster.mpiexec(ranks_per_host, command), capture_output=True,
                              text=True, timeout=timeout, cwd=REPO)


def test_without_root_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match="needs root"):
        check_can_run()
    assert main(["--hosts", "2", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fake_cluster.py: error: needs root") and err.count("\n") == 1


@needs_root
@pytest.mark.parametrize("schedule", ["static", "dynamic"])
def test_two_hosts_train_the_same_bits_as_one_process(tmp_path, schedule):
    args = [*SLEEPY, "--set", f"run.schedule={schedule}", "--set", "run.generations=4"]
    alone = run_cli(["es-train", *args, "--run-dir", str(tmp_path / "alone")])
    assert alone.returncode == 0, alone.stderr
    assert "1 node (" in alone.stderr
    hosts = on_cluster(2, 2, [tool("es-train"), *args, "--run-dir", str(tmp_path / "hosts")])
    assert hosts.returncode == 0, hosts.stderr
    assert ("es-train: 2 nodes (node0: ranks 0-1, node1: ranks 2-3), 2 noise tables "
            "(one per node)") in hosts.stderr
    assert np.array_equal(load_params(tmp_path / "hosts"), load_params(tmp_path / "alone"))
    if schedule == "static":  # the bytes a generation sends do not depend on where ranks are
        one_host = run_cli(["es-train", *args, "--run-dir", str(tmp_path / "onehost")], ranks=4)
        assert one_host.returncode == 0, one_host.stderr
        assert ([r["bytes_sent"] for r in read_progress(tmp_path / "hosts")]
                == [r["bytes_sent"] for r in read_progress(tmp_path / "onehost")])


@needs_root
def test_one_noise_table_per_host():
    done = on_cluster(2, 2, [sys.executable, str(REPO / "tests/mpi_scripts/node_tables.py")])
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("FILLS")]
    assert line == ("FILLS 2 NODES [[0, 1], [2, 3]] SEEN [('node0', True), ('node0', True), "
                    "('node1', False), ('node1', False)]")


@needs_root
def test_a_lost_host_ends_the_job_fast_and_the_checkpoint_resumes_on_one_host(tmp_path):
    run_dir = tmp_path / "lost"
    args = [*SLEEPY, "--set", "env.kwargs.step_ms=2", "--set", "run.checkpoint_every=2",
            "--set", "run.generations=1000", "--run-dir", str(run_dir)]
    with FakeCluster(2) as cluster:
        job = subprocess.Popen(cluster.mpiexec(2, [tool("es-train"), *args]), cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
        try:
            wait_for_a_checkpoint(job, run_dir)
            ranks = [pid for pid in cluster.pids("node1")
                     if "es-train" in Path(f"/proc/{pid}/cmdline").read_text()]
            assert len(ranks) == 2
            killed = time.monotonic()
            for pid in ranks:
                # The node's proxy may end the second once the first dies (a CI run: "No
                # such process"): gone either way.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            job.wait(timeout=10)
            ended_after = time.monotonic() - killed
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
        output = job.stdout.read()
    assert ended_after < 10 and job.returncode != 0
    assert re.search(r"RUNNING AT node1", output), output[-3000:]
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set",
                       f"run.generations={state.generation + 2}", "--quiet"], ranks=2)
    assert resumed.returncode == 0, resumed.stderr
    assert int(read_progress(run_dir)[-1]["generation"]) == state.generation + 2


@needs_root
def test_minimize_across_hosts_equals_one_process():
    reference = minimize_spmd_reference()
    done = on_cluster(2, 2, [sys.executable, str(REPO / "tests/mpi_scripts/minimize_spmd.py")])
    assert done.returncode == 0, done.stderr
    assert [x.split()[1:] for x in done.stdout.splitlines() if x.startswith("RESULT")] \
        == reference


def _cluster_traces() -> tuple[str, str]:
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return netns, " ".join(re.findall(r"fc\d+[a-z]br", links))


def _sleeping_cluster() -> subprocess.Popen:
    """scripts/fake_cluster.py running ``sleep 60`` on 2 hosts, once its hosts exist."""
    script = subprocess.Popen([sys.executable, str(REPO / "scripts/fake_cluster.py"), "--hosts",
                               "2", "--ranks-per-host", "1", "--", "sleep", "60"])
    deadline = time.monotonic() + 60
    while f"fc{script.pid}ah1" not in _cluster_traces()[0]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return script


@needs_root
def test_the_script_forwards_the_exit_code_and_leaves_nothing_behind():
    before = _cluster_traces()
    done = subprocess.run([sys.executable, str(REPO / "scripts/fake_cluster.py"), "--hosts", "2",
                           "--", "-n", "2", "sh", "-c", "hostname; exit 3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    assert sorted(done.stdout.split()) == ["node0", "node1"]
    assert _cluster_traces() == before


@needs_root
def test_a_killed_scripts_leftovers_are_removed_by_the_next_cluster():
    before = _cluster_traces()
    script = _sleeping_cluster()
    script.kill()  # no chance to clean up
    script.wait()
    with FakeCluster(1):
        assert f"fc{script.pid}" not in " ".join(_cluster_traces())
    assert _cluster_traces() == before


@needs_root
def test_ctrl_c_reaches_the_ranks_and_the_cluster_goes():
    before = _cluster_traces()
    script = _sleeping_cluster()
    time.sleep(1)  # the ranks have started
    script.send_signal(signal.SIGINT)
    assert script.wait(timeout=30) != 0
    assert _cluster_traces() == before


def test_the_cluster_files_run_on_one_worker_under_xdist(request):
    """``--dist loadgroup`` puts the files marked ONE_WORKER on one worker by rewriting their
    node ids; pytest 9.2 ignores the rewrite (hence the pin in pyproject.toml). If a pytest
    or pytest-xdist upgrade breaks it again, this fails instead of clusters meeting."""
    if not hasattr(request.config, "workerinput"):
        pytest.skip("not under pytest-xdist (-n 0)")
    assert request.node.nodeid.endswith("@clusters"), request.node.nodeid
