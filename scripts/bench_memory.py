"""Per-rank memory of the noise table: one shared copy per node vs one private copy per rank.

    python scripts/bench_memory.py --ranks 2 --table-size 25000000

Re-launches itself under ``mpiexec -n RANKS`` (the mpiexec beside this Python). Each rank
reports RSS (counts shared pages in every process that touches them), the shared part of
it, and PSS (shared pages divided among the processes that map them: the honest share).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from report import emit, python_on_ranks, run_script, script_parser  # noqa: E402

from es.cli.args import add_flag, add_out, add_ranks  # noqa: E402


def memory_mb() -> dict[str, float]:
    fields = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":")
        fields[name.strip()] = int(value.split()[0]) / 1024
    status = Path("/proc/self/status").read_text()
    shmem = next(int(line.split()[1]) for line in status.splitlines()
                 if line.startswith("RssShmem")) / 1024
    return {"rss_mb": fields["Rss"], "rss_shared_mb": shmem, "pss_mb": fields["Pss"]}


def measure(table_size: int, out: Path) -> None:
    from es.core.noise import NoiseTable, fill_table
    from es.parallel.comm import MPIComm

    comm = MPIComm()
    rows = []
    for mode in ("shared", "private"):
        baseline = memory_mb()
        if mode == "shared":
            table = comm.node_shared_array(table_size, np.float32, lambda a: fill_table(a, 0))
        else:
            table = NoiseTable.build(table_size, seed=0).table
        float(table.sum())  # every rank touches every page, as training eventually does
        comm.barrier()
        mem = memory_mb()
        gathered = comm.allgather_rows(np.array([[comm.rank, mem["rss_mb"], mem["rss_shared_mb"],
                                                  mem["pss_mb"], baseline["pss_mb"]]]))
        for rank, rss, shared, pss, pss0 in gathered:
            rows.append({"table": mode, "rank": int(rank), "table_mb": table_size * 4 / 2**20,
                         "rss_mb": rss, "rss_shared_mb": shared, "pss_mb": pss,
                         "pss_growth_mb": pss - pss0})
        del table
    if comm.rank == 0:
        emit(rows, out, f"Noise table memory per rank, {comm.size} ranks on one node")
        for mode in ("shared", "private"):
            growth = sum(r["pss_growth_mb"] for r in rows if r["table"] == mode)
            print(f"{mode:>8}: all ranks together grew by {growth:.0f} MB "
                  f"for a {table_size * 4 / 2**20:.0f} MB table")


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_memory.py --ranks 2 --table-size 25000000",
        "python scripts/bench_memory.py --ranks 8 --out bench-results/memory-8"])
    add_ranks(parse, "2", several=False)
    add_flag(parse, "--table-size", default=25_000_000)
    add_out(parse, "bench_memory")
    parse.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parse


def main() -> None:
    args = parser().parse_args()
    if args.worker:
        measure(args.table_size, args.out)
        return
    sys.exit(subprocess.call(python_on_ranks(args.ranks[0], __file__, "--worker",
                                             "--table-size", str(args.table_size), "--out",
                                             str(args.out))))


if __name__ == "__main__":
    run_script(main)
