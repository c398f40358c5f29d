"""The elastic supervisor: one process outside MPI that launches the ranks and, when the job
ends because a node or rank was lost, relaunches the same run on the nodes still usable, from
its newest checkpoint, until the run is done. ``es-train CONFIG --resume-or-start RUN
--elastic`` is this.

MPI jobs are all or nothing (the ``mpich`` wheel has no working ULFM to shrink a job in
place), so a lost peer ends the whole launch: a dead rank at once (Hydra, or srun with
``--kill-on-bad-exit``), a silent one after ``run.peer_timeout_s`` (the ranks' heartbeats,
exit code 76). Because results are bit-identical for any rank count and after a resume, a
run continued on fewer nodes ends exactly as an uninterrupted one: the loss costs the
generations since the last checkpoint and the relaunch's start-up.

Two ways to find nodes and launch on them (``Nodes``):
- ``HostfileNodes``: Hydra's ``mpiexec -f`` over a hostfile (``host:slots`` lines). Each host
  is probed before a launch (a one-rank ``mpiexec`` on it, through the same launcher), dead
  ones are left out, and a host that answers again comes back at the next relaunch.
- ``SlurmNodes``: inside an allocation (``sbatch --no-kill``): the job's nodes as Slurm has
  them now (a failed node leaves the job), launched with ``srun``.

This module knows launchers and schedulers and nothing of training: it reads only the run
folder's file names and the launch's own stderr.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

#: es-train's exit codes this supervisor acts on (es.cli.train defines them).
USAGE_ERROR, CHECKPOINTED, PEER_LOST = 2, 75, 76
#: A probe of a host that has not answered in this many seconds counts as dead.
PROBE_TIMEOUT_S = 15.0
#: What the ranks' heartbeat line says of each silent rank: "rank 4 (pid 123 on node2)".
SILENT_RANK = re.compile(r"rank (\d+) \(pid \d+ on (\S+?)\) silent for (\d+) s")
#: Hydra's report of a rank that ended badly ("PID 12 RUNNING AT node2" then "EXIT CODE: 9"),
#: and of the signal that ended it ("EXIT STRING: Killed (signal 9)").
HYDRA_ENDED = re.compile(r"RUNNING AT (\S+)\s*\n=\s*EXIT CODE: (\d+)")
HYDRA_SIGNAL = re.compile(r"EXIT STRING: .*\(signal (\d+)\)")
#: srun's report of a lost node or a killed task.
SRUN_LOST = re.compile(r"srun: error: (?:Node failure on (\S+)|(\S+): tasks? [\d,-]+: "
                       r"(?:Killed|Terminated|Segmentation fault))")
CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)\.json$")


class ElasticError(RuntimeError):
    """The supervisor cannot start (no hostfile, a bad one, no allocation)."""


@dataclass(frozen=True)
class Node:
    name: str
    slots: int  # ranks it runs


class Nodes(Protocol):
    """Where the ranks may run, and how to start them there."""

    kind: str  # "hostfile" or "Slurm", for the log

    def usable(self, blamed: set[str]) -> tuple[list[Node], dict[str, str]]:
        """The nodes a launch may use now, and {node: why not} for the others."""
        ...

    def command(self, nodes: Sequence[Node], program: Sequence[str]) -> list[str]: ...
    def stop(self, launch: subprocess.Popen, signum: int) -> None: ...


def read_hostfile(path: Path) -> list[Node]:
    """Hydra's hostfile: one ``host`` or ``host:slots`` per line, ``#`` comments."""
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        raise ElasticError(f"--hostfile {str(path)!r}: {error.strerror or error}") from None
    nodes = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        host, _, slots = text.partition(":")
        if not host or " " in host or (slots and not slots.isdigit()) or slots == "0":
            raise ElasticError(f"--hostfile {str(path)!r} line {number}: {line.strip()!r}: "
                               "expected host or host:slots (slots >= 1)")
        nodes.append(Node(host, int(slots or 1)))
    if not nodes:
        raise ElasticError(f"--hostfile {str(path)!r}: no hosts in it")
    if len({node.name for node in nodes}) != len(nodes):
        raise ElasticError(f"--hostfile {str(path)!r}: a host is listed twice")
    return nodes


def _mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise ElasticError("no mpiexec beside this Python or on PATH: pip install mpich")
    return found


class HostfileNodes:
    """Hydra's ``mpiexec`` over the hosts of a hostfile. How Hydra reaches a host (ssh by
    default; ``HYDRA_LAUNCHER``, ``HYDRA_LAUNCHER_EXEC`` and ``HYDRA_IFACE`` in the
    environment) is Hydra's business: the probes and the launches go the same way."""

    kind = "hostfile"

    def __init__(self, hostfile: Path, folder: Path) -> None:
        self.nodes = read_hostfile(hostfile)
        self.mpiexec = _mpiexec()
        self.folder = folder

    def usable(self, blamed: set[str]) -> tuple[list[Node], dict[str, str]]:
        candidates = [node for node in self.nodes if node.name not in blamed]
        probes = {node.name: subprocess.Popen(
            [self.mpiexec, "-hosts", node.name, "-n", "1", "true"], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            for node in candidates}
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        why = {name: "lost in the last launch" for name in blamed}
        for name, probe in probes.items():
            try:
                code = probe.wait(max(0.0, deadline - time.monotonic()))
                if code != 0:
                    why[name] = f"a probe failed (exit {code})"
            except subprocess.TimeoutExpired:
                why[name] = f"no answer to a probe within {PROBE_TIMEOUT_S:g} s"
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(probe.pid, signal.SIGKILL)
                probe.wait()
        return [node for node in self.nodes if node.name not in why], why

    def command(self, nodes: Sequence[Node], program: Sequence[str]) -> list[str]:
        hostfile = self.folder / "hosts"
        hostfile.write_text("".join(f"{node.name}:{node.slots}\n" for node in nodes))
        total = sum(node.slots for node in nodes)
        return [self.mpiexec, "-f", str(hostfile), "-n", str(total), *program]

    def stop(self, launch: subprocess.Popen, signum: int) -> None:
        launch.send_signal(signum)  # Hydra passes it on to every rank


def slurm_tasks_per_node(text: str) -> list[int]:
    """Slurm's compact task counts, ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts = []
    for part in text.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if match is None:
            raise ElasticError(f"SLURM_TASKS_PER_NODE={text!r}: not Slurm's format")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def _slurm(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise ElasticError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


class SlurmNodes:
    """The nodes of this Slurm job as Slurm has them now. With ``--no-kill`` a failed node
    leaves the job while the job goes on; the batch shell's ``SLURM_*`` variables keep the
    old counts, which ``srun`` would read, so each launch names its nodes and task counts.
    A node that is up but blamed for the last failure sits out one launch."""

    kind = "Slurm"

    def __init__(self) -> None:
        self.job = os.environ["SLURM_JOB_ID"]
        nodes = self._job_nodes()
        counts = os.environ.get("SLURM_NTASKS_PER_NODE") or os.environ.get(
            "SLURM_TASKS_PER_NODE", "")
        per_node = slurm_tasks_per_node(counts) if counts else [1] * len(nodes)
        if len(per_node) == 1:
            per_node *= len(nodes)
        self.slots = max(per_node)  # the same on every node: Slurm's --ntasks-per-node
        self.srun_mpi = os.environ.get("SRUN_MPI", "--mpi=pmi2")

    def _job_nodes(self) -> list[str]:
        shown = _slurm("scontrol", "show", "job", self.job)
        listed = re.search(r"\bNodeList=(\S+)", shown)
        if listed is None or listed.group(1) == "(null)":
            return []
        return _slurm("scontrol", "show", "hostnames", listed.group(1)).split()

    def usable(self, blamed: set[str]) -> tuple[list[Node], dict[str, str]]:
        names = self._job_nodes()
        states = dict(line.split(maxsplit=1) for line in _slurm(
            "sinfo", "-h", "-N", "-o", "%N %t", "-n", ",".join(names)).splitlines()
            if line.strip()) if names else {}
        why = {name: "lost in the last launch" for name in blamed}
        for name in names:
            state = states.get(name, "unknown").strip()
            if name not in why and ("*" in state or state.startswith(
                    ("down", "drain", "fail", "unk", "npc"))):
                why[name] = f"Slurm says {state}"
        return [Node(name, self.slots) for name in names if name not in why], why

    def command(self, nodes: Sequence[Node], program: Sequence[str]) -> list[str]:
        # --overlap: Slurm 22.05 may still count the killed step's CPUs as busy on the
        # survivors; the new step is the only one running there.
        return ["srun", self.srun_mpi, "--kill-on-bad-exit=1", "--overlap",
                f"--nodes={len(nodes)}", f"--ntasks={len(nodes) * self.slots}",
                f"--ntasks-per-node={self.slots}",
                f"--nodelist={','.join(node.name for node in nodes)}", *program]

    def stop(self, launch: subprocess.Popen, signum: int) -> None:
        launch.send_signal(signum)  # srun passes it on to every task


def newest_checkpoint(run_dir: Path) -> int:
    """The generation of the newest checkpoint's JSON (written last), 0 if none."""
    generations = [int(match.group(1)) for path in (run_dir / "checkpoints").glob("ckpt-*.json")
                   if (match := CHECKPOINT_NAME.search(path.name))]
    return max(generations, default=0)


def last_progress_generation(run_dir: Path) -> int:
    """The generation of progress.csv's last row, 0 if none."""
    try:
        with (run_dir / "progress.csv").open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            last = handle.read().decode(errors="replace").rstrip("\n").rsplit("\n", 1)[-1]
    except OSError:
        return 0
    first = last.split(",", 1)[0]
    return int(first) if first.isdigit() else 0


@dataclass
class Failure:
    """Why a launch ended: the nodes to blame, how the loss was seen, and when."""

    code: int
    lost: set[str] = field(default_factory=set)
    how: str = ""
    lost_at: float = 0.0  # time.monotonic() of the loss, as well as it is known


def diagnose(code: int, tail: str, ended_at: float) -> Failure:
    """What the launch's last stderr lines say: the heartbeat's silent ranks (exit 76),
    Hydra's or srun's killed ranks and failed nodes; nothing for a failure of the run
    itself (an error line, a NaN, a bug), which a relaunch would repeat."""
    silent = SILENT_RANK.findall(tail)
    if code == PEER_LOST and silent:
        hosts = {host for _, host, _ in silent}
        seconds = max(int(s) for *_, s in silent)
        ranks = ", ".join(sorted({rank for rank, _, _ in silent}, key=int))
        return Failure(code, hosts, f"no heartbeat from rank{'s' * (len(silent) > 1)} {ranks} "
                       f"for {seconds} s", ended_at - seconds)
    signals = set(HYDRA_SIGNAL.findall(tail))
    killed = {host for host, exit_code in HYDRA_ENDED.findall(tail) if exit_code in signals}
    if killed:
        return Failure(code, killed, f"its ranks died of signal {', '.join(sorted(signals))}, "
                       "as mpiexec reported", ended_at)
    lost = {a or b for a, b in SRUN_LOST.findall(tail)}
    if lost:
        return Failure(code, lost, "a node failed or its tasks died (reported by srun)",
                       ended_at)
    return Failure(code, set(), "", ended_at)


@dataclass
class Launch:
    code: int
    tail: str
    ended_at: float
    trained_at: float | None  # when the run's first new generation was written


def run_launch(command: Sequence[str], nodes: Nodes, run_dir: Path, resumed_from: int,
               on_trained: Callable[[float], None], env: dict[str, str] | None = None) -> Launch:
    """Run one launch to its end: its stderr goes on to ours (its last lines kept), stop
    signals go on to it, and ``on_trained`` is called once its first generation past
    ``resumed_from`` is in progress.csv."""
    launch = subprocess.Popen(list(command), stderr=subprocess.PIPE, text=True, env=env,
                              start_new_session=True)
    tail: collections.deque[str] = collections.deque(maxlen=200)

    def copy() -> None:
        assert launch.stderr is not None
        for line in launch.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            tail.append(line)

    copier = threading.Thread(target=copy, daemon=True)
    copier.start()
    previous = {signum: signal.signal(signum, lambda signum, _: nodes.stop(launch, signum))
                for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)}
    trained_at = None
    try:
        while launch.poll() is None:
            if trained_at is None and last_progress_generation(run_dir) > resumed_from:
                trained_at = time.monotonic()
                on_trained(trained_at)
            time.sleep(0.1)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
    ended_at = time.monotonic()
    copier.join(timeout=5)
    return Launch(launch.returncode, "".join(tail), ended_at, trained_at)


def say(message: str) -> None:
    print(f"es-train --elastic: {message}", file=sys.stderr, flush=True)


def _names(nodes: Sequence[Node]) -> str:
    return ", ".join(node.name for node in nodes)


def supervise(nodes: Nodes, program: Sequence[str], run_dir: Path, min_nodes: int,
              max_restarts: int) -> int:
    """Launch ``program`` (es-train ... --resume-or-start RUN_DIR) on the usable nodes, again
    after every lost peer, until it ends otherwise; returns the exit code to leave with.

    Stops, with the run's checkpoint intact, when: the run ends (0), a signal stopped it
    (75), the command line is wrong (2), fewer than ``min_nodes`` nodes are usable (75: a
    later start, e.g. a requeued Slurm job, continues), ``max_restarts`` relaunches are
    spent, or a launch fails for a reason of the run's own at the generation where the
    previous one failed (a bug, a bad config, a NaN would fail every relaunch the same way).
    """
    blamed: set[str] = set()
    restarts, previous_failure_at, failure = 0, None, None
    while True:
        usable, why = nodes.usable(blamed)
        if len(usable) < min_nodes:
            left = ", ".join(f"{name} ({reason})" for name, reason in why.items())
            say(f"{len(usable)} usable node{'s' * (len(usable) != 1)} "
                f"({_names(usable) or 'none'}), fewer than --min-nodes {min_nodes}; not "
                f"usable: {left}. The checkpoint of generation {newest_checkpoint(run_dir)} "
                f"is intact: the same command continues the run (exit code {CHECKPOINTED})")
            return CHECKPOINTED
        resumed_from = newest_checkpoint(run_dir)
        ranks = sum(node.slots for node in usable)
        where = f"{_names(usable)} ({ranks} rank{'s' * (ranks != 1)})"
        if failure is None:
            say(f"launching on {len(usable)} {nodes.kind} node"
                f"{'s' * (len(usable) != 1)}: {where}")
            note = None
        else:
            lost = ", ".join(sorted(failure.lost)) or "no node"
            not_used = "; ".join(f"{name}: {reason}" for name, reason in why.items()
                                 if name not in failure.lost)
            note = (f"relaunch {restarts}: lost {lost} ({failure.how}); resumed from "
                    f"generation {resumed_from} on {where}"
                    + (f"; also left out: {not_used}" if not_used else ""))
        lost_at = failure.lost_at if failure is not None else 0.0

        def trained(at: float, note: str | None = note, lost_at: float = lost_at) -> None:
            if note is not None:
                say(f"{note}; training again {at - lost_at:.1f} s after the loss")

        launch = run_launch(nodes.command(usable, program), nodes, run_dir, resumed_from,
                            trained)
        if note is not None and launch.trained_at is None:
            say(f"{note}; it ended before training again (exit code {launch.code})")
        if launch.code in (0, USAGE_ERROR, CHECKPOINTED) or launch.code == 128 + signal.SIGINT:
            return launch.code
        failure = diagnose(launch.code, launch.tail, launch.ended_at)
        reached = newest_checkpoint(run_dir)
        last = [line for line in launch.tail.splitlines() if line.strip()][-3:]
        if not failure.lost:
            if previous_failure_at == reached:
                say(f"the relaunch failed again at generation {reached + 1} (exit code "
                    f"{launch.code}) and no node was lost: a failure of the run itself, "
                    f"not relaunched again. Its last lines: {' | '.join(last)}")
                return launch.code
            failure.how = f"the launch failed with exit code {launch.code}"
        previous_failure_at = reached
        if restarts >= max_restarts:
            say(f"--max-restarts {max_restarts} relaunches spent; the checkpoint of "
                f"generation {reached} is intact (exit code {launch.code})")
            return launch.code
        restarts += 1
        blamed = failure.lost


def elastic_folder() -> contextlib.AbstractContextManager[str]:
    """A scratch folder for the launches' hostfiles, removed at the end."""
    return tempfile.TemporaryDirectory(prefix="es-elastic-")
