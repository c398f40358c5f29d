"""``scripts/slurm_cluster.py``: a command under a real Slurm on this machine (root, Debian's
slurm-wlm and munge); the cluster itself is ``es.parallel.slurm_cluster``.

    python scripts/slurm_cluster.py --nodes 2 --cpus-per-node 2 -- srun -N 2 -n 4 hostname
"""

from __future__ import annotations

import argparse
import shutil
import sys

from es.cli.args import ArgumentParser, fail, positive_int
from es.parallel.fake_cluster import ClusterError
from es.parallel.slurm_cluster import run


def parser() -> argparse.ArgumentParser:
    parse = ArgumentParser(
        prog="slurm_cluster.py",
        description="Run a command under a real Slurm on this machine (root only): slurmctld, "
        "and one slurmd and munged per network-namespaced node; the command gets Slurm's "
        "client tools (srun, sbatch, squeue, scontrol) set up for it.",
        examples=["python scripts/slurm_cluster.py --nodes 2 --cpus-per-node 2 -- srun "
                  "--mpi=pmi2 -N 2 -n 4 es-train configs/cartpole.toml",
                  "python scripts/slurm_cluster.py -- sh -c 'sbatch --wait --ntasks-per-node=2 "
                  "scripts/slurm_train.sbatch configs/cartpole.toml runs/cp'"])
    parse.add_argument("--nodes", type=positive_int, default=2, metavar="N",
                       help="nodes to create (default 2)")
    parse.add_argument("--cpus-per-node", type=positive_int, default=2, metavar="C",
                       help="CPUs Slurm may allocate on each node (default 2; more than the "
                       "machine has is allowed)")
    parse.add_argument("command", nargs=argparse.REMAINDER,
                       help="-- then the command, run on this machine with SLURM_CONF set")
    return parse


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        return fail("slurm_cluster.py", "no command: give one after --, e.g. -- srun -n 2 "
                    "hostname")
    if shutil.which(command[0]) is None:
        return fail("slurm_cluster.py", f"command {command[0]!r}: not found on PATH")
    try:
        return run(args.nodes, args.cpus_per_node, command)
    except ClusterError as error:
        return fail("slurm_cluster.py", str(error))


if __name__ == "__main__":
    sys.exit(main())
