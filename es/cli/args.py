"""What every ``es-*`` program and benchmark script shares about its command line.

Errors are one line on stderr, exit 2: argparse prints a usage block before its error; a user
(or a script reading stderr) gets the message alone here, with a pointer to ``--help``.
Messages echo what the user typed, so line breaks inside them are escaped.

A flag that several programs take is defined once, in ``FLAGS``, so that its name means one
thing with one type everywhere; a program adds its own detail after the shared help text and
chooses the default where ``FLAGS`` leaves it open. The conventions:

- ``--seeds SPEC``: several seeds, ``0-4``, ``0,2,5`` or ``1-2,7``; ``--seed N``: one seed.
- ``--ranks SPEC``: MPI rank counts, ``1,2,4``; a program that runs one rank count per run
  takes exactly one (a list of one).
- ``--out DIR``: a benchmark's output folder, by default ``bench-results/<command>``.
- ``--budget-s SECONDS``: the wall-clock budget of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from es.bench.report import RESULTS, run_interruptible
from es.core.exit_codes import USAGE_ERROR
from es.core.messages import one_line


class ReaderGone:
    """Standard output for a reader that may leave early (``es-train ... | head``): the run
    goes on and writes its files; what it would still print goes to ``os.devnull`` instead of
    a ``BrokenPipeError`` per line and a traceback that ends the work."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        # The stream's own buffer is flushed again at exit: it must find a file that takes it.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def survive_closed_stdout() -> None:
    """Where standard output is a pipe, wrap it in ``ReaderGone``; called first by every
    ``es-*`` program (a terminal or a file cannot go away)."""
    try:
        is_pipe = stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # no file behind it (a notebook, a test)
        return
    if is_pipe and not isinstance(sys.stdout, ReaderGone):
        sys.stdout = ReaderGone(sys.stdout)


def interruptible(program: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """A program's ``main`` for which Ctrl-C (and SIGTERM) is one line, exit code 130, not a
    traceback: for the programs that have nothing to save when stopped (es-eval, es-plot)."""
    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def stoppable(*args: Any) -> int:
            return run_interruptible(main, *args, program=program)
        return stoppable
    return wrap


def output_file_error(path: str, flag: str, suffix: str) -> str | None:
    """Why ``path`` cannot take the file ``flag`` writes (missing folders are created), or
    None: checked before the work that fills it, so a typo in it costs no episodes.
    ``suffix``: that of the example name offered in a folder (``.mp4``), which the flag
    takes."""
    target = Path(path)
    try:
        if target.is_dir():
            return (f"{flag} {path!r}: is a folder; give a file name, e.g. "
                    f"{target / ('out' + suffix)}")
        folder = target.parent
        while not folder.exists():
            folder = folder.parent
        if not folder.is_dir():
            return f"{flag} {path!r}: {str(folder)!r} is a file, not a folder"
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{flag} {path!r}: the folder {str(folder)!r} is not writable"
        if target.exists() and not os.access(target, os.W_OK):
            return f"{flag} {path!r}: the file is not writable"
        if not target.exists() and folder == target.parent:
            # A folder that says writable may still take no file (/proc, a full quota):
            # made and removed now, not found after the episodes.
            target.open("xb").close()
            target.unlink()
    except OSError as error:  # a name too long, a folder that cannot be searched
        return f"{flag} {path!r}: {error.strerror or error}"
    return None


def say_line(text: str) -> None:
    """``text`` and its newline on stderr in one write: ranks that print at once under a
    launcher (unbuffered, as es-compare runs them, print writes the newline apart) ran their
    lines together ("interrupted on rank 1es-baseline: interrupted on rank 0")."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def fail(program: str, message: str) -> int:
    """Print ``program: error: message`` as one line on stderr; returns the exit code 2."""
    say_line(f"{program}: error: {one_line(message)}")
    return USAGE_ERROR


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line (``prog: error: ...``, exit 2)
    and whose ``--help`` ends with ``examples:``, real command lines of the program.

    Sub-command parsers (``add_subparsers().add_parser(..., examples=[...])``) are of this
    class too.
    """

    def __init__(self, *args: Any, examples: Sequence[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.examples = list(examples)

    def format_help(self) -> str:
        # Not argparse's epilog: its formatter would wrap the command lines, or (raw) stop
        # wrapping the description too.
        lines = "".join(f"  {example}\n" for example in self.examples)
        return f"{super().format_help()}\nexamples:\n{lines}"

    def error(self, message: str) -> NoReturn:
        fail(self.prog, f"{message} (see {self.prog} --help)")
        raise SystemExit(USAGE_ERROR)


class SpecError(argparse.ArgumentTypeError, ValueError):
    """A bad flag value. argparse prints its message (after ``argument --flag:``); code that
    calls a parse function directly catches it as the ValueError it is."""


#: The most seeds one --seeds may name: a sweep of more runs than this is a typo, and the
#: list would be built in memory before anything could refuse it.
MAX_SEEDS = 10_000


def _spans(spec: str) -> list[tuple[int, int]]:
    """'1-3,7' -> [(1, 3), (7, 7)]; [] when a part is not an integer or a span of them."""
    try:  # '2-' (a span cut short) is not 2: int('') refuses it as it refuses '-3'
        return [(int(low), int(high) if dash else int(low)) for low, dash, high in
                (part.partition("-") for part in spec.split(","))]
    except ValueError:
        return []


def _count(spans: list[tuple[int, int]]) -> int:
    return sum(max(0, high - low + 1) for low, high in spans)


def parse_seeds(spec: str, lowest: int = 0, why: str = "") -> list[int]:
    """'0-3' -> [0, 1, 2, 3]; '0,2,5' and '1-2,7' work too. Order kept, no repeats, none
    below ``lowest`` (``why``: the reason, when not 0); at most ``MAX_SEEDS``, counted before
    the list is built."""
    spans = _spans(spec)
    count = _count(spans)
    if count > MAX_SEEDS:
        raise SpecError(f"{spec!r}: {count} seeds; at most {MAX_SEEDS} in one sweep")
    seeds = [seed for low, high in spans for seed in range(low, high + 1)]
    if not seeds or min(seeds) < lowest or len(set(seeds)) != len(seeds):
        raise SpecError(f"{spec!r}: expected seeds >= {lowest}{why} like {lowest}-{lowest + 4}, "
                        f"{lowest},{lowest + 2},{lowest + 5} or 1-2,7, no repeats")
    return seeds


def pycma_seeds(spec: str) -> list[int]:
    """``--seeds`` of runs that pycma seeds: it reads seed 0 as 'from the clock'."""
    return parse_seeds(spec, 1, " (pycma reads seed 0 as 'from the clock')")


pycma_seeds.flag_kind = parse_seeds  # type: ignore[attr-defined]  # narrower; alike in kind


#: The most integers one list flag (--dims, --functions, --instances) may name.
MAX_LIST = 10_000


def int_list(low: int = 1, high: int | None = None) -> Callable[[str], list[int]]:
    """The type of a flag such as ``--dims``: '1-5', '1,8' or a mix -> sorted distinct
    integers within [low, high], at most ``MAX_LIST``, counted before the list is built."""
    bound = f"{low}..{high}" if high is not None else f">= {low}"
    top = high if high is not None else low + 7  # the examples stay within the bounds
    examples = f"'{low}-{min(low + 4, top)}' or '{low},{min(low + 7, top)}'"

    def parse(spec: str) -> list[int]:
        spans = _spans(spec)
        count = _count(spans)
        if count > MAX_LIST:
            raise SpecError(f"{spec!r}: {count} integers; at most {MAX_LIST}")
        values = sorted({value for first, last in spans for value in range(first, last + 1)})
        if (not values or any(last < first for first, last in spans) or values[0] < low
                or (high is not None and values[-1] > high)):
            raise SpecError(f"{spec!r}: expected integers {bound} as {examples}")
        return values

    parse.flag_kind = "list"  # type: ignore[attr-defined]  # per program; alike in kind
    return parse


def name_list(known: Sequence[str]) -> Callable[[str], list[str]]:
    """The type of a flag such as ``--methods``: comma-separated distinct names among
    ``known``, checked when the command line is read rather than after the first runs."""

    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",")]
        if set(names) - set(known) or len(set(names)) != len(names):
            raise SpecError(f"{text!r}: expected distinct names among {', '.join(known)}")
        return names

    parse.flag_kind = "list"  # type: ignore[attr-defined]
    return parse


def parse_ranks(spec: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; '2' -> [2]."""
    try:
        ranks = [int(part) for part in spec.split(",")]
    except ValueError:
        ranks = []
    if not ranks or min(ranks) < 1 or ranks != sorted(set(ranks)):
        if "," not in spec:  # one count: a program may take no list (``RankCounts``)
            raise SpecError(f"{spec!r}: expected a rank count >= 1, e.g. 2")
        raise SpecError(f"{spec!r}: expected increasing rank counts >= 1, e.g. 1,2,4")
    return ranks


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SpecError(f"{text!r}: expected an integer >= 1")
    return value


def nonnegative_int(text: str) -> int:
    """A seed, or a count where 0 means none."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise SpecError(f"{text!r}: expected an integer >= 0")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def parse_seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    value = _number(text)
    if not 0 < value < math.inf:
        raise SpecError(f"{text!r}: expected a finite number of seconds > 0")
    return value


def _nonnegative(text: str, unit: str) -> float:
    value = _number(text)
    if not 0 <= value < math.inf:
        raise SpecError(f"{text!r}: expected a finite number of {unit} >= 0")
    return value


def nonnegative_seconds(text: str) -> float:
    """A finite number of seconds >= 0 (a warm-up that may be none)."""
    return _nonnegative(text, "seconds")


def nonnegative_ms(text: str) -> float:
    """A finite number of milliseconds >= 0 (a delay that may be none)."""
    return _nonnegative(text, "milliseconds")


def finite_float(text: str) -> float:
    value = _number(text)
    if not math.isfinite(value):
        raise SpecError(f"{text!r}: expected a finite number")
    return value


def folder_path(text: str) -> str:
    """A run folder's path (``--run-dir``, ``--resume``): an empty one (a batch script's unset
    ``$RUN_DIR``) is refused, where it meant a new folder under runs/ on every start."""
    if not text.strip():
        raise SpecError(f"{text!r}: expected a folder's path (is a variable in the command "
                        "line unset?)")
    return text


def config_file(text: str) -> str:
    """A config or suite file: the path as given where it exists, else the shipped config it
    names (``cartpole``, ``configs/cartpole.toml`` from any folder: es.config.locate_config);
    a file that is neither is refused by the loader, with the shipped names."""
    from es.config import locate_config

    return str(locate_config(text))


def output_folder(text: str) -> Path:
    """``--out``: refused at once where a file stands in the way, not after the benchmark ran
    and its results could not be written."""
    path = Path(text)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if not text or (existing is not None and not existing.is_dir()):
        raise SpecError(f"{text!r}: not a folder (a file is in the way)" if text
                        else "'': expected a folder")
    # Made and taken back at once: the benchmark may refuse something else before it writes.
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".es-write-check-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise SpecError(f"{text!r}: cannot be written ({error.strerror or error})") from None
    finally:
        for folder in missing:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
    return path


class RankCounts(argparse.Action):
    """``--ranks``: always a list of rank counts. A program that runs one rank count per run
    (``several=False``) refuses a list of more than one."""

    def __init__(self, *args: Any, several: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.several = several

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if not self.several and len(values) > 1:
            raise argparse.ArgumentError(self, f"{','.join(map(str, values))!r}: one rank count "
                                         "per run here, e.g. --ranks 2")
        setattr(namespace, self.dest, values)


#: The shared flags: how argparse reads each, ``help`` its meaning (the start of every
#: program's help text for it), and ``default`` where it is the same for every program.
FLAGS: dict[str, dict[str, Any]] = {
    "--seeds": {"type": parse_seeds, "metavar": "SPEC",
                "help": "seeds, a list such as 0-4, 0,2,5 or 1-2,7"},
    "--seed": {"type": nonnegative_int, "metavar": "N", "help": "one seed"},
    "--ranks": {"type": parse_ranks, "action": RankCounts, "metavar": "SPEC",
                "help": "MPI ranks"},
    "--out": {"type": output_folder, "metavar": "DIR", "help": "output folder"},
    "--budget-s": {"type": parse_seconds, "metavar": "SECONDS",
                   "help": "wall-clock budget of one run"},
    "--config": {"type": config_file, "metavar": "PATH",
                 "help": "config file (TOML), or a shipped config's name"},
    "--set": {"dest": "overrides", "action": "append", "default": [],
              "metavar": "SECTION.KEY=VALUE", "help": "override one config value (repeatable)"},
    "--run-dir": {"type": folder_path, "metavar": "DIR", "help": "the run folder"},
    "--force": {"action": "store_true", "default": False,
                "help": "overwrite an existing run folder"},
    "--quiet": {"action": "store_true", "default": False, "help": "no progress lines"},
    "--tensorboard": {"action": "store_true", "default": False,
                      "help": "also write TensorBoard event files under RUN_DIR/tb/ "
                      "(run.tensorboard = true; needs pip install 'mpi-es[tensorboard]')"},
    "--env": {"metavar": "ID", "help": "Gymnasium environment id, e.g. CartPole-v1"},
    "--jobs": {"type": positive_int, "default": 1, "metavar": "N",
               "help": "runs side by side, each in its own process"},
    "--episodes": {"type": positive_int, "metavar": "N", "help": "episodes to play"},
    "--repeats": {"type": positive_int, "metavar": "N",
                  "help": "repetitions of each measurement (medians reported)"},
    "--generations": {"type": positive_int, "metavar": "N",
                      "help": "generations of each run (run.generations)"},
    "--methods": {"metavar": "LIST", "help": "methods, comma-separated"},
    "--launcher": {"metavar": "COMMAND",
                   "help": "MPI launcher taking -n N (default: the mpiexec beside this "
                   "Python), e.g. 'srun --mpi=pmi2' or 'mpiexec -f hosts'"},
    "--dims": {"metavar": "LIST", "help": "dimensions, a list such as 2-5 or 10,100"},
    "--functions": {"metavar": "LIST", "help": "test functions, comma-separated"},
    "--evals-per-dim": {"type": positive_int, "metavar": "N",
                        "help": "evaluation budget of a run per dimension (capped by "
                        "--max-evals)"},
    "--max-evals": {"type": positive_int, "metavar": "N",
                    "help": "most evaluations of a run"},
    "--table-size": {"type": positive_int, "metavar": "N",
                     "help": "floats in the noise table (es.noise_table_size)"},
    "--hosts": {"type": positive_int, "metavar": "H",
                "help": "network-namespaced hosts to create on this machine (root)"},
    "--ranks-per-host": {"type": positive_int, "metavar": "R", "help": "ranks on each host"},
    "--workers": {"type": positive_int, "default": 2, "metavar": "N",
                  "help": "processes that play the episodes"},
    "--judged": {"type": nonnegative_int, "metavar": "N",
                 "help": "the suite's first N judging episodes (es-eval's seeds from 12345, on "
                         "which es-bench suite scores the kept and final policies; 0: none)"},
    "--threshold": {"type": finite_float, "metavar": "RETURN",
                    "help": "eval return that counts as solved"},
}


def add_flag(parser: argparse.ArgumentParser, option: str, detail: str = "",
             **choices: Any) -> argparse.Action:
    """Add the shared flag ``option``: its help is the shared meaning, then ``detail``.
    ``choices`` are what a program decides: ``default`` (where ``FLAGS`` has none),
    ``required``, for ``--ranks`` ``several``, and a narrower ``type``."""
    shared = dict(FLAGS[option])
    if "default" in shared and "default" in choices:
        raise ValueError(f"{option}: its default is shared: {shared['default']!r}")
    meaning = shared.pop("help")
    default = choices.get("default", shared.get("default"))
    help_text = meaning + (f"; {detail}" if detail else "")
    if default not in (None, False, []):
        help_text += " (default: %(default)s)"
    return parser.add_argument(option, **shared | choices, help=help_text)


def add_out(parser: argparse.ArgumentParser, command: str, detail: str = "",
            per: str = "") -> None:
    """``--out DIR``, by default ``bench-results/<command>``, or with ``per`` (what names a
    subfolder, e.g. ``ENV``) ``bench-results/<command>/<per>``: runs of other envs or suites
    then keep their results apart. The program resolves that default with
    ``es.bench.report.out_folder``."""
    if not per:
        add_flag(parser, "--out", detail, default=str(RESULTS / command))
        return
    where = f"default: {RESULTS / command}/{per}"
    add_flag(parser, "--out", f"{detail}; {where}" if detail else where)


def add_ranks(parser: argparse.ArgumentParser, default: str, several: bool,
              detail: str = "") -> None:
    """``--ranks SPEC``; with ``several=False`` exactly one value (one rank count per run)."""
    spec = "a list of counts such as 1,2,4" if several else "one count, e.g. 2, for every run"
    detail = spec + (f"; {detail}" if detail else "")
    add_flag(parser, "--ranks", detail, default=default, several=several)
