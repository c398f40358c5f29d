"""Run folders and progress output, the same for ``es-train``, ``es.train`` and the baselines:
``runs/{env}__{name}__{seed}__{time}/`` with the resolved ``config.toml`` written first, and
progress lines on stdout (a live status line on a terminal), warnings on stderr."""

from __future__ import annotations

import logging
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from es.config import Config


def default_run_dir(runs_dir: str, env_id: str, name: str, seed: int,
                    stamped: bool = True) -> Path:
    stamp = "__" + datetime.now().strftime("%Y%m%d-%H%M%S") if stamped else ""
    return Path(runs_dir) / f"{env_id.replace('/', '_')}__{name}__{seed}{stamp}"


def check_run_dir(requested: str | None, config: Config, force: bool,
                  overwrite: str = "choose another --run-dir or pass --force to overwrite it"
                  ) -> tuple[str | None, str | None]:
    """(run folder, None) or (None, error), touching nothing: the folder is written by
    ``start_run_dir`` once the run's environment and policy are built, so a config that
    names one that cannot be built neither leaves a folder that refuses the corrected
    command nor costs the run that ``force`` would replace. ``overwrite`` says how the
    caller's user starts over in a folder that holds a run (a flag, or an argument)."""
    run_dir = Path(requested) if requested else default_run_dir(
        config.run.runs_dir, config.env.id, config.run.name, config.run.seed
    )
    if run_dir.exists() and not run_dir.is_dir():
        return None, f"run folder {str(run_dir)!r}: exists and is not a folder"
    if run_dir.is_dir() and any(run_dir.iterdir()) and not force:
        held = ("already holds a run" if (run_dir / "config.toml").is_file() else
                "is not empty (no run in it; its files would stay)")
        return None, f"run folder {str(run_dir)!r}: {held}; {overwrite}"
    return str(run_dir), None


def start_run_dir(run_dir: str, config: Config) -> str | None:
    """Clear an earlier run's files from the folder and write the resolved ``config.toml``;
    None, or the error. On rank 0 only. Everything a run writes there goes (an old run's kept
    policy or stops would pass for the new run's, its checkpoints would be what ``--resume``
    finds); anything else the folder holds (a user's notes, es-bench's scores) stays."""
    import tomli_w

    from es.rl.checkpoint import write_atomically
    from es.rl.metrics import STOPS_FILE
    from es.rl.tensorboard_log import TB_FOLDER

    run_files = ("config.toml", "progress.csv", "policy.npz", "policy_best.npz", STOPS_FILE)
    run_folders = ("checkpoints", TB_FOLDER)

    folder = Path(run_dir)
    payload = tomli_w.dumps(config.to_dict()).encode()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in run_files:
            (folder / stale).unlink(missing_ok=True)
        for stale in run_folders:
            shutil.rmtree(folder / stale, ignore_errors=True)
        # At once, not when training starts: a run killed before its first checkpoint can
        # then be resumed (started over) from this file.
        write_atomically(folder / "config.toml", lambda handle: handle.write(payload))
    except OSError as error:
        return f"run folder {run_dir!r}: {error.strerror}"
    return None


class StatusLine(logging.StreamHandler):
    """On a terminal, each progress line overwrites the previous one (a live status line);
    lines with an evaluation stay, so the evaluations remain on screen as a history."""

    def emit(self, record: logging.LogRecord) -> None:
        message = self.format(record)
        end = "\n" if " eval " in message else ""
        self.stream.write(f"\r{message}\x1b[K{end}")
        self.flush()


def configure_logging(progress: bool, prefix: str = "") -> None:
    """Progress lines (INFO) to stdout, warnings and errors to stderr. On a terminal the
    progress is a status line rewritten in place; in a file or pipe, one line a generation.
    ``prefix`` starts every line: a sweep's groups train side by side and print into one
    stream, so each line says whose it is."""
    to_stdout = StatusLine(sys.stdout) if sys.stdout.isatty() else logging.StreamHandler(
        sys.stdout)
    to_stdout.addFilter(lambda record: record.levelno < logging.WARNING)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    logger = logging.getLogger("es")
    logger.handlers[:] = [to_stdout, to_stderr]
    for handler in logger.handlers:
        handler.setFormatter(logging.Formatter(prefix.replace("%", "%%") + "%(message)s"))
    logger.setLevel(logging.INFO if progress else logging.WARNING)
