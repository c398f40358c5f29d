"""Learning curves from run folders (``config.toml`` and ``progress.csv``), drawn by
``es-plot`` and ``es-compare``: the seeds of one config as one curve, mean ± std.

Runs are the seeds of one config when the same program trained them (``trained_by.txt``: es-train,
or es-baseline and its algorithm), their resolved ``config.toml`` agree on every key but
those in ``NOT_TRAINED`` (``run.seed`` and the budgets, evaluation and bookkeeping of
``[run]``, which decide when a run stops and what it records, never what it trains) and their
seeds differ; a key an older ``config.toml`` lacks counts as its default. Two runs of one
config with the same seed are not two seeds: each is drawn alone, labelled with its seed and
folder; a folder given twice counts once. A curve is labelled ``env · run name``; groups that
share env and run name but not their config are labelled with the keys in which they differ.

A group's curve is, at every x where some seed has a point, the mean ± std over the seeds
whose curve reaches that x (interpolated between their rows, along log x on a log axis, as
the rows are drawn there): solid where every seed counts, dotted where only some do, so a seed
that ran longer (a larger budget) is drawn to its end, never cut to the shortest. A single
run carries the ± std of its evaluation episodes instead. Matplotlib comes from the optional
``[plot]`` extra.
"""

from __future__ import annotations

import csv
import json
import os
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from es.config import Config
from es.core.install import install_hint
from es.rl.runs import trained_by

X_COLUMNS = ("timesteps", "time_s", "generation")
Y_COLUMNS = ("eval_return", "return_mean", "return_max")
X_LABELS = {"timesteps": "env steps", "time_s": "wall seconds", "generation": "generation"}

#: The keys in which seeds of one config may differ: ``run.seed`` itself, and the ``[run]``
#: keys that change when a run stops or what it measures and keeps beside training, never the
#: parameters it trains up to then (evaluation and confirmation episodes are not counted in
#: ``timesteps`` either). A budget that differs does not split the seeds of one config.
NOT_TRAINED = frozenset(f"run.{key}" for key in (
    "seed",
    # budgets and stop rules: where the curve ends
    "generations", "max_timesteps", "max_seconds", "target_score", "max_failed_fraction",
    # evaluation of the mean policy and the kept best policy: what is recorded
    "eval_every", "eval_episodes", "best_episodes", "best_by", "best_pool", "best_share",
    "best_from",
    # where and how the ranks run: the parameters are bit-identical either way
    "runs_dir", "schedule", "lockstep", "checkpoint_every", "keep_checkpoints", "check_every",
    "peer_timeout_s", "tensorboard",
))
UNSET = "(unset)"  # a key that one run's config.toml has and another's lacks

Curve = tuple[np.ndarray, np.ndarray, np.ndarray]  # x, y, y's own std


class NoRows(ValueError):
    """A run with no row of the column drawn: one that has not been evaluated yet."""


def runs_in(folder: Path) -> list[Path]:
    """The run folders (a config.toml) at or under ``folder``, sorted, none looked for inside a
    run: a sweep's runs, or a folder of single runs and sweeps side by side (``runs/``)."""
    found, seen = [], set()
    for parent, children, _ in os.walk(folder, followlinks=True):  # a run linked in counts
        if os.path.realpath(parent) in seen:  # a link back up: walked already
            children.clear()
            continue
        seen.add(os.path.realpath(parent))
        if (Path(parent) / "config.toml").is_file():
            found.append(Path(parent))
            children.clear()
        children.sort()
    return sorted(found)


def runs_to_draw(run_dirs: list[Path], x: str, y: str) -> tuple[list[Path], list[str]]:
    """The run folders to draw, and why others are left out. A folder that is not a run stands
    for the runs under it (``es-train --seeds``'s sweep, or ``runs/`` holding runs and
    sweeps); a run with no row of ``y`` yet (a sweep's run before its first evaluation, or
    before its first progress row), or one whose files cannot be read (a value that is not a
    number, a damaged config.toml), is left out where others can be drawn: one broken run of
    a sweep failed the whole figure. Where none can, ``plot`` raises the first problem."""
    folders: list[Path] = []
    for folder in run_dirs:
        is_run = (folder / "config.toml").is_file() or (folder / "progress.csv").is_file()
        folders += (runs_in(folder) if folder.is_dir() and not is_run else []) or [folder]
    drawable, left_out = [], []
    for folder in folders:
        if (folder / "config.toml").is_file() and not (folder / "progress.csv").exists():
            left_out.append(f"{folder}: no progress.csv yet: left out")
            continue
        try:
            read_run(folder)
            read_curve(folder, x, y)
        except (ValueError, OSError) as error:  # NoRows among them
            left_out.append(f"{error}: left out")
            continue
        drawable.append(folder)
    return (drawable, left_out) if drawable else (folders, [])


def read_curve(run_dir: Path, x: str, y: str) -> Curve:
    """(x, y, y std) of one run; rows where ``y`` is empty (no evaluation) are skipped."""
    try:
        with (run_dir / "progress.csv").open(encoding="utf-8") as handle:
            rows = [row for row in csv.DictReader(handle) if row.get(y)]
    except (UnicodeDecodeError, csv.Error) as error:
        raise ValueError(f"{run_dir / 'progress.csv'}: not readable ({error})") from None
    if not rows:
        raise NoRows(f"{run_dir}: no rows with {y!r} in progress.csv")
    path = run_dir / "progress.csv"

    def column(name: str, missing: str | None = None) -> np.ndarray:
        if missing is None and name not in rows[0]:
            raise ValueError(f"{path}: no {name!r} column")
        values = []
        for row in rows:
            try:
                values.append(float(row.get(name) or missing))
            except (TypeError, ValueError):  # "oops", or none where a number belongs
                raise ValueError(f"{path}: generation {row.get('generation')}'s {name} "
                                 f"{row.get(name)!r} is not a number") from None
        return np.array(values)

    spread = column("eval_std", "0") if y == "eval_return" else np.zeros(len(rows))
    return column(x), column(y), spread


def _flatten(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted keys of a TOML table: ``{"es": {"sigma": 0.1}}`` -> ``("es.sigma", 0.1)``."""
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", list(value) if isinstance(value, tuple) else value


#: What a key missing from an older run's config.toml meant: the default of its day and ours.
DEFAULTS = dict(_flatten(Config().to_dict()))


@dataclass(frozen=True)
class Run:
    folder: Path
    seed: Any
    base: str  # "env · run name", the start of its label
    trained: dict[str, Any]  # every dotted key of its config but NOT_TRAINED


@dataclass(frozen=True)
class Group:
    """The seeds of one config (distinct seeds), or one run alone, and its label."""

    label: str
    runs: tuple[Run, ...]


def read_run(folder: Path) -> Run:
    config_path = folder / "config.toml"
    if folder.exists() and not folder.is_dir():  # progress.csv itself, say
        raise ValueError(f"{folder}: a file, not a run folder"
                         + (f" (give {folder.parent})" if (folder.parent / "config.toml").is_file()
                            else ""))
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder")
    missing = [name for name in ("progress.csv", "config.toml") if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"{folder}: not a run folder (no {' and no '.join(missing)})")
    try:
        with config_path.open("rb") as handle:
            table = tomllib.load(handle)
    except ValueError as error:  # not TOML, or not UTF-8
        raise ValueError(f"{config_path}: {error}") from None
    keys = DEFAULTS | dict(_flatten(table))
    trained = {key: value for key, value in keys.items() if key not in NOT_TRAINED}
    trained["trained by"] = trained_by(folder)
    name = keys["run.name"] or folder.name
    return Run(folder, keys["run.seed"], f"{keys['env.id']} · {name}", trained)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _shown(value: Any) -> str:
    if value is UNSET or isinstance(value, str):
        return str(value)
    return json.dumps(value, default=str)  # true, 0.1, [64, 64] as in the TOML


def group_runs(run_dirs: list[Path]) -> list[Group]:
    """The runs as groups, sorted by label (a folder given twice counts once)."""
    runs, seen = [], set()
    for folder in run_dirs:
        if folder.resolve() not in seen:
            seen.add(folder.resolve())
            runs.append(read_run(folder))
    configs: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        configs[_canonical(sorted(run.trained.items()))].append(run)
    by_base: dict[str, list[list[Run]]] = defaultdict(list)
    for members in configs.values():
        by_base[members[0].base].append(members)
    groups = []
    for base, variants in by_base.items():
        keys = sorted(set().union(*(members[0].trained for members in variants)))
        differing = [key for key in keys if len(
            {_canonical(members[0].trained.get(key, UNSET)) for members in variants}) > 1]
        for members in variants:
            label = base
            if differing:
                label += " · " + ", ".join(
                    f"{key}={_shown(members[0].trained.get(key, UNSET))}" for key in differing)
            seeds = [run.seed for run in members]
            if len(set(map(_canonical, seeds))) == len(seeds):
                groups.append(Group(label, tuple(members)))
            else:  # which runs of one seed go together is unknowable: each is drawn alone
                groups.extend(Group(f"{label} · seed {run.seed} · {run.folder}", (run,))
                              for run in members)
    return sorted(groups, key=lambda group: group.label)


def seed_curve(curves: list[Curve], log_x: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, mean, std, seeds) of a group from its runs' (x, y, y std), each sorted by x: one
    run's own curve, or at every x of any seed the mean and std over the seeds whose x range
    holds it, interpolated (along log x with ``log_x``: every x > 0), with ``seeds`` the
    count of those."""
    if len(curves) == 1:
        x, y, spread = curves[0]
        return x, y, spread, np.ones(len(x), dtype=int)
    grid = np.unique(np.concatenate([x for x, _, _ in curves]))
    along = np.log if log_x else np.asarray
    values = np.full((len(curves), grid.size), np.nan)
    for row, (x, y, _) in zip(values, curves, strict=True):
        inside = (grid >= x[0]) & (grid <= x[-1])
        row[inside] = np.interp(along(grid[inside]), along(x), y)
    seeds = np.sum(~np.isnan(values), axis=0)
    return grid, np.nanmean(values, axis=0), np.nanstd(values, axis=0), seeds


def group_curve(group: Group, x: str, y: str, log_x: bool = False
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``seed_curve`` of the group's runs, read from their progress.csv; on a log axis
    (``log_x``) the rows at x <= 0, which it cannot show, are left out."""
    curves = []
    for run in group.runs:
        try:
            xs, ys, spread = read_curve(run.folder, x, y)
        except KeyError as error:
            raise ValueError(f"{run.folder}: progress.csv has no column {error}") from None
        keep = np.argsort(xs, kind="stable")
        if log_x:
            keep = keep[xs[keep] > 0]
            if keep.size == 0:
                raise ValueError(f"{run.folder}: no row with {x} > 0 for a log x axis")
        curves.append((xs[keep], ys[keep], spread[keep]))
    return seed_curve(curves, log_x)


def _partial_segments(x: np.ndarray, y: np.ndarray, full: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The pieces of (x, y) where not every seed counts, each joined to its solid neighbours
    and split from the next piece by a NaN."""
    pieces_x: list[np.ndarray] = []
    pieces_y: list[np.ndarray] = []
    index = 0
    while index < len(full):
        if full[index]:
            index += 1
            continue
        end = index
        while end < len(full) and not full[end]:
            end += 1
        span = slice(max(index - 1, 0), min(end + 1, len(full)))
        pieces_x += [x[span], np.array([np.nan])]
        pieces_y += [y[span], np.array([np.nan])]
        index = end
    return np.concatenate(pieces_x), np.concatenate(pieces_y)


def draw(groups: list[Group], path: Path, x: str, y: str, title: str | None,
         log_x: bool = False) -> list[str]:
    """Draw every group into the image file ``path`` (PNG, SVG or PDF by suffix); returns
    the legend's labels."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(f"drawing needs matplotlib: {install_hint('plot')}") from None
    curves = [group_curve(group, x, y, log_x) for group in groups]  # every run read first
    figure, axes = plt.subplots(figsize=(7, 4.5))
    labels = []
    for group, (grid, mean, std, seeds) in zip(groups, curves, strict=True):
        full = seeds == len(group.runs)
        label = group.label
        if len(group.runs) > 1:
            fewer = "" if full.all() else ", dotted where fewer"
            label += f" ({len(group.runs)} seeds{fewer})"
        labels.append(label)
        # A run with one evaluation is one point, which a line alone does not draw.
        alone = np.count_nonzero(full & ~np.isnan(mean)) <= 1
        (line,) = axes.plot(grid, np.where(full, mean, np.nan), label=label,
                            marker="o" if alone else None)
        if not full.all():
            axes.plot(*_partial_segments(grid, mean, full), ":", color=line.get_color())
        axes.fill_between(grid, mean - std, mean + std, color=line.get_color(), alpha=0.2)
    axes.set(xlabel=X_LABELS[x], ylabel=y.replace("_", " "), title=title or "")
    if log_x:
        axes.set_xscale("log")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        save_whole(figure, path)
    finally:
        plt.close(figure)
    return labels


def save_whole(figure: Any, path: Path) -> None:
    """``figure`` into ``path``, written as run files are (``write_atomically``): a full
    disk left a 0-byte figure (an earlier one at that path lost too), and an error naming no
    file."""
    from es.rl.checkpoint import write_atomically

    try:
        write_atomically(path, lambda handle: figure.savefig(
            handle, dpi=110, format=path.suffix[1:].lower()))
    except OSError as error:
        raise OSError(f"{path}: {error.strerror or error}") from None


def plot(run_dirs: list[Path], path: Path, x: str, y: str, title: str | None,
         log_x: bool = False) -> list[str]:
    """Group the runs and draw them into ``path``; returns the legend's labels. A run folder
    that cannot be read is a ValueError, no matplotlib a RuntimeError."""
    return draw(group_runs(run_dirs), path, x, y, title, log_x)
