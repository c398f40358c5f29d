"""Continuing a stopped run: what ``es-train --resume`` and ``es.resume`` read from its folder
(the newest intact checkpoint and the config it holds), and what they may change (budgets).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from es.config import Config, ConfigError, from_dict, load_config
from es.rl.checkpoint import (
    CheckpointError,
    TrainingState,
    has_checkpoint,
    load_latest_checkpoint,
)
from es.rl.metrics import STOPS_FILE
from es.rl.runs import (
    claim_run_dir,
    first_few,
    remove_unfinished_writes,
    run_folders_in,
    trained_by,
)

#: What a resumed run may change (all in [run]): its budgets and how it is watched.
RESUME_OVERRIDES = ("run.generations", "run.max_timesteps", "run.max_seconds",
                    "run.target_score", "run.max_failed_fraction", "run.tensorboard",
                    "run.peer_timeout_s")


def after_lost(run_dir: str | Path, resume: str) -> str:
    """What a run that lost a peer rank can do next (``es.parallel.heartbeat.peer_lost``):
    ``resume``, the command that continues it, or a start again."""
    return (f"the newest checkpoint is intact: resume on the ranks that are left: {resume}"
            if has_checkpoint(run_dir) else
            "no checkpoint was written yet: start the run again on the ranks that are left")


def claim(run_dir: str | Path) -> None:
    """Hold an existing run folder before its checkpoint is read (``claim_run_dir``): another
    run may be training there. Raises ConfigError."""
    if Path(run_dir).is_dir():
        error = claim_run_dir(run_dir)
        if error:
            raise ConfigError(error)
        remove_unfinished_writes(run_dir)  # a killed session's, now that none writes here


def load_resume(run_dir: str, budgets: dict[str, Any], label: str = "--resume"
                ) -> tuple[Config, TrainingState | None, list[str]]:
    """(config, state, warnings) of a run to resume, its config with ``budgets`` (dotted keys
    of ``RESUME_OVERRIDES``) applied; on rank 0 only. Raises ConfigError, its message headed
    ``label`` and the folder.

    A run killed before its first checkpoint has only its config.toml: the state is then
    None (start over from generation 0). Bad checkpoints are not that case: work existed.
    """
    head = f"{label} {run_dir!r}"
    for key in budgets:
        if key not in RESUME_OVERRIDES:
            raise ConfigError(f"{head}: {key} cannot change: a resumed run keeps its config; "
                              f"only {', '.join(RESUME_OVERRIDES)} may change")
    if not Path(run_dir).is_dir():
        raise ConfigError(f"{head}: no such run folder")
    if (program := trained_by(run_dir)) != "es-train":
        raise ConfigError(f"{head}: trained by {program}, which keeps no checkpoints: a "
                          "baseline run cannot be resumed; start it again (its command with "
                          "--force)")
    if not has_checkpoint(run_dir):
        if runs := run_folders_in(run_dir):
            # A sweep's folder: starting it again with --force, as below, deleted its runs.
            raise ConfigError(
                f"{head}: holds {len(runs)} run folder{'s' * (len(runs) > 1)} "
                f"({first_few(runs)}), not a "
                f"run: resume one of them (e.g. {str(Path(run_dir) / runs[0])!r}), or continue "
                f"a sweep's runs with its command, --resume-or-start {run_dir} in place of "
                "--run-dir")
        if not (Path(run_dir) / "config.toml").is_file():
            raise ConfigError(
                f"{head}: no checkpoint and no config.toml, so not a run folder (or one "
                "stopped before it started: start it again with the original command, with "
                "--force if the folder is not empty)"
            )
        config = _with_budgets(load_config(Path(run_dir) / "config.toml").to_dict(), budgets)
        # A stop, or more generations than run.checkpoint_every, came with a checkpoint:
        # they are gone, and starting over would overwrite a trained run. As many as it: the
        # first checkpoint was due and failed (a full disk), as a kill before it leaves them.
        progress = Path(run_dir) / "progress.csv"
        rows = len(progress.read_text().splitlines()) - 1 if progress.is_file() else 0
        if (Path(run_dir) / STOPS_FILE).is_file() or rows > config.run.checkpoint_every:
            raise ConfigError(
                f"{head}: its checkpoints are gone but it holds a trained run "
                f"({max(rows, 0)} generations in progress.csv), which starting over would "
                "overwrite; restore checkpoints/, or start again in another folder (or here "
                "with the original command and --force)")
        return config, None, [f"{head}: no checkpoint written yet; starting over from "
                              "generation 0 with its config.toml"]
    try:
        state, config_dict, warnings = load_latest_checkpoint(Path(run_dir) / "checkpoints")
    except CheckpointError as error:
        raise ConfigError(f"{head}: {error}") from None
    return (_with_budgets(config_dict, budgets), state,
            [*warnings, *_edited_config_toml(Path(run_dir), config_dict)])


def _with_budgets(config_dict: dict[str, Any], budgets: dict[str, Any]) -> Config:
    run = dict(config_dict.get("run", {}))
    run.update({key.partition(".")[2]: value for key, value in budgets.items()})
    return from_dict({**config_dict, "run": run})


def _edited_config_toml(run_dir: Path, config_dict: dict) -> list[str]:
    """A warning when the run's config.toml was edited by hand: the checkpoint's config is
    what a resume trains with (and writes back), so the edit would be lost without a word."""
    try:
        with (run_dir / "config.toml").open("rb") as handle:
            written = flat(tomllib.load(handle))
    except OSError:
        return []
    except ValueError as error:  # a hand edit that broke the file
        return [f"{run_dir / 'config.toml'} is not valid TOML ({error}); a resumed run trains "
                "with its checkpoint's config and writes it back"]
    saved = flat(config_dict)
    edited = [key for key in sorted(written) if key in saved and written[key] != saved[key]
              and key not in RESUME_OVERRIDES]  # budgets move between sittings
    if not edited:
        return []
    shown = first_few([f"{key} = {written[key]!r} (the checkpoint's: {saved[key]!r})"
                       for key in edited])
    return [f"{run_dir / 'config.toml'} was edited: {shown}; a resumed run trains with its "
            f"checkpoint's config and writes it back (only its budgets change: "
            f"{', '.join(RESUME_OVERRIDES)})"]


def flat(config_dict: dict) -> dict[str, object]:
    """``{"es": {"sigma": 0.02}}`` as ``{"es.sigma": 0.02}``."""
    return {f"{section}.{key}": value for section, values in config_dict.items()
            for key, value in values.items()}
