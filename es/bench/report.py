"""What the measurements share: where results go (``bench-results/<command>``), Markdown
tables, ``results.csv`` with ``results.md``, and headless matplotlib (the optional ``[plot]``
extra). Imports no other module of ``es.bench``, so every one of them can import it.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

RESULTS = Path("bench-results")  # git-ignored


def out_folder(given: str | Path | None, command: str, *subfolder: str) -> Path:
    """``--out`` as given, else ``bench-results/<command>/<subfolder...>``."""
    return Path(given) if given is not None else RESULTS.joinpath(command, *subfolder)


def markdown(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A Markdown table of ``columns``; floats to four significant digits."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns]
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
        print("matplotlib not installed (pip install -e '.[plot]'): no plot written")
        return None
    return plt


def write_table(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    write_results(rows, out, f"## {title}\n\n{markdown(rows, list(rows[0]))}")
