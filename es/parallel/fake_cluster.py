"""A multi-host MPI job on one Linux machine, for testing what only several hosts exercise.

Each "host" is a network namespace with its own hostname (a UTS namespace) and its own
address on a bridge. MPICH's Hydra (the ``mpich`` wheel's ``mpiexec``) starts one proxy per
host through its ssh launcher, pointed at a small exec script that enters the host's
namespaces instead of logging in, and the ranks talk across hosts over TCP (libfabric's
``tcp`` provider on the host's own interface). To MPI these are separate nodes: its
shared-memory split gives one node per host (so one noise table per host), messages between
hosts travel through the kernel's network stack, and a host whose ranks all die is a lost
host. What it does not model: a real interconnect's latency and bandwidth, other MPI
implementations, separate file systems (the hosts share this machine's).

    python scripts/fake_cluster.py --hosts 2 --ranks-per-host 2 -- es-train configs/cartpole.toml
    es-bench scaling --launcher "python scripts/fake_cluster.py --hosts 2 --" --ranks 4 ...

Root is needed (namespaces, a bridge). Everything it creates is removed again when the
command ends, fails or is interrupted.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The host side of each namespace's link has this name in every namespace, so one setting
#: (``FI_TCP_IFACE``) names it on every host.
HOST_INTERFACE = "fc0"
#: What MPICH needs to talk between the namespaces: libfabric's TCP provider on the host's
#: link (UCX, the wheel's default, reads interfaces from /sys, which is not per namespace).
MPI_ENVIRONMENT = {"MPICH_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp",
                   "FI_TCP_IFACE": HOST_INTERFACE}
TOOLS = ("ip", "nsenter", "unshare", "mount", "umount")
_CLUSTER_COUNT = itertools.count()


class ClusterError(RuntimeError):
    """The fake cluster cannot be set up here (not root, a tool missing, no free subnet)."""


def _sh(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ClusterError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")


def _quiet(*command: str) -> None:
    """A teardown step: whatever it finds already gone is fine."""
    subprocess.run(command, capture_output=True)


def check_can_run() -> None:
    if os.geteuid() != 0:
        raise ClusterError("needs root: it creates network namespaces and a bridge "
                           "(run as root, e.g. in CI or with sudo)")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise ClusterError(f"needs the commands {', '.join(missing)} (iproute2, util-linux)")


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.77.0.0/16 that no interface of this machine uses yet."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for third in range(256):
        subnet = ipaddress.IPv4Network(f"10.77.{third}.0/24")
        if f" 10.77.{third}." not in used:
            return subnet
    raise ClusterError("no free subnet in 10.77.0.0/16")


class FakeCluster:
    """``hosts`` namespaced hosts named ``node0``, ``node1``, ...; a context manager that
    builds them on entry and removes them (and any process left in them) on exit."""

    def __init__(self, hosts: int) -> None:
        if hosts < 1:
            raise ValueError(f"hosts {hosts}: must be >= 1")
        self.hosts = [f"node{index}" for index in range(hosts)]
        # Named after this process (for remove_stale) and this cluster among its clusters
        # alive at once: <= 15 characters with the suffixes, as Linux allows.
        tag = f"fc{os.getpid()}{chr(ord('a') + next(_CLUSTER_COUNT) % 26)}"
        self._netns = [f"{tag}h{index}" for index in range(hosts)]
        self._links = [f"{tag}v{index}" for index in range(hosts)]
        self.bridge = f"{tag}br"
        self._folder: Path | None = None
        self._uts: list[Path] = []
        self.addresses: list[str] = []
        self.gateway = ""  # this machine's own address on the bridge, reachable from every host

    def __enter__(self) -> FakeCluster:
        check_can_run()
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def _build(self) -> None:
        remove_stale()
        self._folder = Path(tempfile.mkdtemp(prefix=f"fake-cluster-{os.getpid()}-"))
        subnet = _free_subnet()
        self.gateway = str(subnet[254])
        gateway = f"{self.gateway}/{subnet.prefixlen}"
        _sh("ip", "link", "add", self.bridge, "type", "bridge")
        _sh("ip", "addr", "add", gateway, "dev", self.bridge)
        _sh("ip", "link", "set", self.bridge, "up")
        for index, (host, netns, link) in enumerate(zip(self.hosts, self._netns, self._links,
                                                        strict=True)):
            address = f"{subnet[index + 1]}/{subnet.prefixlen}"
            _sh("ip", "netns", "add", netns)
            _sh("ip", "link", "add", link, "type", "veth", "peer", "name", HOST_INTERFACE,
                "netns", netns)
            _sh("ip", "link", "set", link, "master", self.bridge)
            _sh("ip", "link", "set", link, "up")
            for step in (["addr", "add", address, "dev", HOST_INTERFACE],
                         ["link", "set", HOST_INTERFACE, "up"], ["link", "set", "lo", "up"]):
                _sh("ip", "netns", "exec", netns, "ip", *step)
            uts = self._folder / f"uts-{host}"
            uts.touch()
            _sh("unshare", f"--uts={uts}", "hostname", host)  # the namespace outlives it
            self._uts.append(uts)
            self.addresses.append(str(subnet[index + 1]))
        self.exec_script = self._folder / "enter-host"
        cases = "\n".join(f"  {host}) exec {' '.join(self.enter(host))} /bin/sh -c \"$*\" ;;"
                          for host in self.hosts)
        self.exec_script.write_text(
            "#!/bin/sh\n# Hydra's ssh launcher calls this as: enter-host [-x] HOST COMMAND\n"
            'while [ "${1#-}" != "$1" ]; do shift; done\nhost=$1; shift\n'
            f'case "$host" in\n{cases}\n'
            '  *) echo "fake cluster: no host $host" >&2; exit 255 ;;\nesac\n')
        self.exec_script.chmod(0o755)

    def enter(self, host: str) -> list[str]:
        """The command prefix that runs a program on ``host`` (its network and hostname)."""
        index = self.hosts.index(host)
        return ["nsenter", f"--net=/run/netns/{self._netns[index]}", f"--uts={self._uts[index]}",
                "--"]

    def mpiexec(self, ranks_per_host: int, command: Sequence[str],
                mpiexec: str | None = None) -> list[str]:
        """The ``mpiexec`` command line that runs ``command`` on every host's ranks."""
        launcher = mpiexec or str(Path(sys.executable).parent / "mpiexec")
        environment = [item for name, value in MPI_ENVIRONMENT.items()
                       for item in ("-genv", name, value)]
        hosts = ",".join(f"{host}:{ranks_per_host}" for host in self.hosts)
        return [launcher, "-launcher", "ssh", "-launcher-exec", str(self.exec_script),
                "-iface", self.bridge, "-hosts", hosts, "-n",
                str(ranks_per_host * len(self.hosts)), *environment, *command]

    def hydra_environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment in which a plain ``mpiexec -f HOSTFILE`` (or ``mpiexec -hosts``)
        reaches these hosts, as ``mpiexec`` reaches a real cluster's over ssh: Hydra reads
        its launcher and interface from the environment, so a program that launches MPI jobs
        itself (``es-train --elastic``) runs here unchanged."""
        return {**(os.environ if base is None else base), "HYDRA_LAUNCHER": "ssh",
                "HYDRA_LAUNCHER_EXEC": str(self.exec_script), "HYDRA_IFACE": self.bridge,
                **MPI_ENVIRONMENT}

    def write_hostfile(self, path: Path, ranks_per_host: int) -> Path:
        path.write_text("".join(f"{host}:{ranks_per_host}\n" for host in self.hosts))
        return path

    def cut(self, host: str) -> None:
        """``host`` dies as a machine does: its link goes down and every process on it is
        killed at once."""
        _sh("ip", "link", "set", self._links[self.hosts.index(host)], "down")
        self.signal(host, signal.SIGKILL)

    def reconnect(self, host: str) -> None:
        """A cut host's link comes up again (a machine back from a reboot, empty)."""
        _sh("ip", "link", "set", self._links[self.hosts.index(host)], "up")

    def signal(self, host: str, signum: int, program: str | None = None) -> list[int]:
        """Send ``signum`` to the processes on ``host`` (those whose command line names
        ``program``, if given); returns their pids. Every target is chosen before the first
        signal: a rank killed first makes its proxy reap the others, whose command lines
        then read empty. For the same reason a target may be gone before its turn comes (the
        proxy was quicker than this loop on a loaded machine): it still counts, since it was
        running when chosen and is gone now."""
        targets = [pid for pid in self.pids(host)
                   if program is None or self._runs(pid, program)]
        for pid in targets:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        return targets

    @staticmethod
    def _runs(pid: int, program: str) -> bool:
        """Whether process ``pid``'s command line names ``program`` (False once it is gone)."""
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return any(arg.endswith(program.encode()) for arg in argv)

    def pids(self, host: str) -> list[int]:
        """The processes running on ``host`` (its network namespace)."""
        netns = self._netns[self.hosts.index(host)]
        found = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
        return [int(pid) for pid in found.stdout.split()]

    def teardown(self) -> None:
        for netns in self._netns:
            found = subprocess.run(["ip", "netns", "pids", netns], capture_output=True,
                                   text=True).stdout.split()
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        # A deleted namespace takes its veth pairs with it, but in the background: the next
        # cluster of this process (the same names) could find them still there. Deleting the
        # host's end first removes each pair at once.
        for link in self._links:
            _quiet("ip", "link", "del", link)
        for netns in self._netns:
            _quiet("ip", "netns", "del", netns)
        _quiet("ip", "link", "del", self.bridge)
        for uts in self._uts:
            _quiet("umount", str(uts))
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether a process of this id exists (the owner of a cluster's leftovers)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> None:
    """Remove what clusters of processes that no longer exist left behind (a SIGKILL gives
    no chance to clean up): their namespaces (and any process in them), bridges, hostname
    namespaces and folders. Each is named after the process that made it."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in re.findall(r"^(fc(\d+)[a-z]h\d+)", netns, re.M):
        if not process_alive(int(name[1])):
            for pid in subprocess.run(["ip", "netns", "pids", name[0]], capture_output=True,
                                      text=True).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            _quiet("ip", "netns", "del", name[0])
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for bridge, pid in re.findall(r"^\d+: (fc(\d+)[a-z]br)[:@]", links, re.M):
        if not process_alive(int(pid)):
            _quiet("ip", "link", "del", bridge)
    for folder in Path(tempfile.gettempdir()).glob("fake-cluster-*-*"):
        pid = folder.name.split("-")[2]
        if pid.isdigit() and not process_alive(int(pid)):
            for uts in folder.glob("uts-*"):
                _quiet("umount", str(uts))
            shutil.rmtree(folder, ignore_errors=True)


def run(hosts: int, ranks_per_host: int, command: Sequence[str]) -> int:
    """Run ``command`` on ``hosts`` x ``ranks_per_host`` ranks; returns mpiexec's exit code.
    The cluster is removed whatever happens."""
    with FakeCluster(hosts) as cluster:
        return run_forwarding_signals(cluster.mpiexec(ranks_per_host, command))


def run_forwarding_signals(command: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run ``command`` in a session of its own and return its exit code; SIGINT and SIGTERM
    go on to it, and it is killed if this process stops waiting for any other reason."""
    job = subprocess.Popen(list(command), env=env, start_new_session=True)

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return job.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
