"""Memory over a long run: the largest rank's peak resident memory (progress.csv's
peak_rss_mb) after a warm-up and at the end, and how much it grew in between.

    python scripts/soak.py bench-results/suite/mujoco/runs/humanoid-ars-seed0
    python scripts/soak.py RUN_DIR --warmup-s 600 --out bench-results/soak

A run that leaks grows its peak with every generation; one that does not reaches its peak
early (the noise table, the environment, the first long episodes) and stays there. The
growth is judged after ``--warmup-s`` seconds of training (``time_s``), at generations where
the peak is known (runs from before the column have none).
"""

from __future__ import annotations

import csv
from pathlib import Path

from report import emit, script_parser

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
    after = [row for row in rows if float(row["time_s"]) >= args.warmup_s]
    if not after:
        return fail("soak.py", f"{str(progress)!r}: no generation with peak_rss_mb after "
                    f"{args.warmup_s:g} s of training")
    start, end = after[0], rows[-1]
    start_mb, end_mb = float(start["peak_rss_mb"]), float(end["peak_rss_mb"])
    emit([{"run": Path(args.run_dir).name,
           "warmup_generation": int(start["generation"]), "warmup_s": float(start["time_s"]),
           "warmup_peak_mb": start_mb, "end_generation": int(end["generation"]),
           "end_s": float(end["time_s"]), "end_steps": int(end["timesteps"]),
           "end_peak_mb": end_mb, "growth_pct": 100.0 * (end_mb - start_mb) / start_mb}],
         args.out, "Peak resident memory of the largest rank, after the warm-up and at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
