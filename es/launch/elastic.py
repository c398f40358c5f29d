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

import codecs
import collections
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol, TextIO

from es.core.exit_codes import CHECKPOINTED, USAGE_ERROR

#: A probe of a host that has not answered in this many seconds counts as dead.
PROBE_TIMEOUT_S = 15.0
#: What the ranks' heartbeat line says of each silent rank: "rank 4 (pid 123 on node2)".
SILENT_RANK = re.compile(r"rank (\d+) \(pid \d+ on (\S+?)\) silent for (\d+) s")
#: Hydra's report of a rank that ended badly: "PID 12 RUNNING AT node2" then "EXIT CODE: 9",
#: the number of the signal that killed it. A rank killed by SIGKILL or SIGTERM was killed
#: from outside (a person, the OOM killer, a dying machine); other codes are the run's own.
HYDRA_ENDED = re.compile(r"RUNNING AT (\S+)\s*\n=\s*EXIT CODE: (\d+)")
KILLING_SIGNALS = {str(int(signal.SIGKILL)), str(int(signal.SIGTERM))}
#: srun's report of a failed node, and of tasks that died. When one task dies, srun
#: (--kill-on-bad-exit) kills the others and reports them too: the first report is the cause.
SRUN_NODE_FAILED = re.compile(r"srun: error: Node failure on (\S+)")
SRUN_TASKS_KILLED = re.compile(r"srun: error: (\S+): tasks? [\d,-]+: Killed")
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

    def candidates(self) -> list[Node]:
        """Every node the run may use: the hostfile's, or the job's nodes now."""
        ...

    def answering(self, nodes: Sequence[Node]) -> tuple[list[Node], dict[str, str]]:
        """Those of ``nodes`` that can run ranks now, and {node: why not} for the others."""
        ...

    def command(self, nodes: Sequence[Node], program: Sequence[str]) -> list[str]: ...


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
        if host in {node.name for node in nodes}:
            raise ElasticError(f"--hostfile {str(path)!r} line {number}: host {host!r} is "
                               "listed twice (give one line its slots: host:slots)")
        nodes.append(Node(host, int(slots or 1)))
    if not nodes:
        raise ElasticError(f"--hostfile {str(path)!r}: no hosts in it")
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

    def candidates(self) -> list[Node]:
        return list(self.nodes)

    def answering(self, nodes: Sequence[Node]) -> tuple[list[Node], dict[str, str]]:
        """Each host runs ``true`` through Hydra, all at once: a host that is down, cut off
        or cannot start a process does not answer within PROBE_TIMEOUT_S."""
        probes = {node.name: subprocess.Popen(
            [self.mpiexec, "-hosts", node.name, "-n", "1", "true"], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            for node in nodes}
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        why: dict[str, str] = {}
        for name, probe in probes.items():
            try:
                code = probe.wait(max(0.0, deadline - time.monotonic()))
                if code != 0:
                    why[name] = f"a probe failed with exit code {code}"
            except subprocess.TimeoutExpired:
                why[name] = f"no answer to a probe within {PROBE_TIMEOUT_S:g} s"
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(probe.pid, signal.SIGKILL)
                probe.wait()
        return [node for node in nodes if node.name not in why], why

    def command(self, nodes: Sequence[Node], program: Sequence[str]) -> list[str]:
        hostfile = self.folder / "hosts"
        hostfile.write_text("".join(f"{node.name}:{node.slots}\n" for node in nodes))
        total = sum(node.slots for node in nodes)
        return [self.mpiexec, "-f", str(hostfile), "-n", str(total), *program]


def slurm_tasks_per_node(text: str) -> list[int]:
    """Slurm's compact task counts, ``2(x3),1`` -> [2, 2, 2, 1]."""
    counts = []
    for part in text.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if match is None:
            raise ElasticError(f"SLURM_TASKS_PER_NODE={text!r}: not Slurm's format")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def tool_failure(done: subprocess.CompletedProcess) -> str:
    """One line for a failed Slurm tool: its command, then its stderr's lines joined, without
    the tool's own "scontrol: " in front of each (it would be said twice)."""
    command = list(done.args)
    prefix = f"{Path(command[0]).name}: "
    lines = [line.strip().removeprefix(prefix) for line in done.stderr.splitlines()]
    said = "; ".join(line for line in lines if line) or f"exit code {done.returncode}"
    return f"{' '.join(command)}: {said}"


def _slurm(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise ElasticError(tool_failure(done))
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

    def candidates(self) -> list[Node]:
        return [Node(name, self.slots) for name in self._job_nodes()]

    def _job_nodes(self) -> list[str]:
        shown = _slurm("scontrol", "show", "job", self.job)
        listed = re.search(r"\bNodeList=(\S+)", shown)
        if listed is None or listed.group(1) == "(null)":
            return []
        return _slurm("scontrol", "show", "hostnames", listed.group(1)).split()

    def answering(self, nodes: Sequence[Node]) -> tuple[list[Node], dict[str, str]]:
        """Slurm's own view: a node it does not hear from is marked ``*`` (not responding)
        and later DOWN, and leaves the job."""
        if not nodes:
            return [], {}
        states = dict(line.split(maxsplit=1) for line in _slurm(
            "sinfo", "-h", "-N", "-o", "%N %t", "-n", ",".join(n.name for n in nodes)
        ).splitlines() if line.strip())
        why = {}
        for node in nodes:
            state = states.get(node.name, "unknown").strip()
            if "*" in state or state.startswith(("down", "drain", "fail", "unk", "npc")):
                why[node.name] = f"Slurm says {state}"
        return [node for node in nodes if node.name not in why], why

    def command(self, nodes: Sequence[Node], program: Sequence[str]) -> list[str]:
        # --overlap: Slurm 22.05 may still count the killed step's CPUs as busy on the
        # survivors; the new step is the only one running there.
        return ["srun", self.srun_mpi, "--kill-on-bad-exit=1", "--overlap",
                f"--nodes={len(nodes)}", f"--ntasks={len(nodes) * self.slots}",
                f"--ntasks-per-node={self.slots}",
                f"--nodelist={','.join(node.name for node in nodes)}", *program]


def newest_checkpoint(run_dir: Path) -> int:
    """The generation of the newest checkpoint's JSON (written last), 0 if none."""
    generations = [int(match.group(1)) for path in (run_dir / "checkpoints").glob("ckpt-*.json")
                   if (match := CHECKPOINT_NAME.search(path.name))]
    return max(generations, default=0)


def progress_version(run_dir: Path) -> tuple[int, int, int] | None:
    """What tells one progress.csv from the same file written since: (inode, size,
    modification time in ns); None while there is none."""
    try:
        stat = (run_dir / "progress.csv").stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


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
    since: str = "the launch ended"  # what lost_at is


def diagnose(code: int, tail: str, ended_at: float) -> Failure:
    """What the launch's last stderr lines say: the heartbeat's silent ranks (exit 76, or
    whatever code srun then ends with: 137 once it kills the others), Hydra's or srun's
    killed ranks and failed nodes; nothing for a failure of the run itself (an error line, a
    NaN, a bug), which a relaunch would repeat. The heartbeat's line goes first: srun's
    "Killed" lines name whichever task it killed first, a healthy node as often as not."""
    silent = SILENT_RANK.findall(tail)
    if silent:
        hosts = {host for _, host, _ in silent}
        seconds = max(int(s) for *_, s in silent)
        numbers = sorted({rank for rank, _, _ in silent}, key=int)  # several may report one
        ranks = ", ".join(numbers)
        return Failure(code, hosts, f"no heartbeat from rank{'s' * (len(numbers) > 1)} {ranks} "
                       f"for {seconds} s", ended_at - seconds, "their last heartbeat")
    ended = [(host, number) for host, number in HYDRA_ENDED.findall(tail)
             if number in KILLING_SIGNALS]
    if ended:
        signals = ", ".join(sorted({number for _, number in ended}))
        return Failure(code, {host for host, _ in ended}, f"its ranks were killed by signal "
                       f"{signals}, as mpiexec reported", ended_at)
    failed = set(SRUN_NODE_FAILED.findall(tail))
    if failed:
        return Failure(code, failed, "Slurm found the node not responding", ended_at)
    first_killed = SRUN_TASKS_KILLED.search(tail)
    if first_killed:
        return Failure(code, {first_killed.group(1)}, "its tasks were killed, as srun "
                       "reported", ended_at)
    return Failure(code, set(), "", ended_at)


def _addresses(host: str) -> set[str]:
    try:
        return {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return set()


def _this_machine(host: str) -> bool:
    return host == socket.gethostname() or any(
        address.startswith("127.") or address == "::1" for address in _addresses(host))


def as_launched(hosts: set[str], launched: Sequence[Node]) -> set[str]:
    """The launched nodes that the hosts a failure names are. Ranks and mpiexec name a host
    by its own hostname, a hostfile may name it by an address or an alias (127.0.0.1,
    localhost): matched by name, else by a shared address, else both being this machine. A
    host that matches none is kept as named."""
    names = {node.name for node in launched}
    matched: set[str] = set()
    for host in hosts:
        if host in names:
            matched.add(host)
            continue
        addresses, here = _addresses(host), _this_machine(host)  # one lookup, not per node
        same = {node.name for node in launched if addresses & _addresses(node.name)
                or (here and _this_machine(node.name))}
        matched |= same or {host}
    return matched


@dataclass
class Launch:
    code: int
    tail: str
    ended_at: float
    trained_at: float | None  # when the run's first new generation was written


class StopSignals:
    """The supervisor's stop signals (a person's Ctrl-C, Slurm's SIGUSR1 ahead of the time
    limit, a SIGTERM): each goes on to the running launch (mpiexec and srun pass it to every
    rank, which checkpoint and stop) and is remembered, so that a launch it ended, whatever
    its exit code, is not taken for a lost node and relaunched. Installed for the whole
    supervision: one arriving between launches stops it too."""

    #: SIGHUP too: a login node's ssh session ending, which left the launch training with
    #: no supervisor (and the run folder's lock free for a second one).
    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)

    def __init__(self) -> None:
        self.signum = 0
        self.launch: subprocess.Popen[bytes] | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        self.signum = self.signum or signum
        if self.launch is not None and self.launch.poll() is None:
            self.forward(self.launch, signum)

    @staticmethod
    def forward(launch: subprocess.Popen[bytes], signum: int) -> None:
        """``signum`` to the launch; a SIGHUP as SIGTERM, which the ranks stop on (Hydra
        does not pass a SIGHUP on to them)."""
        launch.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)


#: Linux's prctl option that sends a signal to a process when its parent dies.
PR_SET_PDEATHSIG = 1


def stop_with_parent(parent: int) -> Callable[[], None] | None:
    """What a launch runs before its exec so that it stops as a SIGTERM stops it (every rank
    checkpoints and exits) when this supervisor dies, even by SIGKILL: a launch left training
    unsupervised also leaves the run folder's lock free for a second one. Linux only."""
    if not sys.platform.startswith("linux"):
        return None

    def arm() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the supervisor died before the prctl
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def run_launch(command: Sequence[str], run_dir: Path, resumed_from: int,
               on_trained: Callable[[float], None], stops: StopSignals) -> Launch:
    """Run one launch to its end: its output goes on to ours (its last lines kept: Hydra
    reports a dead rank on stdout) through unlinked files, not pipes, which died with a
    supervisor killed outright and took mpiexec with them before its ranks had saved their
    stop checkpoint; ``stops`` passes stop signals on to it, and
    ``on_trained`` is called once its first generation past ``resumed_from`` is in
    progress.csv. The lost launch's rows past the checkpoint are there until this one's
    resume rewrites the file: only a row written since it started counts (they had made
    "training again" come out at once, before the new ranks had started)."""
    lost_launchs_rows = progress_version(run_dir)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        launch = subprocess.Popen(list(command), stdout=out, stderr=err, start_new_session=True,
                                  preexec_fn=stop_with_parent(os.getpid()))
        return _supervise_launch(launch, (out, err), run_dir, resumed_from, lost_launchs_rows,
                                 on_trained, stops)


def _follow(written: BinaryIO, to: TextIO, tail: collections.deque[str],
            ended: threading.Event) -> None:
    """Copy what a launch writes into ``written`` on to ``to`` as it comes, line by line,
    keeping the lines in ``tail``; after ``ended``, up to the file's end."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    read, pending = 0, ""
    while True:
        last_look = ended.is_set()
        chunk = os.pread(written.fileno(), 1 << 16, read)
        read += len(chunk)
        pending += decoder.decode(chunk, final=last_look and not chunk)
        *lines, pending = pending.split("\n")
        for line in lines:
            to.write(line + "\n")
            tail.append(line + "\n")
        to.flush()
        if not chunk:
            if last_look:
                break
            time.sleep(0.05)
    if pending:
        to.write(pending)
        tail.append(pending)
        to.flush()


def _supervise_launch(launch: subprocess.Popen[bytes], written: tuple[BinaryIO, BinaryIO],
                      run_dir: Path, resumed_from: int,
                      lost_launchs_rows: tuple[int, int, int] | None,
                      on_trained: Callable[[float], None], stops: StopSignals) -> Launch:
    """``run_launch``'s watch over a started launch, its output followed from ``written``."""
    tail: collections.deque[str] = collections.deque(maxlen=200)
    ended = threading.Event()
    copiers = [threading.Thread(target=_follow, args=(file, to, tail, ended), daemon=True)
               for file, to in zip(written, (sys.stdout, sys.stderr), strict=True)]
    for copier in copiers:
        copier.start()
    stops.launch = launch
    if stops.signum:  # it came while the launch was starting
        stops.forward(launch, stops.signum)
    trained_at = None
    try:
        while launch.poll() is None:
            if (trained_at is None and progress_version(run_dir) != lost_launchs_rows
                    and last_progress_generation(run_dir) > resumed_from):
                trained_at = time.monotonic()
                on_trained(trained_at)
            time.sleep(0.1)
    finally:
        stops.launch = None
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
    ended_at = time.monotonic()
    ended.set()
    for copier in copiers:
        copier.join(timeout=5)
    return Launch(launch.returncode, "".join(tail), ended_at, trained_at)


def say(message: str) -> None:
    print(f"es-train --elastic: {message}", file=sys.stderr, flush=True)


def _names(nodes: Sequence[Node]) -> str:
    return ", ".join(node.name for node in nodes)


def choose_nodes(nodes: Nodes, blamed: set[str], min_nodes: int
                 ) -> tuple[list[Node], dict[str, str]]:
    """The nodes that answer, leaving out those blamed for the last failure while enough
    others answer (a node whose ranks died or hung may be sick, though it answers); with
    too few, the blamed ones that answer come back. In the candidates' order."""
    candidates = nodes.candidates()
    fresh, why = nodes.answering([node for node in candidates if node.name not in blamed])
    suspects = [node for node in candidates if node.name in blamed]
    if len(fresh) < min_nodes and suspects:
        back, still = nodes.answering(suspects)
        why |= still
        chosen = {node.name for node in fresh + back}
        return [node for node in candidates if node.name in chosen], why
    return fresh, why | {node.name: "lost in the last launch" for node in suspects}


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
    with StopSignals() as stops:
        return _supervise(nodes, program, run_dir, min_nodes, max_restarts, stops)


def _supervise(nodes: Nodes, program: Sequence[str], run_dir: Path, min_nodes: int,
               max_restarts: int, stops: StopSignals) -> int:
    blamed: set[str] = set()
    restarts, previous_failure_at, failure = 0, None, None
    while True:
        if stops.signum:
            return stopped(stops.signum, run_dir)
        # At the first launch only: under Slurm each look at the nodes is two scontrol calls.
        if failure is None and len(listed := nodes.candidates()) < min_nodes:
            # No later start of the same command can find more: not a case for exit 75,
            # which a requeueing wrapper would retry for ever.
            say(f"--min-nodes {min_nodes}: the {nodes.kind} lists {len(listed)} node"
                f"{'s' * (len(listed) != 1)} ({_names(listed) or 'none'}); give at most "
                f"{len(listed)}, or more nodes (exit code {USAGE_ERROR})")
            return USAGE_ERROR
        usable, why = choose_nodes(nodes, blamed, min_nodes)
        if stops.signum:  # it came during the probes: a launch would start before it got it
            return stopped(stops.signum, run_dir)
        if len(usable) < min_nodes:
            left = ", ".join(f"{name} ({reason})" for name, reason in why.items())
            saved = newest_checkpoint(run_dir)
            state = (f"The checkpoint of generation {saved} is intact: the same command "
                     "continues the run" if saved else
                     "No checkpoint yet: the same command starts the run")
            say(f"{len(usable)} usable node{'s' * (len(usable) != 1)} "
                f"({_names(usable) or 'none'}), fewer than --min-nodes {min_nodes}"
                f"{f'; not usable: {left}' if left else ''}. {state} (exit code "
                f"{CHECKPOINTED})")
            return CHECKPOINTED
        resumed_from = newest_checkpoint(run_dir)
        ranks = sum(node.slots for node in usable)
        where = f"{_names(usable)} ({ranks} rank{'s' * (ranks != 1)})"
        if failure is None:
            left_out = "; ".join(f"{name}: {reason}" for name, reason in why.items())
            say(f"launching on {len(usable)} {nodes.kind} node"
                f"{'s' * (len(usable) != 1)}: {where}"
                + (f"; left out: {left_out}" if left_out else ""))
            note = None
        else:
            lost = ", ".join(sorted(failure.lost)) or "no node"
            not_used = "; ".join(f"{name}: {reason}" for name, reason in why.items()
                                 if name not in failure.lost)
            note = (f"relaunch {restarts}: lost {lost} ({failure.how}); resumed from "
                    f"generation {resumed_from} on {where}"
                    + (f"; also left out: {not_used}" if not_used else ""))
        lost_at, since = (failure.lost_at, failure.since) if failure else (0.0, "")

        def trained(at: float, note: str | None = note, lost_at: float = lost_at,
                    since: str = since) -> None:
            if note is not None:
                say(f"{note}; training again {at - lost_at:.1f} s after {since}")

        launch = run_launch(nodes.command(usable, program), run_dir, resumed_from, trained,
                            stops)
        if note is not None and launch.trained_at is None:
            say(f"{note}; it ended before training again (exit code {launch.code})")
        if launch.code in (0, USAGE_ERROR, CHECKPOINTED) or launch.code == 128 + signal.SIGINT:
            return launch.code
        if stops.signum:  # e.g. srun killed the ranks still saving when the first exited 75
            return stopped(stops.signum, run_dir, launch.code)
        failure = diagnose(launch.code, launch.tail, launch.ended_at)
        failure.lost = as_launched(failure.lost, usable)
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


def stopped(signum: int, run_dir: Path, code: int | None = None) -> int:
    """The exit code after a stop signal ended the supervision: 130 for SIGINT (a person),
    else CHECKPOINTED, so that a batch script requeues the job."""
    ended = "" if code is None else f" (the launch ended with exit code {code})"
    leave = 128 + signum if signum == signal.SIGINT else CHECKPOINTED
    say(f"stopped by {signal.Signals(signum).name}{ended}; the checkpoint of generation "
        f"{newest_checkpoint(run_dir)} is intact: the same command continues the run "
        f"(exit code {leave})")
    return leave


def elastic_folder() -> contextlib.AbstractContextManager[str]:
    """A scratch folder for the launches' hostfiles, removed at the end."""
    return tempfile.TemporaryDirectory(prefix="es-elastic-")
