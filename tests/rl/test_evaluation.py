"""Evaluations of the mean policy are played beside the next generation's members (no rank
idles while the others finish them), or at the stop; each evaluated row still reports its own
generation's mean policy, and a callback's stop or a resume leaves the rows and parameters of
a run that never stopped."""

import subprocess
import time

import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli, tool

import es
from es.config import load_config
from es.parallel.comm import LocalComm
from es.rl.checkpoint import load_latest_checkpoint, read_checkpoint
from es.rl.trainer import Trainer

SETTINGS = {"es.population": 10, "env.max_episode_steps": 50, "run.eval_every": 2,
            "run.eval_episodes": 3, "policy.kind": "linear", "policy.obs_norm": True}
FLAGS = [item for key, value in SETTINGS.items()
         for item in ("--set", f"{key}={str(value).lower()}")]


def evaluations(run_dir) -> dict[int, tuple[str, str]]:
    return {int(row["generation"]): (row["eval_return"], row["eval_std"])
            for row in read_progress(run_dir) if row["eval_return"]}


def test_each_evaluated_row_reports_its_own_generations_mean_policy(tmp_path):
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/pendulum.toml", *FLAGS, "--set", "run.generations=7",
                    "--set", "run.checkpoint_every=1", "--set", "run.keep_checkpoints=100",
                    "--quiet", "--run-dir", str(run_dir)], ranks=2)
    assert done.returncode == 0, done.stderr
    rows = read_progress(run_dir)
    assert [int(row["generation"]) for row in rows] == list(range(1, 8))
    # Every second generation's beside the next one's members, the last one's at the stop.
    assert sorted(evaluations(run_dir)) == [2, 4, 6, 7]
    config = load_config(run_dir / "config.toml")
    for generation in (2, 4, 6, 7):
        trainer = Trainer(config, LocalComm(), None)
        state, _ = read_checkpoint(run_dir / "checkpoints" / f"ckpt-{generation:08d}.json")
        trainer.restore(state)
        assert state.held_row["generation"] == generation  # checkpointed before its evaluation
        returns = trainer.evaluate_mean(generation)
        row = rows[generation - 1]
        assert float(row["eval_return"]) == pytest.approx(returns.mean(), rel=1e-5)
        assert float(row["eval_std"]) == pytest.approx(returns.std(), rel=1e-5, abs=1e-6)
        assert float(row["eval_s"]) > 0
        trainer.close()


def test_a_callback_stop_at_an_evaluated_row_leaves_the_run_at_that_generation(tmp_path):
    """The row of generation 4 is finished by generation 5's episodes; stopping there does
    not apply generation 5, and a resume goes on as the run that never stopped."""
    config = REPO / "configs/pendulum.toml"
    plain = es.train(config, {**SETTINGS, "run.generations": 8}, run_dir=tmp_path / "plain")
    seen = []

    def watch(row):
        seen.append(row["generation"])
        return row["generation"] < 4

    stopped = es.train(config, {**SETTINGS, "run.generations": 8}, run_dir=tmp_path / "cb",
                       callback=watch)
    assert stopped.generations == 4 and seen == [1, 2, 3, 4]
    assert stopped.eval_return is not None
    assert [int(row["generation"]) for row in read_progress(tmp_path / "cb")] == [1, 2, 3, 4]
    state, _, _ = load_latest_checkpoint(tmp_path / "cb/checkpoints")
    assert state.generation == 4 and state.held_row["generation"] == 4
    resumed = run_cli(["es-train", "--resume", str(tmp_path / "cb"), "--quiet"], ranks=2)
    assert resumed.returncode == 0, resumed.stderr
    assert np.array_equal(load_params(tmp_path / "cb"), load_params(plain.run_dir))
    assert evaluations(tmp_path / "cb") == evaluations(plain.run_dir)
    assert [int(row["generation"]) for row in read_progress(tmp_path / "cb")] == \
        list(range(1, 9))


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_an_interrupted_es_eval_is_one_line_and_exit_130(tmp_path, stop):
    """Ctrl-C printed a full traceback (through imageio's ffmpeg with --video)."""
    from conftest import interrupt_job, start_terminal_job

    run_dir = tmp_path / "run"
    assert run_cli(["es-train", "configs/cartpole.toml", "--set", "run.generations=1",
                    "--run-dir", str(run_dir), "--quiet"]).returncode == 0
    started = time.monotonic()
    job = start_terminal_job([tool("es-eval"), str(run_dir), "--episodes", "1000000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = interrupt_job(job, stop, ready=lambda: time.monotonic() - started > 3)
    assert job.returncode == 130 and err.strip() == "es-eval: interrupted (exit code 130)", err


def test_es_eval_plays_a_policy_unclipped_as_the_papers_code_does(tmp_path):
    """--unclipped: the built-in policy's actions as computed (ARS's and the ES paper's code
    send W obs unclipped, and MuJoCo charges the control cost on it), beside a run trained
    with policy.clip_actions = false, whose policy.npz keeps infinite bounds."""
    clipped, free = tmp_path / "clipped", tmp_path / "free"
    es.train(REPO / "configs/pendulum.toml", {**SETTINGS, "run.generations": 2},
             run_dir=clipped)
    es.train(REPO / "configs/pendulum.toml", {**SETTINGS, "run.generations": 2,
                                              "policy.clip_actions": False}, run_dir=free)
    said = {}
    for run_dir, flags in ((clipped, []), (clipped, ["--unclipped"]), (free, [])):
        done = run_cli(["es-eval", str(run_dir), "--episodes", "2", *flags])
        assert done.returncode == 0, done.stderr
        said[run_dir.name, bool(flags)] = done.stdout
    assert "(generation 2, actions unclipped): return " in said["clipped", True]
    assert "(generation 2): return " in said["clipped", False]
    # The same training bits either way (Pendulum clips its torque itself, and charges its
    # cost on the clipped one): played unclipped, the clipped run scores as the free one.
    assert load_params(clipped).tobytes() == load_params(free).tobytes()
    assert said["clipped", True].split(": return ")[1] == said["free", False].split(": return ")[1]
    refused = run_cli(["es-eval", str(clipped), "--random", "--unclipped"])
    assert refused.returncode == 2 and "--unclipped and --random" in refused.stderr
