"""The progress line and the live status line on a terminal."""

import io
import logging

from es.rl.metrics import progress_line
from es.rl.runs import StatusLine

ROW = {"generation": 12, "timesteps": 34_500, "return_mean": -3.5, "return_max": 7.25,
       "eval_return": None, "steps_per_s": 2500.0, "time_s": 61.0, "bytes_sent": 224}


def test_progress_line_shows_best_eval_and_eta():
    line = progress_line({**ROW, "eval_return": 8.0}, best_eval=9.5, eta_s=3725)
    assert line.startswith("gen    12 | steps   34.5k | return mean     -3.50 max      7.25")
    assert "| eval      8.00 (best 9.50)" in line and line.endswith("| ETA 1:02:05")
    assert "ETA" not in progress_line(ROW)
    assert "best" not in progress_line(ROW, best_eval=9.5)  # shown beside an evaluation only


def test_status_line_rewrites_in_place_and_keeps_evaluations():
    stream = io.StringIO()
    handler = StatusLine(stream)
    for message in ("gen 1 | steps 10", "gen 2 | steps 20 | eval 5.00", "gen 3 | steps 30"):
        handler.emit(logging.LogRecord("es", logging.INFO, "", 0, message, None, None))
    assert stream.getvalue() == ("\rgen 1 | steps 10\x1b[K"
                                 "\rgen 2 | steps 20 | eval 5.00\x1b[K\n"
                                 "\rgen 3 | steps 30\x1b[K")


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
