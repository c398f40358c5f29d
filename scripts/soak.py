"""Memory over a long run: each es-train process's peak resident memory (the largest rank's,
progress.csv's peak_rss_mb) after a warm-up and at its end, and how much it grew in between.

    python scripts/soak.py bench-results/suite/mujoco/runs/humanoid-ars-seed0
    python scripts/soak.py RUN_DIR --warmup-s 600 --out bench-results/soak

A run that leaks grows its peak with every generation; one that does not reaches its peak
early (the noise table, the environment, the first long episodes) and stays there. A peak
belongs to a process, and a resumed run is several processes one after the other: one row
per process (progress.csv's ``resumed_from``: the generation it resumed at, 0 for the first),
its growth judged after ``--warmup-s`` seconds of its own training (``time_s`` from its first
generation), at generations where the peak is known (runs from before the column have none;
runs from before ``resumed_from`` count as one process).
"""

from __future__ import annotations

import csv
from pathlib import Path

from report import emit, run_script, script_parser

from es.cli.args import ArgumentParser, add_out, fail, nonnegative_seconds


def parser() -> ArgumentParser:
    parser = script_parser(__file__, __doc__, [
        "python scripts/soak.py RUN_DIR", "python scripts/soak.py RUN_DIR --warmup-s 600"])
    parser.add_argument("run_dir", help="a run folder written by es-train")
    parser.add_argument("--warmup-s", type=nonnegative_seconds, default=600.0,
                        help="training seconds before the growth is measured (default 600)")
    add_out(parser, "soak")
    return parser


def main() -> int:
    args = parser().parse_args()
    progress = Path(args.run_dir) / "progress.csv"
    if not progress.is_file():
        return fail("soak.py", f"run folder {args.run_dir!r}: no progress.csv in it")
    with progress.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("peak_rss_mb")]
    processes: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        processes.setdefault(row.get("resumed_from") or "", []).append(row)
    results = []
    for resumed_from, own in processes.items():
        started = float(own[0]["time_s"])
        after = [row for row in own if float(row["time_s"]) - started >= args.warmup_s]
        if not after:
            continue
        start, end = after[0], own[-1]
        start_mb, end_mb = float(start["peak_rss_mb"]), float(end["peak_rss_mb"])
        results.append({
            "run": Path(args.run_dir).name, "resumed_from": resumed_from or "unknown",
            "warmup_generation": int(start["generation"]), "warmup_s": float(start["time_s"]),
            "warmup_peak_mb": start_mb, "end_generation": int(end["generation"]),
            "end_s": float(end["time_s"]), "end_steps": int(end["timesteps"]),
            "end_peak_mb": end_mb, "growth_pct": 100.0 * (end_mb - start_mb) / start_mb})
    if not results:
        return fail("soak.py", f"{str(progress)!r}: no process trained {args.warmup_s:g} s "
                    "past its first generation with peak_rss_mb known")
    emit(results, args.out, "Peak resident memory of the largest rank, per es-train process, "
         "after the warm-up and at the process's end")
    return 0


if __name__ == "__main__":
    run_script(main)
