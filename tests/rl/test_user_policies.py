"""Bring your own policy: the protocol (built-ins implement it too), torch modules and NumPy
objects from ``policy.kind = "module:factory"`` and from ``es.train(policy=...)``, any
observation space, MultiDiscrete actions, recurrent state that starts fresh every episode,
es-eval/--video/--resume on a user's run, and a one-line error for every broken factory.
(The invariants under mpiexec with a torch policy: tests/strategies/test_strategy_invariants.py.)"""

import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
import user_policies
from conftest import REPO, load_params, read_progress, run_cli

import es
from es.config import ConfigError, from_dict
from es.parallel.comm import LocalComm
from es.rl.cnn import ConvNetSpec
from es.rl.envs import make_env, policy_spec_for
from es.rl.policies import ObsNorm, PolicyError
from es.rl.policy import Policy, build_user_policy, object_path
from es.rl.rollout import run_episode
from es.rl.torch_policy import TorchPolicy, as_tensor
from es.rl.trainer import Trainer

TESTS = {"PYTHONPATH": str(REPO / "tests")}
SHORT = ["--set", "run.generations=2", "--set", "es.population=8", "--set", "run.eval_every=1",
         "--set", "run.eval_episodes=2", "--set", "es.noise_table_size=100000", "--quiet"]


def one_line_error(done: subprocess.CompletedProcess, *parts: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    for part in parts:
        assert part in done.stderr, done.stderr


def test_the_built_in_policies_are_of_the_protocol():
    env = make_env("CartPole-v1", None, {})
    for spec in (policy_spec_for(env, "linear", (), "tanh"),
                 policy_spec_for(env, "mlp", (8,), "tanh"),
                 ConvNetSpec(3, (4, 36, 36), ((4, 8, 4), (8, 3, 1)), 16, vbn=False)):
        assert isinstance(spec, Policy)
        params = spec.initial_params(np.random.default_rng(0))
        params += np.random.default_rng(1).standard_normal(params.size).astype(np.float32)
        observation = np.random.default_rng(2).random(spec.obs_dim).reshape(
            getattr(spec, "input_shape", (spec.obs_dim,))).astype(np.float32)
        action, state = spec.act(params, observation, None)
        assert state is None
        assert action == spec.bind(params, ObsNorm.identity(spec.obs_dim))(observation)


def test_a_torch_module_maps_the_flat_vector_onto_its_parameters_in_order():
    env = make_env("CartPole-v1", None, {})
    module = user_policies.torch_mlp(env.observation_space, env.action_space, hidden=3)
    policy = TorchPolicy(module, env.observation_space, env.action_space, "t:mlp")
    assert policy.num_params == 4 * 3 + 3 + 3 * 2 + 2
    params = np.arange(policy.num_params, dtype=np.float32) / 100
    observation = np.array([0.1, -0.2, 0.3, 0.05], dtype=np.float32)
    w1, b1 = params[:12].reshape(3, 4), params[12:15]
    w2, b2 = params[15:21].reshape(2, 3), params[21:]
    logits = w2 @ np.tanh(w1 @ observation + b1) + b2
    assert policy.bind(params)(observation) == int(np.argmax(logits))
    assert policy.act(params, observation, None) == (int(np.argmax(logits)), None)
    np.testing.assert_array_equal(policy.initial_params(np.random.default_rng(0)),
                                  torch.nn.utils.parameters_to_vector(module.parameters())
                                  .detach().numpy())


def test_recurrent_state_starts_fresh_every_episode():
    env = make_env("CartPole-v1", None, {})
    user_policies.StepCounter.first_states.clear()
    policy = build_user_policy(user_policies.StepCounter, env, {}, True, "user_policies:Step")
    params = policy.initial_params(np.random.default_rng(0))
    norm = ObsNorm.identity(4)
    for seed in range(3):
        run_episode(env, policy.bind(params, norm), seed)
    assert user_policies.StepCounter.first_states == [None, None, None]
    memory = TorchPolicy(user_policies.Memory(env.observation_space, env.action_space),
                         env.observation_space, env.action_space, "user_policies:Memory")
    assert memory.recurrent
    params = memory.initial_params(np.random.default_rng(0))
    episode = memory.bind(params)
    first = [episode(np.full(4, 0.5, np.float32)) for _ in range(5)]
    again = memory.bind(params)  # a new episode: the same actions from the same inputs
    assert [again(np.full(4, 0.5, np.float32)) for _ in range(5)] == first
    state, stepped = None, []  # the protocol's act carries the state the same way
    for _ in range(5):
        action, state = memory.act(params, np.full(4, 0.5, np.float32), state)
        stepped.append(action)
    assert stepped == first and state is not None


def test_a_torch_policy_trains_from_the_config_and_es_eval_and_video_rebuild_it(tmp_path):
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/cartpole.toml", "--set",
                    "policy.kind=examples.torch_policies:mlp", "--set", "policy.kwargs.hidden=8",
                    "--set", "run.generations=8", "--run-dir", str(run_dir), "--quiet"],
                   ranks=2)
    assert done.returncode == 0, done.stderr
    assert 'kind = "examples.torch_policies:mlp"' in (run_dir / "config.toml").read_text()
    rows = read_progress(run_dir)
    assert float(rows[-1]["eval_return"]) > float(rows[0]["return_mean"])
    assert load_params(run_dir).size == 4 * 8 + 8 + 8 * 8 + 8 + 8 * 2 + 2
    evaluated = run_cli(["es-eval", str(run_dir), "--episodes", "2", "--video",
                         str(tmp_path / "cartpole.gif"), "--video-steps", "5"],
                        extra_env={"XDG_RUNTIME_DIR": ""})  # a headless node's session
    assert evaluated.returncode == 0, evaluated.stderr
    assert "error" not in evaluated.stderr, evaluated.stderr  # SDL's spurious one included
    assert "mean policy (generation 8)" in evaluated.stdout
    assert (tmp_path / "cartpole.gif").stat().st_size > 0
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=9",
                       "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    assert int(read_progress(run_dir)[-1]["generation"]) == 9


def test_normalisation_refuses_a_dict_observation_in_one_line(tmp_path):
    refused = run_cli(["es-train", "configs/pendulum.toml", "--set",
                       "env.id=user_policies:GoalReach-v0", "--set",
                       "policy.kind=user_policies:LinearNumpy", *SHORT, "--run-dir",
                       str(tmp_path / "no")], extra_env=TESTS)
    one_line_error(refused, "policy.obs_norm = true", "Dict", "policy.obs_norm = false")
    builtin = run_cli(["es-train", "configs/pendulum.toml", "--set",
                       "env.id=user_policies:GoalReach-v0", "--set", "policy.kind=linear",
                       *SHORT, "--run-dir", str(tmp_path / "built-in")], extra_env=TESTS)
    one_line_error(builtin, "Dict(", "policy.kind = 'linear' takes Box observations; for "
                   "others give your own policy (policy.kind = 'module:factory'")


def test_action_noise_refuses_discrete_actions_in_one_line(tmp_path):
    """The noise is Gaussian on Box actions: on CartPole it was once silently nothing."""
    refused = run_cli(["es-train", "configs/cartpole.toml", "--set", "policy.action_noise=0.01",
                       *SHORT, "--run-dir", str(tmp_path / "no")])
    one_line_error(refused, "policy.action_noise = 0.01", "Discrete(2)",
                   "set policy.action_noise = 0")
    assert not (tmp_path / "no").exists()


def test_es_train_gives_torch_its_thread_count_back(tmp_path):
    """A torch policy runs on one thread (the parallelism is the ranks'); the caller's count
    stayed at 1 after the call, where the docs promise it back."""
    import es

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        es.train("configs/cartpole.toml", {"run.generations": 1,
                                           "policy.kind": "examples.torch_policies:mlp"},
                 run_dir=tmp_path / "run")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(("env_id", "kind", "ranks"), [
    ("user_policies:GoalReach-v0", "user_policies:LinearNumpy", 2),  # Dict observations
    ("user_policies:GoalReach-v0", "user_policies:DictModule", 2),
    ("user_policies:TupleReach-v0", "user_policies:LinearNumpy", None),  # Tuple observations
    ("user_policies:TupleReach-v0", "user_policies:TupleModule", None),
])
def test_dict_and_tuple_observations_reach_numpy_policies_and_torch_modules(
        tmp_path, env_id, kind, ranks):
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", f"env.id={env_id}", "--set",
                    f"policy.kind={kind}", "--set", "policy.obs_norm=false", *SHORT,
                    "--run-dir", str(run_dir)], ranks=ranks, extra_env=TESTS)
    assert done.returncode == 0, done.stderr
    assert np.isfinite(float(read_progress(run_dir)[-1]["eval_return"]))


def test_a_module_gets_float32_for_real_and_int64_for_integer_observations():
    """As docs/python-api.md says, so an embedding layer can take a Discrete observation."""
    seen = as_tensor({"position": np.array([0.5, 1.0]), "cell": np.int64(3),
                      "ram": np.arange(4, dtype=np.uint8), "flags": (np.array([True]),)})
    assert seen["position"].dtype == torch.float32 and seen["cell"].dtype == torch.int64
    assert seen["ram"].dtype == torch.int64 and seen["flags"][0].dtype == torch.int64
    assert seen["ram"].tolist() == [0, 1, 2, 3]


def test_multidiscrete_actions_from_a_numpy_policy_and_a_torch_module(tmp_path):
    for kind in ("user_policies:LinearNumpy", "examples.torch_policies:mlp"):
        run_dir = tmp_path / kind.rpartition(":")[2]
        done = run_cli(["es-train", "configs/cartpole.toml", "--set",
                        "env.id=user_policies:PickTwo-v0", "--set", f"policy.kind={kind}",
                        *SHORT, "--run-dir", str(run_dir)], extra_env=TESTS)
        assert done.returncode == 0, done.stderr
        assert 0 <= float(read_progress(run_dir)[-1]["eval_return"]) <= 60


@pytest.mark.parametrize(("factory", "words"), [
    ("user_policies:raises", ["the factory raised RuntimeError: no GPU here"]),
    ("user_policies:wrong_kind", ["the factory returned str", "torch.nn.Module"]),
    ("user_policies:wrong_outputs", ["returned 7 outputs", "expected a tensor of 2 outputs"]),
    ("user_policies:wrong_outputs_mlp", ["returned 1 outputs",
                                         "expected a tensor of 2 outputs"]),
    ("user_policies:outside", ["action 5 is outside the action space Discrete(2)",
                               "an integer in [0, 2)"]),
    ("user_policies:nothing", ["module 'user_policies' has no 'nothing'"]),
    # int(nan) raised "cannot convert float NaN to integer" from inside the check.
    ("user_policies:nan_actions", ["action nan is outside the action space Discrete(2)"]),
    ("user_policies:Noisy", ["on the same observation (step ", "the policy must be "
                             "deterministic (no random draws in forward or act)"]),
    # The buffer drifted with every episode a rank played: 1 and 2 ranks trained apart.
    ("user_policies:RunningMean", ["forward changed the module's buffer 'mean' while acting",
                                   "the result on the rank count"]),
    # argmax of NaN is 0: the run trained a constant action without a word.
    ("user_policies:nan_outputs", ["the module returned array([nan, nan]",
                                   "its outputs must be finite numbers"]),
    # "the module returned 1 outputs", where it had returned 2 (unpacked as output, state)
    ("user_policies:HalfRecurrent", ["forward takes a second argument, so the module is read "
                                     "as recurrent", "returned a tensor of shape (2,)"]),
    ("user_policies:nan_start", ["initial_params returned 3 non-finite values (NaN or "
                                 "infinite) of 10; expected finite numbers"]),
    ("no_such_module:mlp", ["cannot import module 'no_such_module'"]),
    # torch's own words, naming no factory
    ("user_policies:lazy", ["the module has lazy parameters", "give their input sizes"]),
    # torch's words alone: "mat1 and mat2 must have the same dtype, but got Long and Float"
    ("user_policies:uncast", ["acting on a first observation raised RuntimeError: ",
                              "reach a torch module as int64 tensors", "x.float()"]),
])
def test_a_broken_factory_is_a_one_line_error_naming_it(tmp_path, factory, words):
    env = ["--set", "env.id=FrozenLake-v1", "--set", "policy.obs_norm=false"] if (
        factory.endswith("uncast")) else []
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", f"policy.kind={factory}",
                    *env, *SHORT, "--run-dir", str(tmp_path / "run")], extra_env=TESTS)
    one_line_error(done, f"policy.kind = {factory!r}", *words)


def test_nan_box_actions_at_the_start_are_named_not_called_random(tmp_path):
    """NaN equals no NaN: the start-up check said the policy acted at random."""
    done = run_cli(["es-train", "configs/pendulum.toml", "--set",
                    "policy.kind=user_policies:nan_actions", *SHORT, "--run-dir",
                    str(tmp_path / "run")], extra_env=TESTS)
    one_line_error(done, "policy.kind = 'user_policies:nan_actions': acted array([nan]) "
                   "on an observation of the env's (step 0 of a probe episode): "
                   "an action must be finite numbers")


def test_an_env_whose_step_fails_on_the_probe_is_named_with_the_action(tmp_path):
    """It read "acting on a first observation raised AssertionError": the policy blamed for
    what the env's step raised on its action."""
    done = run_cli(["es-train", "configs/cartpole.toml", "--set",
                    "env.id=user_policies:PickTwoOfTwo-v0", "--set",
                    "policy.kind=user_policies:LinearNumpy", *SHORT, "--run-dir",
                    str(tmp_path / "run")], extra_env=TESTS)
    # The policy alone was named, for a step that an env.kwargs of the env's may have broken.
    one_line_error(done, "policy.kind = 'user_policies:LinearNumpy' on "
                   "PickTwoOfTwo-v0: the env's step raised AssertionError: no such "
                   "move", "on the policy's action array(", "of a probe episode): the action, "
                   "or the env's code or its env.kwargs")


def test_an_action_outside_the_space_during_training_stops_every_rank_in_one_line(tmp_path):
    done = run_cli(["es-train", "configs/cartpole.toml", "--set",
                    "policy.kind=user_policies:LaterOutside", *SHORT, "--run-dir",
                    str(tmp_path / "run")], ranks=2, extra_env=TESTS, timeout=120)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if "PolicyError" in line]
    assert errors and "Traceback" not in done.stderr, done.stderr
    assert "policy.kind = 'user_policies:LaterOutside': action 5 is outside" in errors[0]


def test_without_torch_a_module_factory_is_a_one_line_error(tmp_path):
    blocked = ("import sys; sys.modules['torch'] = None; from es.cli.train import main; "
               "sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", blocked, "configs/cartpole.toml", "--set",
                           "policy.kind=examples.torch_policies:mlp", *SHORT, "--run-dir",
                           str(tmp_path / "run")], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    one_line_error(done, "cannot import module 'examples.torch_policies'",
                   f'pip install -e "{REPO}[torch]"')


@pytest.mark.filterwarnings("ignore:policy. this run's config.toml")
def test_es_train_takes_a_factory_class_or_instance_from_python(tmp_path):
    runs = {}
    for name, policy in (("factory", user_policies.torch_mlp),
                         ("class", user_policies.LinearNumpy)):
        runs[name] = es.train(REPO / "configs/cartpole.toml", {"run.generations": 3},
                              policy=policy, run_dir=tmp_path / name)
        assert f'kind = "{object_path(policy)}"' in (tmp_path / name / "config.toml").read_text()
        observation, _ = gym.make("CartPole-v1").reset(seed=0)
        assert runs[name].policy(observation) in (0, 1)
    env = gym.make("CartPole-v1")
    instance = user_policies.torch_mlp(env.observation_space, env.action_space)
    run = es.train(REPO / "configs/cartpole.toml", {"run.generations": 3}, policy=instance,
                   run_dir=tmp_path / "instance")
    assert run.saved.params.size == sum(p.numel() for p in instance.parameters())
    with pytest.raises(PolicyError, match="not a factory to call with them"):
        es.train(REPO / "configs/cartpole.toml", {"policy.kwargs": {"hidden": 4}},
                 policy=instance, run_dir=tmp_path / "kwargs")
    # It trained the factory's module and recorded the built-in MLP: neither es-eval nor a
    # resume could rebuild what was trained.
    with pytest.raises(ConfigError, match=r"^policy.kind = 'mlp' and policy=<function "
                       r"torch_mlp at 0x[0-9a-f]+>: give one of them"):
        es.train(REPO / "configs/cartpole.toml", {"policy.kind": "mlp"},
                 policy=user_policies.torch_mlp, run_dir=tmp_path / "both")
    assert not (tmp_path / "both").exists()
    # A number was blamed on a factory: "policy.kind = 'builtins:int': the factory returned int"
    with pytest.raises(ConfigError, match=r"^policy=42 is not a policy \(type int\); policy= "
                       "takes a factory or class"):
        es.train(REPO / "configs/cartpole.toml", policy=42, run_dir=tmp_path / "number")
    assert not (tmp_path / "number").exists()


def test_a_policy_kind_naming_no_callable_is_not_blamed_on_a_factory(tmp_path):
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "policy.kind=math:pi",
                    *SHORT, "--run-dir", str(tmp_path / "run")])
    one_line_error(done, "policy.kind = 'math:pi' is 3.141592653589793, not a policy (type "
                   "float); name a torch.nn.Module or an object with num_params")


@pytest.mark.filterwarnings("ignore:policy. this run's config.toml")
def test_a_notebook_lambda_trains_and_an_instance_es_eval_cannot_rebuild_says_why(tmp_path):
    """A closure's path (``<locals>.<lambda>``) is a valid policy.kind, trained in-process;
    a ``Sequential`` instance's run names its class, which es-eval cannot call with the
    spaces: the error says to give es.train a factory."""
    def make():
        return lambda observation_space, action_space: torch.nn.Linear(4, 2)

    run = es.train(REPO / "configs/cartpole.toml", {"run.generations": 2}, policy=make(),
                   run_dir=tmp_path / "lambda")
    assert run.generations == 2 and "<locals>.<lambda>" in (
        tmp_path / "lambda" / "config.toml").read_text()
    es.train(REPO / "configs/cartpole.toml", {"run.generations": 2},
             policy=torch.nn.Sequential(torch.nn.Linear(4, 2)), run_dir=tmp_path / "sequential")
    done = run_cli(["es-eval", str(tmp_path / "sequential"), "--episodes", "1"])
    one_line_error(done, "policy.kind = 'torch.nn.modules.container:Sequential'",
                   "a run trained from an instance names its class",
                   "give es.train a factory")


@pytest.mark.filterwarnings("ignore:policy. this run's config.toml")
def test_a_rebuilt_module_of_another_size_is_refused_not_played(tmp_path):
    """An instance trained with hidden=16 was rebuilt by its class with hidden=8, and es-eval
    played the first 58 of the 114 saved parameters: a wrong score, exit code 0."""
    env = gym.make("CartPole-v1")
    es.train(REPO / "configs/cartpole.toml", {"run.generations": 2},
             policy=user_policies.SizedMlp(env.observation_space, env.action_space, hidden=16),
             run_dir=tmp_path / "run")
    done = run_cli(["es-eval", str(tmp_path / "run"), "--episodes", "1"],
                   extra_env={"PYTHONPATH": str(REPO / "tests")})
    one_line_error(done, "policy.kind = 'user_policies:SizedMlp': the saved policy has 114 "
                   "parameters, the rebuilt one 58: the factory now builds another network")


@pytest.mark.filterwarnings("ignore:policy.hidden")
def test_an_instance_its_class_rebuilds_otherwise_is_a_warning_at_the_start(tmp_path):
    """es-eval and --resume rebuilt an instance trained with ``gain=3`` as its class's
    default (``gain=1``: the same parameter count, other actions) without a word; a resumed
    run then trained another policy. Now es.train says so before it trains, where the user
    can still give a factory; an instance its class rebuilds alike says nothing."""
    pendulum, cartpole = gym.make("Pendulum-v1"), gym.make("CartPole-v1")
    short = {"run.generations": 1, "es.population": 4, "env.max_episode_steps": 20}
    for name, config, instance, problem in (
            ("gained", "pendulum", user_policies.Gained(pendulum.observation_space,
                                                        pendulum.action_space, gain=3.0),
             r"which acts array\(\[.*\]\) where the instance acted array"),
            ("sized", "cartpole", user_policies.SizedMlp(cartpole.observation_space,
                                                         cartpole.action_space, hidden=16),
             "which builds 58 parameters, not the instance's 114"),
            ("sequential", "cartpole", torch.nn.Sequential(torch.nn.Linear(4, 2)),
             "which raises TypeError")):
        with pytest.warns(UserWarning, match=rf"^policy: this run's config.toml names the "
                          rf"instance's class, .*{problem}.* give es.train a factory"):
            es.train(REPO / f"configs/{config}.toml", short, policy=instance,
                     run_dir=tmp_path / name)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="policy: ")
        es.train(REPO / "configs/pendulum.toml", short, run_dir=tmp_path / "default",
                 policy=user_policies.Gained(pendulum.observation_space, pendulum.action_space))


@pytest.mark.filterwarnings("error:The given NumPy array is not writable")
@pytest.mark.filterwarnings("ignore:es.lr, es.l2")
def test_a_torch_module_takes_cma_es_read_only_candidates_without_torch_warning(tmp_path):
    """CMA-ES's candidates are read-only arrays: loading one into the module's batched form
    printed torch's UserWarning about non-writable arrays in every run."""
    run = es.train(REPO / "configs/cartpole.toml",
                   {"es.strategy": "cma", "es.mirrored": False, "es.population": 6,
                    "run.generations": 2}, policy=user_policies.torch_mlp, run_dir=tmp_path / "r")
    assert run.generations == 2


def test_a_factory_builds_the_same_module_on_every_rank_and_run():
    config = from_dict({"env": {"id": "CartPole-v1"},
                        "policy": {"kind": "examples.torch_policies:mlp"},
                        "es": {"noise_table_size": 100_000}})
    first = Trainer(config, LocalComm(), None)
    torch.manual_seed(12345)  # the global generator is not what the factory's modules use
    second = Trainer(config, LocalComm(), None)
    np.testing.assert_array_equal(first.strategy.mean, second.strategy.mean)
    other = Trainer(from_dict({**config.to_dict(), "run": {"seed": 1}}), LocalComm(), None)
    assert not np.array_equal(first.strategy.mean, other.strategy.mean)


# ---- lockstep: several members, one forward per step --------------------------------------

def test_a_members_outputs_do_not_depend_on_the_members_beside_it():
    env = make_env("HalfCheetah-v5", None, {})
    module = examples_mlp(env, hidden=16)
    policy = TorchPolicy(module, env.observation_space, env.action_space, "examples:mlp")
    rng = np.random.default_rng(3)
    params = rng.standard_normal((12, policy.num_params)).astype(np.float32)
    inputs = rng.standard_normal((12, 17))
    alone = []
    for member in range(12):
        one = policy.batched(1)
        one.load(0, params[member])
        alone.append(one.outputs(inputs[member:member + 1])[0])
    for slots in (2, 5, 12):
        lockstep = policy.batched(slots)
        for companions in (rng.permutation(12)[:slots] for _ in range(4)):
            for slot, member in enumerate(companions):
                lockstep.load(slot, params[member])
            together = lockstep.outputs(inputs[companions])
            for slot, member in enumerate(companions):
                assert np.array_equal(together[slot], alone[member]), (slots, companions)
    # ... and equal the module's own forward up to float32 rounding
    policy._load(params[0], None)
    with torch.inference_mode():
        own = policy.module(torch.from_numpy(inputs[0].astype(np.float32))).numpy()
    np.testing.assert_allclose(alone[0], own, rtol=1e-5, atol=1e-6)


def examples_mlp(env, hidden):
    from examples.torch_policies import mlp

    return mlp(env.observation_space, env.action_space, hidden)


def test_only_an_mlp_of_linear_layers_and_elementwise_activations_runs_in_lockstep():
    env = make_env("CartPole-v1", None, {})
    spaces = (env.observation_space, env.action_space)
    assert TorchPolicy(examples_mlp(env, 8), *spaces, "m").batched(4) is not None
    memory = user_policies.Memory(*spaces)
    assert TorchPolicy(memory, *spaces, "r").batched(4) is None  # recurrent
    normed = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8),
                                 torch.nn.Linear(8, 2))
    assert TorchPolicy(normed, *spaces, "n").batched(4) is None  # LayerNorm mixes a row


def _unbatchable_mlps():
    """MLPs whose layers are not what the lockstep computes (it ran plain Linear layers in
    their place, quietly, or failed in torch's words)."""
    shared = torch.nn.Linear(4, 4)  # tied: the same layer twice, its parameters listed once
    yield "tied", torch.nn.Sequential(shared, torch.nn.Tanh(), shared, torch.nn.Linear(4, 2))
    yield "weight_norm", torch.nn.Sequential(
        torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 8)), torch.nn.Tanh(),
        torch.nn.Linear(8, 2))

    class Masked(torch.nn.Linear):
        def forward(self, x):
            return torch.nn.functional.linear(x, self.weight * 0, self.bias)

    yield "subclass", torch.nn.Sequential(Masked(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))

    class Doubled(torch.nn.Sequential):
        def forward(self, x):
            return 2 * super().forward(x)

    yield "sequential subclass", Doubled(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    hooked = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    hooked[1].register_forward_hook(lambda layer, inputs, output: output + 1)
    yield "hooked", hooked


@pytest.mark.parametrize("name", [name for name, _ in _unbatchable_mlps()])
def test_an_mlp_the_lockstep_would_compute_otherwise_runs_as_the_module(name):
    """Each such module acts as its own forward does: one member at a time."""
    env = make_env("CartPole-v1", None, {})
    module = dict(_unbatchable_mlps())[name]
    policy = TorchPolicy(module, env.observation_space, env.action_space, name)
    assert policy.batched(4) is None and policy.single is None
    params = np.random.default_rng(0).standard_normal(policy.num_params).astype(np.float32)
    observation = np.array([0.3, -0.2, 0.1, 0.4], dtype=np.float32)
    policy._load(params, None)
    with torch.inference_mode():
        expected = int(np.argmax(module(torch.from_numpy(observation)).numpy()))
    assert policy.bind(params)(observation) == expected


@pytest.mark.parametrize(("env_id", "extra"), [
    ("Pendulum-v1", ["--set", "policy.action_noise=0.2", "--set", "es.population=10"]),
    ("fault_envs:Flaky-v0", ["--set", "es.population=19", "--set", "es.mirrored=false",
                             "--set", "run.max_failed_fraction=0.5"]),
])
def test_lockstep_gives_the_parameters_of_one_member_at_a_time(tmp_path, env_id, extra):
    """Action noise, observation statistics, episode caps and failing episodes included;
    mirrored pairs and unmirrored members (an odd population); under mpiexec with the
    dynamic schedule too."""
    params = {}
    for lockstep, ranks, schedule in ((1, None, "static"), (16, None, "static"),
                                      (3, 2, "dynamic")):
        run_dir = tmp_path / f"{lockstep}-{schedule}"
        done = run_cli(["es-train", "configs/pendulum.toml", "--set", f"env.id={env_id}",
                        "--set", "policy.kind=examples.torch_policies:mlp", "--set",
                        "policy.kwargs.hidden=8", "--set", f"run.lockstep={lockstep}",
                        "--set", f"run.schedule={schedule}", "--set", "run.generations=3",
                        "--set", "es.train_steps=40", "--set", "env.max_episode_steps=60",
                        *extra, "--run-dir", str(run_dir), "--quiet"], ranks=ranks,
                       extra_env={"PYTHONPATH": str(REPO / "tests")})
        assert done.returncode == 0, done.stderr
        params[lockstep] = load_params(run_dir)
    assert np.isfinite(params[1]).all()
    assert np.array_equal(params[16], params[1]) and np.array_equal(params[3], params[1])


def test_a_resume_whose_policy_code_changed_says_so(tmp_path):
    """The policy's module file edited between the start and a resume (or a notebook's class
    defined again under its name) trained on as another run without a word: only the name
    was compared. The checkpoint keeps a digest of the start-up probe's actions."""
    module = tmp_path / "edited_policy.py"
    source = ("import torch\n"
              "class Net(torch.nn.Module):\n"
              "    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.head = torch.nn.Linear(4, 2)\n"
              "    def forward(self, x):\n"
              "        return {sign}self.head(x)\n"
              "def net(observation_space, action_space):\n"
              "    return Net()\n")
    module.write_text(source.format(sign=""))
    run_dir = tmp_path / "run"
    paths = {"PYTHONPATH": str(tmp_path)}
    started = run_cli(["es-train", "configs/cartpole.toml", "--set",
                       "policy.kind=edited_policy:net", *SHORT, "--run-dir", str(run_dir)],
                      extra_env=paths)
    assert started.returncode == 0, started.stderr
    again = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=3",
                     "--quiet"], extra_env=paths)
    assert again.returncode == 0 and "acts otherwise" not in again.stderr, again.stderr
    module.write_text(source.format(sign="-"))  # the other action, always
    edited = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=4",
                      "--quiet"], extra_env=paths)
    assert edited.returncode == 0, edited.stderr
    assert ("warning: policy.kind = 'edited_policy:net' acts otherwise than when this run was "
            "checkpointed (the start-up probe's actions at generation 0's parameters differ): "
            "its code, or the env's, changed since") in edited.stderr, edited.stderr
