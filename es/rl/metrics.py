"""One row per generation: ``progress.csv`` and the readable line printed by rank 0."""

from __future__ import annotations

import csv
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from es.rl.tensorboard_log import TB_FOLDER, TensorBoardLog

log = logging.getLogger("es.rl.metrics")

COLUMNS = (
    "generation",
    "timesteps",
    "time_s",
    "return_mean",
    "return_min",
    "return_max",
    "eval_return",
    "eval_std",
    "eval_failed",
    "episodes",
    "failed_episodes",
    "evals_per_s",
    "steps_per_s",
    "bytes_sent",
    "rollout_s",
    "wait_s",
    "update_s",
    "eval_s",
    "io_s",
    "grad_norm",
    "sigma_mean",
    "peak_rss_mb",
    "resumed_from",
    "best_return",
    "confirm_steps",
    "confirm_s",
    "eval_ranks_s",
    "confirm_ranks_s",
    "paused_s",
)

#: The columns that count (generations, steps, episodes, bytes): ints, the others floats.
COUNT_COLUMNS = frozenset({"generation", "timesteps", "eval_failed", "episodes",
                           "failed_episodes", "bytes_sent", "resumed_from", "confirm_steps"})


#: ``stops.csv``: one row per stop of a run (its end, a signal, the callback; a resumed run
#: adds its own), with what confirming the waiting nominations cost at that stop, which
#: happens after the last progress row and so is in none of them, and the kept policy it
#: left (empty: none), which a run resumed with nothing left to do reports without a race.
STOPS_FILE = "stops.csv"
STOP_COLUMNS = ("generation", "timesteps", "ended_by", "confirm_episodes", "confirm_s",
                "kept_return", "kept_generation")


def read_stops(run_dir: Path) -> list[dict[str, str]]:
    """The run's stops, oldest first (none for a run never stopped)."""
    path = run_dir / STOPS_FILE
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def append_stop(run_dir: Path, row: dict[str, Any]) -> None:
    """Add a stop's row to the run folder's ``stops.csv`` (written with a header if new; one
    written before a column was added is rewritten with it, its old rows' cells empty)."""
    path = run_dir / STOPS_FILE
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            header, earlier = reader.fieldnames, list(reader)
        if header is not None and tuple(header) != STOP_COLUMNS:
            with path.open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=STOP_COLUMNS, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(earlier)
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=STOP_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def last_evaluation(path: Path) -> float | None:
    """The newest ``eval_return`` in a ``progress.csv`` (None: none evaluated yet)."""
    if not path.is_file():
        return None
    with path.open(newline="") as handle:
        returns = [row["eval_return"] for row in csv.DictReader(handle) if row.get("eval_return")]
    return float(returns[-1]) if returns else None


class ProgressLog:
    """Appends rows to ``progress.csv``, flushed each generation so a crash loses nothing, and
    with ``tensorboard_config`` (the resolved config as TOML) the same rows as TensorBoard
    scalars under the run folder's ``tb/``."""

    def __init__(self, path: Path, keep_through: int | None = None,
                 tensorboard_config: str | None = None) -> None:
        """Append to ``path``; with ``keep_through`` (a resume), first drop the rows of later
        generations, which the resumed run writes again."""
        kept_steps = None
        #: The best evaluation of the rows kept: a resumed run's progress lines go on from it.
        self.best_eval: float | None = None
        if keep_through is not None and path.exists():
            kept = _rows_kept(path, keep_through)
            with path.open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(kept)
            kept_steps = int(kept[-1]["timesteps"]) if kept else 0
            self.best_eval = max((float(row["eval_return"]) for row in kept
                                  if row.get("eval_return")), default=None)
        new = not path.exists() or path.stat().st_size == 0
        self._file = path.open("a", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS)
        if new:
            self._writer.writeheader()
            self._file.flush()
        self._tensorboard = None
        if tensorboard_config is not None:
            self._tensorboard = TensorBoardLog(path.parent / TB_FOLDER, tensorboard_config,
                                               purge_after=kept_steps)

    def write(self, row: dict[str, Any]) -> None:
        self._writer.writerow({key: _cell(row.get(key)) for key in COLUMNS})
        self._file.flush()
        if self._tensorboard is not None:
            self._tensorboard.write({key: row.get(key) for key in COLUMNS})

    def close(self) -> None:
        self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()


def evaluation_columns(returns: np.ndarray | None) -> dict[str, float | int | None]:
    """``eval_return`` and ``eval_std`` over the evaluation episodes that finished, and
    ``eval_failed``, how many did not (return NaN): a mean over the survivors alone would
    hide them. All None when there was no evaluation; the mean is None if every one failed."""
    if returns is None:
        return {"eval_return": None, "eval_std": None, "eval_failed": None}
    returns = np.asarray(returns, dtype=np.float64)
    finished = returns[np.isfinite(returns)]
    return {"eval_return": float(finished.mean()) if finished.size else None,
            "eval_std": float(finished.std()) if finished.size else None,
            "eval_failed": int(returns.size - finished.size)}


def _rows_kept(path: Path, keep_through: int) -> list[dict[str, str | None]]:
    """A resumed run's rows of ``progress.csv`` through generation ``keep_through``. Rows it
    cannot read (damage, not the line a kill cut short) are not kept: a warning says which,
    and the file as it was stays beside it as ``progress.csv.damaged``, where they were lost
    without a word (and bytes not UTF-8 were a traceback naming no file)."""
    why = ""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except (UnicodeDecodeError, csv.Error) as error:
        rows, why = [], f" ({error})"
    kept = [row for row in rows if _complete(row, keep_through)]
    seen = {int(str(row["generation"])) for row in kept}
    lost = [generation for generation in range(1, keep_through + 1) if generation not in seen]
    if lost or why:
        backup = path.with_name(path.name + ".damaged")
        shutil.copyfile(path, backup)
        what = (f"the rows of {len(lost)} generation{'s' * (len(lost) != 1)} "
                f"({lost[0]}{'' if len(lost) == 1 else f'-{lost[-1]}'})" if lost else "rows")
        log.warning(f"{path}: {what} could not be read{why} and are not in it from now on; "
                    f"the file as it was is kept as {backup.name}")
    return kept


def _complete(row: dict[str, str | None], keep_through: int) -> bool:
    """A whole row (a kill can cut the last line short) of a generation up to the given one."""
    if None in row.values() or None in row:
        return False
    generation = row.get("generation") or ""
    return generation.isdigit() and int(generation) <= keep_through


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _si(value: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def progress_line(row: dict[str, Any], best_eval: float | None = None,
                  eta_s: float | None = None) -> str:
    ended = not math.isnan(row["return_mean"])  # a baseline's round may end none
    line = (
        f"gen {row['generation']:>5} | steps {_si(row['timesteps']):>7} | "
        + (f"return mean {row['return_mean']:9.2f} max {row['return_max']:9.2f}" if ended
           else f"{'no episode ended':<35}")
    )
    if row.get("failed_episodes"):
        line += f" ({row['failed_episodes']} failed)"
    if row.get("eval_return") is not None:
        line += f" | eval {row['eval_return']:9.2f}"
        if best_eval is not None:
            line += f" (best {best_eval:.2f})"
    if row.get("eval_failed"):
        line += f" | {row['eval_failed']} eval episodes failed"
    line += (
        f" | {_si(row['steps_per_s'])} steps/s | {row['time_s']:7.1f} s"
        f" | {row['bytes_sent']} B sent"
    )
    return line + (f" | ETA {_clock(eta_s)}" if eta_s is not None else "")
