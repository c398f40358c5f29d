"""What finished runs spent beside training: evaluation, confirmation while training and the
stops' confirmations (the race), each a share of the run's running time.

es-bench suite writes the first two of its runs' shares (the race inside confirm_share); this
splits them, for any es-train run folder, from its progress.csv (the ranks' mean seconds in
evaluation and confirmation episodes) and stops.csv (each stop's confirmation episodes and
seconds); pauses are left out as the suite leaves them out.

    python scripts/run_costs.py bench-results/suite/runs/halfcheetah-ars-seed* --out DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from report import emit, run_script, script_parser

from es.bench.suite import (
    column_sum,
    ranks_sum,
    read_progress,
    running_seconds,
    stop_confirmations,
)
from es.cli.args import add_out
from es.config import load_config


def kept_generation(run_dir: Path) -> int | str:
    """The generation of the run's kept policy (empty: it kept none)."""
    path = run_dir / "policy_best.npz"
    if not path.is_file():
        return ""
    with np.load(path) as policy:
        return int(policy["generation"])


def costs(run_dir: Path) -> dict[str, Any]:
    rows = read_progress(run_dir)
    race_episodes, race_s = stop_confirmations(run_dir)
    ran = float(running_seconds(rows)[-1]) + race_s
    evaluation, confirmation = ranks_sum(rows, "eval") / ran, ranks_sum(rows, "confirm") / ran
    return {"run": run_dir.name, "seed": load_config(run_dir / "config.toml").run.seed,
            "steps": int(rows[-1]["timesteps"]), "time_s": round(ran, 1),
            "eval_share": evaluation, "confirm_share": confirmation,
            "race_episodes": race_episodes, "race_share": race_s / ran,
            "total_share": evaluation + confirmation + race_s / ran,
            "wait_share": column_sum(rows, "wait_s") / ran,
            "kept_generation": kept_generation(run_dir)}


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/run_costs.py runs/seed0 runs/seed1 --out bench-results/costs"])
    parse.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="es-train run folders")
    add_out(parse, "run_costs")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    for run in args.runs:
        if not (run / "config.toml").is_file() or not (run / "progress.csv").is_file():
            parse.error(f"{run}: not a run folder (it needs config.toml and progress.csv)")
        if not read_progress(run):
            parse.error(f"{run}: no generation in its progress.csv yet")
    emit([costs(run) for run in args.runs], args.out,
         "Evaluation, confirmation while training and the stops' race, shares of running time")


if __name__ == "__main__":
    run_script(main)
