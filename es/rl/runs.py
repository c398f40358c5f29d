"""Run folders and progress output, the same for ``es-train``, ``es.train`` and the baselines:
``runs/{env}__{name}__{seed}__{time}/`` with the resolved ``config.toml`` written first, and
progress lines on stdout (a live status line on a terminal), warnings on stderr."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import shlex
import socket
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from es.config import Config


def default_run_dir(runs_dir: str, env_id: str, name: str, seed: int,
                    stamped: bool = True) -> Path:
    stamp = "__" + datetime.now().strftime("%Y%m%d-%H%M%S") if stamped else ""
    return Path(runs_dir) / f"{env_id.replace('/', '_')}__{name}__{seed}{stamp}"


def unused(folder: Path) -> Path:
    """``folder``, or ``folder-2``, ``-3``, ... where it exists: the default folders of runs
    started in the same second (a loop over overrides) were one, and ``force`` overwrote the
    earlier run."""
    candidate, number = folder, 1
    while candidate.exists():
        number += 1
        candidate = folder.with_name(f"{folder.name}-{number}")
    return candidate


#: The file in a run folder that the process training there holds a lock on.
LOCK_FILE = "es.lock"
#: The file in a run folder that names the program that trained it ("es-train", "es-baseline
#: ppo"): one config may train with either, and their curves are not seeds of one run.
TRAINED_BY = "trained_by.txt"
#: Set by ``es-train --elastic``'s supervisor to the folder it holds for the ranks it
#: launches and relaunches (a hung rank 0 it left behind would otherwise still hold it), and
#: to what its lock file says, which rank 0 finds there only if it sees the same folder.
LOCK_HELD_BY_SUPERVISOR = "ES_RUN_DIR_HELD"
SUPERVISOR_LOCK_LINE = "ES_RUN_DIR_HOLDER"
_held: dict[str, int] = {}  # this process's locks: folder -> file descriptor


def claim_run_dir(run_dir: str | Path, who: str = "es-train") -> str | None:
    """Hold ``RUN_DIR/es.lock`` while this process trains there (rank 0): a second run, a
    ``--resume`` or a ``--force`` start on the same folder is refused while the first lives,
    instead of both writing into it. The lock goes with the process (a kill, a lost node's
    restart), so it never needs clearing. None, or the error. On a filesystem without locks
    (an NFS without lockd) the run goes on unguarded, with a warning."""
    folder = Path(run_dir).resolve()
    if str(folder) in _held:
        return None
    if os.environ.get(LOCK_HELD_BY_SUPERVISOR) == str(folder):
        return _check_supervisors_folder(folder, run_dir)
    made = [path for path in (folder, *folder.parents) if not path.exists()]
    lock_was_there = (folder / LOCK_FILE).exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        return f"run folder {str(run_dir)!r}: {error.strerror}"
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = _holder(handle)
        os.close(handle)
        if error.errno in (errno.EACCES, errno.EAGAIN):
            return (f"run folder {str(run_dir)!r}: in use by {holder}; "
                    "wait until it stops, or choose another folder")
        logging.getLogger("es").warning(
            "run folder %r: cannot lock %s (%s); nothing stops a second run from writing "
            "into it", str(run_dir), LOCK_FILE, error.strerror)
        return None
    try:
        os.ftruncate(handle, 0)
        os.pwrite(handle, f"{lock_line(who)}\n".encode(), 0)
    except OSError as error:  # a full disk: a traceback, and the lock file left behind
        os.close(handle)
        with contextlib.suppress(OSError):
            if not lock_was_there:
                (folder / LOCK_FILE).unlink()
            for path in made:  # this call's folders, innermost first, if still empty
                path.rmdir()
        return f"run folder {str(run_dir)!r}: {error.strerror}"
    _held[str(folder)] = handle
    return None


def lock_holder(run_dir: str | Path) -> str | None:
    """Who holds the folder's lock now (its lock line), or None: free, or held by this
    process (whose lock closing another descriptor of the file would let go)."""
    folder = Path(run_dir).resolve()
    if str(folder) in _held:
        return None
    try:
        handle = os.open(folder / LOCK_FILE, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EACCES, errno.EAGAIN):
            return _holder(handle)
        return None
    finally:
        os.close(handle)
    return None


def _holder(handle: int) -> str:
    """Who holds a lock file, as its lock line says."""
    return os.pread(handle, 200, 0).decode(errors="replace").strip() or "another process"


def lock_line(who: str) -> str:
    """What this process writes into a folder's lock file: who holds it, and where."""
    return f"{who} pid {os.getpid()} on {socket.gethostname()}"


def _check_supervisors_folder(folder: Path, run_dir: str | Path) -> str | None:
    """A rank 0 on another host than its supervisor sees the supervisor's folder only through
    a shared file system; a path that is local to each host would have the run start over in
    a folder the supervisor never sees (after a lost node, from generation 0)."""
    holder = os.environ.get(SUPERVISOR_LOCK_LINE, "")
    try:
        found = (folder / LOCK_FILE).read_text().strip()
    except OSError:
        found = ""
    if not holder or found == holder:
        return None
    return (f"run folder {str(run_dir)!r} on {socket.gethostname()} is not the one its "
            f"supervisor holds ({holder}): the run folder must be on a file system that every "
            "host and the supervisor share (docs/cluster.md)")


def release_run_dir(run_dir: str | Path | None = None) -> None:
    """Let go of a folder ``claim_run_dir`` holds (None: every one), once its run ended: a
    sweep trains its next run in the same process, a notebook its next ``es.train``."""
    for folder in list(_held) if run_dir is None else [str(Path(run_dir).resolve())]:
        handle = _held.pop(folder, None)
        if handle is not None:
            os.close(handle)


def check_run_dir(requested: str | None, config: Config, force: bool,
                  overwrite: str = "choose another --run-dir or pass --force to overwrite it",
                  resume: Callable[[Path], str] = lambda folder: (
                      f"es-train --resume {shlex.quote(str(folder))}")
                  ) -> tuple[str | None, str | None]:
    """(run folder, None) or (None, error), touching nothing: the folder is written by
    ``start_run_dir`` once the run's environment and policy are built, so a config that
    names one that cannot be built neither leaves a folder that refuses the corrected
    command nor costs the run that ``force`` would replace. ``overwrite`` says how the
    caller's user starts over in a folder that holds a run (a flag, or an argument), and
    ``resume`` how they continue an es-train run there, said first: a user who ran the same
    command again after a kill was told only of ``--force``, which deletes the run."""
    run_dir = Path(requested) if requested else unused(default_run_dir(
        config.run.runs_dir, config.env.id, config.run.name, config.run.seed))
    if run_dir.exists() and not run_dir.is_dir():
        return None, f"run folder {str(run_dir)!r}: exists and is not a folder"
    if run_dir.is_dir() and not (run_dir / "config.toml").is_file() \
            and (runs := run_folders_in(run_dir)):
        # Even with force: a run there made the folder a run, and es-plot and es-eval then
        # took it for that run alone, its sweep's seeds dropped without a word.
        many = len(runs) != 1
        return None, (f"run folder {str(run_dir)!r}: holds {len(runs)} run{'s' * many} in its "
                      f"subfolders ({first_few(runs)}); a run written beside "
                      f"{'them' if many else 'it'} would hide {'them' if many else 'it'}: "
                      "choose another folder")
    if run_dir.is_dir() and any(path.name != LOCK_FILE for path in run_dir.iterdir()) \
            and not force:
        if (holder := lock_holder(run_dir)) is not None:  # else told to --resume, refused
            return None, (f"run folder {str(run_dir)!r}: in use by {holder}; wait until it "
                          "stops, or choose another folder")
        if not (run_dir / "config.toml").is_file():
            held = "is not empty (no run in it; its files would stay)"
        elif trained_by(run_dir) == "es-train":
            held = f"already holds a run; continue it with {resume(run_dir)}, or"
        else:
            held = "already holds a run;"
        return None, f"run folder {str(run_dir)!r}: {held} {overwrite}"
    return str(run_dir), None


def start_run_dir(run_dir: str, config: Config, program: str = "es-train") -> str | None:
    """Clear an earlier run's files from the folder and write the resolved ``config.toml``
    and ``TRAINED_BY`` (the program); None, or the error. On rank 0 only. Everything a run
    writes there goes (an old run's kept policy or stops would pass for the new run's, its
    checkpoints would be what ``--resume`` finds); anything else the folder holds (a user's
    notes, es-bench's scores) stays."""
    import tomli_w

    from es.rl.checkpoint import write_atomically
    from es.rl.metrics import STOPS_FILE
    from es.rl.tensorboard_log import TB_FOLDER

    run_files = ("config.toml", "progress.csv", "policy.npz", "policy_best.npz", STOPS_FILE,
                 TRAINED_BY)
    # What a run writes in its folders: a user's own file there stays, as it does beside them.
    run_folders = {"checkpoints": ("ckpt-*.npz", "ckpt-*.json"),
                   TB_FOLDER: ("events.out.tfevents.*",)}

    folder = Path(run_dir)
    payload = tomli_w.dumps(config.to_dict()).encode()
    # Before an old run's files go: it may still be training.
    claimed = claim_run_dir(folder, program)
    if claimed:
        return claimed
    try:
        remove_unfinished_writes(folder)
        for stale in run_files:
            (folder / stale).unlink(missing_ok=True)
        for name, patterns in run_folders.items():
            for stale in [path for pattern in patterns for path in (folder / name).glob(pattern)]:
                stale.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # not there, or holding a user's files
                (folder / name).rmdir()
        # At once, not when training starts: a run killed before its first checkpoint can
        # then be resumed (started over) from this file.
        write_atomically(folder / "config.toml", lambda handle: handle.write(payload))
        (folder / TRAINED_BY).write_text(program + "\n")
    except OSError as error:  # a full disk: no half-made folder, which read as a baseline's
        with contextlib.suppress(OSError):
            undo_start_run_dir(run_dir)
        return f"run folder {run_dir!r}: {error.strerror}"
    return None


#: The temp files of a run's atomic writes (``write_atomically``: ``.{name}.XXXXXXXX``) that
#: a killed process leaves behind, in the run folder and in ``checkpoints/``.
UNFINISHED_WRITES = ((".", (".config.toml.*", ".policy.npz.*", ".policy_best.npz.*")),
                     ("checkpoints", (".ckpt-*",)))


def remove_unfinished_writes(run_dir: str | Path) -> None:
    """Delete what a process killed while writing left (a policy's worth each, a CNN's
    megabytes): only the folder's own process, which holds its lock, may."""
    for name, patterns in UNFINISHED_WRITES:
        for leftover in [path for pattern in patterns
                         for path in (Path(run_dir) / name).glob(pattern)]:
            leftover.unlink(missing_ok=True)


def run_folders_in(folder: str | Path) -> list[str]:
    """The names of ``folder``'s subfolders that hold a run (a config.toml): a sweep's runs."""
    return sorted(child.name for child in Path(folder).iterdir()
                  if (child / "config.toml").is_file())


def first_few(items: list[str], count: int = 3) -> str:
    """``items`` joined, the first ``count`` of them and "..." for the rest."""
    return ", ".join(items[:count]) + (", ..." if len(items) > count else "")


def trained_by(run_dir: str | Path) -> str:
    """The program that trained the run (``TRAINED_BY``); es-train's for runs from before the
    file was written."""
    path = Path(run_dir) / TRAINED_BY
    return (path.read_text().strip() if path.is_file() else "") or "es-train"


def undo_start_run_dir(run_dir: str) -> None:
    """Take back what ``start_run_dir`` wrote when the run refused its config before training
    (a baseline checks its own keys then): the corrected command must not find "already holds
    a run". Rank 0 only; a folder with progress rows is a run, and stays."""
    folder = Path(run_dir)
    if (folder / "progress.csv").exists():
        return
    release_run_dir(folder)
    for name in ("config.toml", TRAINED_BY, LOCK_FILE):
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()  # only if nothing else is there


#: ``log.info(line, extra=TRANSIENT)``: a progress line without an evaluation, which the next
#: line overwrites on a terminal.
TRANSIENT = {"transient": True}


class StatusLine(logging.StreamHandler):
    """On a terminal, each progress line without an evaluation overwrites the previous one (a
    live status line); every other line stays: the evaluations remain on screen as a history,
    and a verdict or the stop's lines are never overwritten nor run into the next."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.open = False  # a transient line is on screen, its line not ended

    def emit(self, record: logging.LogRecord) -> None:
        transient = getattr(record, "transient", False)
        end = "" if transient else "\n"
        self.stream.write(f"\r{self.format(record)}\x1b[K{end}")
        self.open = transient
        self.flush()

    def end(self) -> None:
        """End a transient line left on screen, before what is printed next."""
        if self.open:
            self.stream.write("\n")
            self.open = False
            self.flush()


def end_status_line() -> None:
    """At a run's end: what follows (``done:``, a stop's message) starts on its own line."""
    for handler in logging.getLogger("es").handlers:
        if isinstance(handler, StatusLine):
            handler.end()


def configure_logging(progress: bool, prefix: str = "", program: str = "") -> None:
    """Progress lines (INFO) to stdout, warnings and errors to stderr. On a terminal the
    progress is a status line rewritten in place; in a file or pipe, one line a generation.
    ``prefix`` starts every line: a sweep's groups train side by side and print into one
    stream, so each line says whose it is. ``program`` (a command line's) starts the stderr
    lines before it, as the program's own warnings begin."""
    to_stdout = StatusLine(sys.stdout) if sys.stdout.isatty() else logging.StreamHandler(
        sys.stdout)
    to_stdout.addFilter(lambda record: record.levelno < logging.WARNING)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    logger = logging.getLogger("es")
    logger.handlers[:] = [to_stdout, to_stderr]
    for handler, start in ((to_stdout, prefix), (to_stderr, f"{program}: {prefix}"
                                                  if program else prefix)):
        handler.setFormatter(logging.Formatter(start.replace("%", "%%") + "%(message)s"))
    logger.setLevel(logging.INFO if progress else logging.WARNING)
