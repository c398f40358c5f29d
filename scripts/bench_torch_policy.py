"""Env steps/s of training with a user's torch module against the built-in NumPy policy of
the same shape, same config and rank count.

    python scripts/bench_torch_policy.py --ranks 2
    python scripts/bench_torch_policy.py --config configs/hopper.toml --hidden 32 --repeats 3

Each policy trains ``mpiexec -n RANKS es-train CONFIG`` for ``--generations`` (no
evaluation), ``--repeats`` times, alternating; its steps/s is the steady state of
``progress.csv`` (warm-up and the last generation left out, as ``es-bench scaling``), and the
ratio torch / NumPy is of the medians. The torch module is ``examples/torch_policies.py:mlp``
(Linear-tanh-Linear-tanh-Linear), the NumPy one ``policy.kind = "mlp"``, both
``--hidden`` x 2 units.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from report import (
    BIN,
    CONFIGS,
    PROJECT,
    check_config,
    emit,
    mpiexec,
    run_script,
    script_parser,
)

from es.bench.launch import set_flags
from es.bench.scaling import WARMUP_GENERATIONS, steady_state
from es.cli.args import add_flag, add_out, add_ranks, positive_int

POLICIES = {
    "numpy mlp": lambda hidden: ["policy.kind=mlp", f"policy.hidden=[{hidden}, {hidden}]"],
    "torch mlp": lambda hidden: ["policy.kind=examples.torch_policies:mlp",
                                 f"policy.kwargs.hidden={hidden}", "policy.kwargs.layers=2"],
}


def steps_per_s(config: str, ranks: int, overrides: list[str]) -> float:
    with tempfile.TemporaryDirectory(prefix=".es-bench-", dir=".") as tmp:
        command = mpiexec(ranks, str(BIN / "es-train"), config, "--run-dir", f"{tmp}/run",
                          "--quiet", *set_flags(overrides))
        # examples/ is the project's: found from any folder, as the config is.
        path = os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))
        done = subprocess.run(command, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": path})
        if done.returncode != 0:
            raise SystemExit(f"es-train failed: {done.stderr.strip()[-500:]}")
        with open(f"{tmp}/run/progress.csv") as handle:
            return steady_state(list(csv.DictReader(handle)))["steps_per_s"]


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_torch_policy.py --ranks 2",
        "python scripts/bench_torch_policy.py --config configs/hopper.toml --hidden 32"])
    add_flag(parse, "--config", "trained with each policy",
             default=str(CONFIGS / "halfcheetah.toml"))
    parse.add_argument("--hidden", type=positive_int, default=64,
                       help="units of both hidden layers (default 64)")
    add_ranks(parse, "2", several=False)
    add_flag(parse, "--generations", "of each run; at least 5", default=8)
    add_flag(parse, "--repeats", "runs of each policy", default=3)
    add_out(parse, "bench_torch_policy")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    check_config(parse, args.config)
    if args.generations < WARMUP_GENERATIONS + 3:  # what steady_state needs: was raised to it
        parse.error(f"--generations {args.generations}: must be >= {WARMUP_GENERATIONS + 3}")
    if importlib.util.find_spec("torch") is None:  # before the NumPy half's minutes
        parse.error('the torch policy needs torch: pip install -e ".[torch]"')
    ranks = args.ranks[0]
    base = [f"run.generations={args.generations}", "run.eval_every=1000000",
            "run.checkpoint_every=1000000"]
    measured: dict[str, list[float]] = {name: [] for name in POLICIES}
    for repeat in range(args.repeats):
        for name, overrides in POLICIES.items():
            rate = steps_per_s(args.config, ranks, [*base, *overrides(args.hidden)])
            measured[name].append(rate)
            print(f"repeat {repeat}: {name}: {rate:,.0f} steps/s", flush=True)
    numpy_rate = statistics.median(measured["numpy mlp"])
    rows = [{"config": args.config, "policy": name, "hidden": f"{args.hidden}x2",
             "ranks": ranks, "repeats": args.repeats,
             "steps_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
             "vs_numpy": statistics.median(rates) / numpy_rate}
            for name, rates in measured.items()]
    emit(rows, Path(args.out), f"Training steps/s, torch module vs NumPy policy, "
         f"mpiexec -n {ranks}")


if __name__ == "__main__":
    run_script(main)
