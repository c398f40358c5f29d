"""es-bench bbob / highdim: target bookkeeping, ECDF arithmetic and real CLI smoke runs.

The full benchmark is a script (``es-bench bbob``); here it runs on two functions."""

import csv
import math
import re

import numpy as np
import pytest
from conftest import run_cli

import es
from es.bench.bbob import HIT_COLUMNS, TARGETS, Stop, Tracker, ecdf_at, spans_text
from es.cli.args import SpecError, int_list

pytest.importorskip("ioh")
pytest.importorskip("cma")


class FakeProblem:
    """f(x) = f_opt + x[0]: the precision is the first coordinate."""

    class optimum:  # noqa: N801 - ioh's attribute layout
        y = 5.0

    def __call__(self, x):
        return 5.0 + float(x[0])


def test_tracker_records_the_first_evaluation_reaching_each_target():
    tracker = Tracker(FakeProblem(), budget=4)
    assert tracker(np.array([200.0, 0.0])) == 200.0  # above every target
    tracker(np.array([[50.0, 0], [150.0, 0]]))  # 50 reaches 1e2 .. 10^1.8 (63.1), not 10^1.6
    assert tracker.nfev == 3 and tracker.best == 50.0
    assert list(tracker.hits[:2]) == [2, 2] and math.isinf(tracker.hits[2])
    tracker(np.array([1e-9, 0.0]))  # every target at the fourth evaluation
    assert np.all(tracker.hits[2:] == 4) and tracker.reached == TARGETS.size
    with pytest.raises(Stop):  # budget spent (and 1e-8 reached): no fifth evaluation
        tracker(np.array([0.0, 0.0]))
    assert tracker.nfev == 4


def test_a_run_that_spends_its_budget_is_labelled_so_whichever_method():
    """es.minimize stops at max_evals itself, pycma's fmin2 by the tracker's Stop: ours was
    labelled 'own stop' where pycma's said 'budget', as if ours stopped early."""
    from es.bench.bbob import run_bbob

    for method in ("cma", "pycma"):
        row = run_bbob((method, 1, 1, 2, 60, 0, False, 0))  # 10 generations of 6
        assert (row["nfev"], row["ended"]) == (60, "budget"), method
    assert run_bbob(("cma", 1, 1, 2, 10_000, 0, False, 0))["ended"] == "target"


def test_ecdf_counts_pairs_reached_within_the_budget_fraction():
    hits = [1.0] * 10 + [30.0] * 10 + [math.inf] * 31
    row = {"dim": 2, "budget": 40, **dict(zip(HIT_COLUMNS, hits, strict=True))}
    assert ecdf_at([row], 0.5) == pytest.approx(10 / 51)  # one evaluation
    assert ecdf_at([row], 15) == pytest.approx(20 / 51)
    assert ecdf_at([row], 1000) == pytest.approx(20 / 51)  # clipped at the run's budget
    assert ecdf_at([row, {**row, **dict.fromkeys(HIT_COLUMNS, "")}], 15) == pytest.approx(10 / 51)


def test_integer_lists_are_read_and_written_back_as_spans():
    assert int_list()("1-3,7") == [1, 2, 3, 7]
    assert int_list()("7,1-3,2") == [1, 2, 3, 7]
    assert spans_text([1, 2, 3, 7]) == "1-3,7"
    for bad in ("", "0-2", "x", "25", "3-1", "1,3-1", "-1", "1-99999999999"):
        with pytest.raises(SpecError, match=bad or "''"):
            int_list(1, 24)(bad)


def read(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_bbob_smoke_two_functions_through_the_cli(tmp_path):
    out = tmp_path / "bbob"
    args = ["es-bench", "bbob", "--functions", "1,8", "--dims", "2", "--instances", "1",
            "--budget-per-dim", "500", "--methods", "auto,pycma"]
    done = run_cli([*args, "--out", str(out)], timeout=60)
    assert done.returncode == 0, done.stderr
    runs = read(out / "runs.csv")
    assert [(r["method"], r["function"]) for r in runs] == [
        ("auto", "1"), ("auto", "8"), ("pycma", "1"), ("pycma", "8")]
    for run in runs:
        assert int(run["nfev"]) <= 1000 and len([c for c in run if c in HIT_COLUMNS]) == 51
        if run["function"] == "1":  # the sphere: both solve it to 1e-8
            assert run["solved"] == "True" and float(run["best_precision"]) <= 1e-8
    ecdf = read(out / "ecdf.csv")
    for method in ("auto", "pycma"):
        curve = [float(r["ecdf"]) for r in ecdf if r["method"] == method and r["dim"] == "2"]
        assert len(curve) > 10 and all(0 <= v <= 1 for v in curve)
        assert curve == sorted(curve) and curve[-1] > 0.5
    summary = read(out / "summary.csv")
    assert [(r["method"], r["dim"], r["runs"]) for r in summary] == [
        ("auto", "2", "2"), ("auto", "all", "2"), ("pycma", "2", "2"), ("pycma", "all", "2")]
    assert all(int(r["solved_1e-8"]) >= 1 for r in summary)  # f1 at least
    assert "| auto |" in done.stdout and (out / "results.md").exists()
    # Results do not depend on the number of processes (wall times do).
    again = run_cli([*args, "--jobs", "2", "--out", str(tmp_path / "jobs2")], timeout=60)
    assert again.returncode == 0, again.stderr
    strip = [{k: v for k, v in r.items() if k != "wall_s"} for r in runs]
    assert strip == [{k: v for k, v in r.items() if k != "wall_s"}
                     for r in read(tmp_path / "jobs2" / "runs.csv")]


def test_paired_pycma_draws_what_es_minimize_draws(tmp_path):
    """``pycma-paired`` is plain cma.fmin2 given the random numbers es.minimize's ``cma``
    uses: every target is reached at the same evaluation, so a paired comparison measures
    only what es.minimize adds."""
    out = tmp_path / "paired"
    done = run_cli(["es-bench", "bbob", "--functions", "1,8", "--dims", "3", "--instances", "2",
                    "--budget-per-dim", "300", "--methods", "auto,pycma-paired", "--out",
                    str(out)], timeout=60)
    assert done.returncode == 0, done.stderr
    runs = {(r["method"], r["function"]): r for r in read(out / "runs.csv")}
    for function in ("1", "8"):
        ours, theirs = runs["auto", function], runs["pycma-paired", function]
        assert [ours[c] for c in HIT_COLUMNS] == [theirs[c] for c in HIT_COLUMNS]
        assert any(ours[c] != "inf" for c in HIT_COLUMNS)


def test_highdim_smoke_and_one_line_errors(tmp_path):
    out = tmp_path / "high"
    done = run_cli(["es-bench", "highdim", "--dims", "30", "--functions", "sphere",
                    "--methods", "auto,pycma,pycma-diag", "--evals-per-dim", "20",
                    "--out", str(out)], timeout=60)
    assert done.returncode == 0, done.stderr
    rows = read(out / "highdim.csv")
    assert [r["method"] for r in rows] == ["auto", "pycma", "pycma-diag"]
    for row in rows:
        assert int(row["evals"]) == 600 and row["stopped"] == "budget"
        assert float(row["best_f"]) < 30 * 9.0  # below f(x0) = 270
        assert float(row["ms_per_generation"]) > 0 and int(row["common_evals"]) == 600
    for argv, message in ((["bbob", "--methods", "nope"], "--methods: 'nope'"),
                          (["bbob", "--dims", "1"], "--dims: '1'"),
                          (["highdim", "--functions", "ackley"], "--functions: 'ackley'"),
                          # pycma's d x d matrices (2.2 PiB): numpy's MemoryError traceback.
                          (["highdim", "--dims", "10000000", "--methods", "auto,pycma"],
                           "--dims 10000000 with --methods pycma: full CMA-ES holds 3 d x d "
                           "matrices"),
                          # es.minimize's refusal named a popsize, which highdim has not.
                          (["highdim", "--dims", "100000000", "--methods", "auto",
                            "--evals-per-dim", "1", "--max-evals", "10"],
                           "--max-evals 10 and --evals-per-dim 1: less than one generation at "
                           "d = 100000000 (60 points): raise them")):
        bad = run_cli(["es-bench", *argv])
        assert bad.returncode == 2 and message in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    # Another command's --out: BBOB's runs.csv and summary.csv replaced a suite's, and the
    # reverse (BBOB's data cannot be made again without its compute).
    assert (out / "es-bench.txt").read_text() == "es-bench highdim\n"
    kept = {path.name: path.read_bytes() for path in out.iterdir()}
    legacy = tmp_path / "suite"  # a suite's results from before the marker: its suite.txt
    legacy.mkdir()
    (legacy / "suite.txt").write_text("/somewhere/mujoco.toml\n")
    for folder, held in ((out, "es-bench highdim"), (legacy, "es-bench suite")):
        other = run_cli(["es-bench", "bbob", "--functions", "1", "--dims", "2", "--instances",
                         "1", "--out", str(folder)])
        assert other.returncode == 2 and other.stderr == (
            f"es-bench bbob: error: --out {str(folder)!r} holds the results of {held}; pass "
            "another --out\n"), other.stderr
    assert {path.name: path.read_bytes() for path in out.iterdir()} == kept
    assert sorted(path.name for path in legacy.iterdir()) == ["suite.txt"]


def test_paired_pycma_restarts_as_es_minimize_restarts():
    """With BIPOP restarts too: ``pycma-paired`` (cma.fmin2 drawing es.minimize's random
    numbers for every run and every BIPOP draw) reaches every target at the same evaluation
    as ``auto``, so the two restart the same runs at the same generations."""
    import ioh

    from es.bench.bbob import SOLVED, bbob_seed, run_bbob, run_ours

    budget = 4000
    for function in (3, 4, 15, 24):
        ours, theirs = (run_bbob((method, function, 1, 2, budget, 9, True, 0))
                        for method in ("auto", "pycma-paired"))
        assert [ours[c] for c in HIT_COLUMNS + ["nfev"]] == [theirs[c]
                                                            for c in HIT_COLUMNS + ["nfev"]]
        problem = ioh.get_problem(function, instance=1, dimension=2,
                                  problem_class=ioh.ProblemClass.BBOB)
        result = run_ours("auto", lambda x, p=problem: p(x) - p.optimum.y, np.zeros(2), 2.0,
                          budget, bbob_seed(function, 1), restarts=9, bipop=True,
                          ftarget=SOLVED)
        assert result.restarts >= 3  # several runs, small and large, were compared


@pytest.mark.parametrize("function, instance, reason", [(18, 3, "tolx"),
                                                       (19, 2, "stagnation")])
def test_a_bbob_run_ends_at_pycmas_generation(function, instance, reason):
    """Two rules where one generation used to differ from pycma (d = 10): its tolx also asks
    the step along the evolution path p_c to be below it (f18), and its tolstagnation
    counts the best solution's age from that member's evaluation, not its generation's end
    (f19)."""
    import cma
    import ioh

    from es.bench.bbob import bbob_seed
    from es.strategies.external import CmaRandn

    problem = ioh.get_problem(function, instance=instance, dimension=10,
                              problem_class=ioh.ProblemClass.BBOB)

    def precision(x):
        return float(problem(x)) - problem.optimum.y

    seed = bbob_seed(function, instance)
    reference = cma.CMAEvolutionStrategy(np.zeros(10), 2.0,
                                         {"randn": CmaRandn(seed), "verbose": -9})
    while not reference.stop():
        xs = reference.ask()
        reference.tell(xs, [precision(x) for x in xs])
    ours = es.minimize(precision, x0=np.zeros(10), sigma0=2.0, method="cma", seed=seed,
                       max_evals=10**6)
    assert {"stagnation": "tolstagnation"}.get(reason, reason) in reference.stop()
    assert (ours.stop_reason, ours.ngen) == (reason, reference.countiter)


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_an_interrupted_pool_ends_its_workers_in_one_line(tmp_path, stop):
    """Ctrl-C printed a traceback from the parent and from every worker; a SIGTERM to
    es-bench alone ended it and left its workers computing the rest of the queue."""
    import subprocess

    from conftest import interrupt_job, start_terminal_job, tool

    process = start_terminal_job(
        [tool("es-bench"), "highdim", "--dims", "1000", "--jobs", "2", "--seeds", "1-10",
         "--evals-per-dim", "10", "--out", str(tmp_path)],  # a run in under a second: 89 queued
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = interrupt_job(process, stop, timeout=30,  # once the pool is at work
                        ready=lambda: " ms/generation" in process.stdout.readline())
    assert process.returncode == 130
    # The runs it had finished are kept (they were lost), and the one line says where.
    said = re.fullmatch(r"es-bench highdim: interrupted after (\d+) of 90 runs, their rows in "
                        + re.escape(str(tmp_path / "partial.csv")) + r" \(the tables need all "
                        r"of them: run it again\) \(exit code 130\)", err.strip())
    assert said, err[-3000:]
    rows = read(tmp_path / "partial.csv")
    assert len(rows) == int(said[1]) >= 1 and "trace" not in rows[0]
    assert all(row["dim"] == "1000" and float(row["ms_per_generation"]) > 0 for row in rows)
    assert not (tmp_path / "highdim.csv").exists()
