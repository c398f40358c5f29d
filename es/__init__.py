"""Evolution strategies (Salimans et al. 2017) distributed over MPI.

Importing ``es`` is cheap and has no side effects: NumPy, Gymnasium and mpi4py are imported
by the submodules that need them, so ``es.cli`` can pin BLAS threads before NumPy loads. The
Python API (``es.minimize``, ``es.AskTell``, ``es.functions``, ``es.train``) loads on first use.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {"minimize": "es.blackbox", "AskTell": "es.blackbox", "Result": "es.blackbox",
         "functions": "es.functions", "train": "es.training", "TrainingRun": "es.training"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'es' has no attribute {name!r}")
    module = import_module(_LAZY[name])
    return module if module.__name__ == f"es.{name}" else getattr(module, name)
