"""Helpers to run the real command-line tools, as a user types them."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent


#: The mark of the test files that build clusters of their own (network namespaces, a real
#: Slurm's daemons, the scripts that start them): ``pytestmark = ONE_WORKER``. With
#: ``--dist loadgroup`` (pyproject.toml), pytest-xdist runs them one after another on one
#: worker, so two clusters never meet, beside the other worker's tests.
ONE_WORKER = pytest.mark.xdist_group("clusters")


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} not found beside {sys.executable}: install with pip install -e .")
    return str(path)


def run_cli(args: list[str], ranks: int | None = None, timeout: float = 300,
            cwd: Path | None = None, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a console script; under ``mpiexec -n ranks`` when ranks is given."""
    command = [tool(args[0]), *args[1:]]
    if ranks is not None:
        command = [tool("mpiexec"), "-n", str(ranks), *command]
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "PMI_SIZE", "ES_COMM")}
    env |= extra_env or {}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd or REPO, env=env)


def read_progress(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open() as handle:
        return list(csv.DictReader(handle))


def load_params(run_dir: Path) -> np.ndarray:
    with np.load(run_dir / "policy.npz", allow_pickle=False) as data:
        return data["params"].copy()


def numeric_grad(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central finite differences of the scalar ``f`` at ``x``."""
    grad = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        grad[i] = (f(up) - f(down)) / (2 * h)
    return grad


def minimize_spmd_reference() -> list[list[str]]:
    """What ``tests/mpi_scripts/minimize_spmd.py`` prints, computed in one process: the
    digest, evaluations and restarts of its two es.minimize runs."""
    import hashlib

    import es

    reference = []
    for restarts in (0, 2):
        result = es.minimize(lambda x: float(np.sum((x - 0.5) ** 2)), x0=np.zeros(6),
                             sigma0=0.3, method="cma", seed=4, restarts=restarts, tolx=1e-4,
                             max_generations=30 if restarts == 0 else 400)
        digest = hashlib.sha256(result.x.tobytes() + result.x_mean.tobytes()).hexdigest()
        reference.append([digest, str(result.nfev), str(result.restarts)])
    return reference
