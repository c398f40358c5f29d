"""The pip command that installs an extra, for the messages that name one."""

from __future__ import annotations

from pathlib import Path

#: The folder holding ``es/`` when es runs from a checkout (the README's editable install).
CHECKOUT = Path(__file__).resolve().parents[2]


def install_hint(extra: str) -> str:
    """pip's command for ``extra``: with the checkout's own path where es runs from one, so
    that it works from any folder (``pip install -e ".[video]"`` worked only in the
    checkout, and es-eval is run from anywhere); else with the distribution's name."""
    if (CHECKOUT / "pyproject.toml").is_file():
        return f'pip install -e "{CHECKOUT}[{extra}]"'
    return f'pip install "mpi-es[{extra}]"'
