"""Where the ``es-*`` console scripts start (pyproject.toml's ``[project.scripts]``).

A program's modules take a while to load (NumPy, mpi4py, Gymnasium: a second or more on a
cluster's shared filesystem), and a Ctrl-C in that time came as a traceback of imports. Here
the program is imported inside a guard: interrupted while loading, it ends in one line, exit
code 130, with nothing started. Its ``main`` handles the signals of its own work (es-train
checkpoints); one that escapes it (before es-train holds signals, or a second signal on its
way out) ends it in one line too, naming the rank.
"""

import importlib
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from es.parallel.launcher import launcher_rank


def _interrupted(said: str | None) -> NoReturn:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher's repeats: one line
    if said is not None:  # one write, as es.cli.args.say_line: ranks print at once
        sys.stderr.write(f"{said} (exit code 130)\n")
        sys.stderr.flush()
    sys.exit(130)


def _start(module: str, program: str) -> NoReturn:
    rank = launcher_rank()
    try:
        main = importlib.import_module(module).main
    except KeyboardInterrupt:  # every rank alike: rank 0 alone says so
        _interrupted(f"{program}: interrupted while starting; nothing ran" if rank == 0
                     else None)
    try:
        code = main()
    except KeyboardInterrupt:  # where this rank was: the others may not have got it
        _interrupted(f"{program}: interrupted on rank {rank}")
    sys.exit(code)


def _entry(module: str, program: str) -> Callable[[], NoReturn]:
    """The console script ``program``: ``module``'s ``main`` behind the guard."""
    def start() -> NoReturn:
        _start(module, program)

    return start


train = _entry("es.cli.train", "es-train")
evaluate = _entry("es.cli.evaluate", "es-eval")
bench = _entry("es.cli.bench", "es-bench")
plot = _entry("es.cli.plot", "es-plot")
baseline = _entry("es.cli.baseline", "es-baseline")
compare = _entry("es.cli.compare", "es-compare")
