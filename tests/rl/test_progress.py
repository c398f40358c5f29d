"""The progress line and the live status line on a terminal."""

import io
import logging
import shutil
import subprocess

import pytest
from conftest import REPO, tool

from es.rl.metrics import progress_line
from es.rl.runs import TRANSIENT, StatusLine

ROW = {"generation": 12, "timesteps": 34_500, "return_mean": -3.5, "return_max": 7.25,
       "eval_return": None, "steps_per_s": 2500.0, "time_s": 61.0, "bytes_sent": 224}


def test_progress_line_shows_best_eval_and_eta():
    line = progress_line({**ROW, "eval_return": 8.0}, best_eval=9.5, eta_s=3725)
    assert line.startswith("gen    12 | steps   34.5k | return mean     -3.50 max      7.25")
    assert "| eval      8.00 (best 9.50)" in line and line.endswith("| ETA 1:02:05")
    assert "ETA" not in progress_line(ROW)
    assert "best" not in progress_line(ROW, best_eval=9.5)  # shown beside an evaluation only
    # A baseline's round in which no episode ended said "return mean nan max nan".
    none_ended = progress_line({**ROW, "return_mean": float("nan"),
                                "return_max": float("nan")})
    assert none_ended.startswith("gen    12 | steps   34.5k | no episode ended")
    assert none_ended.index("| 2.5k steps/s") == progress_line(ROW).index("| 2.5k steps/s")


def test_status_line_rewrites_in_place_and_keeps_evaluations_and_every_other_line():
    """Only progress lines without an evaluation are overwritten: the stop's lines (no
    " eval " in them) were erased by the next, and ``done:`` ran into the last."""
    stream = io.StringIO()
    handler = StatusLine(stream)
    for message, extra in (("gen 1 | steps 10", TRANSIENT), ("gen 2 | steps 20 | eval 5.00", {}),
                           ("gen 3 | steps 30", TRANSIENT), ("confirming 2 nominations", {}),
                           ("stop: generation 2's policy kept", {}), ("gen 4", TRANSIENT)):
        record = logging.LogRecord("es", logging.INFO, "", 0, message, None, None)
        record.__dict__.update(extra)
        handler.emit(record)
    handler.end()
    handler.end()  # once: a line already ended is left alone
    assert stream.getvalue() == ("\rgen 1 | steps 10\x1b[K"
                                 "\rgen 2 | steps 20 | eval 5.00\x1b[K\n"
                                 "\rgen 3 | steps 30\x1b[K"
                                 "\rconfirming 2 nominations\x1b[K\n"
                                 "\rstop: generation 2's policy kept\x1b[K\n"
                                 "\rgen 4\x1b[K\n")


def test_on_a_terminal_the_stops_lines_and_done_each_have_a_line(tmp_path):
    """es-train under a pseudo-terminal (``script``), as the quick start runs on one."""
    if shutil.which("script") is None:
        pytest.skip("no script(1) here to give es-train a terminal")
    command = (f"{tool('es-train')} configs/cartpole.toml --run-dir {tmp_path / 'run'} "
               "--set run.generations=5 --set run.eval_every=3")
    done = subprocess.run(["script", "-qec", command, "/dev/null"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    screen = done.stdout.replace("\r\n", "\n")
    lines = [line.rsplit("\r", 1)[-1].replace("\x1b[K", "") for line in screen.split("\n")]
    assert any(line.startswith("confirming ") for line in lines), lines
    assert any(line.startswith("stop: generation ") for line in lines), lines
    assert any(line.startswith("done: 5 generations") for line in lines), lines


def test_a_resumed_progress_log_starts_from_the_kept_rows_best_evaluation(tmp_path):
    """After a resume the progress line's "(best X)" counted the new session's evaluations
    alone, below an earlier one the run had reached."""
    from es.rl.metrics import ProgressLog

    path = tmp_path / "progress.csv"
    log = ProgressLog(path)
    assert log.best_eval is None
    for generation, evaluated in ((1, 5.0), (2, None), (3, 9.5), (4, 7.0)):
        log.write({"generation": generation, "timesteps": 10 * generation,
                   "eval_return": evaluated})
    log.close()
    assert ProgressLog(path, keep_through=4).best_eval == 9.5
    assert ProgressLog(path, keep_through=2).best_eval == 5.0  # rows 3-4 are trained again
    assert ProgressLog(path, keep_through=0).best_eval is None
