"""Launching the ``es-*`` programs under MPI for a measurement: the launcher's command line
(the ``mpiexec`` beside this Python unless a cluster's is given) and a run whose failure is
the last line of its stderr."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent  # the console scripts and mpiexec of this installation


def mpiexec(ranks: int, *command: str, launcher: str | None = None) -> list[str]:
    """``LAUNCHER -n RANKS COMMAND``. The default launcher is the mpiexec installed beside
    this Python (the mpich wheel's), else the one on PATH; a cluster passes its own, e.g.
    ``"srun --mpi=pmi2"`` or ``"mpiexec -f hosts.txt"``."""
    if launcher:
        base = shlex.split(launcher)
    else:
        beside = BIN / "mpiexec"
        base = [str(beside) if beside.exists() else shutil.which("mpiexec") or "mpiexec"]
    return [*base, "-n", str(ranks), *command]


#: How a launcher's own complaints begin: Hydra's mpiexec and its proxies, Slurm's srun.
LAUNCHER_LINES = ("[mpiexec@", "[proxy:", "srun: error")

#: ``python -m mpi4py``: a Python worker (a script or ``-m module``) under this runner whose
#: uncaught exception or non-zero exit on one rank aborts the job (the runner calls
#: MPI_Abort), where plain ``python`` would leave the other ranks waiting in their next
#: exchange until someone kills them.
PYTHON_ON_RANKS = (sys.executable, "-m", "mpi4py")


def python_on_ranks(ranks: int, *arguments: str, launcher: str | None = None) -> list[str]:
    """``LAUNCHER -n RANKS python -m mpi4py ARGUMENTS`` (``PYTHON_ON_RANKS``)."""
    return mpiexec(ranks, *PYTHON_ON_RANKS, *arguments, launcher=launcher)


def run_mpi(ranks: int, *command: str, launcher: str | None = None) -> None:
    """Run ``command`` on ``ranks`` ranks; a failure is a RuntimeError naming the launch as
    given and ending in the last line of its stderr (where our programs put their one-line
    error), after the launcher's own first complaint where it made one (Hydra's last line of
    a missing hostfile said only "error parsing parameters")."""
    line = mpiexec(ranks, *command, launcher=launcher)
    try:
        done = subprocess.run(line, capture_output=True, text=True)
    except OSError as error:  # a --launcher that does not exist or cannot run
        raise RuntimeError(f"launcher {error.filename!r}: {error.strerror}") from None
    if done.returncode != 0:
        said = [text.strip() for text in done.stderr.splitlines() if text.strip()]
        last = said[-1] if said else "(no output)"
        launcher_said = [text for text in said if text.startswith(LAUNCHER_LINES)]
        if launcher_said and launcher_said[0] != last:
            last = f"{launcher_said[0][-300:]} ... {last}"
        raise RuntimeError(f"{launcher or 'mpiexec'} -n {ranks} failed (exit {done.returncode})"
                           f": {last[-600:]}")


def set_flags(overrides: list[str]) -> list[str]:
    """``["a.b=1", ...]`` -> ``["--set", "a.b=1", ...]`` for es-train."""
    return [part for override in overrides for part in ("--set", override)]
