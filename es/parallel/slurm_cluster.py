"""A real Slurm on this machine, for testing what only a scheduler exercises: ``srun``,
``sbatch``, time limits, requeue and a lost node.

The nodes are the fake cluster's network-namespaced hosts (``es.parallel.fake_cluster``),
each with its own hostname, address and ``slurmd``; ``slurmctld`` runs on this machine and
reaches them over the bridge, as a controller reaches compute nodes over the network. Every
host also has its own ``munged``: munge refuses a credential it has decoded before, and the
credential of a step that spans several nodes is decoded by each of them, so hosts that
shared one munged could not run a multi-node step. Each node reads a ``slurm.conf`` that
differs from the controller's only in the munge socket it names.

    python scripts/slurm_cluster.py --nodes 2 --cpus-per-node 2 -- srun -N 2 -n 4 hostname

Root and Slurm's and munge's Debian packages are needed (``apt-get install slurm-wlm
munge``). Everything it starts and writes is removed again when the command ends, fails or
is interrupted; a cluster whose process was killed is removed by the next one.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from es.parallel.fake_cluster import (
    MPI_ENVIRONMENT,
    ClusterError,
    FakeCluster,
    process_alive,
    run_forwarding_signals,
)
from es.parallel.fake_cluster import check_can_run as check_namespaces

#: The programs the cluster runs, and the Debian packages that have them.
PROGRAMS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol", "sinfo", "squeue")
PACKAGES = "slurm-wlm munge"
#: Scheduler settings for tests, each chosen so that what a test waits for happens within
#: seconds, not Slurm's production minutes; ``settings=`` replaces any of them.
TEST_SETTINGS = {
    "SlurmdTimeout": "5",  # a node that stops answering is DOWN after this (default 300)
    "KillWait": "5",  # SIGTERM to SIGKILL at a time limit or cancel (default 30)
    # A lost node's pings fail only after this (a refused connection is retried until then),
    # twice before it is DOWN: 10 s (the default) took 26 s, 4 s 13 s.
    "MessageTimeout": "5",
    "InactiveLimit": "0",
    "MinJobAge": "300",  # finished jobs stay visible to scontrol for 5 minutes
    "ReturnToService": "2",  # a node whose slurmd registers again is usable again
    "SchedulerType": "sched/backfill",
    # A requeued job may start again cred_expire + 1 s later (default 121 s); the main
    # scheduler looks every 2 s instead of 60.
    "SchedulerParameters": "sched_interval=2,bf_interval=1",
}
READY_TIMEOUT_S = 60.0


def check_can_run() -> None:
    """Raises ClusterError naming what is missing: root, namespaces' tools, Slurm, munge."""
    check_namespaces()
    missing = [program for program in PROGRAMS if shutil.which(program) is None]
    if missing:
        raise ClusterError(f"needs {', '.join(missing)}: install Debian's packages "
                           f"(apt-get install {PACKAGES})")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


class SlurmCluster:
    """``nodes`` Slurm nodes ``node0``, ``node1``, ... with ``cpus_per_node`` CPUs each (more
    than the machine has is fine: Slurm is told to trust the configuration) in one partition,
    ``debug``. A context manager: the daemons start on entry and are stopped on exit."""

    def __init__(self, nodes: int, cpus_per_node: int,
                 settings: Mapping[str, str] | None = None) -> None:
        if nodes < 1 or cpus_per_node < 1:
            raise ValueError(f"nodes {nodes}, cpus_per_node {cpus_per_node}: both must be >= 1")
        self.cpus_per_node = cpus_per_node
        self.settings = {**TEST_SETTINGS, **(settings or {})}
        self.hosts_cluster = FakeCluster(nodes)
        self.hosts = self.hosts_cluster.hosts
        self.folder: Path | None = None
        self._daemons: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> SlurmCluster:
        check_can_run()
        remove_stale()
        try:
            self.hosts_cluster.__enter__()
            self._start()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def _start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix=f"slurm-cluster-{os.getpid()}-"))
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for name in ("controller", *self.hosts):
            self._start_munged(name, key)
        port = _free_port()
        for name in ("controller", *self.hosts):
            self.conf(name).write_text(self._slurm_conf(name, port))
        self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-f", str(self.conf("controller"))])
        for host in self.hosts:
            self._spawn(f"slurmd-{host}", [*self.hosts_cluster.enter(host), "slurmd", "-D",
                                           "-f", str(self.conf(host)), "-N", host])
        self._wait_ready()

    def conf(self, name: str) -> Path:
        """The slurm.conf of ``name``: "controller" (this machine's client tools) or a host."""
        assert self.folder is not None
        return self.folder / f"slurm-{name}.conf"

    def munge_socket(self, name: str) -> Path:
        assert self.folder is not None
        return self.folder / f"munge-{name}.socket"

    def _start_munged(self, name: str, key: Path) -> None:
        assert self.folder is not None
        self._spawn(f"munged-{name}", [
            "munged", "--foreground", "--force", f"--socket={self.munge_socket(name)}",
            f"--key-file={key}", f"--pid-file={self.folder / f'munged-{name}.pid'}",
            f"--seed-file={self.folder / f'munged-{name}.seed'}",
            f"--log-file={self.folder / f'munged-{name}.log'}"])
        deadline = time.monotonic() + 10
        while not self.munge_socket(name).exists():
            if self._daemons[f"munged-{name}"].poll() is not None or time.monotonic() > deadline:
                raise ClusterError(f"munged for {name} did not start: "
                                   f"{self._log_tail(f'munged-{name}')}")
            time.sleep(0.05)

    def _slurm_conf(self, name: str, port: int) -> str:
        assert self.folder is not None
        folder = self.folder
        lines = {
            "ClusterName": "estest",
            "SlurmctldHost": f"{socket.gethostname().split('.')[0]}"
                             f"({self.hosts_cluster.gateway})",
            "SlurmctldPort": str(port),
            "SlurmdPort": "6818",  # one per host: each namespace has its own ports
            "SlurmUser": "root",
            "SlurmdUser": "root",
            "AuthType": "auth/munge",
            "CredType": "cred/munge",
            "AuthInfo": f"socket={self.munge_socket(name)},cred_expire=10",
            "StateSaveLocation": str(folder / "state"),
            "SlurmdSpoolDir": str(folder / "spool-%n"),
            "SlurmctldPidFile": str(folder / "slurmctld.pid"),
            "SlurmdPidFile": str(folder / "slurmd-%n.pid"),
            "SlurmctldLogFile": str(folder / "slurmctld.log"),
            "SlurmdLogFile": str(folder / "slurmd-%n.log"),
            "ProctrackType": "proctrack/linuxproc",  # no cgroups needed
            "TaskPlugin": "task/none",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_CPU",
            "SlurmdParameters": "config_overrides",  # CPUs as configured, not as detected
            "MpiDefault": "none",  # as many sites: srun --mpi=pmi2 asks for PMI explicitly
            "JobAcctGatherType": "jobacct_gather/none",
            "AccountingStorageType": "accounting_storage/none",
            "JobCompType": "jobcomp/none",
            "DebugFlags": "NO_CONF_HASH",  # the nodes' files differ in their munge socket
            # Job ids of their own: MPICH names its shared-memory segments after the job, and
            # a killed job's segment in /dev/shm outlives it; a later cluster's job with the
            # same id would then fail to start its ranks ("Out of memory") or hang.
            "FirstJobId": str(random.randrange(1_000, 60_000_000)),
            **self.settings,
        }
        nodes = [f"NodeName={host} NodeAddr={address} CPUs={self.cpus_per_node} State=UNKNOWN"
                 for host, address in zip(self.hosts, self.hosts_cluster.addresses,
                                          strict=True)]
        return "\n".join([*(f"{key}={value}" for key, value in lines.items()), *nodes,
                          "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
                          ""])

    def _spawn(self, name: str, command: list[str]) -> None:
        assert self.folder is not None
        log = open(self.folder / f"{name}.out", "wb")  # noqa: SIM115 (kept by the daemon)
        self._daemons[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL,
                                               start_new_session=True)
        log.close()

    def _log_tail(self, name: str, lines: int = 3) -> str:
        assert self.folder is not None
        text = ""
        for path in (self.folder / f"{name}.out", self.folder / f"{name}.log"):
            if path.is_file():
                text += path.read_text(errors="replace")
        return " | ".join(text.strip().splitlines()[-lines:]) or "no output"

    def node_states(self) -> dict[str, str]:
        """{node: Slurm's state of it}, e.g. {"node0": "idle", "node1": "down*"}."""
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True,
                              text=True, env=self.environment(), timeout=30)
        return dict(line.split() for line in done.stdout.splitlines() if line.strip())

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            for name, daemon in self._daemons.items():
                if daemon.poll() is not None:
                    raise ClusterError(f"{name} exited ({daemon.returncode}): "
                                       f"{self._log_tail(name)}")
            states = self.node_states()
            if len(states) == len(self.hosts) and all(
                    state == "idle" for state in states.values()):
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"nodes not idle after {READY_TIMEOUT_S:.0f} s ({states}): "
                                   f"{self._log_tail('slurmctld')}")
            time.sleep(0.2)

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for Slurm's client tools and the jobs they start: this cluster's
        slurm.conf, and MPICH's settings for talking between the hosts."""
        assert self.folder is not None
        return {**(os.environ if base is None else base), "SLURM_CONF": str(self.conf(
            "controller")), **MPI_ENVIRONMENT}

    def lose(self, host: str) -> None:
        """``host`` fails as a machine does: every process on it (its slurmd, the job steps'
        slurmstepd and tasks) is killed at once."""
        for pid in self.hosts_cluster.pids(host):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def teardown(self) -> None:
        for daemon in self._daemons.values():
            if daemon.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(daemon.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for daemon in self._daemons.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.wait(max(0.0, deadline - time.monotonic()))
            if daemon.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
        self.hosts_cluster.teardown()  # and whatever job processes are left on the hosts
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def remove_stale() -> None:
    """Stop the daemons of clusters whose process no longer exists (a SIGKILL gives no
    chance to clean up) and remove their folders; their hosts go with the fake cluster's
    own clean-up."""
    for folder in Path(tempfile.gettempdir()).glob("slurm-cluster-*-*"):
        owner = folder.name.split("-")[2]
        if not owner.isdigit() or process_alive(int(owner)):
            continue
        for pid_file in folder.glob("*.pid"):
            text = pid_file.read_text().strip()
            if re.fullmatch(r"\d+", text):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(text), signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def run(nodes: int, cpus_per_node: int, command: Sequence[str]) -> int:
    """Run ``command`` with the cluster's client tools; returns its exit code. The cluster is
    removed whatever happens."""
    with SlurmCluster(nodes, cpus_per_node) as cluster:
        return run_forwarding_signals(command, cluster.environment())
