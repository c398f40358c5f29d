"""MPICH's shared-memory segments that killed jobs left in ``/dev/shm``.

An MPICH job keeps a named segment or a few on each node (``mpich_shm_*``, 2 MB each with
the wheel's MPICH 5) until ``MPI_Finalize``. A job whose ranks are killed (``kill -9``, a lost
peer's partners, the OOM killer, a supervisor ending a hung job) never finalizes, so they stay
and hold RAM until someone removes them: a day of killed test runs left 2.3 GB on this
project's test machine (a Docker container's ``/dev/shm`` holds 64 MB unless set otherwise).
Clusters clean ``/dev/shm`` in a job's epilogue; a laptop or a hostfile's hosts have none, so
a new job removes what dead ones left on its node.

A segment is dead when no process maps it: MPICH maps a segment right after creating it and
keeps it mapped until it removes it. Only the user's own segments are touched, and only those
older than ``MIN_AGE_S``, so that one another job has just created and not yet mapped is left
alone.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

SHM_FOLDER = Path("/dev/shm")
PROC = Path("/proc")
PREFIX = "mpich_shm_"
#: Between a segment's creation and its mapping there are microseconds; this is ample.
MIN_AGE_S = 10.0


def mapped_paths() -> set[str]:
    """The files that some process this user can see maps (its ``/proc/PID/maps``)."""
    paths: set[str] = set()
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            with open(entry / "maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    name = line.split(maxsplit=5)[5:]
                    if name and name[0].startswith("/"):
                        paths.add(name[0].rstrip("\n"))
        except OSError:  # gone since the listing, or another user's
            continue
    return paths


def remove_dead_segments(folder: Path = SHM_FOLDER) -> tuple[int, int]:
    """Remove this user's MPICH segments in ``folder`` that no process maps and that are
    older than ``MIN_AGE_S``; how many, and their bytes. Nothing where there is no
    ``/dev/shm`` or ``/proc`` (not Linux)."""
    if not folder.is_dir() or not PROC.is_dir():
        return 0, 0
    now = time.time()
    uid = os.getuid()
    candidates = []
    for path in folder.glob(f"{PREFIX}*"):
        try:
            stat = path.stat()
        except OSError:
            continue
        if stat.st_uid == uid and now - stat.st_mtime >= MIN_AGE_S:
            candidates.append((path, stat.st_size))
    if not candidates:  # the common case: no scan of every process's maps
        return 0, 0
    mapped = mapped_paths()
    removed = freed = 0
    for path, size in candidates:
        if str(path) in mapped:
            continue
        try:
            path.unlink()
        except OSError:  # another job's start removed it first
            continue
        removed += 1
        freed += size
    return removed, freed
