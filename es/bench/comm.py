"""``es-bench comm``: bytes and time per update, what the ES ranks exchange (scalars) against
an all-reduce of a float32 gradient of the same parameter count (data-parallel policy
gradient); and the ES exchange's time with the last rank arriving late, as the end of a
generation has it, against the same exchange through MPI's non-blocking collectives (what
``MPIComm`` used before it went point-to-point). ``comm_worker`` runs under ``mpiexec`` as
``es-bench comm-worker``."""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
from pathlib import Path
from typing import Any

from es.bench.launch import PYTHON_ON_RANKS, run_mpi
from es.bench.report import pyplot


def check_populations(populations: list[int]) -> None:
    if any(population % 2 for population in populations):
        raise ValueError(f"--populations {','.join(map(str, populations))}: counts "
                         "must be even (mirrored pairs)")


def comm_worker(params: list[int], populations: list[int], repeats: int, late_ms: float,
                out: Path) -> None:
    """Under mpiexec: time what the trainer exchanges per update (``es.parallel.exchange``,
    static schedule, no observation statistics) against an all-reduce of a float32 gradient
    of the parameter count (what data-parallel policy gradient sends), and against the same
    returns and step count through MPI's non-blocking collectives, waited on alike (tests
    between sleeps). Each timed exchange starts from a blocking barrier, the last rank
    ``late_ms`` later than the others, and ends at a blocking barrier: the last rank's time
    from its arrival until every rank has its result. Rank 0 writes ``out/comm.csv``."""
    import time

    import numpy as np

    from es.parallel.comm import MPIComm
    from es.parallel.exchange import share_results, static_share

    comm = MPIComm()
    last = comm.size - 1
    steps = np.zeros(1, dtype=np.int64)  # the int64 block: the step count alone

    rows = []
    for population in populations:
        shares = [static_share(rank, comm.size, population, True) for rank in range(comm.size)]
        returns = np.zeros(len(shares[comm.rank]))
        counts = [len(share) for share in shares]
        displacements = np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()

        def es_update(returns=returns, population=population, mine=shares[comm.rank]) -> None:
            share_results(comm, population, True, mine, returns, 0, steps[1:], dynamic=False)

        def es_collective(returns=returns, population=population, counts=counts,
                          displacements=displacements) -> None:
            gathered = np.empty(population, dtype=np.float32)
            comm._wait(comm.world.Iallgatherv(returns.astype(np.float32),
                                              [gathered, (counts, displacements)]))
            comm._wait(comm.world.Iallreduce(steps, np.empty_like(steps), op=comm._mpi.SUM))

        for dim in params:
            gradient = np.zeros(dim, dtype=np.float32)
            timings = {}
            exchanges = (("es", es_update), ("es_collective", es_collective),
                         ("allreduce", lambda grad=gradient: comm.allreduce_sum(grad)))
            for name, exchange in exchanges:
                exchange()  # warm-up
                before, times = comm.world_bytes_sent, []
                for _ in range(repeats):
                    comm.world.Barrier()
                    if comm.rank == last:
                        time.sleep(late_ms / 1000)
                    started = time.perf_counter()
                    exchange()
                    comm.world.Barrier()
                    times.append(time.perf_counter() - started)
                median = comm.world.bcast(statistics.median(times), root=last)
                timings[name] = (median, (comm.world_bytes_sent - before) // repeats)
            rows.append({
                "ranks": comm.size, "params": dim, "population": population,
                "late_ms": late_ms,
                "es_bytes": timings["es"][1], "allreduce_bytes": timings["allreduce"][1],
                "bytes_ratio": timings["es"][1] / timings["allreduce"][1],
                "es_us": 1e6 * timings["es"][0],
                "es_collective_us": 1e6 * timings["es_collective"][0],
                "allreduce_us": 1e6 * timings["allreduce"][0],
            })
    if comm.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        with (out / "comm.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def comm_compare(args: argparse.Namespace) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix=".es-bench-", dir=".") as tmp:
        run_mpi(args.ranks[0], *PYTHON_ON_RANKS, "-m", "es.cli.bench", "comm-worker", "--params",
                 ",".join(map(str, args.params)), "--populations",
                 ",".join(map(str, args.populations)), "--repeats", str(args.repeats),
                 "--late-ms", str(args.late_ms), "--out", tmp, launcher=args.launcher)
        with open(f"{tmp}/comm.csv") as handle:
            return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(handle)]


def _number(text: str) -> int | float:
    """A cell of the worker's CSV: a count, or a float however Python wrote it (a bytes
    ratio reads '3e-05', with no dot)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def plot_comm(rows: list[dict[str, Any]], out: Path) -> None:
    """Bytes per update against the parameter count, log-log, one line per population."""
    plt = pyplot()
    if plt is None:
        return
    figure, axes = plt.subplots(figsize=(6, 4))
    by_params = sorted({r["params"]: r["allreduce_bytes"] for r in rows}.items())
    axes.plot(*zip(*by_params, strict=True), "s-", label="gradient all-reduce (float32)")
    for population in sorted({r["population"] for r in rows}):
        mine = [(r["params"], r["es_bytes"]) for r in rows if r["population"] == population]
        axes.plot(*zip(*mine, strict=True), "o-", label=f"ES, population {population}")
    axes.set(xscale="log", yscale="log", xlabel="parameters", ylabel="bytes per update")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "comm.png", dpi=100)
    print(f"wrote {out / 'comm.png'}")
