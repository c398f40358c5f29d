"""A user's own environment (``env.id = "module:Env-v0"``, the module on PYTHONPATH or in the
folder es-train runs in): what goes wrong with it is one line, and an env whose episodes
nothing ends is named before it holds a run up."""

from conftest import read_progress, run_cli

SHORT = ["--set", "es.population=4", "--set", "run.generations=1", "--set",
         "run.eval_every=1", "--set", "run.eval_episodes=1", "--set", "run.best_episodes=0"]

MODULE = """
import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class Short(CartPoleEnv):  # ends itself after 20 steps, with no TimeLimit around it
    def reset(self, **kwargs):
        self.t = 0
        return super().reset(**kwargs)

    def step(self, action):
        self.t += 1
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, self.t >= 20, info


gym.register("Limited-v0", entry_point=CartPoleEnv, max_episode_steps=50)
gym.register("Unlimited-v0", entry_point=Short)
"""


def one_line(done, program: str, line: str) -> None:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == f"{program}: error: {line}\n", done.stderr


def test_a_user_env_module_that_fails_to_import_is_one_line(tmp_path):
    """Only a missing module was one line; one that raised while it loaded (a syntax error,
    any exception) was a traceback, where the same module as policy.kind was one line."""
    (tmp_path / "broken.py").write_text("raise RuntimeError('module-level failure')\n")
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "env.id=broken:X-v0",
                    "--run-dir", str(tmp_path / "run")], extra_env={"PYTHONPATH": str(tmp_path)})
    one_line(done, "es-train", "env.id 'broken:X-v0': cannot import module 'broken' "
                               "(RuntimeError: module-level failure)")


def test_es_eval_where_the_run_s_env_module_cannot_be_imported_is_one_line(tmp_path):
    """es-eval from another folder, or without the PYTHONPATH the run trained with, was a
    traceback ending in ModuleNotFoundError."""
    modules, run_dir = tmp_path / "modules", tmp_path / "run"
    modules.mkdir()
    (modules / "my_envs.py").write_text(MODULE)
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "env.id=my_envs:Limited-v0",
                    *SHORT, "--run-dir", str(run_dir)], extra_env={"PYTHONPATH": str(modules)})
    assert done.returncode == 0, done.stderr
    assert "time limit" not in done.stderr
    played = run_cli(["es-eval", str(run_dir), "--episodes", "2"],
                     extra_env={"PYTHONPATH": str(modules)})
    assert played.returncode == 0, played.stderr
    one_line(run_cli(["es-eval", str(run_dir), "--episodes", "2"]), "es-eval",
             "env.id 'my_envs:Limited-v0': cannot import module 'my_envs' "
             "(ModuleNotFoundError: No module named 'my_envs')")


def test_an_env_with_no_time_limit_is_named_at_the_start(tmp_path):
    """An episode that never ends held its generation, and with it run.max_seconds and a stop
    signal, with no word; its memory grew all the while (now it keeps one observation's)."""
    (tmp_path / "my_envs.py").write_text(MODULE)
    paths = {"PYTHONPATH": str(tmp_path)}
    command = ["es-train", "configs/cartpole.toml", "--set", "env.id=my_envs:Unlimited-v0",
               *SHORT]
    done = run_cli([*command, "--run-dir", str(tmp_path / "run")], extra_env=paths)
    assert done.returncode == 0, done.stderr
    warning = ("es-train: warning: env.id = 'my_envs:Unlimited-v0' has no time limit: an "
               "episode that never ends holds up its generation, and run.max_seconds and a "
               "stop signal with it; cap them with env.max_episode_steps (e.g. --set "
               "env.max_episode_steps=1000)")
    assert done.stderr.count(warning) == 1, done.stderr
    assert int(read_progress(tmp_path / "run")[0]["timesteps"]) <= 4 * 20  # it ends itself
    played = run_cli(["es-eval", str(tmp_path / "run"), "--episodes", "1"], extra_env=paths)
    # es-eval has no --set: its hint names where the cap goes.
    assert played.returncode == 0 and ("es-eval: warning: env.id = 'my_envs:Unlimited-v0' has "
                                       "no time limit: an episode that never ends keeps "
                                       "es-eval playing (Ctrl-C stops it); "
                                       "env.max_episode_steps in the run's config.toml caps "
                                       "them") in played.stderr, played.stderr
    capped = run_cli([*command, "--set", "env.max_episode_steps=30", "--run-dir",
                      str(tmp_path / "capped")], extra_env=paths)
    assert capped.returncode == 0 and "time limit" not in capped.stderr, capped.stderr
