"""Cost of one ES update (noise reconstruction + weighted sum + Adam) on one core.

    python scripts/bench_update.py --members 1000 --dim 100000

Compares the shared noise table with regenerating each perturbation from its seed.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from report import emit, run_script, script_parser  # noqa: E402

from es.cli.args import add_flag, add_out, positive_int  # noqa: E402
from es.core.noise import NoiseTable, SeedNoise  # noqa: E402
from es.core.optim import Adam  # noqa: E402
from es.strategies.openai_es import OpenAIES  # noqa: E402


def time_updates(noise, members: int, dim: int, repeats: int) -> list[float]:
    es = OpenAIES(np.zeros(dim), population=members, sigma=0.02, noise=noise,
                optimizer=Adam(dim, 0.01), l2=0.005, seed=0)
    fitness = np.random.default_rng(0).normal(size=members)
    times = []
    for _ in range(repeats + 1):  # the first call warms caches and is dropped
        es.ask()
        started = time.perf_counter()
        es.tell(fitness)
        times.append(time.perf_counter() - started)
    return times[1:]


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_update.py --members 1000 --dim 100000",
        "python scripts/bench_update.py --dim 1000000 --table-size 250000000 --repeats 3"])
    parse.add_argument("--members", type=positive_int, default=1000,
                       help="population of the update (even: mirrored sampling; default: "
                       "%(default)s)")
    parse.add_argument("--dim", type=positive_int, default=100_000,
                       help="parameters (default: %(default)s)")
    add_flag(parse, "--table-size", default=25_000_000)
    add_flag(parse, "--repeats", "timed updates from the table (from seeds: 3)", default=7)
    add_out(parse, "bench_update")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    if args.members % 2:
        parse.error(f"--members {args.members}: must be even (mirrored sampling)")
    if args.table_size < args.dim:  # each member's slice of the table is --dim floats long
        parse.error(f"--table-size {args.table_size}: must be at least --dim ({args.dim})")

    started = time.perf_counter()
    table = NoiseTable.build(args.table_size, seed=0)
    build_s = time.perf_counter() - started
    rows = []
    for mode, noise, repeats in (("table", table, args.repeats), ("seed", SeedNoise(), 3)):
        times = time_updates(noise, args.members, args.dim, repeats)
        rows.append({
            "noise": mode, "members": args.members, "dim": args.dim,
            "update_ms_median": 1e3 * float(np.median(times)),
            "update_ms_min": 1e3 * min(times), "repeats": len(times),
        })
    emit(rows, args.out, f"ES update cost, mirrored, one core; table of {args.table_size:,} "
         f"floats built once in {build_s:.2f} s")


if __name__ == "__main__":
    run_script(main)
