"""Evolution strategies (Salimans et al. 2017) distributed over MPI.

Importing ``es`` is cheap and has no side effects: NumPy, Gymnasium and mpi4py are imported
by the submodules that need them, so the ``es-*`` programs can pin BLAS threads before NumPy
loads. The Python API (``es.minimize``, ``es.AskTell``, ``es.functions``, ``es.train``,
``es.resume``) loads on first use. The layers are the folders; docs/architecture.md says
which may import which.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {"minimize": "es.blackbox.minimizer", "AskTell": "es.blackbox.minimizer",
         "Result": "es.blackbox.minimizer", "functions": "es.functions",
         "train": "es.rl.training", "resume": "es.rl.training",
         "TrainingRun": "es.rl.training"}


def __dir__() -> list[str]:
    """The module's names and the lazy ones, so that tab completion offers ``es.minimize``
    before it has loaded."""
    return sorted({*globals(), *_LAZY} - {"Any", "import_module"})


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'es' has no attribute {name!r}")
    module = import_module(_LAZY[name])
    return module if module.__name__ == f"es.{name}" else getattr(module, name)
