"""Learning curves from run folders (``progress.csv``): the seeds of one configuration as
their mean ± std, drawn by ``es-plot`` and ``es-compare``.

Runs are grouped by (environment, run name) from their ``config.toml``; runs of one group
differ only in the seed, so the group is drawn as the mean over seeds with a ±1 std band,
after interpolating every seed onto a common x grid (up to the shortest run's end). A single
run's evaluation curve carries its own ±std over evaluation episodes instead. Matplotlib comes
from the optional ``[plot]`` extra.
"""

from __future__ import annotations

import csv
import tomllib
from collections import defaultdict
from pathlib import Path

import numpy as np

X_COLUMNS = ("timesteps", "time_s", "generation")
Y_COLUMNS = ("eval_return", "return_mean", "return_max")
X_LABELS = {"timesteps": "env steps", "time_s": "wall seconds", "generation": "generation"}


def read_curve(run_dir: Path, x: str, y: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, y std) of one run; rows where ``y`` is empty (no evaluation) are skipped."""
    with (run_dir / "progress.csv").open() as handle:
        rows = [row for row in csv.DictReader(handle) if row.get(y)]
    if not rows:
        raise ValueError(f"{run_dir}: no rows with {y!r} in progress.csv")
    spread = [float(r["eval_std"]) if y == "eval_return" and r.get("eval_std") else 0.0
              for r in rows]
    return (np.array([float(r[x]) for r in rows]), np.array([float(r[y]) for r in rows]),
            np.array(spread))


def group_runs(run_dirs: list[Path]) -> dict[str, list[Path]]:
    """Runs keyed by "env · name": the seeds of one configuration."""
    groups: dict[str, list[Path]] = defaultdict(list)
    for run_dir in run_dirs:
        config_path = run_dir / "config.toml"
        if not (run_dir / "progress.csv").is_file() or not config_path.is_file():
            raise ValueError(f"{run_dir}: not a run folder (no progress.csv or config.toml)")
        with config_path.open("rb") as handle:
            config = tomllib.load(handle)
        groups[f"{config['env']['id']} · {config['run']['name']}"].append(run_dir)
    return dict(groups)


def mean_and_std(curves: list[tuple[np.ndarray, np.ndarray, np.ndarray]], log_grid: bool = False
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One curve per group: the single run's own, or the mean ± std over seeds on a grid
    (spaced evenly, or evenly on a log scale for a log axis)."""
    if len(curves) == 1:
        return curves[0]
    end = min(x[-1] for x, _, _ in curves)
    start = max(x[0] for x, _, _ in curves)
    if end <= start:
        grid = np.array([end])
    elif log_grid and start > 0:
        grid = np.geomspace(start, end, 200)
    else:
        grid = np.linspace(start, end, 200)
    values = np.array([np.interp(grid, x, y) for x, y, _ in curves])
    return grid, values.mean(axis=0), values.std(axis=0)


def plot(run_dirs: list[Path], path: Path, x: str, y: str, title: str | None,
         log_x: bool = False) -> int:
    """Draw every group into the image file ``path`` (PNG, SVG or PDF by suffix); returns the
    group count."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError('es-plot needs matplotlib: pip install -e ".[plot]"') from None
    groups = group_runs(run_dirs)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label, members in sorted(groups.items()):
        grid, mean, std = mean_and_std([read_curve(run, x, y) for run in members], log_x)
        seeds = f" ({len(members)} seeds)" if len(members) > 1 else ""
        (line,) = axes.plot(grid, mean, label=label + seeds)
        axes.fill_between(grid, mean - std, mean + std, color=line.get_color(), alpha=0.2)
    axes.set(xlabel=X_LABELS[x], ylabel=y.replace("_", " "), title=title or "")
    if log_x:
        axes.set_xscale("log")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return len(groups)
