"""TensorBoard event files beside ``progress.csv`` (``run.tensorboard``): every column as a
scalar against env steps, and the resolved config as text, so a run shows up in TensorBoard as
cleanrl's and SB3's do. Written with tensorboardX (no TensorFlow or PyTorch needed); the
``tensorboard`` extra installs it with TensorBoard itself."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from es.config import ConfigError
from es.core.install import install_hint

#: Where the event files go inside a run folder.
TB_FOLDER = "tb"
#: The x axis of every scalar: env steps, as RL runs are compared.
STEP_COLUMN = "timesteps"


def require_tensorboard() -> None:
    """Fail before training, with the install line, when the writer is missing."""
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        raise ConfigError("run.tensorboard = true: needs the tensorboard extra "
                          f"({install_hint('tensorboard')})") from None


class TensorBoardLog:
    """Scalars under ``progress/<column>`` and the config under ``config``; flushed with every
    row so ``tensorboard --logdir`` shows a live run."""

    def __init__(self, log_dir: Path, config_toml: str, purge_after: int | None = None) -> None:
        """``purge_after`` (a resume): the env steps of the last kept row; TensorBoard hides the
        earlier session's events past it, which the resumed run writes again."""
        require_tensorboard()
        from tensorboardX import SummaryWriter

        first_step = 0 if purge_after is None else purge_after + 1
        # Files are named by the second they open in, then this suffix: a session resumed
        # within the same second neither overwrites nor sorts before the one it follows.
        self._writer = SummaryWriter(str(log_dir), purge_step=first_step or None, flush_secs=5,
                                     filename_suffix=f".from-step-{first_step:015d}")
        # At the first step of this session: an event at an earlier step would make
        # TensorBoard purge every later one as out of order (the earlier session's kept rows).
        self._writer.add_text("config", "```toml\n" + config_toml + "\n```", first_step)

    def write(self, row: dict[str, Any]) -> None:
        """One ``progress.csv`` row: its numbers (an empty cell, such as ``eval_return`` between
        evaluations, writes nothing)."""
        step = int(row[STEP_COLUMN])
        for key, value in row.items():
            if key == STEP_COLUMN or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isfinite(value):
                self._writer.add_scalar(f"progress/{key}", value, step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
