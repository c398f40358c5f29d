"""es-bench reference: the training-return metric by hand, and a run of two tiny cases (real
es-baseline processes, PPO under mpiexec) that is scored, tabled and not redone."""

import csv
import math

import pytest
from conftest import REPO, run_cli, tool

from es.bench import reference as bench_reference
from es.bench.reference import EVALUATION, TRAINING, Case, Reference, training_return
from es.cli.bench import parser


def rows(*rounds):
    """progress.csv rows from (finished episodes, failed episodes, mean return) per round."""
    return [{"return_mean": "" if mean is None else str(mean), "episodes": str(n + failed),
             "failed_episodes": str(failed)} for n, failed, mean in rounds]


def test_training_return_is_the_mean_of_the_last_episodes():
    # Newest first: 2 episodes at 10, none, 3 at 20 (one more failed), then 5 at 40 of
    # which only 1 is needed for the last 6.
    progress = rows((5, 0, 40.0), (3, 1, 20.0), (0, 0, None), (2, 0, 10.0))
    assert training_return(progress, episodes=6) == pytest.approx(
        (2 * 10 + 3 * 20 + 1 * 40) / 6)
    assert training_return(progress, episodes=100) == pytest.approx(
        (2 * 10 + 3 * 20 + 5 * 40) / 10)  # fewer than asked: all of them
    assert math.isnan(training_return(rows((0, 2, None))))


TINY = {
    "tiny-ppo": Case("tiny-ppo", "ppo", "configs/baselines/cartpole_ppo.toml", 2048, (
        Reference("paper A", 100.0, 5.0, TRAINING, "3 seeds"),
        Reference("paper B", -50.0, 1.0, EVALUATION, "1 run", "a note")),
        ("ppo.epochs=2",)),
    "tiny-dqn": Case("tiny-dqn", "dqn", "configs/baselines/cartpole_dqn.toml", 3000, (
        Reference("paper C", 200.0, 0.0, EVALUATION, "1 run"),), max_ranks=1),
}


def test_cases_run_score_and_are_not_redone(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_reference, "CASES", TINY)
    out = tmp_path / "ref"
    args = parser().parse_args(["reference", "--cases", "tiny-ppo,tiny-dqn", "--seeds", "0-1",
                                "--ranks", "2", "--jobs", "2", "--out", str(out)])
    assert bench_reference.reference(args) == 0
    assert capsys.readouterr().out.startswith(
        "es-bench reference: 4 runs, 2 at a time, 2 on 2 ranks, 2 on 1\n")
    with (out / "runs.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    assert [(r["case"], r["seed"]) for r in runs] == [
        ("tiny-ppo", "0"), ("tiny-ppo", "1"), ("tiny-dqn", "0"), ("tiny-dqn", "1")]
    assert [r["ranks"] for r in runs] == ["2", "2", "1", "1"]  # DQN: one process
    for run in runs:
        steps = int(run["steps"])
        assert steps >= TINY[run["case"]].steps and steps < TINY[run["case"]].steps + 2048
        assert 8 <= float(run[TRAINING]) <= 500 and 8 <= float(run[EVALUATION]) <= 500
    ppo = [r for r in runs if r["case"] == "tiny-ppo"]
    assert ppo[0][EVALUATION] != ppo[1][EVALUATION] or ppo[0][TRAINING] != ppo[1][TRAINING]
    table = (out / "results.md").read_text()
    lines = [line for line in table.splitlines() if line.startswith("| tiny-")]
    assert len(lines) == 3  # one per reference
    mean = sum(float(r[TRAINING]) for r in ppo) / 2
    assert f"{mean:,.1f} ± " in lines[0] and "(seeds 0,1)" in lines[0]
    assert "100.0 ± 5.0 (3 seeds)" in lines[0]
    assert f"| {mean / 100:.2f} |" in lines[0]
    assert "paper B; a note" in lines[1] and "| — |" in lines[1]  # no ratio of negatives

    # Done runs are not redone; an interrupted one (no final.json) is trained again; a call
    # for one case still tables every finished run in the folder.
    finals = {p.parent.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*/final.json")}
    assert len(finals) == 4
    (out / "runs" / "tiny-dqn-seed1" / "final.json").unlink()
    part = parser().parse_args(["reference", "--cases", "tiny-dqn", "--seeds", "0-1",
                                "--out", str(out)])
    assert bench_reference.reference(part) == 0
    again = {p.parent.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*/final.json")}
    assert again.pop("tiny-dqn-seed1") != finals.pop("tiny-dqn-seed1")
    assert again == finals
    with (out / "runs.csv").open() as handle:
        assert [(r["case"], r["seed"]) for r in csv.DictReader(handle)] == [
            (r["case"], r["seed"]) for r in runs]
    assert (out / "results.md").read_text().count("| tiny-") == 3


def test_the_start_line_says_the_ranks_each_run_gets():
    """A DQN-only call said 'ppo on 2 ranks'."""
    assert bench_reference.runs_on_ranks([1, 1]) == "each on 1 rank"
    assert bench_reference.runs_on_ranks([2, 2, 2]) == "each on 2 ranks"


def test_unknown_case_is_a_one_line_error(tmp_path):
    result = run_cli([tool("es-bench"), "reference", "--cases", "ppo-mars", "--out",
                      str(tmp_path)], cwd=REPO)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "--cases 'ppo-mars': allowed are dqn-cartpole-50k" in result.stderr


def test_every_shipped_case_names_an_existing_config_and_its_source():
    for case in bench_reference.CASES.values():
        assert (REPO / case.config).is_file(), case.config
        assert case.references and all(r.source and r.metric in (TRAINING, EVALUATION)
                                       for r in case.references)


def test_one_seed_is_shown_without_a_spread_over_seeds():
    """'466.2 ± 0.0 (seeds 0)' read as a measured spread."""
    def row(value: float, seed: int) -> dict:
        return {TRAINING: value, EVALUATION: value, "seed": seed}

    (line, *_) = bench_reference.comparison(TINY["tiny-ppo"], [row(466.25, 0)])
    assert line["ours"] == "466.2 (seed 0 alone)"
    (line, *_) = bench_reference.comparison(TINY["tiny-ppo"], [row(1.0, 0), row(3.0, 1)])
    assert line["ours"] == "2.0 ± 1.0 (seeds 0,1)"
