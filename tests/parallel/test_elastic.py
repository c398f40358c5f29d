"""A lost or hung peer costs a generation, not the run: the ranks' heartbeats end a job whose
peer went silent (exit code 76, the rank and host named), a busy rank is not taken for a
silent one, and ``es-train --elastic`` relaunches the run on the hosts still usable (Hydra
over a hostfile of network-namespaced hosts, ``es.parallel.fake_cluster``) until it ends
bit-identical to an uninterrupted run. The Slurm case is in test_slurm.py."""

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ONE_WORKER, REPO, load_params, read_progress, run_cli, tool

from es.core.seeding import TAG_ENV, episode_seeds
from es.launch.elastic import Node, as_launched, supervise, tool_failure
from es.parallel.fake_cluster import FakeCluster
from es.rl.checkpoint import load_latest_checkpoint

pytestmark = ONE_WORKER  # builds clusters: one test after another on one worker

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the fake cluster needs root "
                                "(namespaces)")
#: ~30 generations of a task whose steps take wall time, not CPU: a dozen ranks on 2 cores.
RUN = ["configs/cartpole.toml", "--set", "env.id=es/Sleep-v0", "--set", "env.kwargs.step_ms=0.5",
       "--set", "es.population=16", "--set", "run.generations=30", "--set",
       "run.checkpoint_every=1", "--set", "run.eval_every=5", "--set", "run.eval_episodes=2",
       "--set", "run.peer_timeout_s=3", "--quiet"]
RELAUNCH = re.compile(r"relaunch (\d+): lost (\S+) \((.*?)\); resumed from generation (\d+) on "
                      r"(.*?) \(\d+ ranks\)")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> np.ndarray:
    """The run's parameters, trained in one process without a fault."""
    run_dir = tmp_path_factory.mktemp("elastic") / "reference"
    done = run_cli(["es-train", *RUN, "--set", "env.kwargs.step_ms=0", "--run-dir",
                    str(run_dir)])
    assert done.returncode == 0, done.stderr
    return load_params(run_dir)


class Supervised:
    """``es-train --elastic`` (or any command) running, its stderr lines kept with the
    moment each arrived."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, cwd=REPO, env=env, text=True,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        start_new_session=True)
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line))

    @property
    def stderr(self) -> str:
        return "".join(line for _, line in self.lines)

    def when(self, pattern: str) -> float | None:
        return next((at for at, line in self.lines if re.search(pattern, line)), None)

    def wait_for_checkpoint(self, run_dir: Path, generation: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not (run_dir / f"checkpoints/ckpt-{generation:08d}.json").exists():
            assert self.process.poll() is None, self.stderr[-3000:]
            assert time.monotonic() < deadline, self.stderr[-3000:]
            time.sleep(0.05)

    def wait(self, timeout: float = 240) -> int:
        try:
            code = self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
        self._reader.join(5)
        return code


def elastic(cluster: FakeCluster, run_dir: Path, *flags: str) -> Supervised:
    hostfile = cluster.write_hostfile(run_dir.parent / f"{run_dir.name}.hosts", 2)
    return Supervised([tool("es-train"), *RUN, "--resume-or-start", str(run_dir), "--elastic",
                       "--hostfile", str(hostfile), *flags], cluster.hydra_environment())


def generations(run_dir: Path) -> list[int]:
    return [int(row["generation"]) for row in read_progress(run_dir)]


def newest_checkpoint(run_dir: Path) -> int:
    """The last generation trained (checkpoints every generation; an evaluated generation's
    row is written after the next one's episodes)."""
    return max(int(path.stem.removeprefix("ckpt-"))
               for path in (run_dir / "checkpoints").glob("ckpt-*.json"))


@needs_root
def test_a_gone_host_then_a_hung_one_and_the_run_ends_on_host_0_bit_identical(
        tmp_path, reference):
    run_dir = tmp_path / "run"
    with FakeCluster(3) as cluster:
        job = elastic(cluster, run_dir)
        job.wait_for_checkpoint(run_dir, 5)
        trained_before = newest_checkpoint(run_dir)
        cluster.cut("node2")  # a dead machine: link down, every process killed
        job.wait_for_checkpoint(run_dir, 15)
        stopped_at = time.monotonic()
        assert cluster.signal("node1", signal.SIGSTOP, "es-train")  # a hang
        code = job.wait()
    output = job.stderr
    assert code == 0, output[-3000:]
    relaunches = RELAUNCH.findall(output)
    assert [(n, lost, where) for n, lost, _, _, where in relaunches] == [
        ("1", "node2", "node0, node1"), ("2", "node1", "node0")], output[-3000:]
    # The hang is seen as silence, from node1's ranks: both, or the first whose silence the
    # survivors report (a loaded machine spreads the two ranks' last heartbeats apart).
    silent = re.fullmatch(r"no heartbeat from ranks? ([\d, ]+) for 3 s", relaunches[1][2])
    assert silent is not None, relaunches[1][2]
    assert set(silent.group(1).split(", ")) <= {"2", "3"}, relaunches[1][2]
    # The stop is seen within the deadline (+ 5 s); each loss costs at most 1 generation.
    detected = job.when(r"peer lost: rank [23] \(pid \d+ on node1\)")
    assert detected is not None and detected - stopped_at < 3 + 5, output[-3000:]
    assert 0 <= trained_before - int(relaunches[0][3]) <= 1
    assert "es-train: 1 node (node0: ranks 0-1)" in output
    assert generations(run_dir) == list(range(1, 31))
    assert np.array_equal(load_params(run_dir), reference)


@needs_root
def test_a_hosts_killed_ranks_cost_one_relaunch_without_it(tmp_path, reference):
    run_dir = tmp_path / "run"
    with FakeCluster(3) as cluster:
        job = elastic(cluster, run_dir)
        job.wait_for_checkpoint(run_dir, 5)
        assert len(cluster.signal("node2", signal.SIGKILL, "es-train")) == 2
        code = job.wait()
    output = job.stderr
    assert code == 0, output[-3000:]
    relaunches = RELAUNCH.findall(output)
    assert len(relaunches) == 1, output[-3000:]
    ((_, lost, how, _, where),) = relaunches
    assert (lost, where) == ("node2", "node0, node1")
    assert how == "its ranks were killed by signal 9, as mpiexec reported"
    assert np.array_equal(load_params(run_dir), reference)


@needs_root
def test_fewer_hosts_than_min_nodes_stop_with_the_checkpoint_and_the_command_goes_on(
        tmp_path, reference):
    run_dir = tmp_path / "run"
    with FakeCluster(3) as cluster:
        job = elastic(cluster, run_dir, "--min-nodes", "3")
        job.wait_for_checkpoint(run_dir, 5)
        cluster.cut("node2")
        code = job.wait()
        output = job.stderr
        assert code == 75, output[-3000:]
        (line,) = [x for x in output.splitlines() if "fewer than --min-nodes" in x]
        saved = load_latest_checkpoint(run_dir / "checkpoints")[0].generation
        # Too few without it, node2 was probed again: its link is down.
        assert re.fullmatch(r"es-train --elastic: 2 usable nodes \(node0, node1\), fewer than "
                            r"--min-nodes 3; not usable: node2 \((a probe failed with exit code "
                            r"\d+|no answer to a probe within 15 s)\)\. The checkpoint of "
                            f"generation {saved} is intact: the same command continues the run "
                            r"\(exit code 75\)", line), line
        cluster.reconnect("node2")  # back, empty: it answers the next launch's probe
        again = elastic(cluster, run_dir, "--min-nodes", "3")  # the same command
        assert again.wait() == 0, again.stderr[-3000:]
    assert "launching on 3 hostfile nodes: node0, node1, node2" in again.stderr
    assert np.array_equal(load_params(run_dir), reference)


def test_a_run_that_fails_by_itself_is_relaunched_once_then_stops_with_its_error(tmp_path):
    """No root needed: Hydra launches on this machine's own name."""
    doomed = episode_seeds(0, 6, 16, TAG_ENV)  # every episode of generation 7 (index 6)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:2\n")
    run_dir = tmp_path / "run"
    job = Supervised([tool("es-train"), *RUN, "--set", "env.id=fault_envs:DoomedSleep-v0",
                      "--set", f"env.kwargs.doomed={doomed}", "--resume-or-start", str(run_dir),
                      "--elastic", "--hostfile", str(hostfile)],
                     {**os.environ, "PYTHONPATH": str(REPO / "tests")})
    code = job.wait()
    output = job.stderr
    assert code == 1, output[-3000:]
    assert output.count("es-train: 2 ranks:") == 2  # the first launch and one relaunch
    assert "relaunch 1: lost no node (the launch failed with exit code 1)" in output
    (line,) = [x for x in output.splitlines() if "failed again" in x]
    assert line.startswith("es-train --elastic: the relaunch failed again at generation 7 "
                           "(exit code 1) and no node was lost")
    assert "episodes failed" in line


def test_a_supervisor_killed_outright_takes_its_launch_with_it(tmp_path):
    """SIGKILL leaves the supervisor no handler: its launch trained on unsupervised, and the
    run folder's lock, held by the supervisor, let a second run in beside it. The launch now
    gets SIGTERM when the supervisor dies, its ranks stop with their checkpoint, and the run
    resumes. That checkpoint was mostly lost: the launch's output went through pipes that
    died with the supervisor, and mpiexec with them, before its ranks had saved (checkpoints
    every generation hid it). No root needed: Hydra launches on this machine's own name."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:2\n")
    run_dir = tmp_path / "run"
    slow = ["--set", "env.kwargs.step_ms=2",  # the 30 generations would outlast the test
            "--set", "run.checkpoint_every=100"]  # the stop's checkpoint alone
    loud = [arg for arg in RUN if arg != "--quiet"]  # a line a generation: mpiexec writes
    job = Supervised([tool("es-train"), *loud, *slow, "--resume-or-start", str(run_dir),
                      "--elastic", "--hostfile", str(hostfile)])
    deadline = time.monotonic() + 120
    while len(read_progress(run_dir) if (run_dir / "progress.csv").exists() else []) < 3:
        assert job.process.poll() is None and time.monotonic() < deadline, job.stderr[-3000:]
        time.sleep(0.05)
    os.kill(job.process.pid, signal.SIGKILL)
    job.wait()
    deadline = time.monotonic() + 15
    while (left := [pid for pid in Path("/proc").iterdir() if pid.name.isdigit()
                    and str(run_dir) in _cmdline(pid)]):
        if time.monotonic() > deadline:
            for pid in left:
                os.kill(int(pid.name), signal.SIGKILL)
            pytest.fail(f"still running: {[_cmdline(pid) for pid in left]}")
        time.sleep(0.1)
    saved = newest_checkpoint(run_dir)  # none: a ValueError
    assert 3 <= saved < 10  # stopped with its checkpoint, not trained to its end
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set",
                       f"run.generations={saved + 1}", "--quiet"], ranks=2)
    assert resumed.returncode == 0, resumed.stderr
    assert generations(run_dir)[-1] == saved + 1


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_text().replace("\0", " ")
    except OSError:  # ended meanwhile
        return ""


def test_a_stopped_rank_ends_the_job_within_the_deadline_naming_it_and_the_run_resumes(
        tmp_path, reference):
    """Plain mpiexec, no supervisor: rank 1 stopped (SIGSTOP) is a hang rank 0 sees."""
    run_dir = tmp_path / "run"
    job = Supervised([tool("mpiexec"), "-n", "2", tool("es-train"), *RUN, "--run-dir",
                      str(run_dir)])
    job.wait_for_checkpoint(run_dir, 3)
    (listed,) = [line for _, line in job.lines if line.startswith("es-train: 2 ranks:")]
    pid, host = re.search(r"rank 1 = pid (\d+)@(\S+)", listed).groups()
    stopped_at = time.monotonic()
    os.kill(int(pid), signal.SIGSTOP)
    code = job.wait(timeout=3 + 30)
    ended_after = time.monotonic() - stopped_at
    assert code == 76 and ended_after < 3 + 10, (code, ended_after, job.stderr[-3000:])
    (line,) = [line for _, line in job.lines if "peer lost" in line]
    assert line.startswith(f"es-train: peer lost: rank 1 (pid {pid} on {host}) silent for 3 s "
                           "(no heartbeat within run.peer_timeout_s = 3 s: stopped, hung or "
                           "cut off) while rank 0 was in generation ")
    assert line.rstrip().endswith("the newest checkpoint is intact: resume on the ranks that "
                                  f"are left: es-train --resume {run_dir} (exit code 76)")
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--quiet"], ranks=2)
    assert resumed.returncode == 0, resumed.stderr
    assert np.array_equal(load_params(run_dir), reference)


def test_a_rank_lost_before_the_first_checkpoint_says_there_is_none(tmp_path):
    """The exit-76 line said "the newest checkpoint is intact" with none written yet."""
    run_dir = tmp_path / "run"
    job = Supervised([tool("mpiexec"), "-n", "2", tool("es-train"), *RUN, "--set",
                      "run.checkpoint_every=1000", "--run-dir", str(run_dir)])
    deadline = time.monotonic() + 60
    while not (run_dir / "progress.csv").exists() or len(read_progress(run_dir)) < 2:
        assert job.process.poll() is None and time.monotonic() < deadline, job.stderr[-3000:]
        time.sleep(0.05)
    (listed,) = [line for _, line in job.lines if line.startswith("es-train: 2 ranks:")]
    os.kill(int(re.search(r"rank 1 = pid (\d+)@", listed).group(1)), signal.SIGSTOP)
    assert job.wait(timeout=3 + 30) == 76, job.stderr[-3000:]
    (line,) = [line for _, line in job.lines if "peer lost" in line]
    assert line.rstrip().endswith("; no checkpoint was written yet: start the run again on the "
                                  "ranks that are left (exit code 76)"), line
    assert not (run_dir / "checkpoints").exists() or not any(
        (run_dir / "checkpoints").iterdir())


def test_a_whole_job_stopped_for_longer_than_the_deadline_goes_on_when_continued(
        tmp_path, reference):
    """Every rank stopped (SIGSTOP, as Slurm's suspend or a user pausing a run does) for
    twice the deadline, then continued: nobody is lost and the run ends as if never paused."""
    run_dir = tmp_path / "run"
    job = Supervised([tool("mpiexec"), "-n", "2", tool("es-train"), *RUN, "--run-dir",
                      str(run_dir)])
    job.wait_for_checkpoint(run_dir, 3)
    (listed,) = [line for _, line in job.lines if line.startswith("es-train: 2 ranks:")]
    pids = [int(pid) for pid in re.findall(r"pid (\d+)@", listed)]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(2 * 3)
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
    assert job.wait(timeout=120) == 0, job.stderr[-3000:]
    assert not [line for _, line in job.lines if "peer lost" in line]
    assert np.array_equal(load_params(run_dir), reference)


def test_a_rank_busy_for_longer_than_the_deadline_is_not_lost(tmp_path):
    """Three members, two ranks, static schedule: rank 0 plays two 2.5-s episodes a
    generation, rank 1 one, then waits in the exchange for 2.5 s, generation after
    generation, with a 2-s deadline. Its heartbeats keep coming, so nobody is lost."""
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "env.id=es/Sleep-v0",
                    "--set", "env.kwargs.step_ms=25", "--set", "env.kwargs.mean_length=100",
                    "--set", "es.population=3", "--set", "es.mirrored=false", "--set",
                    "run.generations=2", "--set", "run.eval_every=1000", "--set",
                    "run.best_episodes=0", "--set", "run.peer_timeout_s=2", "--set",
                    "run.schedule=static", "--quiet", "--run-dir", str(run_dir)], ranks=2)
    assert done.returncode == 0, done.stderr
    rows = read_progress(run_dir)
    # Rank 0 played for more than twice the deadline each generation, rank 1 waited half.
    assert len(rows) == 2 and all(float(row["rollout_s"]) > 2 * 2 for row in rows), rows


class ShellNodes:
    """One local node whose "launch" is a shell command: the supervisor's own decisions,
    without MPI."""

    kind = "test"

    def __init__(self, script: str) -> None:
        self.script, self.launches = script, 0

    def candidates(self) -> list[Node]:
        return [Node("here", 1)]

    def answering(self, nodes):
        return list(nodes), {}

    def command(self, nodes, program) -> list[str]:
        self.launches += 1
        return ["sh", "-c", self.script]


def test_a_stop_signal_ends_the_supervision_whatever_the_launch_exits_with(tmp_path, capfd):
    """srun (--kill-on-bad-exit) may kill the ranks still saving when the first one exits 75,
    and report 143: after Slurm's SIGUSR1 that is a stop, not a lost node to relaunch."""
    nodes = ShellNodes("trap 'exit 143' USR1; echo ready; while :; do sleep 0.05; done")
    before = signal.getsignal(signal.SIGUSR1)
    stop = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGUSR1))
    stop.start()
    try:
        code = supervise(nodes, ["es-train"], tmp_path, min_nodes=1, max_restarts=3)
    finally:
        stop.cancel()  # never a stray signal to pytest if the supervisor returned early
    assert (code, nodes.launches) == (75, 1)
    assert ("es-train --elastic: stopped by SIGUSR1 (the launch ended with exit code 143); the "
            "checkpoint of generation 0 is intact: the same command continues the run (exit "
            "code 75)") in capfd.readouterr().err
    assert signal.getsignal(signal.SIGUSR1) == before  # the handlers are put back


def test_more_min_nodes_than_the_hostfile_lists_is_a_usage_error_not_a_retry(tmp_path):
    """Exit 75 said 'the checkpoint of generation 0 is intact: the same command continues the
    run' with no run at all; a wrapper that requeues on 75 would have retried for ever."""
    from conftest import run_cli

    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:2\n")
    refused = run_cli(["es-train", "configs/cartpole.toml", "--resume-or-start",
                       str(tmp_path / "run"), "--elastic", "--hostfile", str(hostfile),
                       "--min-nodes", "2"], timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert ("es-train --elastic: --min-nodes 2: the hostfile lists 1 node (localhost); give at "
            "most 1, or more nodes (exit code 2)") in refused.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("present", [False, True], ids=["missing", "another"])
def test_a_rank_0_that_sees_another_folder_than_its_supervisor_is_refused(tmp_path, present):
    """A run folder on a path local to each host: after a lost node, rank 0 on another host
    started the run over in its own folder, which the supervisor never saw. Here the
    supervisor's variables name a holder that this host's folder does not have."""
    import socket

    from es.rl.runs import LOCK_HELD_BY_SUPERVISOR, SUPERVISOR_LOCK_LINE

    run_dir = tmp_path / "run"
    if present:  # this host's own folder of that name, from an earlier run of its own
        done = run_cli(["es-train", *RUN, "--set", "run.generations=1", "--run-dir",
                        str(run_dir)])
        assert done.returncode == 0, done.stderr
    holder = "es-train --elastic pid 4242 on login1"
    refused = run_cli(["es-train", *RUN, "--resume-or-start", str(run_dir)], ranks=2,
                      extra_env={LOCK_HELD_BY_SUPERVISOR: str(run_dir.resolve()),
                                 SUPERVISOR_LOCK_LINE: holder}, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        f"es-train: error: run folder {str(run_dir)!r} on {socket.gethostname()} is not the "
        f"one its supervisor holds ({holder}): the run folder must be on a file system that "
        "every host and the supervisor share (docs/cluster.md)")
    assert run_dir.exists() == present


def test_a_host_left_out_at_the_first_launch_is_named_with_why(tmp_path):
    """The first launch said only where it ran: a host the probe found unusable vanished
    from the run without a word."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:2\nno-such-host.invalid:2\n")
    job = Supervised([tool("es-train"), *RUN, "--set", "run.generations=2", "--resume-or-start",
                      str(tmp_path / "run"), "--elastic", "--hostfile", str(hostfile)])
    assert job.wait(timeout=120) == 0, job.stderr[-3000:]
    assert re.search(r"es-train --elastic: launching on 1 hostfile node: localhost \(2 ranks\); "
                     r"left out: no-such-host.invalid: a probe failed with exit code \d+\n",
                     job.stderr), job.stderr[-3000:]


def test_a_host_listed_twice_is_named_with_its_line(tmp_path):
    """'a host is listed twice' left the user to find which, in a hostfile of hundreds."""
    from es.launch.elastic import ElasticError, read_hostfile

    hostfile = tmp_path / "hosts"
    hostfile.write_text("node0:2\nnode1:2\n# spare\nnode0\n")
    with pytest.raises(ElasticError) as refused:
        read_hostfile(hostfile)
    assert str(refused.value) == (f"--hostfile {str(hostfile)!r} line 4: host 'node0' is listed "
                                  "twice (give one line its slots: host:slots)")


@pytest.mark.parametrize("flag", ["--min-nodes", "--max-restarts"])
def test_the_supervisors_flags_without_elastic_are_refused(tmp_path, flag):
    """They were accepted and did nothing: without --elastic nothing relaunches."""
    refused = run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(tmp_path / "run"),
                       flag, "3"], ranks=2, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == f"es-train: error: {flag} 3: only with --elastic"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flags, said", [
    (["--elastic"], "--elastic launches the ranks itself: start it without mpiexec or srun"),
    (["--hostfile", "hosts"], "--hostfile is for --elastic runs"),
])
def test_the_supervisor_under_mpiexec_is_refused_once_not_by_every_rank(tmp_path, flags, said):
    refused = run_cli(["es-train", "configs/cartpole.toml", "--resume-or-start",
                       str(tmp_path / "run"), *flags], ranks=3, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert refused.stderr.startswith(f"es-train: error: {said}")
    assert not (tmp_path / "run").exists()


def test_a_failed_slurm_tool_is_said_in_one_line_once():
    """scontrol starts each of its stderr lines with "scontrol: ": said once, lines joined."""
    command = ["scontrol", "requeue", "17"]
    said = subprocess.CompletedProcess(command, 1, "", "scontrol: error: Invalid job id "
                                       "specified\nscontrol: error: another line\n")
    assert tool_failure(said) == ("scontrol requeue 17: error: Invalid job id "
                                           "specified; error: another line")
    silent = subprocess.CompletedProcess(command, 3, "", "")
    assert tool_failure(silent) == "scontrol requeue 17: exit code 3"


def test_a_failure_blames_the_hostfiles_names_for_the_host_its_ranks_name():
    """Ranks report this machine's hostname; a hostfile that lists it as 127.0.0.1 and
    localhost must see those two blamed (they sit out, or come back when too few are left),
    not a name it never listed."""
    import socket

    listed = [Node("127.0.0.1", 2), Node("localhost", 2)]
    assert as_launched({socket.gethostname()}, listed) == {"127.0.0.1", "localhost"}
    assert as_launched({"localhost"}, listed) == {"localhost"}  # its own name: that one only
    assert as_launched({"no-such-host.invalid"}, listed) == {"no-such-host.invalid"}


def test_the_heartbeats_silent_rank_is_blamed_whatever_code_srun_ends_with():
    """srun ends with 137 once it kills the other tasks, not the ranks' 76, and its first
    "Killed" line names whichever task it killed first: a healthy node was blamed."""
    from es.launch.elastic import diagnose

    tail = ("es-train: peer lost: rank 2 (pid 4242 on node2) silent for 6 s\n"
            "srun: error: node0: task 0: Killed\n"
            "srun: error: node2: task 2: Killed\n")
    failure = diagnose(137, tail, ended_at=100.0)
    assert failure.lost == {"node2"} and failure.code == 137
    assert diagnose(137, "srun: error: node0: task 0: Killed\n", 100.0).lost == {"node0"}


def test_a_sighup_to_the_supervisor_stops_the_launch_as_a_sigterm_would():
    """An ssh session's end on a login node: the supervisor exited 129 with its launch still
    training, unsupervised, and the run folder's lock free for a second launch."""
    from es.core.exit_codes import CHECKPOINTED
    from es.launch.elastic import StopSignals, stopped

    class Launch:
        sent: list[int] = []

        def poll(self):
            return None

        def send_signal(self, signum):
            self.sent.append(signum)

    with StopSignals() as stops:
        assert signal.getsignal(signal.SIGHUP) == stops._handle
        stops.launch = Launch()
        stops._handle(signal.SIGHUP, None)
    assert stops.signum == signal.SIGHUP and Launch.sent == [signal.SIGTERM]
    assert stopped(stops.signum, Path("/nonexistent")) == CHECKPOINTED


@pytest.mark.parametrize("trains", [True, False])
def test_training_again_is_the_relaunchs_own_row_not_the_lost_launchs(tmp_path, trains):
    """The lost launch's rows past the checkpoint (generations 21-25, checkpoint 20) made
    "training again" come at the relaunch's first look, before its ranks had started, and a
    relaunch that died before training was said to train."""
    import sys

    from es.launch.elastic import StopSignals, run_launch

    header = "generation,timesteps\n"
    (tmp_path / "progress.csv").write_text(header + "".join(f"{g},{g}\n" for g in range(1, 26)))
    resume = ("import pathlib, sys, time; p = pathlib.Path(sys.argv[1]) / 'progress.csv'; "
              "time.sleep(0.6); p.write_text(sys.argv[2]); time.sleep(0.6); "
              + ("p.open('a').write('21,21\\n'); time.sleep(0.3)" if trains else "sys.exit(1)"))
    kept = header + "".join(f"{g},{g}\n" for g in range(1, 21))
    seen: list[float] = []
    started = time.monotonic()
    with StopSignals() as stops:
        launch = run_launch([sys.executable, "-c", resume, str(tmp_path), kept], tmp_path, 20,
                            seen.append, stops)
    if trains:
        assert launch.code == 0 and len(seen) == 1 and launch.trained_at == seen[0]
        assert seen[0] - started >= 1.2  # after the new row, not at the first look
    else:
        assert launch.code == 1 and seen == [] and launch.trained_at is None
