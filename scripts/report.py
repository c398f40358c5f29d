"""Shared by the benchmark scripts: print a table, write the same rows as CSV."""

from __future__ import annotations

import csv
import os
import platform
from pathlib import Path
from typing import Any

from es.bench import BIN, mpiexec  # noqa: F401  (re-exported for the benchmark scripts)


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def emit(rows: list[dict[str, Any]], csv_path: str | Path, title: str) -> None:
    """Print ``rows`` as an aligned table and write them to ``csv_path``."""
    columns = list(rows[0])
    cells = [[_fmt(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n{title}  ({machine()})")
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    path = Path(csv_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)
