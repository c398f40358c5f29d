"""Callbacks of es.train and es.minimize: each generation's row, a clean stop on False
(checkpointed, resumable), rank 0 deciding for every rank under mpiexec."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import REPO, tool

import es
from es.rl.checkpoint import load_latest_checkpoint
from es.rl.metrics import COLUMNS

PENDULUM = {"es.population": 10, "env.max_episode_steps": 50, "run.eval_every": 2,
            "run.eval_episodes": 1, "run.generations": 8}


def test_train_callback_sees_every_row_and_stops_the_run_checkpointed(tmp_path):
    rows = []

    def watch(row):
        rows.append(row)
        return row["generation"] < 3

    run = es.train(REPO / "configs/pendulum.toml", PENDULUM, run_dir=tmp_path / "cb",
                   callback=watch)
    assert run.generations == 3 and [r["generation"] for r in rows] == [1, 2, 3]
    assert all(set(r) == set(COLUMNS) for r in rows)
    assert rows[0]["eval_return"] is None and rows[1]["eval_return"] is not None
    assert [r["timesteps"] for r in rows] == [h["timesteps"] for h in run.history]
    # The history (read back from progress.csv) is typed as the rows: counts stay ints.
    assert [{k: type(v) for k, v in row.items()} for row in rows] == [
        {k: type(v) for k, v in row.items()} for row in run.history]
    state, _, _ = load_latest_checkpoint(tmp_path / "cb/checkpoints")
    assert state.generation == 3
    # Printed in a notebook, a summary, not every row and parameter.
    assert repr(run) == (f"TrainingRun(run_dir='{tmp_path / 'cb'}', env='Pendulum-v1', "
                         f"generations=3, timesteps={run.timesteps}, eval_return="
                         f"{run.eval_return}, best: generation {run.best.generation}, return "
                         f"{run.best_return}, ended_by='the callback', history: 3 rows)")


def test_train_callback_returning_anything_but_false_goes_on(tmp_path):
    answers = iter([None, True, 0, "", [], 1, None, None])
    run = es.train(REPO / "configs/pendulum.toml", PENDULUM, run_dir=tmp_path / "on",
                   callback=lambda row: next(answers))
    assert run.generations == 8


def test_train_callback_error_propagates_after_saving(tmp_path):
    def broken(row):
        if row["generation"] == 2:
            raise KeyError("no such column")
        return True

    with pytest.raises(KeyError, match="no such column"):
        es.train(REPO / "configs/pendulum.toml", PENDULUM, run_dir=tmp_path / "err",
                 callback=broken)
    state, _, _ = load_latest_checkpoint(tmp_path / "err/checkpoints")
    assert state.generation == 2


def test_minimize_callback_sees_the_history_rows_and_stops():
    rows = []

    def watch(row):
        rows.append(row)
        return row["ngen"] < 5

    result = es.minimize(lambda x: float(np.sum(x**2)), np.ones(3), 0.5, method="sepcma",
                         callback=watch)
    assert result.stop_reason == "callback" and result.ngen == 5
    assert rows == result.history
    assert {"ngen", "nfev", "best_f", "f_min", "f_median", "sigma_mean"} <= set(rows[0])
    plain = es.minimize(lambda x: float(np.sum(x**2)), np.ones(3), 0.5, method="sepcma",
                        max_generations=5)
    np.testing.assert_array_equal(result.x, plain.x)


def test_numpy_false_stops_as_false_does(tmp_path):
    """A comparison of NumPy numbers returns ``numpy.False_``, which ``is not False``."""
    result = es.minimize(lambda x: float(np.sum(x**2)), np.ones(3), 0.5, method="sepcma",
                         callback=lambda row: row["ngen"] < np.int64(4))
    assert result.stop_reason == "callback" and result.ngen == 4
    run = es.train(REPO / "configs/pendulum.toml", PENDULUM, run_dir=tmp_path / "np",
                   callback=lambda row: np.float64(row["generation"]) < 2)
    assert run.generations == 2


def test_under_mpiexec_rank_zero_decides_for_every_rank(tmp_path):
    done = subprocess.run([tool("mpiexec"), "-n", "2", sys.executable,
                           str(REPO / "tests/mpi_scripts/callbacks_spmd.py"),
                           str(tmp_path / "spmd")],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("RANK"))
    parsed = [re.fullmatch(r"RANK (\d) train (\d+) seen (\[.*\]) minimize (.*) resumed (.*)",
                           line).groups() for line in lines]
    assert [rank for rank, *_ in parsed] == ["0", "1"]
    (_, trained0, seen0, minimized0, resumed0), (_, trained1, seen1, minimized1, resumed1) = parsed
    assert trained0 == trained1 == "3"
    assert seen0 == "[1, 2, 3]" and seen1 == "[]"  # only rank 0's callback was asked
    assert minimized0 == minimized1 and minimized0.startswith("4 callback ")
    # es.resume on two ranks trains on to the bits of one unstopped process's run.
    spmd = {"es.population": 10, "env.max_episode_steps": 50, "run.generations": 8,
            "run.eval_every": 2}  # callbacks_spmd.py's
    whole = es.train(REPO / "configs/pendulum.toml", spmd, run_dir=tmp_path / "whole")
    assert resumed0 == resumed1 == f"8 {whole.saved.params.tobytes().hex()}"


def start_interruptible_train(config: dict, run_dir) -> subprocess.Popen:
    """es.train of CartPole's config with ``config`` in a terminal's job of its own, printing
    ``INTERRUPTED <message>`` to its piped stderr for the KeyboardInterrupt it raises."""
    from conftest import start_terminal_job

    script = ("import sys\nimport es\n"
              "try:\n"
              f"    es.train({str(REPO / 'configs/cartpole.toml')!r}, {config!r}, "
              f"run_dir={str(run_dir)!r})\n"
              "except KeyboardInterrupt as interrupt:\n"
              "    print(f'INTERRUPTED {interrupt}', file=sys.stderr)\n")
    return start_terminal_job([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)


def test_ctrl_c_stops_es_train_from_python_checkpointed_as_es_train_does(tmp_path):
    """A notebook's interrupt (SIGINT) ended es.train at once: the generations since the last
    checkpoint were lost, and no stop confirmed a kept policy. Now it stops after the
    generation in progress, checkpointed, and raises KeyboardInterrupt saying so."""
    from conftest import interrupt_job

    from es.rl.metrics import STOPS_FILE

    run_dir = tmp_path / "run"
    config = {"run.generations": 10**6, "run.checkpoint_every": 1000, "es.population": 8}
    job = start_interruptible_train(config, run_dir)
    progress = run_dir / "progress.csv"
    err = interrupt_job(job, "ctrl-c", ready=lambda: progress.is_file()
                        and len(progress.read_text().splitlines()) > 3)
    stopped = int(re.search(r"INTERRUPTED stopped by SIGINT after generation (\d+); its "
                            rf"checkpoint is saved: es.resume\('{run_dir}'\) or es-train "
                            rf"--resume {run_dir} continues the run", err).group(1))
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    assert state.generation == stopped  # no generation lost
    assert (run_dir / STOPS_FILE).read_text().splitlines()[-1].split(",")[2] == "SIGINT"
    # Said when the interrupt came, before the generation ended (a notebook showed nothing
    # for as long as a generation took, and a user pressed again).
    assert err.index("es.train: SIGINT: stopping after the generation in progress, with its "
                     "checkpoint (a second signal 2 s later stops at once, that generation "
                     "lost)\n") < err.index("INTERRUPTED")
    # As the message says, from Python:
    resumed = es.resume(run_dir, {"run.generations": stopped + 2})
    assert resumed.generations == stopped + 2 and len(resumed.history) == stopped + 2


def test_a_signal_while_the_callback_runs_stops_before_another_generation(tmp_path):
    """A Ctrl-C during a slow callback was seen only at the next generation's end: one more
    generation was played after it (minutes on a large task). Now the run stops where the
    callback was called, checkpointed there."""
    run_dir = tmp_path / "run"
    script = ("import os, signal, sys\nimport es\n"
              "def interrupt_at_2(row):\n"
              "    if row['generation'] == 2:\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "    return True\n"
              "try:\n"
              f"    es.train({str(REPO / 'configs/pendulum.toml')!r}, "
              f"{{**{PENDULUM!r}, 'run.eval_every': 1000}}, run_dir={str(run_dir)!r}, "
              "callback=interrupt_at_2)\n"
              "except KeyboardInterrupt as interrupt:\n"
              "    print(f'INTERRUPTED {interrupt}', file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert "INTERRUPTED stopped by SIGINT after generation 2;" in done.stderr, done.stderr
    state, _, _ = load_latest_checkpoint(run_dir / "checkpoints")
    assert state.generation == 2
    assert len((run_dir / "progress.csv").read_text().splitlines()) == 1 + 2


@pytest.mark.parametrize("checkpoint_every", [1, 1000])
def test_a_second_ctrl_c_stops_es_train_at_once_saying_what_is_kept(tmp_path,
                                                                     checkpoint_every):
    """The second signal raised a KeyboardInterrupt without a word: nothing said what was
    lost or how to go on (and then it promised a checkpoint where none was written yet)."""
    run_dir = tmp_path / "run"
    # Generations of ~4 s of sleeping steps (es/Sleep-v0: 16 members of 100 steps of 2.5 ms).
    config = {"env.id": "es/Sleep-v0", "env.kwargs": {"step_ms": 2.5}, "es.population": 16,
              "run.generations": 10**6, "run.eval_every": 1000, "run.best_episodes": 0,
              "run.checkpoint_every": checkpoint_every}
    job = start_interruptible_train(config, run_dir)
    try:
        progress = run_dir / "progress.csv"
        while not progress.is_file() or len(progress.read_text().splitlines()) < 2:
            assert job.poll() is None, job.communicate()
            time.sleep(0.05)
        os.killpg(job.pid, signal.SIGINT)  # a generation has just begun
        time.sleep(2.5)  # past StopFlag.REPEAT_WINDOW_S: not a copy of the first
        os.killpg(job.pid, signal.SIGINT)
        _, err = job.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
    resume = f"es.resume('{run_dir}') or es-train --resume {run_dir}"
    then = (f"{resume} continues the run from its newest checkpoint" if checkpoint_every == 1
            else f"no checkpoint was written yet: {resume} starts it over")
    assert ("INTERRUPTED es.train stopped at once by a second signal: what was in progress (a "
            "generation, or the stop's confirmation of the kept policy) is lost; "
            f"{then}") in err, err
    assert len(progress.read_text().splitlines()) == 2  # the generation under way was not


def test_es_train_warns_of_settings_it_will_not_read_as_es_train_says_them(tmp_path):
    with pytest.warns(UserWarning) as said:
        es.train(REPO / "configs/pendulum.toml", {**PENDULUM, "run.generations": 1,
                                                  "snes.lr_sigma": 0.1},
                 run_dir=tmp_path / "run")
    assert [str(w.message) for w in said] == [
        "snes.lr_sigma: es.strategy = 'openai' does not read [snes]; ignored"]
    assert said[0].filename == __file__  # the caller's line, not es's


@pytest.mark.filterwarnings("ignore:es.lr, es.l2")
@pytest.mark.parametrize("strategy", ["openai", "snes", "cma"])
def test_sigma_mean_is_the_search_scale_each_generation_sampled_with(tmp_path, strategy):
    """Scheduled (OpenAI-ES: es.sigma times es.sigma_decay per generation, down to
    es.sigma_min) or adapted (SNES, CMA-ES: starts at es.sigma, then moves)."""
    settings = {**PENDULUM, "es.strategy": strategy, "run.generations": 4}
    if strategy == "openai":
        settings |= {"es.sigma_decay": 0.5, "es.sigma_min": 0.02}
    rows = []
    es.train(REPO / "configs/pendulum.toml", settings, run_dir=tmp_path / strategy,
             callback=rows.append)
    sigmas = [row["sigma_mean"] for row in rows]
    if strategy == "openai":
        assert sigmas == pytest.approx([0.1, 0.05, 0.025, 0.02])
    else:
        assert sigmas[0] == pytest.approx(0.1, rel=1e-4) and len(set(sigmas)) == 4


def test_run_policy_refuses_an_observation_of_another_size_in_one_line(tmp_path):
    """``run.policy`` called by hand with the wrong observation raised numpy's broadcasting
    error (or a UFuncTypeError for a string), naming neither the policy nor what it takes."""
    run = es.train(REPO / "configs/pendulum.toml", {**PENDULUM, "run.generations": 1},
                   run_dir=tmp_path / "r")
    assert run.policy(np.zeros(3)).shape == (1,)
    for wrong, shape in ((np.zeros(5), r"\(5,\) \(float64\)"), ("abc", r"\(\) \(<U3\)"),
                         ([np.zeros(3), [1.0]], r"\(2,\) \(object\)")):  # ragged
        with pytest.raises(ValueError, match=rf"^observation of shape {shape}: the policy takes "
                                             "3 numbers"):
            run.policy(wrong)
    # env.reset()'s pair: numpy's "setting an array element with a sequence".
    with pytest.raises(ValueError, match=r"^observation is a pair \(observation, info\), as "
                                         r"env.reset\(\) returns it: pass its first item"):
        run.policy((np.zeros(3), {}))
    # A user's policy too, where it said "operands could not be broadcast together" or
    # "unsupported operand type(s) for -: 'NoneType' and 'float'".
    with pytest.warns(UserWarning, match="policy.hidden: a setting of the built-in MLP"):
        mine = es.train(REPO / "configs/pendulum.toml", {**PENDULUM, "run.generations": 1},
                        run_dir=tmp_path / "mine", policy=Affine)
    assert mine.policy(np.zeros(3)).shape == (1,)
    for wrong, shape in ((np.zeros(5), r"\(5,\) \(float64\)"), (None, r"\(\) \(object\)")):
        with pytest.raises(ValueError, match=rf"^observation of shape {shape}: the policy takes "
                                             "3 numbers"):
            mine.policy(wrong)


class Affine:
    """A user's policy of the protocol (``es.rl.policy``): one action from a weighted sum."""

    def __init__(self, observation_space, action_space) -> None:
        self.num_params = observation_space.shape[0] + 1

    def initial_params(self, rng):
        return np.zeros(self.num_params, dtype=np.float32)

    def act(self, params, observation, state):
        return np.array([params[:-1] @ observation + params[-1]]), state



@pytest.mark.parametrize("call", ["train", "minimize"])
@pytest.mark.parametrize(("ending", "status", "raised"), [
    ("exit0", 0, "SystemExit None"), ("exit3", 3, "SystemExit 3"),
    ("message", 1, "SystemExit 'enough'"), ("interrupt", None, "KeyboardInterrupt")])
def test_a_callback_ending_the_program_on_rank_zero_ends_every_rank_alike(
        tmp_path, call, ending, status, raised):
    """sys.exit or a KeyboardInterrupt in rank 0's callback left the other ranks waiting for
    its answer (es.minimize: for good; es.train: until their peer timeout blamed rank 0):
    only an Exception was passed on. Every rank now ends as rank 0 does, with the same exit
    status (a message printed once, by rank 0) or a KeyboardInterrupt, es.train's after its
    checkpoint, from which the run resumes exactly."""
    done = subprocess.run([tool("mpiexec"), "-n", "2", sys.executable,
                           str(REPO / "tests/mpi_scripts/callback_ends.py"), call, ending,
                           str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    said = {path.name: path.read_text() for path in tmp_path.glob("rank*.txt")}
    assert said["rank0.txt"].startswith(raised), (said, done.stderr)  # not killed in a wait
    if status is None:  # Python ends itself by SIGINT, mpiexec says "signal 2"
        assert done.returncode != 0, done.stderr
    else:
        assert done.returncode == status, done.stderr
        assert done.stderr.count("enough") == (ending == "message"), done.stderr
    if status == 0:  # both end normally; otherwise mpiexec may end rank 1 first
        assert said["rank1.txt"] == "SystemExit None", said
    elif "rank1.txt" in said:
        rank_one = {"exit3": "SystemExit 3", "message": "SystemExit 1",
                    "interrupt": "KeyboardInterrupt"}[ending]
        assert said["rank1.txt"].startswith(rank_one), said
    if call == "minimize" and ending == "interrupt":  # the work so far
        assert said["rank0.txt"].endswith(" 2"), said
    if call == "train":
        torn = ending == "interrupt"  # mid-generation: no checkpoint is written
        with pytest.warns(UserWarning, match="no checkpoint written yet") if torn else \
                contextlib.nullcontext():
            resumed = es.resume(tmp_path / "run")
        whole = es.train(REPO / "configs/pendulum.toml",
                         {"es.population": 10, "env.max_episode_steps": 50,
                          "run.generations": 8, "run.eval_every": 2}, run_dir=tmp_path / "whole")
        assert resumed.generations == 8
        assert np.array_equal(resumed.saved.params, whole.saved.params)
