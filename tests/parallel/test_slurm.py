"""Under a real Slurm 22.05 on this machine (``es.parallel.slurm_cluster``: slurmctld, one
slurmd and munged per network-namespaced node): ``srun`` starts es across nodes bit-identically,
a lone copy is refused, ``scripts/slurm_train.sbatch`` is cut by its time limit, requeued and
resumed exactly, so is a job requeued by hand, a suspended job keeps its time budget, and a
lost node costs the script's job one relaunch on the nodes left (es-train --elastic), not the
run. Needs
root and Debian's slurm-wlm and munge (.ci/run installs them); without them these skip.

The batch jobs run side by side with the ``srun`` tests (submitted when the cluster starts), so
the file takes about as long as its longest job."""

import csv
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
    read_progress,
    run_cli,
    tool,
    wait_for_a_checkpoint,
    without_cleanup_lines,
)

from es.cli.slurm_cluster import main
from es.launch.elastic import SILENT_RANK
from es.parallel.fake_cluster import ClusterError
from es.parallel.slurm_cluster import SlurmCluster, check_can_run
from es.rl.checkpoint import load_latest_checkpoint

pytestmark = ONE_WORKER  # builds clusters: one test after another on one worker


def _missing() -> str | None:
    try:
        check_can_run()
    except ClusterError as error:
        return str(error)
    return None


MISSING = _missing()
needs_slurm = pytest.mark.skipif(MISSING is not None, reason=f"real Slurm: {MISSING}")

#: A task whose steps take wall time but almost no CPU, so that a dozen ranks share two cores;
#: its dynamics do not depend on step_ms, so the references train with step_ms=0.
SLEEPY = ["configs/cartpole.toml", "--set", "env.id=es/Sleep-v0", "--set", "es.population=16",
          "--set", "run.eval_every=5", "--set", "run.eval_episodes=2", "--set",
          "run.checkpoint_every=1", "--quiet"]
#: ~0.8 s a generation on 4 ranks: 80 generations outlast the first warning of a one-minute
#: limit (20-50 s after the start: Slurm checks limits every 30 s).
TIME_LIMITED = [*SLEEPY, "--set", "env.kwargs.step_ms=2", "--set", "run.generations=80"]
REQUEUED_BY_HAND = [*SLEEPY, "--set", "env.kwargs.step_ms=1", "--set", "run.generations=25"]
#: Two runs side by side, 2 ranks each: ~1.6 s a generation, so 40 outlast the warning too.
SWEEP_LIMITED = [*SLEEPY, "--set", "env.kwargs.step_ms=2", "--set", "run.generations=40",
                 "--seeds", "0,1"]
FINISHED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY")


def reference(tmp_path: Path, args: list[str]) -> np.ndarray:
    """The parameters of the same run trained in one process, uninterrupted."""
    run_dir = tmp_path / f"reference-{len(list(tmp_path.glob('reference-*')))}"
    done = run_cli(["es-train", *args, "--set", "env.kwargs.step_ms=0", "--run-dir",
                    str(run_dir)])
    assert done.returncode == 0, done.stderr
    return load_params(run_dir)


def slurm_run(cluster: SlurmCluster, command: list[str], timeout: float = 180):
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=timeout,
                          env=cluster.environment())
    done.stderr = without_cleanup_lines(done.stderr)
    return done


def job_state(cluster: SlurmCluster, job: str) -> tuple[str, int]:
    shown = slurm_run(cluster, ["scontrol", "show", "job", job]).stdout
    return (re.search(r"JobState=(\S+)", shown).group(1),
            int(re.search(r"Restarts=(\d+)", shown).group(1)))


def wait_for_job(cluster: SlurmCluster, job: str, timeout: float = 240) -> tuple[str, int]:
    deadline = time.monotonic() + timeout
    while (state := job_state(cluster, job))[0] not in FINISHED:
        assert time.monotonic() < deadline, f"job {job} still {state}"
        time.sleep(0.5)
    return state


def wait_for_rows(cluster: SlurmCluster, job: str, run_dir: Path, rows: int) -> float:
    """Until the job's run has written ``rows`` progress rows (it must not end first); returns
    the deadline it waited within, for what follows."""
    deadline = time.monotonic() + 120
    while not (run_dir / "progress.csv").is_file() or len(read_progress(run_dir)) < rows:
        assert time.monotonic() < deadline and job_state(cluster, job)[0] not in FINISHED
        time.sleep(0.1)
    return deadline


def sbatch(cluster: SlurmCluster, options: list[str], arguments: list[str],
           environment: dict[str, str] | None = None) -> str:
    done = subprocess.run(["sbatch", "--parsable", *options, *arguments], capture_output=True,
                          text=True, cwd=REPO, timeout=60,
                          env={**cluster.environment(), **(environment or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A 3-node cluster (12 CPUs each, more than the machine has) and the batch jobs that the
    tests below check, submitted at once so that they train while the other tests run. The
    jobs keep off node2, which the lost-node test loses."""
    if MISSING is not None:
        pytest.skip(f"real Slurm: {MISSING}")
    folder = tmp_path_factory.mktemp("slurm")
    with SlurmCluster(3, 12) as cluster:
        two_nodes = ["--nodes=2", "--ntasks-per-node=2", "--exclude=node2"]
        jobs = {
            # The shipped script, cut by a one-minute limit (USR1 10 s ahead), requeued by itself.
            "time_limit": sbatch(cluster, [*two_nodes, "--time=1", "--signal=B:USR1@10",
                                           f"--output={folder}/time_limit.out"],
                                 ["scripts/slurm_train.sbatch", *TIME_LIMITED[:1],
                                  str(folder / "time_limit"), *TIME_LIMITED[1:]]),
            # The same script, requeued from outside (scontrol requeue) in the middle.
            "by_hand": sbatch(cluster, [*two_nodes, "--time=10", f"--output={folder}/by_hand.out"],
                              ["scripts/slurm_train.sbatch", *REQUEUED_BY_HAND[:1],
                               str(folder / "by_hand"), *REQUEUED_BY_HAND[1:]]),
            # No script logic: the signal goes to the ranks themselves (no B:), and es-train
            # requeues the job (--requeue-on-signal), once for the sweep's two runs.
            "flag": sbatch(cluster, [*two_nodes, "--time=1", "--signal=USR1@10", "--requeue",
                                     "--open-mode=append", f"--output={folder}/flag.out",
                                     "--wrap", " ".join([
                                         "srun --mpi=pmi2", tool("es-train"), *SWEEP_LIMITED,
                                         "--resume-or-start", str(folder / "flag"),
                                         "--requeue-on-signal"])], []),
            # The scaling benchmark's script, on a small config.
            "scaling": sbatch(cluster, [*two_nodes, "--time=10",
                                        f"--output={folder}/scaling.out"],
                              ["scripts/slurm_scaling.sbatch"],
                              {"ES_CONFIG": "configs/cartpole.toml", "ES_WEAK_RANKS": "1,2",
                               "ES_STRONG_RANKS": "2,4", "ES_POPULATION": "16",
                               "ES_GENERATIONS": "5", "ES_REPEATS": "1",
                               "ES_OUT": str(folder / "scaling")}),
        }
        yield cluster, jobs, folder


@needs_slurm
def test_a_job_requeued_by_hand_resumes_exactly(slurm, tmp_path):
    cluster, jobs, folder = slurm
    run_dir, job = folder / "by_hand", jobs["by_hand"]
    deadline = wait_for_rows(cluster, job, run_dir, 10)
    requeued = slurm_run(cluster, ["scontrol", "requeue", job])
    assert requeued.returncode == 0, requeued.stderr
    # Pending again (it may start cred_expire = 10 s later): its ranks are gone.
    while job_state(cluster, job)[0] != "PENDING":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # Slurm kills the ranks (srun answers SIGTERM with SIGKILL): the run resumes from its
    # newest checkpoint, so at most the generations since then are trained twice (an
    # evaluated generation's row is written after the next generation's episodes: the last
    # row may be one before the checkpoint).
    written = int(read_progress(run_dir)[-1]["generation"])
    saved = load_latest_checkpoint(run_dir / "checkpoints")[0].generation
    print(f"requeued by hand with rows through generation {written}; resumes from {saved}")
    assert -1 <= written - saved <= 1  # checkpoint_every = 1
    assert wait_for_job(cluster, job) == ("COMPLETED", 1)
    output = (folder / "by_hand.out").read_text()
    assert "start 0" in output and "start 1: exit code 0" in output, output
    generations = [int(row["generation"]) for row in read_progress(run_dir)]
    assert generations == list(range(1, 26))
    assert np.array_equal(load_params(run_dir), reference(tmp_path, REQUEUED_BY_HAND))


@needs_slurm
def test_the_batch_script_loses_a_node_and_finishes_on_the_others_bit_identical(slurm,
                                                                               tmp_path):
    """scripts/slurm_train.sbatch on 3 nodes (--no-kill is in it): node2 dies (its slurmd and
    ranks killed); Slurm removes it from the job and kills the step, and es-train --elastic
    launches again on node0 and node1 from the newest checkpoint."""
    cluster, _, folder = slurm
    run_dir = folder / "elastic"
    job = sbatch(cluster, ["--nodes=3", "--ntasks-per-node=2", "--time=10",
                           f"--output={folder}/elastic.out"],
                 ["scripts/slurm_train.sbatch", *REQUEUED_BY_HAND[:1], str(run_dir),
                  *REQUEUED_BY_HAND[1:]])
    deadline = time.monotonic() + 120
    while not (run_dir / "progress.csv").is_file() or len(read_progress(run_dir)) < 5:
        assert time.monotonic() < deadline and job_state(cluster, job)[0] not in FINISHED
        time.sleep(0.2)
    lost_at = time.monotonic()
    cluster.lose("node2")
    trained = int(read_progress(run_dir)[-1]["generation"])
    while not read_progress(run_dir) or int(read_progress(run_dir)[-1]["generation"]) <= trained:
        assert time.monotonic() - lost_at < 120, (folder / "elastic.out").read_text()
        time.sleep(0.2)
    print(f"node2 lost: training again {time.monotonic() - lost_at:.1f} s later (SlurmdTimeout "
          f"{cluster.settings['SlurmdTimeout']} s)")
    assert wait_for_job(cluster, job) == ("COMPLETED", 0)
    output = (folder / "elastic.out").read_text()
    assert "srun: error: Node failure on node2" in output, output
    relaunches = re.findall(r"relaunch \d+: lost (\S+) \((.*?)\); resumed from generation "
                            r"(\d+) on (.*?) \(", output)
    assert [(lost, how, where) for lost, how, _, where in relaunches] == [
        ("node2", "Slurm found the node not responding", "node0, node1")], output
    # checkpoint_every = 1; an evaluated generation's row is written after the next
    # generation's episodes, so the last row read at the loss may be one before the checkpoint.
    assert -1 <= trained - int(relaunches[0][2]) <= 1
    assert "es-train: 2 nodes (node0: ranks 0-1, node1: ranks 2-3)" in output
    assert [int(row["generation"]) for row in read_progress(run_dir)] == list(range(1, 26))
    assert np.array_equal(load_params(run_dir), reference(tmp_path, REQUEUED_BY_HAND))


@needs_slurm
@pytest.mark.parametrize("schedule", ["static", "dynamic"])
def test_srun_on_one_node_and_across_two_gives_the_plain_run_bits(slurm, tmp_path, schedule):
    cluster, _, _ = slurm
    args = [*SLEEPY, "--set", f"run.schedule={schedule}", "--set", "run.generations=4",
            "--set", "env.kwargs.step_ms=0.1"]
    plain = reference(tmp_path, args)
    for nodes, where in ((1, "1 node (node0: ranks 0-3), 1 noise table"),
                         (2, "2 nodes (node0: ranks 0-1, node1: ranks 2-3), 2 noise tables")):
        run_dir = tmp_path / f"srun-{nodes}"
        done = slurm_run(cluster, ["srun", "--mpi=pmi2", f"--nodes={nodes}", "--ntasks=4",
                                   f"--ntasks-per-node={4 // nodes}", "--exclude=node2",
                                   tool("es-train"), *args, "--run-dir", str(run_dir)])
        assert done.returncode == 0, done.stderr
        assert f"es-train: {where}" in done.stderr
        assert np.array_equal(load_params(run_dir), plain)


@needs_slurm
@pytest.mark.parametrize("per_node", [1, 2])
def test_a_rank_killed_on_another_node_ends_a_plain_srun_job_naming_it(slurm, tmp_path,
                                                                       per_node):
    """srun without --kill-on-bad-exit leaves a dead rank's peers to the heartbeats. Between
    nodes, rank 0's send to the dead rank spun inside MPI holding its lock, and the deadline
    was checked between its MPI calls: with one rank a node the job hung for good; with two,
    the others blamed rank 0 on the healthy node. The deadline is now a watchdog's. A rank
    stuck behind the dead one (waiting for MPI's lock) falls silent too, up to a period
    before it: rank 0 names no rank of its own node that it sees running (that blamed rank 1
    under CI's load), and the dead rank's neighbour on node1 may be named in its place."""
    cluster, _, _ = slurm
    run_dir = tmp_path / "run"
    args = [*SLEEPY, "--set", "env.kwargs.step_ms=2", "--set", "run.generations=1000",
            "--set", "run.peer_timeout_s=3", "--run-dir", str(run_dir)]
    ranks = 2 * per_node
    job = subprocess.Popen(["srun", "--mpi=pmi2", "--nodes=2", f"--ntasks={ranks}",
                            f"--ntasks-per-node={per_node}", "--exclude=node2",
                            tool("es-train"), *args], cwd=REPO, env=cluster.environment(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        wait_for_a_checkpoint(job, run_dir)
        time.sleep(1)  # a heartbeat or two between the nodes first
        victim = max(pid for pid in cluster.hosts_cluster.pids("node1")  # other jobs run
                     if str(run_dir) in Path(f"/proc/{pid}/cmdline").read_text())  # there too
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        job.wait(timeout=60)
        ended_after = time.monotonic() - killed
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    output = job.stderr.read()
    print(f"{per_node} rank(s) a node: the job ended {ended_after:.1f} s after the kill")
    assert ended_after < 3 + 10, output
    lost = [line for line in output.splitlines() if "peer lost" in line]
    named = [SILENT_RANK.findall(line) for line in lost]
    assert lost and all(line.startswith("es-train: peer lost: rank ") for line in lost), output
    assert all(silent and {host for _, host, _ in silent} == {"node1"} for silent in named), output
    if per_node == 1:
        assert lost[0].startswith(f"es-train: peer lost: rank 1 (pid {victim} on node1) silent "
                                  "for 3 s"), output


@needs_slurm
def test_srun_without_a_pmi_is_refused_once_not_run_as_copies(slurm, tmp_path):
    cluster, _, _ = slurm
    run_dir = tmp_path / "copies"
    done = slurm_run(cluster, ["srun", "--ntasks=2", tool("es-train"), *SLEEPY,
                               "--run-dir", str(run_dir)])
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("es-train")]
    assert errors == ["es-train: error: srun started 2 separate one-rank copies, not one "
                      "2-rank job (the MPI found no process manager it speaks): use srun "
                      "--mpi=pmi2 for the mpich wheel, or your site's MPI with its srun plugin "
                      "(docs/cluster.md)"], done.stderr
    assert not run_dir.exists()


def _stop_generations(output: str) -> list[str]:
    return re.findall(r"stopped by SIGUSR1 after generation (\d+)", output)


@needs_slurm
def test_the_batch_script_is_cut_by_its_time_limit_requeued_and_resumed_exactly(slurm,
                                                                              tmp_path):
    cluster, jobs, folder = slurm
    state, restarts = wait_for_job(cluster, jobs["time_limit"])
    output = (folder / "time_limit.out").read_text()
    assert (state, restarts >= 1) == ("COMPLETED", True), output
    stops = _stop_generations(output)
    assert len(stops) == restarts, output
    assert re.findall(r"start (\d+): exit code (\d+)", output) == [
        *((str(start), "75") for start in range(restarts)), (str(restarts), "0")], output
    assert "es-train: 2 nodes (node0: ranks 0-1, node1: ranks 2-3)" in output
    # A stop by the signal checkpoints the generation it finished: none is trained twice.
    generations = [int(row["generation"]) for row in read_progress(folder / "time_limit")]
    assert generations == list(range(1, 81))
    assert np.array_equal(load_params(folder / "time_limit"), reference(tmp_path, TIME_LIMITED))


@needs_slurm
def test_es_train_requeues_its_own_sweep_on_the_signal(slurm, tmp_path):
    cluster, jobs, folder = slurm
    state, restarts = wait_for_job(cluster, jobs["flag"])
    output = (folder / "flag.out").read_text()
    assert (state, restarts >= 1) == ("COMPLETED", True), output
    assert output.count(f"es-train: requeued Slurm job {jobs['flag']}") == restarts, output
    for seed in (0, 1):
        run_dir = folder / "flag" / f"es_Sleep-v0__cartpole__{seed}"
        assert np.array_equal(load_params(run_dir), reference(
            tmp_path, [*SWEEP_LIMITED[:-2], "--set", f"run.seed={seed}"]))


@needs_slurm
def test_a_suspended_job_keeps_its_time_budget(slurm, tmp_path):
    """``scontrol suspend`` stops every process of the job (SIGSTOP) and ``scontrol resume``
    continues them (SIGCONT): Slurm's time limit leaves the suspended time out, and so does
    es-train's ``run.max_seconds`` (``paused_s``, not ``time_s``)."""
    cluster, _, folder = slurm
    run_dir, suspended_s = folder / "suspended", 5.0
    job = sbatch(cluster, ["--nodes=2", "--ntasks-per-node=1", "--exclude=node2", "--time=5",
                           f"--output={folder}/suspended.out", "--wrap", " ".join([
                               "srun --mpi=pmi2", tool("es-train"), *SLEEPY, "--set",
                               "env.kwargs.step_ms=1", "--set", "run.generations=100000",
                               "--set", "run.max_seconds=8", "--run-dir", str(run_dir)])], [])
    wait_for_rows(cluster, job, run_dir, 3)
    suspended = slurm_run(cluster, ["scontrol", "suspend", job])
    assert suspended.returncode == 0, suspended.stderr
    assert job_state(cluster, job)[0] == "SUSPENDED"
    time.sleep(suspended_s)
    resumed = slurm_run(cluster, ["scontrol", "resume", job])
    assert resumed.returncode == 0, resumed.stderr
    output = (folder / "suspended.out")
    assert wait_for_job(cluster, job)[0] == "COMPLETED", output.read_text()
    rows = read_progress(run_dir)
    times = [float(row["time_s"]) for row in rows]
    print(f"suspended {suspended_s} s: paused_s {rows[-1]['paused_s']}, time_s {times[-1]}")
    assert suspended_s - 1.0 <= float(rows[-1]["paused_s"]) <= suspended_s + 1.0
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) < suspended_s - 1.5
    assert 8.0 <= times[-1] < 8.0 + suspended_s - 1.5


@needs_slurm
def test_the_scaling_script_measures_every_rank_count_through_srun(slurm):
    cluster, jobs, folder = slurm
    state, _ = wait_for_job(cluster, jobs["scaling"])
    output = (folder / "scaling.out").read_text()
    assert state == "COMPLETED", output
    job = jobs["scaling"]
    for mode, ranks in (("weak", ["1", "2"]), ("strong", ["2", "4"])):
        with (folder / f"scaling/cartpole-{mode}-{job}/results.csv").open() as handle:
            assert [row["ranks"] for row in csv.DictReader(handle)] == ranks, output
    assert (folder / f"scaling/comm-{job}/results.csv").is_file(), output


def test_without_slurm_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda name: None if name == "slurmd" else "/bin/true")
    assert main(["--nodes", "1", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err == ("slurm_cluster.py: error: needs slurmd: install Debian's packages "
                   "(apt-get install slurm-wlm munge)\n")


def test_the_script_runs_a_command_under_slurm():
    if MISSING is not None:
        pytest.skip(f"real Slurm: {MISSING}")
    done = subprocess.run([sys.executable, str(REPO / "scripts/slurm_cluster.py"), "--nodes",
                           "2", "--cpus-per-node", "1", "--", "srun", "--nodes=2", "--ntasks=2",
                           "hostname"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["node0", "node1"]


@pytest.mark.parametrize("script", ["slurm_train.sbatch", "slurm_scaling.sbatch"])
def test_a_batch_script_run_by_hand_says_to_submit_it(script):
    """Outside a job (no SLURM_JOB_ID) the batch scripts exit 2 in one line before anything
    starts, instead of bash's "unbound variable" halfway."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("SLURM_")}
    done = subprocess.run(["bash", f"scripts/{script}"], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"{script}: not inside a Slurm job (no SLURM_JOB_ID): submit it "
                           f"with sbatch scripts/{script}\n")
    assert done.stdout == ""


@pytest.mark.parametrize("script", ["slurm_train.sbatch", "slurm_scaling.sbatch"])
def test_a_batch_script_logs_into_a_folder_a_fresh_clone_has(script):
    """Slurm does not make the folder of ``--output``: the scaling script's log went to
    bench-results/, which a clone lacks (git ignores it), and its job failed at once with
    no output anywhere."""
    (output,) = re.findall(r"^#SBATCH --output=(\S+)$", (REPO / "scripts" / script).read_text(),
                           flags=re.MULTILINE)
    folder = Path(output).parent
    tracked = subprocess.run(["git", "ls-files", "--", str(folder)], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
    assert folder == Path(".") or tracked, f"{script} logs into {folder}/, not in a clone"
