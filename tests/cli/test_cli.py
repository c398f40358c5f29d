"""Smoke tests of es-train and es-eval through a subprocess, as a user types them."""

import os
import re

import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli

from es.config import shipped_configs
from es.rl.metrics import COLUMNS


@pytest.mark.parametrize(("budget", "ended_by"), [
    ("run.max_seconds=3", "run.max_seconds = 3"),
    ("run.max_timesteps=40000", "run.max_timesteps = 40000"),
    ("run.generations=2", "run.generations = 2"),
])
def test_the_eta_is_the_nearest_budget_and_the_last_line_names_the_one_that_ended_it(
        tmp_path, budget, ended_by):
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", "run.generations=100000",
                    "--set", budget, "--run-dir", str(tmp_path / "r")])
    assert done.returncode == 0, done.stderr
    etas = [int(h or 0) * 3600 + int(m) * 60 + int(s)
            for h, m, s in re.findall(r"ETA (?:(\d+):)?(\d+):(\d+)\n", done.stdout)]
    assert etas and max(etas) <= 60, done.stdout  # not the 100,000 generations' hours
    if budget.startswith("run.max_seconds"):
        assert max(etas) <= 3
    assert f"(ended by {ended_by})" in done.stdout.splitlines()[-1]


def test_train_then_eval_cartpole(tmp_path):
    run_dir = tmp_path / "cp"
    done = run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(run_dir),
                    "--set", "run.generations=6", "--set", "run.eval_every=3"])
    assert done.returncode == 0, done.stderr
    assert "gen     6" in done.stdout and "done: 6 generations" in done.stdout
    assert {p.name for p in run_dir.iterdir()} >= {"config.toml", "progress.csv", "policy.npz"}
    rows = read_progress(run_dir)
    assert [int(r["generation"]) for r in rows] == list(range(1, 7))
    assert set(COLUMNS) <= set(rows[0])
    assert rows[2]["eval_return"] and not rows[1]["eval_return"]
    assert all(int(r["timesteps"]) > 0 for r in rows)
    assert float(rows[-1]["time_s"]) > float(rows[0]["time_s"]) > 0
    with np.load(run_dir / "policy.npz", allow_pickle=False) as data:
        assert data["params"].dtype == np.float32 and "obs_mean" in data
    assert "generations = 6" in (run_dir / "config.toml").read_text()

    shown = run_cli(["es-eval", str(run_dir), "--episodes", "3"])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("CartPole-v1, mean policy (generation 6): return ")
    assert "over 3 episodes" in shown.stdout


def test_cartpole_config_solves_cartpole(tmp_path):
    run_dir = tmp_path / "solve"
    done = run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(run_dir), "--quiet"])
    assert done.returncode == 0, done.stderr
    evals = [float(r["eval_return"]) for r in read_progress(run_dir) if r["eval_return"]]
    assert max(evals) >= 475
    shown = run_cli(["es-eval", str(run_dir), "--episodes", "5"])
    assert float(shown.stdout.split("return ")[1].split()[0]) >= 475


def test_pendulum_with_overrides_as_in_the_readme(tmp_path):
    run_dir = tmp_path / "p3"
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", "es.sigma=0.05",
                    "--set", "run.seed=3", "--set", "run.generations=2", "--run-dir",
                    str(run_dir)])
    assert done.returncode == 0, done.stderr
    text = (run_dir / "config.toml").read_text()
    assert "sigma = 0.05" in text and "seed = 3" in text
    assert load_params(run_dir).shape == (3 * 32 + 32 + 32 * 32 + 32 + 32 + 1,)


def test_default_run_folder_is_named_after_env_config_and_seed(tmp_path):
    done = run_cli(["es-train", str(REPO / "configs/cartpole.toml"), "--quiet",
                    "--set", "run.generations=1"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (folder,) = (tmp_path / "runs").iterdir()
    assert folder.name.startswith("CartPole-v1__cartpole__0__")


def one_line_error(done, *fragments):
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[es]\nsigma = 0.0\n")
    one_line_error(run_cli(["es-train", str(bad)]), "es.sigma = 0.0", "> 0")
    bad.write_text("[es]\npopulaton = 8\n")
    one_line_error(run_cli(["es-train", str(bad)]), "unknown key es.populaton", "population")
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--set", "env.id=CartPol-v1"]),
                   "'CartPol-v1'", "not a registered Gymnasium id")
    # In a fresh process gym's old Atari ids are unknown: "not a registered Gymnasium id".
    one_line_error(run_cli(["es-train", "configs/pong.toml", "--set",
                            "env.id=PongNoFrameskip-v4"]),
                   "env.id 'PongNoFrameskip-v4': gym's old Atari id; here an ALE game is "
                   "ALE/Pong-v5")
    one_line_error(run_cli(["es-train", str(tmp_path / "missing.toml")]), "not found")
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--set", "es.population=9"]),
                   "es.population = 9", "even")
    one_line_error(run_cli(["es-eval", str(tmp_path)]), "no policy.npz")
    one_line_error(run_cli(["es-eval", str(tmp_path / "typo")]),  # not "no policy.npz in it"
                   f"run folder '{tmp_path / 'typo'}': no such folder")
    # A file that exists was "no such folder" too; a run's file names its folder.
    one_line_error(run_cli(["es-eval", str(bad)]),
                   f"run folder '{bad}': is a file, not a run folder")
    (tmp_path / "config.toml").write_text("")
    (tmp_path / "policy.npz").write_text("")
    one_line_error(run_cli(["es-eval", str(tmp_path / "policy.npz")]),
                   f"is a file; give the run's folder, e.g. es-eval {tmp_path}")
    # Under a launcher every copy would play and print the same episodes: said once.
    one_line_error(run_cli(["es-eval", str(tmp_path)], ranks=2),
                   "es-eval plays its episodes in one process", "without mpiexec")


def test_existing_run_folder_needs_force(tmp_path):
    args = ["es-train", "configs/cartpole.toml", "--run-dir", str(tmp_path / "r"), "--quiet",
            "--set", "run.generations=1"]
    assert run_cli(args).returncode == 0
    # The same command after a kill: --force alone was named, which deletes the run.
    one_line_error(run_cli(args), "already holds a run; continue it with es-train --resume "
                   f"{tmp_path / 'r'}, or", "--force")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    one_line_error(run_cli([*args[:2], "--run-dir", str(other)]), "is not empty (no run in it",
                   "--force")
    one_line_error(run_cli(["es-train", "--resume", str(other)]), "not a run folder")
    long_run = [*args[:-1], "run.generations=12", "--set", "run.checkpoint_every=1", "--force"]
    assert run_cli(long_run).returncode == 0
    assert run_cli([*args, "--force"]).returncode == 0
    # The overwritten run's checkpoints are gone: the newest is the new run's generation 1.
    assert sorted(p.name for p in (tmp_path / "r/checkpoints").glob("*.json")) == [
        "ckpt-00000001.json"
    ]


def test_force_starts_over_with_none_of_the_old_runs_files(tmp_path):
    """The old run's kept policy, stops and TensorBoard files go with --force (they would pass
    for the new run's); a file of the user's stays; the policies and checkpoints get the mode
    any file gets (the umask's), not a temporary file's 0600."""
    run_dir = tmp_path / "r"
    args = ["es-train", "configs/cartpole.toml", "--run-dir", str(run_dir), "--quiet"]
    assert run_cli([*args, "--set", "run.generations=6", "--tensorboard"]).returncode == 0
    assert (run_dir / "policy_best.npz").exists() and (run_dir / "tb").is_dir()
    (run_dir / "notes.txt").write_text("mine")
    (run_dir / "checkpoints/mine.txt").write_text("mine too")  # --force deleted it
    again = run_cli([*args, "--force", "--set", "run.generations=1", "--set",
                     "run.best_episodes=0"])
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "checkpoints", "config.toml", "es.lock", "notes.txt", "policy.npz", "progress.csv",
        "stops.csv", "trained_by.txt"]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "ckpt-00000001.json", "ckpt-00000001.npz", "mine.txt"]
    assert len(read_progress(run_dir)) == 1
    assert len((run_dir / "stops.csv").read_text().splitlines()) == 2  # header and this stop
    plain = (run_dir / "progress.csv").stat().st_mode & 0o777  # as open() makes a file
    for written in ("config.toml", "policy.npz", "checkpoints/ckpt-00000001.npz"):
        assert (run_dir / written).stat().st_mode & 0o777 == plain, written


def test_a_config_that_cannot_be_built_leaves_no_folder_and_spares_the_run_it_would_replace(
        tmp_path):
    """An env keyword or policy the config names but that cannot be built: one line, exit 2,
    and no folder written, so the corrected command starts there; with --force, the run it
    would have replaced is still whole."""
    fresh = tmp_path / "fresh"
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--set", "env.kwargs.bogus=1",
                            "--run-dir", str(fresh)]), "env.kwargs.bogus", "no such keyword")
    assert not fresh.exists()
    assert run_cli(["es-train", "configs/cartpole.toml", "--set", "run.generations=1",
                    "--run-dir", str(fresh), "--quiet"]).returncode == 0
    before = {p.name: p.read_bytes() for p in fresh.iterdir() if p.is_file()}
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--set", "policy.kind=es:nothing",
                            "--run-dir", str(fresh), "--force"]), "policy.kind = 'es:nothing'")
    assert {p.name: p.read_bytes() for p in fresh.iterdir() if p.is_file()} == before


def test_cli_pins_blas_to_one_thread_per_rank():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    code = "import es.cli.train, os; print(*(os.environ[v] for v in ('OPENBLAS_NUM_THREADS', "
    code += "'OMP_NUM_THREADS')))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["1", "1"], out.stderr


def test_misspelt_env_kwarg_is_a_one_line_error(tmp_path):
    done = run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(tmp_path / "r"),
                    "--set", "env.kwargs.bogus=1"])
    one_line_error(done, "env.kwargs.bogus", "CartPole-v1", "unexpected keyword argument")


def test_non_finite_floats_are_one_line_errors(tmp_path):
    one_line_error(run_cli(["es-train", "configs/cartpole.toml", "--set", "es.l2=nan",
                            "--run-dir", str(tmp_path / "r")]), "es.l2 = nan", "finite")


def test_unreadable_config_files_are_one_line_errors(tmp_path):
    one_line_error(run_cli(["es-train", "configs/"]), "'configs'", "is a directory")
    one_line_error(run_cli(["es-baseline", "pg", "configs"]), "is a directory")
    one_line_error(run_cli(["es-train", "configs/cartpole.toml/x"]), "Not a directory")
    one_line_error(run_cli(["es-train", "x" * 300]), "File name too long")


def test_eval_of_a_broken_policy_file_is_a_one_line_error(tmp_path):
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(run_dir), "--quiet",
                    "--set", "run.generations=1", "--set", "es.population=4"])
    assert done.returncode == 0, done.stderr
    with np.load(run_dir / "policy.npz", allow_pickle=False) as data:
        arrays = dict(data)
    whole = (run_dir / "policy.npz").read_bytes()

    def broken(name: str, write) -> str:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.toml").write_text((run_dir / "config.toml").read_text())
        write(folder / "policy.npz")
        return str(folder)

    cases = {
        "truncated": (lambda p: p.write_bytes(whole[: len(whole) // 2]), "not an .npz"),
        "cut_inside": (lambda p: p.write_bytes(whole[:200] + whole[-200:]), "unreadable policy"),
        "empty": (lambda p: p.write_bytes(b""), "not an .npz archive"),
        "text": (lambda p: p.write_text("hello\n"), "not an .npz archive"),
        "no_keys": (lambda p: np.savez(p, params=arrays["params"]), "unreadable policy"),
        "short": (lambda p: np.savez(p, **{**arrays, "params": arrays["params"][:3]}),
                  "3 parameters given"),
        "other_env": (lambda p: np.savez(p, **{**arrays, "env_id": np.array("Acrobot-v1")}),
                      "'Acrobot-v1'"),
        "folder": (lambda p: p.mkdir(), "no policy.npz"),
        # Played, it scored as a policy would (9.00 on CartPole), exit code 0.
        "nan": (lambda p: np.savez(p, **{**arrays, "params": arrays["params"] * np.nan}),
                f"policy.npz': {arrays['params'].size} of its {arrays['params'].size} "
                "parameters are NaN or inf: nothing to play"),
        "std": (lambda p: np.savez(p, **{**arrays, "obs_std": arrays["obs_std"] * 0}),
                "policy.npz': its observation normalisation holds NaN, inf or a std <= 0"),
        "mean": (lambda p: np.savez(p, **{**arrays, "obs_mean": arrays["obs_mean"] * np.nan}),
                 "policy.npz': its observation normalisation holds NaN, inf or a std <= 0"),
    }
    # An env the training script registered (gym.register, then es.train): gone here.
    script_env = tmp_path / "script_env"
    script_env.mkdir()
    (script_env / "config.toml").write_text((run_dir / "config.toml").read_text().replace(
        "CartPole-v1", "MyCartPole-v0"))
    (script_env / "policy.npz").write_bytes(whole)
    one_line_error(run_cli(["es-eval", str(script_env)]), "'MyCartPole-v0': not a registered "
                   "Gymnasium id", "register it in a module and train with env.id = "
                   "'module:ID'")
    for name, (write, fragment) in cases.items():
        one_line_error(run_cli(["es-eval", broken(name, write)]), fragment)
    sweep = tmp_path / "sweep"  # a folder of runs: "no policy.npz in it"
    sweep.mkdir()
    (run_dir).rename(sweep / "CartPole-v1__cartpole__0")
    one_line_error(run_cli(["es-eval", str(sweep)]), f"{str(sweep)!r} is a folder of runs (a "
                   f"sweep's): evaluate one of them, e.g. es-eval {sweep}/CartPole-v1__cartpole__0")
    run_dir = sweep / "CartPole-v1__cartpole__0"
    (run_dir / "config.toml").unlink()
    (run_dir / "config.toml").mkdir()
    one_line_error(run_cli(["es-eval", str(run_dir)]), "config.toml", "is a directory")


RANK_ENV = '''
import os

import gymnasium as gym
import numpy as np


class RankEnv(gym.Env):
    """Frames that differ between ranks: not deterministic under a seed."""

    observation_space = gym.spaces.Box(0, 255, (1, 36, 36), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, False, self.t >= 10, {}

    def _obs(self):
        return np.full((1, 36, 36), int(os.environ.get("PMI_RANK", 0)), np.uint8)


gym.register("Rank-v0", entry_point=RankEnv)
'''


def test_vbn_reference_batch_mismatch_is_a_one_line_error(tmp_path):
    (tmp_path / "rank_env.py").write_text(RANK_ENV)
    done = run_cli(["es-train", "configs/cartpole.toml", "--run-dir", str(tmp_path / "r"),
                    "--set", "env.id=rank_env:Rank-v0", "--set", "policy.kind=cnn",
                    "--set", "policy.obs_norm=false", "--set", "policy.torso=small",
                    "--set", "policy.vbn_batch=4", "--set", "es.population=4",
                    "--set", "es.noise_table_size=100000"],
                   ranks=2, timeout=120, extra_env={"PYTHONPATH": os.pathsep.join(
                       [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])})
    assert done.returncode == 1, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if "ranks: rank 0 = pid" not in line]
    assert "Traceback" not in done.stderr, done.stderr
    assert errors == ["es-train: error: the ranks collected different VBN reference batches: "
                      "the environment is not deterministic under a seed"], done.stderr


def test_out_of_memory_names_the_settings_that_size_the_run(tmp_path):
    """es.population = 10**12 read "MemoryError: Unable to allocate 3.64 TiB for an array
    with shape (500000000000,) and data type int64", naming no setting."""
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "es.population=1000000000000",
                    "--run-dir", str(tmp_path / "run")])
    assert done.returncode == 1, done.stderr
    (said,) = [line for line in done.stderr.splitlines() if "error" in line]
    assert said.startswith("es-train: error on rank 0: MemoryError: "), said
    assert said.endswith("; the config sizes es.population = 1000000000000 (arrays of a "
                         "generation's members) and es.noise_table_size = 1000000 (4 MiB a node)"
                         ": lower what is too large for this machine"), said


def test_shipped_configs_run_from_any_folder(tmp_path):
    """A pip-installed es has no checkout beside it: the README's commands name the shipped
    configs (configs/cartpole.toml), which es-train, es-baseline and es-bench find by name."""
    listed = run_cli(["es-train", "--list-configs"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[:-1]]
    assert names == shipped_configs() and "configs: copy one to change it" in listed.stdout
    assert any(line.startswith("cartpole ") and "CartPole-v1 with a linear policy" in line
               for line in listed.stdout.splitlines())
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "run.generations=1",
                    "--run-dir", "run", "--quiet"], ranks=2, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "CartPole-v1" in (tmp_path / "run/config.toml").read_text()
    done = run_cli(["es-baseline", "dqn", "baselines/cartpole_dqn", "--set",
                    "run.max_timesteps=300", "--run-dir", "dqn", "--quiet"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dqn/policy.npz").is_file()
    # The suite loads, and with it every config it names (relative to the suite file), before
    # the unknown task is refused.
    one_line_error(run_cli(["es-bench", "suite", "configs/suites/mujoco_steps.toml", "--tasks",
                            "nope"], cwd=tmp_path),
                   "'nope' is not in the suite (it has swimmer, halfcheetah, hopper")
    one_line_error(run_cli(["es-train", "hopper_arss"], cwd=tmp_path),
                   "config file 'hopper_arss': not found; did you mean hopper_ars?",
                   "es-train --list-configs")
