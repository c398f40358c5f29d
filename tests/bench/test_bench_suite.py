"""es-bench suite end to end: 2 tasks x 2 strategies x 2 seeds on tiny budgets under real
mpiexec, interrupted in the middle of a run and resumed; and its one-line errors."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, run_cli, tool

SUITE = """
eval_episodes = 3
final_episodes = 4

[tasks.cartpole]
thresholds = [100, 475]
budget_steps = 6000
strategies.openai = "configs/cartpole.toml"
strategies.snes = { config = "configs/cartpole.toml", set = ["es.strategy=snes", "es.sigma=0.5"] }

[tasks.pendulum]
thresholds = [-1400]
budget_s = 5
[tasks.pendulum.strategies.openai]
config = "configs/pendulum.toml"
set = ["policy.kind=linear", "run.checkpoint_every=1"]
[tasks.pendulum.strategies.ars]
config = "configs/pendulum.toml"
set = ["policy.kind=linear", "es.strategy=ars", "run.checkpoint_every=1"]
"""


def read_csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


def started_until_rows(command: list[str], run_dir: Path, rows: int = 3) -> subprocess.Popen:
    """``command`` started, once ``run_dir`` has ``rows`` progress rows (its first
    checkpoints, with run.checkpoint_every = 1), or it has ended, or 240 s have passed."""
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None:
        if (run_dir / "progress.csv").is_file() and len(read_csv(run_dir / "progress.csv")) >= rows:
            break
        time.sleep(0.2)
    return process


def test_suite_runs_scores_and_resumes_after_an_interruption(tmp_path):
    suite, out = tmp_path / "tiny.toml", tmp_path / "out"
    suite.write_text(SUITE)
    command = [tool("es-bench"), "suite", str(suite), "--seeds", "0-1", "--ranks", "2",
               "--out", str(out)]
    # Interrupt the suite (SIGTERM) while it trains the first Pendulum run, after its first
    # checkpoint: the four CartPole runs are done by then. (Waiting for its third row, a
    # loaded machine sometimes let the run finish first.)
    victim = out / "runs" / "pendulum-openai-seed0"
    process = started_until_rows(command, victim, rows=1)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "interrupted; run it again to resume" in stderr
    done_before = {path.parent.name: path.stat().st_mtime_ns
                   for path in (out / "runs").glob("*/final.json")}
    assert sorted(done_before) == [f"cartpole-{s}-seed{k}" for s in ("openai", "snes")
                                   for k in (0, 1)]
    assert not (victim / "final.json").exists()
    first_rows = read_csv(victim / "progress.csv")

    # Begun on 2 ranks, it goes on on 2: its wall times must not mix two rank counts.
    other = run_cli(["es-bench", *command[1:6], "1", *command[7:]], timeout=300)
    assert other.returncode == 2 and other.stderr.strip() == (
        "es-bench suite: error: --ranks 1: pendulum-openai-seed0 began on 2 ranks and its times "
        "would mix two rank counts: give --ranks 2, or another --out"), other.stderr
    again = run_cli(["es-bench", *command[1:]], timeout=300)
    assert again.returncode == 0, again.stderr
    assert "4 done already" in again.stdout
    assert "mpiexec -n 2, " in (out / "results.md").read_text()
    for name, mtime in done_before.items():  # finished runs are not redone
        assert (out / "runs" / name / "final.json").stat().st_mtime_ns == mtime
    resumed = read_csv(victim / "progress.csv")
    assert resumed[0] == first_rows[0]  # continued from its checkpoint, not started over
    # The wall budget counts both sessions. Any rank's clock may call the time (the ranks
    # agree on the earliest): on a loaded machine rank 0's row may show a little under 5 s.
    assert float(resumed[-1]["time_s"]) >= 5.0 - 0.5

    rows = read_csv(out / "runs.csv")
    assert len(rows) == 8
    for row in rows:
        final = json.loads((out / "runs" / f"{row['task']}-{row['strategy']}-seed{row['seed']}"
                            / "final.json").read_text())
        assert len(final["returns"]) == 4 and final["seed"] == 12345
        assert float(row["final_mean"]) == pytest.approx(sum(final["returns"]) / 4)
        # The kept policy (policy_best.npz) is scored on the same episodes beside it.
        kept = json.loads((out / "runs" / f"{row['task']}-{row['strategy']}-seed{row['seed']}"
                           / "kept.json").read_text())
        assert kept["policy"] == "best" and kept["seed"] == 12345 and not kept["failed"]
        assert float(row["kept_mean"]) == pytest.approx(sum(kept["returns"]) / 4)
        assert float(row["kept_min"]) == pytest.approx(min(kept["returns"]))
        assert int(row["kept_generation"]) <= int(row["generations"])
        for threshold in ([100, 475] if row["task"] == "cartpole" else [-1400]):
            bar = 0.8 * threshold if threshold > 0 else threshold / 0.8
            assert row[f"steady_{threshold}"] == str(
                float(row["kept_mean"]) >= threshold and float(row["kept_min"]) >= bar)
        if row["task"] == "cartpole":
            assert int(row["steps"]) >= 6000
        assert float(row["bare_steps_per_s"]) > 1000  # the machine's yardstick, beside times
        # What evaluations and confirmations cost: the stops' confirmations (one stops.csv
        # row per es-train session: two for the interrupted run) are after the last row.
        run_dir = out / "runs" / f"{row['task']}-{row['strategy']}-seed{row['seed']}"
        progress, stops = read_csv(run_dir / "progress.csv"), read_csv(run_dir / "stops.csv")
        assert len(stops) == (2 if run_dir == victim else 1)
        stop_s = sum(float(stop["confirm_s"]) for stop in stops)
        wall = float(progress[-1]["time_s"]) + stop_s
        # Priced at the ranks' mean seconds in those episodes (what they cost the machine).
        confirm_s = sum(float(r["confirm_ranks_s"]) for r in progress) + stop_s
        eval_s = sum(float(r["eval_ranks_s"]) for r in progress)
        assert float(row["confirm_share"]) == pytest.approx(confirm_s / wall)
        assert float(row["eval_share"]) == pytest.approx(eval_s / wall) and eval_s > 0
        assert 0 <= float(row["wait_share"]) < 1
    summary = read_csv(out / "summary.csv")
    assert [(r["task"], r["strategy"]) for r in summary] == [
        ("cartpole", "openai"), ("cartpole", "snes"), ("pendulum", "openai"), ("pendulum", "ars")]
    for entry in summary:  # the summary is the runs' own figures
        group = [r for r in rows if (r["task"], r["strategy"]) == (entry["task"],
                                                                    entry["strategy"])]
        assert float(entry["final_worst"]) == min(float(r["final_mean"]) for r in group)
        assert float(entry["kept_worst_episode"]) == min(float(r["kept_min"]) for r in group)
        reached = sum(1 for r in group if r["time_to_100" if entry["task"] == "cartpole"
                                             else "time_to_-1400"])
        assert entry["reached_100" if entry["task"] == "cartpole"
                     else "reached_-1400"] == f"{reached}/2"
    results = (out / "results.md").read_text()
    assert "### cartpole (budget 6,000 steps)" in results
    assert "| strategy | seed | final_mean | final_min | kept_mean | kept_min |" in results
    assert "| steps_to_100 | time_to_100 | steady_100 |" in results
    assert "| paused_s | bare_steps_per_s |" in results
    assert (out / "suite.png").stat().st_size > 10_000

    # A call for a part of the suite tables every finished run in the folder of its seeds:
    # every task's, not only its own, and no other seed's (fresh seeds get a table of their
    # own); asked again for both seeds, the folder's table is whole again, nothing retrained.
    part = run_cli(["es-bench", *command[1:3], "--tasks", "cartpole", "--seeds", "0",
                    *command[5:]], timeout=120)
    assert part.returncode == 0, part.stderr
    assert "2 runs (2 done already)" in part.stdout  # openai and snes, seed 0
    assert read_csv(out / "runs.csv") == [row for row in rows if row["seed"] == "0"]
    assert "### pendulum" in (out / "results.md").read_text()
    whole = run_cli(["es-bench", *command[1:]], timeout=120)
    assert whole.returncode == 0 and "8 done already" in whole.stdout, whole.stderr
    assert read_csv(out / "runs.csv") == rows


def progress_rows(gaps: list[float]) -> list[dict[str, str]]:
    """progress.csv rows of generations ``gaps`` seconds apart, every tenth evaluated (1 s of
    evaluation episodes), 100 steps each."""
    rows, clock = [], 0.0
    for generation, gap in enumerate(gaps):
        clock += gap
        evaluated = generation % 10 == 9
        rows.append({"generation": str(generation), "time_s": f"{clock:g}",
                     "timesteps": str(100 * (generation + 1)),
                     "eval_return": str(generation) if evaluated else "",
                     "eval_ranks_s": "1" if evaluated else "0", "confirm_ranks_s": "0",
                     "wait_s": "0.1"})
    return rows


def test_a_pause_is_left_out_of_the_seconds_and_the_shares():
    """A run stopped (SIGSTOP) for a measurement beside it keeps its wall clock going: the
    suite finds the pause in progress.csv and leaves it out of the training seconds, the
    times to thresholds and the shares, as if it had not been paused; slow generations (an
    evaluation, a confirmation of a minute) are not pauses."""
    from es.bench.suite import cost_columns, evaluations, pauses, running_seconds

    rng = np.random.default_rng(0)
    gaps = list(2.0 + rng.uniform(-0.5, 0.5, 60))
    gaps[20] += 55.0  # a long confirmation: 27x the usual generation, under a minute beyond
    paused = [*gaps[:30], gaps[30] + 900.0, *gaps[31:45], gaps[45] + 120.0, *gaps[46:]]
    plain, stopped = progress_rows(gaps), progress_rows(paused)

    found = pauses(stopped)
    assert list(np.flatnonzero(found)) == [30, 45] and not pauses(plain).any()
    # Each pause less the usual generation around it: off by at most the jitter.
    assert found[30] == pytest.approx(900.0, abs=0.5) and found[45] == pytest.approx(120, abs=0.5)
    assert running_seconds(stopped)[-1] == pytest.approx(running_seconds(plain)[-1], abs=1.0)
    for (t_paused, steps_paused, _), (t_plain, steps_plain, _) in zip(
            evaluations(stopped), evaluations(plain), strict=True):
        assert steps_paused == steps_plain and t_paused == pytest.approx(t_plain, abs=1.0)
    shares, wall = cost_columns(stopped, 0.0), float(stopped[-1]["time_s"])
    assert shares["eval_share"] == pytest.approx(cost_columns(plain, 0.0)["eval_share"], rel=0.01)
    assert shares["eval_share"] > 1.5 * 6 / wall  # the wall time would understate it


def test_a_pause_es_train_left_out_itself_is_counted_once():
    """es-train leaves the seconds it stood stopped out of ``time_s`` and writes them to
    ``paused_s``: the suite adds them to the run's pauses and finds no gap to take out."""
    from es.bench.suite import pauses, recorded_pause_s, running_seconds

    rows = progress_rows(list(2.0 + np.random.default_rng(1).uniform(-0.5, 0.5, 60)))
    for index, row in enumerate(rows):
        row["paused_s"] = "900.5" if index >= 30 else "0"
    assert not pauses(rows).any() and recorded_pause_s(rows) == 900.5
    assert running_seconds(rows)[-1] == pytest.approx(float(rows[-1]["time_s"]))
    assert recorded_pause_s([{k: v for k, v in row.items() if k != "paused_s"}
                             for row in rows]) == 0.0  # a run from before the column


@pytest.mark.parametrize(("text", "message"), [
    ("[tasks.a]\nthresholds = [1]\nbudget_s = 5\nstrategies.snes = \"configs/cartpole.toml\"",
     "tasks.a.strategies.snes: 'configs/cartpole.toml' trains with es.strategy = 'openai'"),
    ("[tasks.a]\nthresholds = [1]\nstrategies.openai = \"configs/cartpole.toml\"",
     "tasks.a: give budget_s or budget_steps"),
    ("[tasks.a]\nthresholds = []\nbudget_s = 5\nstrategies.openai = \"configs/cartpole.toml\"",
     "tasks.a.thresholds: expected a non-empty list"),
    ("[tasks.a]\nthresholds = [1]\nbudget_s = 5\nstrategies.openai = \"nope.toml\"",
     "tasks.a.strategies.openai:"),
    ("[tasks.a]\nthresholds = [1]\nbudget_s = 5\nwhat = 1\nstrategies.openai = \"x\"",
     "tasks.a.what: unknown key"),
    ("seeds = 3", "unknown key 'seeds'"),
    ("tasks = 3", "tasks = 3: expected [tasks.NAME] tables"),
    ("[tasks.a]\nthresholds = [1]\nbudget_s = 5\nstrategies = 3",
     "tasks.a.strategies: expected {strategy = \"config.toml\"}"),
    ("[tasks.a\n", "suite file"),  # it said "config file", of the suite's own file
])
def test_bad_suite_files_are_one_line_errors(tmp_path, text, message):
    suite = tmp_path / "bad.toml"
    suite.write_text(text)
    done = run_cli(["es-bench", "suite", str(suite), "--out", str(tmp_path / "out")])
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    if message == "suite file":
        assert done.stderr.startswith(f"es-bench suite: error: suite file {str(suite)!r}: "
                                      "invalid TOML: "), done.stderr


def test_unknown_task_or_strategy_is_refused(tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text("[tasks.a]\nthresholds = [1]\nbudget_s = 5\n"
                     "strategies.openai = \"configs/cartpole.toml\"\n")
    for option, message in ((["--tasks", "b"], "--tasks 'b': 'b' is not in the suite"),
                            (["--strategies", "ars"], "task 'a' has configs for openai only")):
        done = run_cli(["es-bench", "suite", str(suite), *option])
        assert done.returncode == 2 and message in done.stderr, done.stderr


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "suites").glob("*.toml")),
                         ids=lambda path: path.name)
def test_shipped_suites_load_and_name_configs_of_their_strategies(path):
    """Every shipped suite file loads: its configs exist and train with the strategy they are
    listed under (load_suite checks both)."""
    from es.bench.suite import load_suite

    suite = load_suite(path)
    assert suite.tasks and all(task.configs for task in suite.tasks.values())


def test_a_suite_of_ones_own_names_shipped_configs_from_any_folder(tmp_path, monkeypatch):
    """A suite file beside no configs/ (a pip-installed es): its entries, the README's
    ``configs/...`` paths or names, are the shipped configs; a file of one's own wins."""
    from es.bench.suite import config_path, load_suite
    from es.config import SHIPPED_CONFIGS

    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "mine.toml"
    suite.write_text('[tasks.cartpole]\nthresholds = [475]\nbudget_s = 10\n'
                     'strategies.openai = "configs/cartpole.toml"\n'
                     'strategies.snes = { config = "pendulum", set = ["es.strategy=snes", '
                     '"env.id=CartPole-v1", "policy.kind=linear"] }\n')
    assert load_suite(suite).tasks["cartpole"].configs
    assert config_path(suite, "configs/cartpole.toml") == SHIPPED_CONFIGS / "cartpole.toml"
    (tmp_path / "pendulum.toml").write_text("[env]\nid = 'Acrobot-v1'\n")
    assert config_path(suite, "pendulum") == Path("pendulum.toml")


def test_an_output_folder_holds_one_suite(tmp_path):
    """Finished runs in --out are not redone: another suite file's are refused, not reused."""
    from es.bench.suite import claim_output_folder

    out = tmp_path / "out"
    claim_output_folder(out, tmp_path / "a.toml")
    claim_output_folder(out, tmp_path / "a.toml")  # the same suite resumes
    with pytest.raises(ValueError, match="holds the results of the suite .*a.toml"):
        claim_output_folder(out, tmp_path / "b.toml")


def processes_naming(text: str) -> list[int]:
    """The pids of the processes whose command line contains ``text``."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                pids.append(int(cmdline.parent.name))
        except OSError:  # gone meanwhile
            continue
    return pids


def test_a_training_stopped_from_outside_stops_the_suite_for_a_resume(tmp_path):
    """SIGTERM to one run's es-train (a preempted or hand-stopped training, not the suite):
    the run checkpoints, and the suite stops with the interrupted message instead of going
    on to the next run and leaving it training with nobody to stop it; the next call resumes
    the run from its checkpoint."""
    suite, out = tmp_path / "one.toml", tmp_path / "out"
    suite.write_text('[tasks.pendulum]\nthresholds = [-1400]\nbudget_s = 8\n'
                     '[tasks.pendulum.strategies.openai]\nconfig = "configs/pendulum.toml"\n'
                     'set = ["policy.kind=linear", "run.checkpoint_every=1", '
                     '"run.peer_timeout_s=20"]\n')  # a rank left waiting: lost in 20 s, not 60
    command = [tool("es-bench"), "suite", str(suite), "--seeds", "0-1", "--jobs", "1",
               "--ranks", "2", "--out", str(out)]
    victim = out / "runs" / "pendulum-openai-seed0"
    # Its first checkpoint, not its third row: a loaded machine let the 4-s run end first.
    process = started_until_rows(command, victim, rows=1)
    trainings = processes_naming(f"{victim} ")
    assert trainings, "seed 0 is not training"
    for pid in trainings:  # mpiexec and its ranks, as a batch system's signal reaches them
        os.kill(pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    # 75: stopped by the signal; 76: a rank that stopped first was taken for lost. Both
    # leave the checkpoint, and the same command continues.
    assert re.search(r"pendulum-openai-seed0: es-train stopped with its checkpoint "
                     r"\(exit 7[56]", stderr), stderr
    assert "interrupted; run it again to resume" in stderr
    assert not processes_naming(str(out)), "a training outlived the suite"
    assert not (out / "runs" / "pendulum-openai-seed1" / "progress.csv").exists()
    first_rows = read_csv(victim / "progress.csv")

    again = run_cli(["es-bench", *command[1:]], timeout=300)
    assert again.returncode == 0, again.stderr
    assert read_csv(victim / "progress.csv")[0] == first_rows[0]  # resumed, not started over
    assert len(read_csv(out / "runs.csv")) == 2


def test_a_failed_run_stops_the_runs_beside_it_at_once(tmp_path):
    """With --jobs 2, a run that fails while an earlier one trains: the call ends with the
    failure now, the training beside it interrupted (SIGINT, as es-train checkpoints on), the
    runs not begun skipped; not after the earlier run's whole training."""
    from es.bench.suite import run_all, supervised

    started = []

    def work(item: str) -> None:
        started.append(item)
        if item == "long":  # a training that stops on SIGINT, as es-train does, even where
            # its parent was started with SIGINT ignored (a background job of a script)
            supervised([sys.executable, "-c", "import signal, time; "
                        "signal.signal(signal.SIGINT, signal.default_int_handler); "
                        "time.sleep(120)"])
        elif item == "failing":
            time.sleep(0.5)
            raise RuntimeError("failing: es-train exited with 2")

    began = time.perf_counter()
    with pytest.raises(RuntimeError, match="failing: es-train exited with 2"):
        run_all(work, ["long", "failing", "never"], 2, "es-bench suite", tmp_path)
    assert time.perf_counter() - began < 30
    assert sorted(started) == ["failing", "long"]


def test_a_terminals_ctrl_c_stops_the_suites_training_at_its_last_generation(tmp_path):
    """A Ctrl-C reaches the whole process group. Its trainings reached directly too, mpiexec
    took the suite's own SIGINT for a second Ctrl-C and ended the job without the stop's
    checkpoint: up to run.checkpoint_every generations were trained again."""
    suite, out = tmp_path / "tiny.toml", tmp_path / "out"
    suite.write_text("eval_episodes = 1\nfinal_episodes = 1\n[tasks.pendulum]\n"
                     "thresholds = [-1400]\nbudget_steps = 100_000_000\n"
                     "strategies.openai = \"configs/pendulum.toml\"\n")
    run_dir = out / "runs" / "pendulum-openai-seed0"
    process = subprocess.Popen([tool("es-bench"), "suite", str(suite), "--seeds", "0",
                                "--ranks", "2", "--out", str(out)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True,
                               # A terminal's: a background job (CI's) starts with SIGINT
                               # ignored, which the suite would keep.
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 240
        while not ((run_dir / "progress.csv").is_file()
                   and len(read_csv(run_dir / "progress.csv")) % 10 == 3):
            assert time.time() < deadline and process.poll() is None
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:  # its trainings run in sessions of their own: a failure must not leave them
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if str(run_dir).encode() in cmdline.read_bytes():
                    os.kill(int(cmdline.parent.name), signal.SIGKILL)
            except OSError:  # gone meanwhile
                pass
    assert process.returncode == 130 and "interrupted; run it again to resume" in stderr, stderr
    last = int(read_csv(run_dir / "progress.csv")[-1]["generation"])
    newest = max(int(path.stem.split("-")[1]) for path in (run_dir / "checkpoints").glob("*.npz"))
    assert newest == last


def test_runs_trained_to_another_budget_and_an_empty_selection_are_refused(tmp_path):
    """After an edit of the suite file, a finished run was tabled under the new budget and a
    begun one resumed to its old one; ``--tasks ""`` selected every task (hours)."""
    import tomli_w

    from es.bench.suite import (
        Run,
        check_trained_budgets,
        load_suite,
        run_eval_episodes,
        run_folder,
        select,
    )
    from es.config import load_config

    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE.replace("budget_steps = 6000", "budget_steps = 9000"))
    spec = load_suite(suite)
    run = Run(spec.tasks["cartpole"], "openai", 0)
    folder = run_folder(tmp_path / "out", run)
    folder.mkdir(parents=True)
    trained = load_config(REPO / "configs/cartpole.toml", ["run.max_timesteps=6000"])
    (folder / "config.toml").write_text(tomli_w.dumps(trained.to_dict()))
    with pytest.raises(ValueError, match=r"cartpole-openai-seed0: trained to run.max_timesteps "
                                         r"= 6000, run.max_seconds = 0, where the suite file "
                                         r"now gives 9000 and 0"):
        check_trained_budgets([run], tmp_path / "out", spec, suite)
    check_trained_budgets([Run(spec.tasks["cartpole"], "openai", 1)], tmp_path / "out", spec,
                          suite)
    # The episodes it was judged and scored on: tabled under the file's new counts.
    suite.write_text(SUITE.replace("eval_episodes = 3", "eval_episodes = 7"))
    spec = load_suite(suite)
    run = Run(spec.tasks["cartpole"], "openai", 0)
    with pytest.raises(ValueError, match=r"cartpole-openai-seed0: evaluated on "
                                         r"run.eval_episodes = \d+, where the suite file now "
                                         r"gives 7: use another --out"):
        check_trained_budgets([run], tmp_path / "out", spec, suite)
    suite.write_text(SUITE)
    spec = load_suite(suite)
    run = Run(spec.tasks["cartpole"], "openai", 0)
    episodes = run_eval_episodes(spec, suite, spec.tasks["cartpole"].configs["openai"])
    trained = load_config(REPO / "configs/cartpole.toml",
                          ["run.max_timesteps=6000", f"run.eval_episodes={episodes}"])
    (folder / "config.toml").write_text(tomli_w.dumps(trained.to_dict()))
    check_trained_budgets([run], tmp_path / "out", spec, suite)
    (folder / "final.json").write_text('{"episodes": 3}')
    with pytest.raises(ValueError, match=r"cartpole-openai-seed0: scored on 3 final episodes, "
                                         r"where the suite file now gives final_episodes = 4"):
        check_trained_budgets([run], tmp_path / "out", spec, suite)
    for tasks, strategies in (("", None), (" , ", None), (None, "")):
        with pytest.raises(ValueError, match="name at least one"):
            select(spec, tasks, strategies)


def test_a_missing_launcher_and_a_task_name_no_folder_can_take_are_refused_first(tmp_path):
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    done = run_cli(["es-bench", "suite", str(suite), "--seeds", "0", "--launcher", "nosuch",
                    "--out", str(tmp_path / "out")])
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("es-bench suite: error: --launcher 'nosuch': 'nosuch' is not a "
                           "program here\n")  # the subcommand, as argparse's errors name it
    suite.write_text(SUITE.replace("[tasks.cartpole]", '[tasks."a b/c"]'))
    done = run_cli(["es-bench", "suite", str(suite), "--seeds", "0", "--out",
                    str(tmp_path / "out2")])
    assert done.returncode == 2 and "'a b/c' names a run folder" in done.stderr, done.stderr
    assert not (tmp_path / "out2").exists()
    done = run_cli([sys.executable, "scripts/bench_throughput.py", "--max-train-s", "0"])
    assert done.returncode == 2 and "--max-train-s: '0': expected a finite number of " \
        "seconds > 0" in done.stderr, done.stderr


def test_a_run_interrupted_while_scored_is_scored_not_resumed(tmp_path):
    """Stopped between its training's end and its score, a run was resumed by the next
    call, which played the stop's confirmations a second time: its confirmation cost
    (confirm_share) doubled. Now it is only scored."""
    suite, out = tmp_path / "tiny.toml", tmp_path / "out"
    suite.write_text(SUITE.split("[tasks.pendulum]")[0].replace(
        'strategies.snes = { config = "configs/cartpole.toml", set = ["es.strategy=snes", '
        '"es.sigma=0.5"] }\n', ""))
    command = ["es-bench", "suite", str(suite), "--seeds", "0", "--out", str(out)]
    first = run_cli(command, timeout=300)
    assert first.returncode == 0, first.stderr
    run_dir = out / "runs" / "cartpole-openai-seed0"
    scored = {name: (run_dir / name).read_text() for name in ("final.json", "kept.json")}
    stops = (run_dir / "stops.csv").read_text()
    assert int(read_csv(run_dir / "stops.csv")[-1]["confirm_episodes"]) > 0
    for name in scored:  # as if the call had been stopped before its scoring
        (run_dir / name).unlink()
    again = run_cli(command, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (run_dir / "stops.csv").read_text() == stops  # no second stop: not resumed
    assert {name: (run_dir / name).read_text() for name in scored} == scored


def test_a_figure_no_seed_gives_is_an_empty_cell_in_the_csv_and_a_dash_in_the_markdown():
    """summary.csv had "—" in its number columns, a string where a CSV reader wants a
    number (runs.csv leaves such cells empty)."""
    from es.bench.report import markdown
    from es.bench.suite import Task, summary_rows

    task = Task("pendulum", (-200.0,), 2.0, 0, {})
    runs = [{"task": "pendulum", "strategy": "ars", "final_mean": -900.0, "kept_mean": "",
             "kept_min": "", "time_to_-200": "", "steps_to_-200": ""} for _ in range(2)]
    (entry,) = summary_rows(runs, {"pendulum": task})
    for column in ("kept_median", "kept_worst", "kept_worst_episode", "median_s_-200",
                   "worst_s_-200", "median_steps_-200", "worst_steps_-200"):
        assert entry[column] == "", column
    assert entry["reached_-200"] == "0/2"
    assert markdown([entry], ["worst_s_-200", "reached_-200"]).splitlines()[-1] == "| — | 0/2 |"
