"""``scripts/fake_cluster.py``: an MPI command across H network-namespaced hosts on this
machine (root only); the cluster itself is ``es.parallel.fake_cluster``.

    python scripts/fake_cluster.py --hosts 2 --ranks-per-host 2 -- es-train configs/cartpole.toml
"""

from __future__ import annotations

import argparse
import shutil
import sys

from es.cli.args import ArgumentParser, add_flag, fail
from es.parallel.fake_cluster import ClusterError, run


def parser() -> argparse.ArgumentParser:
    parse = ArgumentParser(
        prog="fake_cluster.py",
        description="Run an MPI command across H network-namespaced hosts on this machine "
        "(root only): each its own hostname and address, TCP between them.",
        examples=["python scripts/fake_cluster.py --hosts 2 --ranks-per-host 2 -- es-train "
                  "configs/cartpole.toml",
                  "es-bench scaling --launcher 'python scripts/fake_cluster.py --hosts 2 --' "
                  "--ranks 4 --synthetic-step-ms 2"])
    add_flag(parse, "--hosts", default=2)
    add_flag(parse, "--ranks-per-host", "or give mpiexec's -n N after --: N / H each")
    parse.add_argument("command", nargs=argparse.REMAINDER,
                       help="-- then the command every rank runs, optionally after -n N")
    return parse


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    ranks_per_host = args.ranks_per_host
    if command[:1] == ["-n"] and len(command) > 1:  # as a launcher: `... -- -n N program`
        total = int(command[1]) if command[1].isdigit() else 0
        if total < 1 or total % args.hosts:
            return fail("fake_cluster.py", f"-n {command[1]}: must be a multiple of --hosts "
                        f"{args.hosts}")
        if ranks_per_host is not None and ranks_per_host * args.hosts != total:
            return fail("fake_cluster.py", f"-n {total} and --ranks-per-host {ranks_per_host} "
                        f"disagree for {args.hosts} hosts")
        ranks_per_host, command = total // args.hosts, command[2:]
    if not command:
        return fail("fake_cluster.py", "no command: give one after --, e.g. -- es-train "
                    "configs/cartpole.toml")
    if shutil.which(command[0]) is None:
        return fail("fake_cluster.py", f"command {command[0]!r}: not found on PATH")
    try:
        return run(args.hosts, ranks_per_host or 1, command)
    except ClusterError as error:
        return fail("fake_cluster.py", str(error))


if __name__ == "__main__":
    sys.exit(main())
