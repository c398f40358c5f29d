"""A user's own environment (``env.id = "module:Env-v0"``, the module on PYTHONPATH or in the
folder es-train runs in): what goes wrong with it is one line, and an env whose episodes
nothing ends is named before it holds a run up."""

import pytest
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
    assert " over 1 episode (min " in played.stdout, played.stdout  # not "1 episodes"
    capped = run_cli([*command, "--set", "env.max_episode_steps=30", "--run-dir",
                      str(tmp_path / "capped")], extra_env=paths)
    assert capped.returncode == 0 and "time limit" not in capped.stderr, capped.stderr


SLOPPY = """
import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class OldApi(PendulumEnv):  # the Gym API before 0.26: reset gives the observation alone
    def reset(self, **kwargs):
        return super().reset(**kwargs)[0]


class FourValues(PendulumEnv):  # step with one done
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class ArrayReward(PendulumEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, np.array([reward]), terminated, truncated, info


class WrongShape(PendulumEnv):
    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        return obs[:2], info


class Shifted(gym.Env):  # actions -1, 0, 1: move left, stay, right towards 5
    observation_space = gym.spaces.Box(-10.0, 10.0, (1,), np.float64)
    action_space = gym.spaces.Discrete(3, start=-1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 0.0
        return np.array([self.x]), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.x += action
        return np.array([self.x]), -abs(self.x - 5.0), False, False, {}


class Grid(gym.Env):  # a (2, 2) Box action
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.float32)), np.shape(action)
        return np.zeros(3), float(np.sum(action)), False, False, {}


class Counts(Grid):  # whole-number actions
    action_space = gym.spaces.Box(0, 10, (2,), np.int64)


class InitRaise(PendulumEnv):
    def __init__(self, **kwargs):
        raise OSError("simulator license not found")


class Shrinking(PendulumEnv):  # 3 numbers at every reset; from its third step on, 2
    def step(self, action):
        obs, *rest = super().step(action)
        self.calls = getattr(self, "calls", 0) + 1  # past the start-up check's one step
        return (obs if self.calls < 3 else obs[:2], *rest)


class CloseRaise(PendulumEnv):
    def close(self):
        raise RuntimeError("close failed")


for name in ("OldApi", "FourValues", "ArrayReward", "WrongShape", "Counts", "InitRaise",
             "Shrinking", "CloseRaise"):
    gym.register(f"{name}-v0", entry_point=globals()[name], max_episode_steps=20)
gym.register("Shifted-v0", entry_point=Shifted, max_episode_steps=20)
gym.register("Grid-v0", entry_point=Grid, max_episode_steps=20)
"""


@pytest.mark.parametrize(("env", "said"), [
    ("OldApi", "reset returned an array of shape (3,); a Gymnasium env's reset returns "
               "(observation, info)"),
    ("FourValues", "step returned a tuple of 4; a Gymnasium env's step returns (observation, "
                   "reward, terminated, truncated, info)"),
    ("ArrayReward", "step's reward is an array of shape (1,); it must be one number"),
    ("WrongShape", "reset gave an observation of shape (2,), but its observation_space is "
                   "Box("),
])
def test_an_env_off_gymnasiums_api_is_named_before_training(tmp_path, env, said):
    """Each failed every episode at generation 1 (exit 1) with NumPy's words."""
    refused(tmp_path, env, f"env.id = 'sloppy:{env}-v0': {said}")


def test_an_env_whose_constructor_raises_is_named_in_one_line(tmp_path):
    """It read "es-train: error on rank 0: OSError: simulator license not found", exit 1,
    naming no env; with env.kwargs set, the kwargs were blamed."""
    refused(tmp_path, "InitRaise", "env.id = 'sloppy:InitRaise-v0': the env's constructor "
                                   "raised OSError: simulator license not found")


def test_an_observation_that_changes_size_fails_its_episode(tmp_path):
    """The policy's inputs broadcast a (2,) observation against 3 numbers: every episode
    trained on it without a word, and es-eval then refused the run."""
    (tmp_path / "sloppy.py").write_text(SLOPPY)
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", "env.id=sloppy:Shrinking-v0",
                    *SHORT, "--run-dir", str(tmp_path / "run")],
                   extra_env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1, done.stderr
    said = ("episode raised ValueError: observation of shape (2,): the env gave 3 numbers at "
            "the episode's start, 2 now")
    # Told once, and the other three counted: a generation of 64 printed 64 such lines.
    assert [line.split(": ", 2)[2] for line in done.stderr.splitlines() if said in line] == [
        f"member 0: {said}", f"3 more episodes alike: {said}"], done.stderr
    assert "4 of 4 episodes failed" in done.stderr


def test_an_env_whose_close_raises_does_not_fail_a_finished_run(tmp_path):
    """Exit 1 and no done: line, every file of the run written."""
    (tmp_path / "sloppy.py").write_text(SLOPPY)
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", "env.id=sloppy:CloseRaise-v0",
                    *SHORT, "--run-dir", str(tmp_path / "run")],
                   extra_env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0 and "done: 1 generation" in done.stdout, done.stderr
    assert "sloppy:CloseRaise-v0: closing the env raised RuntimeError: close failed" \
        in done.stderr


def test_integer_box_actions_need_a_policy_of_ones_own(tmp_path):
    refused(tmp_path, "Counts", "action space Box(0, 10, (2,), int64): policy.kind = 'linear' "
                                "gives real numbers, not the env's integers; give your own policy")


def refused(tmp_path, env, said):
    (tmp_path / "sloppy.py").write_text(SLOPPY)
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", f"env.id=sloppy:{env}-v0",
                    "--set", "policy.kind=linear", *SHORT, "--run-dir", str(tmp_path / "run")],
                   extra_env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"es-train: error: {said}"), done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(("env", "policy"), [("Shifted", "linear"), ("Shifted", "mlp"),
                                             ("Grid", "linear")])
def test_the_builtin_policies_act_in_discrete_spaces_that_start_elsewhere_and_in_grids(
        tmp_path, env, policy):
    """Discrete(3, start=-1) got actions 0..2 and a (2, 2) Box a flat (4,): every episode
    failed on the env's assertion. Policies act from 0 and flat; the env gets its own."""
    (tmp_path / "sloppy.py").write_text(SLOPPY)
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", f"env.id=sloppy:{env}-v0",
                    "--set", f"policy.kind={policy}", "--set", "policy.hidden=[4]",
                    "--set", "es.population=8", "--set", "run.generations=3", "--quiet",
                    "--run-dir", str(run_dir)], extra_env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert all(int(row["failed_episodes"]) == 0 for row in read_progress(run_dir))
    played = run_cli(["es-eval", str(run_dir), "--episodes", "2"],
                     extra_env={"PYTHONPATH": str(tmp_path)})
    assert played.returncode == 0 and "failed" not in played.stdout, played.stdout


def test_an_env_class_of_ones_own_module_needs_no_registration(tmp_path):
    """env.id = "module:Class" was "not a registered Gymnasium id", suggesting the id the
    module registered without the module, which es-eval and --resume cannot find."""
    (tmp_path / "sloppy.py").write_text(SLOPPY)
    on_path = {"PYTHONPATH": str(tmp_path)}
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", "env.id=sloppy:Shifted",
                    "--set", "env.max_episode_steps=20", "--set", "policy.kind=linear",
                    *SHORT, "--run-dir", str(run_dir)], extra_env=on_path)
    assert done.returncode == 0, done.stderr
    played = run_cli(["es-eval", str(run_dir), "--episodes", "2"], extra_env=on_path)
    assert played.returncode == 0 and "mean length 20.0" in played.stdout, played.stdout
    one_line(run_cli(["es-train", "configs/pendulum.toml", "--set", "env.id=sloppy:Shiftd-v0",
                      "--run-dir", str(tmp_path / "typo")], extra_env=on_path), "es-train",
             "env.id 'sloppy:Shiftd-v0': not a registered Gymnasium id (did you mean "
             "sloppy:Shifted-v0?)")
    # A class name the module does not have: said so, not "not a registered id".
    one_line(run_cli(["es-train", "configs/pendulum.toml", "--set", "env.id=sloppy:Shifed",
                      "--run-dir", str(tmp_path / "typo")], extra_env=on_path), "es-train",
             "env.id 'sloppy:Shifed': module 'sloppy' has no 'Shifed' (an environment class or "
             "function) and registers no such Gymnasium id (did you mean sloppy:Shifted?)")


NEEDS_ARGUMENTS = '''
import gymnasium as gym
import numpy as np


class Sized(gym.Env):
    def __init__(self, size):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (size,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action):
        return np.zeros(self.observation_space.shape, np.float32), 1.0, True, False, {}
'''


def test_an_env_class_that_needs_arguments_says_to_give_them_in_env_kwargs(tmp_path):
    """Its TypeError ended the run as an internal error on rank 0 (exit 1)."""
    (tmp_path / "sized.py").write_text(NEEDS_ARGUMENTS)
    on_path = {"PYTHONPATH": str(tmp_path)}
    one_line(run_cli(["es-train", "configs/cartpole.toml", "--set", "env.id=sized:Sized",
                      "--run-dir", str(tmp_path / "run")], extra_env=on_path), "es-train",
             "sized:Sized cannot be made without arguments (Sized.__init__() missing 1 "
             "required positional argument: 'size'): give them in env.kwargs (--set "
             "env.kwargs.NAME=VALUE)")
    assert not (tmp_path / "run").exists()
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "env.id=sized:Sized", "--set",
                    "env.kwargs.size=3", "--set", "run.generations=1", "--run-dir",
                    str(tmp_path / "run"), "--quiet"], extra_env=on_path)
    assert done.returncode == 0, done.stderr
