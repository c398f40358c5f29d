"""Shared by the benchmark scripts: their parser class, running the programs they launch, and
printing a table whose rows go to ``--out``/results.csv."""

from __future__ import annotations

import csv
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from es.bench.launch import BIN, mpiexec, python_on_ranks  # noqa: F401  (re-exported for the benchmark scripts)
from es.bench.report import check_out, mark_out, run_interruptible
from es.cli.args import ArgumentParser
from es.config import ConfigError, load_config

RESULTS_CSV = "results.csv"
#: The project's folders: a script's default config is found from any folder.
PROJECT = Path(__file__).resolve().parent.parent
CONFIGS = PROJECT / "configs"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def first_sentence(doc: str) -> str:
    """The docstring's first paragraph up to its first full stop, on one line: its first line
    alone stopped mid-sentence where the sentence wraps."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


def script_command(name: str) -> str:
    """How an ``--out`` folder's marker names the script whose results it holds."""
    return f"scripts/{name}"


class ScriptParser(ArgumentParser):
    """Refuses, before any work, an ``--out`` that holds another command's results (an
    ``es-bench`` command's, another script's, es-compare's): a script's results.csv replaced
    theirs, or sat among them, silently."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed = super().parse_args(args, namespace)
        if getattr(parsed, "out", None) is not None:
            try:
                check_out(Path(parsed.out), script_command(self.prog))
            except ValueError as error:
                self.error(str(error))
        return parsed


def script_parser(script: str, doc: str, examples: list[str]) -> ArgumentParser:
    """The parser of ``scripts/<script>``: described by its docstring's first sentence, errors as
    one line like the ``es-*`` programs'."""
    return ScriptParser(prog=Path(script).name, description=first_sentence(doc),
                        examples=examples)


def run_script(main: Callable[[], int | None]) -> NoReturn:
    """Exit with ``main()``'s code; Ctrl-C or SIGTERM end the script in one line, exit code
    130, never a traceback (the runs it launched stop as their own signals make them)."""
    sys.exit(run_interruptible(main, program=Path(sys.argv[0]).name) or 0)


def check_config(parse: ArgumentParser, path: str, overrides: list[str] = ()) -> None:
    """Refuse in one line, before the first run, a config (with its ``--set`` overrides) that
    every run of the benchmark would fail on."""
    try:
        load_config(path, list(overrides))
    except ConfigError as error:
        parse.error(str(error))


def died(script: str, what: str, code: int, stderr: str) -> NoReturn:
    """Exit 1 in one line: ``what`` (a run the benchmark launched) ended with exit code
    ``code``; the last lines of its stderr say why. Never a traceback of the script."""
    tail = " | ".join(stderr.strip().splitlines()[-3:]) or "no output"
    sys.exit(f"{Path(script).name}: {what} exited with {code}: {tail}")


def run_or_die(script: str, what: str, command: list[str]) -> str:
    """Run ``command`` to the end; its stdout, or ``died`` if it failed."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        died(script, what, done.returncode, done.stderr)
    return done.stdout


def emit(rows: list[dict[str, Any]], out: str | Path, title: str) -> None:
    """Print ``rows`` as an aligned table and write them to ``out``/results.csv."""
    columns = list(rows[0])
    cells = [[_fmt(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n{title}  ({machine()})")
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    path = Path(out) / RESULTS_CSV
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    mark_out(path.parent, script_command(Path(sys.argv[0]).name))
    print(f"wrote {path}")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)
