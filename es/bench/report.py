"""What the measurements share: where results go (``bench-results/<command>``), Markdown
tables, ``results.csv`` with ``results.md``, headless matplotlib (the optional ``[plot]``
extra), and how a program ends on Ctrl-C. Imports no other module of ``es.bench``, so every
one of them can import it.
"""

from __future__ import annotations

import contextlib
import csv
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from es.core.install import install_hint

RESULTS = Path("bench-results")  # git-ignored
#: The checkout (an editable install): the shipped configs/ are there, whatever the folder a
#: program runs in.
PROJECT = Path(__file__).resolve().parents[2]
#: The exit code of a program ended by Ctrl-C or SIGTERM (128 + SIGINT, as shells have it).
INTERRUPTED = 130


def run_interruptible(work: Callable[..., int | None], *args: Any,
                      program: str | None = None) -> int | None:
    """``work(*args)``; Ctrl-C, or a SIGTERM (turned into the same ``KeyboardInterrupt``
    while the work lasts, where it had Python's default handling), ends it with
    ``INTERRUPTED`` instead of a traceback. ``program``: the one line that says so (None
    for work that says it itself), with what the interrupt says of the work kept
    (``partial_rows_kept``)."""
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return work(*args)
    except KeyboardInterrupt as interrupt:
        if program:
            kept = f" {interrupt}" if str(interrupt) else ""
            print(f"{program}: interrupted{kept} (exit code {INTERRUPTED})", file=sys.stderr)
        return INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


#: The rows an interrupted measurement had finished (``partial_rows_kept``).
PARTIAL_CSV = "partial.csv"


@contextlib.contextmanager
def partial_rows_kept(rows: list[dict[str, Any]], total: int, what: str,
                      out: Path) -> Iterator[None]:
    """Around a measurement that appends its finished rows to ``rows``: interrupted, it
    writes them to ``out/partial.csv`` and its interrupt says so (``run_interruptible``'s
    line), where a long run stopped near its end had lost every finished row; complete, it
    removes an older run's file. The tables, made of every row, are not written then."""
    try:
        yield
    except KeyboardInterrupt:
        if not rows:
            raise
        out.mkdir(parents=True, exist_ok=True)
        with (out / PARTIAL_CSV).open("w", newline="") as handle:
            columns = [key for key, value in rows[0].items()  # numbers: no traces
                       if not isinstance(value, list | tuple | dict)]
            writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        raise KeyboardInterrupt(f"after {len(rows)} of {total} {what}, their rows in "
                                f"{out / PARTIAL_CSV} (the tables need all of them: run it "
                                "again)") from None
    (out / PARTIAL_CSV).unlink(missing_ok=True)


def out_folder(given: str | Path | None, command: str, *subfolder: str) -> Path:
    """``--out`` as given, else ``bench-results/<command>/<subfolder...>``."""
    return Path(given) if given is not None else RESULTS.joinpath(command, *subfolder)


#: The file in an ``--out`` folder that names the command whose results it holds.
OUT_MARKER = "es-bench.txt"
#: What names a folder's command where it holds no marker (written before markers were).
_MARKED_BY_FILES = {"suite.txt": "es-bench suite", "ecdf.csv": "es-bench bbob",
                    "highdim.csv": "es-bench highdim", "compare.csv": "es-compare"}


def held_results(out: Path) -> str | None:
    """The command whose results ``out`` holds (``"es-bench bbob"``), where it is known."""
    if (out / OUT_MARKER).is_file():
        return (out / OUT_MARKER).read_text().strip()
    return next((command for name, command in _MARKED_BY_FILES.items()
                 if (out / name).is_file()), None)


def check_out(out: Path, command: str) -> None:
    """Refuse an ``--out`` that holds another command's results, before any work: their
    files share names (``runs.csv``, ``summary.csv``, ``results.md``), and a BBOB run given
    a suite's folder replaced the suite's tables."""
    held = held_results(out)
    if held is not None and held != command:
        raise ValueError(f"--out {str(out)!r} holds the results of {held}; pass another --out")


def mark_out(out: Path, command: str) -> None:
    """Name ``command`` in ``out`` once it holds results (``check_out`` reads it)."""
    if out.is_dir() and any(path.name != OUT_MARKER for path in out.iterdir()):
        (out / OUT_MARKER).write_text(command + "\n")


def markdown(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A Markdown table of ``columns``; floats to four significant digits, an empty value
    (none measured: a CSV's empty cell) as "—"."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) or "—"
                 for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_results(rows: list[dict[str, Any]], out: Path, table: str) -> None:
    """``results.csv`` (every column) and ``results.md`` in ``out``; the table is printed."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "results.md").write_text(table)
    print("\n" + table)


def pyplot() -> Any:
    """matplotlib.pyplot (headless), or None without the optional [plot] extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib not installed ({install_hint('plot')}): no plot written")
        return None
    return plt


def write_table(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    write_results(rows, out, f"## {title}\n\n{markdown(rows, list(rows[0]))}")
