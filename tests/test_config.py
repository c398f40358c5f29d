"""Config loading: defaults, overrides, and a one-line ConfigError for every bad input."""

import dataclasses
import typing
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from es.config import (
    SECTIONS,
    SHIPPED_CONFIGS,
    Config,
    ConfigError,
    apply_overrides,
    from_dict,
    load_config,
    locate_config,
    read_toml,
    shipped_configs,
)

CONFIGS = sorted((REPO / "configs").glob("*.toml"))


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_load(path):
    config = load_config(path)
    assert config.run.name == path.stem
    assert config.es.population >= 2


def test_defaults_and_overrides(tmp_path):
    config = load_config(
        write(tmp_path, '[es]\nsigma = 0.1\n[env]\nid = "Pendulum-v1"\n'),
        ["es.sigma=0.05", "run.seed=3", "env.id=CartPole-v1", "policy.hidden=[8, 8]",
         "env.kwargs.sutton_barto_reward=true", "es.mirrored=false", "es.population=5"],
    )
    assert config.es.sigma == 0.05 and config.run.seed == 3
    assert config.env.id == "CartPole-v1" and config.policy.hidden == (8, 8)
    assert config.env.kwargs == {"sutton_barto_reward": True}
    assert config.es.population == 5 and not config.es.mirrored
    assert config.run.name == "c"


def test_ints_are_accepted_for_floats(tmp_path):
    assert load_config(write(tmp_path, "[es]\nsigma = 1\n")).es.sigma == 1.0


def test_config_round_trips_through_its_dict():
    config = from_dict({"es": {"sigma": 0.3}, "policy": {"hidden": [4]}})
    assert from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        ("[es\n", [], "invalid TOML"),
        ("[bogus]\n", [], "unknown section [bogus]"),
        # Above every header: it was "unknown section [seed]".
        ("seed = 0\n[env]\n", [], "seed = 0: a key outside any section (a key of [run]: write "
                                 "it below that header); the sections are run, env, "),
        ("bogus = 1\n", [], "bogus = 1: a key outside any section; the sections are run, "),
        # gymnasium.make's keyword: env.max_episode_steps won unsaid, an ALE game's raised.
        ("", ["env.kwargs.max_episode_steps=10"], "env.kwargs.max_episode_steps = 10: es sets "
         "it from env.max_episode_steps; set that instead"),
        ("", ["env.id=ALE/Pong-v5", "env.kwargs.frameskip=2"], "env.kwargs.frameskip = 2: es "
         "sets it from atari.frame_skip; set that instead"),  # "set by make_atari_env"
        ('eval_episodes = 5\n[tasks.swimmer]\nbudget_s = 60\n', [],
         "[tasks]: this is an es-bench suite file, not a config; run it with es-bench suite"),
        ("[es]\nsigmaa = 1.0\n", [], "unknown key es.sigmaa"),
        ('[es]\nsigma = "big"\n', [], "es.sigma = 'big': must be a number"),
        ("[es]\nsigma = 0\n", [], "es.sigma = 0.0: must be a finite number > 0"),
        ("[es]\nsigma = -1.0\n", [], "es.sigma"),
        ("[es]\npopulation = 1\n", [], "es.population = 1: must be >= 2"),
        ("[es]\npopulation = 7\n", [], "must be even when es.mirrored = true"),
        ("[es]\npopulation = 8.0\n", [], "es.population = 8.0: must be an integer"),
        ("[es]\nmirrored = 1\n", [], "es.mirrored = 1: must be true or false"),
        ('[es]\noptimizer = "rmsprop"\n', [], "allowed are 'adam', 'sgd'"),
        ("[policy]\nhidden = [0]\n", [], "policy.hidden"),
        ("[run]\ngenerations = 0\n", [], "run.generations = 0: must be >= 1"),
        ("es = 3\n", [], "[es] must be a table"),
        ("", ["es.sigma"], "expected section.key=value"),
        ("", ["es.lr=-2"], "es.lr = -2.0"),
        ("", ["nosuch.key=1"], "unknown section [nosuch]"),
    ],
)
def test_bad_input_is_a_one_line_config_error(tmp_path, text, overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), overrides)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


FLOAT_KEYS = [f"{section}.{f.name}" for section, cls in SECTIONS.items()
              for f in dataclasses.fields(cls) if typing.get_type_hints(cls)[f.name] is float]


@pytest.mark.parametrize("key", FLOAT_KEYS)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1" + "0" * 400])
def test_every_float_key_must_be_finite(tmp_path, key, value):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, ""), [f"{key}={value}"])
    assert str(info.value).startswith(f"{key} = ") and "must be a finite number" in str(info.value)


@pytest.mark.parametrize("override, key", [
    ("env.kwargs.g=nan", "env.kwargs.g"), ("policy.kwargs.scale=inf", "policy.kwargs.scale"),
    ("env.kwargs.wind={power=-inf}", "env.kwargs.wind.power"),
    ("policy.kwargs.sizes=[1.0, nan]", "policy.kwargs.sizes"),
])
def test_numbers_inside_the_kwargs_tables_must_be_finite_too(tmp_path, override, key):
    """A NaN gravity started a run whose every episode failed (exit 1)."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, ""), [override])
    assert str(info.value).startswith(f"{key} = ") and str(info.value).endswith(
        ": must be a finite number")


def test_the_keys_of_the_issue_are_among_the_float_keys():
    assert {"es.l2", "es.sigma_min", "es.lr_min", "run.max_seconds", "policy.action_noise",
            "pg.initial_log_std"} <= set(FLOAT_KEYS)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("run.seed=9223372036854775808", "run.seed = 9223372036854775808: must be an integer "
         "of at most 64 bits"),
        ("es.population=-9223372036854775809", "es.population = -9223372036854775809"),
        ("run.name=a\udcffb", "run.name = 'a\\udcffb': must be valid Unicode text"),
        (r'run.runs_dir="a\u0000b"', "run.runs_dir = 'a\\x00b': must not contain NUL"),
        ("env.kwargs.x=[\"\udcff\"]", "env.kwargs = "),
        ("es.a\nb=1", "unknown key es.a\\nb"),
    ],
)
def test_integers_beyond_64_bits_and_unwritable_text_are_config_errors(tmp_path, override,
                                                                         message):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, ""), [override])
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_unreadable_config_paths_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match="Not a directory"):
        load_config(write(tmp_path, "") / "x.toml")


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


toml_scalars = st.one_of(
    st.integers(-10, 10**9), st.floats(allow_nan=True), st.booleans(), st.text(max_size=5),
    st.lists(st.integers(-3, 300), max_size=3),
)
sections = st.sampled_from(["run", "env", "policy", "es", "other"])
keys = st.sampled_from(["seed", "sigma", "population", "kind", "hidden", "id", "lr", "mirrored",
                        "noise", "generations", "kwargs", "zzz"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(sections, st.dictionaries(keys, toml_scalars, max_size=4), max_size=4))
def test_any_dict_gives_a_config_or_a_one_line_error(data):
    try:
        assert isinstance(from_dict(data), Config)
    except ConfigError as error:
        assert "\n" not in str(error)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_override_text_gives_a_config_or_a_one_line_error(text):
    try:
        from_dict(apply_overrides({}, [text]))
    except ConfigError as error:
        assert "\n" not in str(error)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_toml_text_gives_a_config_or_a_one_line_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "c.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        assert isinstance(load_config(path), Config)
    except ConfigError as error:
        assert "\n" not in str(error)


def test_strategy_needs_are_checked_across_sections():
    from es.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match=r"ars.top = 9: must be at most the 4 directions"):
        from_dict({"es": {"strategy": "ars", "population": 8}, "ars": {"top": 9}})
    with pytest.raises(ConfigError, match=r"ars.contrast_top = 5: must be at most the 4 "):
        from_dict({"es": {"strategy": "ars", "population": 8}, "ars": {"contrast_top": 5}})
    with pytest.raises(ConfigError, match=r"es.mirrored = false: es.strategy = 'pgpe'"):
        from_dict({"es": {"strategy": "pgpe", "mirrored": False, "population": 5}})
    assert from_dict({"es": {"strategy": "ars", "population": 8}, "ars": {"top": 4}}).ars.top == 4


def test_the_cnn_on_an_ale_game_s_ram_is_refused_before_its_obs_norm():
    from es.config import ConfigError, from_dict

    ram = {"env": {"id": "ALE/Breakout-v5"}, "atari": {"obs": "ram"}, "policy": {"kind": "cnn"}}
    with pytest.raises(ConfigError, match=r"policy.kind = 'cnn': needs stacked frames, and "
                                          r"atari.obs = 'ram'.*set atari.obs = 'pixels'"):
        from_dict(ram)
    with pytest.raises(ConfigError, match=r"policy.obs_norm = true: not used with policy.kind"):
        from_dict({**ram, "atari": {"obs": "pixels"}})


def test_what_silently_replaced_or_degraded_a_strategy_s_settings_is_refused():
    """A floor above its start replaced it from the first generation; sepcma.mu named no key
    and another population; TPA on 2 members is a line search; a cap of 1 only shrinks."""
    from es.config import ConfigError, from_dict

    for data, message in [
        ({"es": {"sigma": 0.1, "sigma_min": 5}}, "es.sigma_min = 5.0: must be at most "
                                                  "es.sigma = 0.1, the value it is the floor of"),
        ({"es": {"strategy": "ars", "population": 8, "lr_min": 5}, "ars": {"lr": 0.02}},
         "es.lr_min = 5.0: must be at most ars.lr = 0.02"),
        ({"es": {"strategy": "sepcma", "population": 16}, "sepcma": {"mu": 9}},
         "sepcma.mu = 9: must be at most 8, the winners of es.population = 16's mirrored "
         "pairs (0: es.population // 2)"),
        ({"es": {"strategy": "sepcma", "population": 2}, "sepcma": {"step_size": "tpa"}},
         "sepcma.step_size = 'tpa': needs es.population >= 4"),
        ({"es": {"episode_cap": 1}}, "es.episode_cap = 1.0: must be 0 (off) or > 1"),
    ]:
        with pytest.raises(ConfigError) as refused:
            from_dict(data)
        assert str(refused.value).startswith(message), refused.value
    assert from_dict({"es": {"strategy": "sepcma", "population": 16, "mirrored": False},
                      "sepcma": {"mu": 16}}).sepcma.mu == 16


def test_decays_only_for_strategies_with_a_fixed_step_size():
    from es.config import ConfigError, from_dict

    assert from_dict({"es": {"strategy": "ars", "lr_decay": 0.99}}).es.lr_decay == 0.99
    with pytest.raises(ConfigError, match=r"es.sigma_decay = 0.99: es.strategy = 'snes' sets "
                                          r"its own step sizes; the decays apply to 'openai' "
                                          r"and 'ars'"):
        from_dict({"es": {"strategy": "snes", "sigma_decay": 0.99}})
    with pytest.raises(ConfigError, match=r"es.lr_min = 0.1: es.strategy = 'cma'"):
        from_dict({"es": {"strategy": "cma", "lr_min": 0.1}})


@pytest.mark.parametrize("path, overrides, said", [
    ("configs/cartpole.toml", ["atari.obs=ram"],
     ["atari.obs: CartPole-v1 is not an ALE game; ignored"]),
    ("configs/halfcheetah_ars.toml", ["es.strategy=openai"],
     ["ars.top, ars.contrast_from, ars.contrast_lr: es.strategy = 'openai' does not read "
      "[ars]; ignored"]),
    ("configs/cartpole.toml", ["pg.lr=0.1"], ["pg.lr: [pg] is es-baseline's; es-train "
                                              "ignores it"]),
    ("configs/cartpole.toml", ["policy.kind=user_policies:torch_mlp", "policy.hidden=[8]"],
     ["policy.hidden: a setting of the built-in MLP, but policy.kind = "
      "'user_policies:torch_mlp'; a factory takes its own settings in policy.kwargs; "
      "ignored"]),
    ("configs/cartpole.toml", ["policy.torso=small"],
     ["policy.torso: a setting of the built-in CNN, but policy.kind = 'linear'; ignored"]),
    ("configs/pong.toml", ["policy.clip_actions=false"],
     ["policy.clip_actions: a setting of the built-in linear and MLP policies, but "
      "policy.kind = 'cnn'; ignored"]),
    ("configs/pong.toml", [], []),
    ("configs/halfcheetah_ars.toml", [], []),
    ("configs/cartpole.toml", ["es.strategy=pgpe", "es.lr=5", "es.optimizer=sgd"],
     ["es.lr, es.optimizer, es.l2: OpenAI-ES's, and es.strategy = 'pgpe' does not read them (its "
      "own step sizes: [pgpe]); ignored"]),
    # Switched off within their own section: the same bits as without them, without a word.
    ("configs/cartpole.toml", ["es.momentum=0.5"],
     ["es.momentum: SGD's, and es.optimizer = 'adam'; ignored"]),
    ("configs/cartpole.toml", ["es.noise=seed", "es.noise_table_size=5000000"],
     ["es.noise_table_size: no table is built: es.noise = 'seed' regenerates each "
      "perturbation from its seed; ignored"]),
    ("configs/swimmer_cma.toml", ["es.noise_table_size=5000000"],
     ["es.noise_table_size: no table is built: pycma draws its own samples; ignored"]),
    ("configs/cartpole.toml", ["es.train_steps_until=1000"],
     ["es.train_steps_until: the end of es.train_steps's cut, and es.train_steps = 0 (whole "
      "episodes); ignored"]),
    ("configs/halfcheetah_ars.toml", ["ars.contrast_from=0"],
     ["ars.contrast_lr: the contrast phase's, and ars.contrast_from = 0 (no phase); ignored"]),
    ("configs/hopper_pgpe.toml", ["pgpe.optimizer=adam", "pgpe.max_speed=0.01"],
     ["pgpe.max_speed: ClipUp's, and pgpe.optimizer = 'adam'; ignored"]),
    ("configs/cartpole.toml", ["run.best_episodes=0", "run.best_by=worst", "run.best_from=3"],
     ["run.best_by, run.best_from: no policy is kept (run.best_episodes = 0); ignored"]),
    ("configs/breakout_ram.toml", ["atari.frame_stack=2"],
     ["atari.frame_stack: stacks pixel frames, and atari.obs = 'ram'; ignored"]),
    ("configs/pong.toml", ["policy.obs_clip=3"],
     ["policy.obs_clip: the CNN clips nothing (it scales raw pixels by 1/255); ignored"]),
    ("configs/pong.toml", ["policy.vbn=false", "policy.vbn_batch=64"],
     ["policy.vbn_batch: VBN's, and policy.vbn = false; ignored"]),
    ("configs/cartpole.toml", ["policy.kind=user_policies:torch_mlp", "policy.obs_norm=false",
                               "policy.obs_clip=0.1"],
     ["policy.obs_clip: clips normalised observations, and policy.obs_norm = false (only the "
      "built-in policies clip raw ones); ignored"]),
])
def test_settings_a_run_will_not_read_are_named(path, overrides, said):
    """atari.obs on CartPole, [ars] under OpenAI-ES, es-baseline's sections and the MLP's
    sizes under a user's module trained as if they were not there, without a word."""
    from conftest import REPO

    from es.config import ignored_settings

    assert ignored_settings(load_config(REPO / path, overrides)) == said


def test_no_shipped_es_train_config_sets_what_it_does_not_read():
    from conftest import REPO

    from es.config import ignored_settings

    for path in [*REPO.glob("configs/*.toml"), *REPO.glob("configs/paper/*.toml")]:
        assert ignored_settings(load_config(path)) == [], path



def test_a_cnn_on_a_vector_env_is_refused_for_that_before_its_obs_norm():
    """Told first to set policy.obs_norm = false, a user then heard that the CNN needs images;
    on an env of images obs_norm is still refused, where the policy is built."""
    import gymnasium as gym
    import numpy as np

    from es.config import CNN_OBS_NORM, ConfigError, from_dict
    from es.rl.policy import make_policy

    class Frames(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        action_space = gym.spaces.Discrete(3)

    cnn = from_dict({"env": {"id": "CartPole-v1"}, "policy": {"kind": "cnn"}})
    with pytest.raises(ValueError, match=r"policy.kind = 'cnn' needs stacked image"):
        make_policy(cnn, gym.make("CartPole-v1"))
    with pytest.raises(ConfigError) as refused:
        make_policy(cnn, Frames())
    assert str(refused.value) == CNN_OBS_NORM
    unnormalised = from_dict({"env": {"id": "CartPole-v1"},
                              "policy": {"kind": "cnn", "obs_norm": False}})
    assert make_policy(unnormalised, Frames()).num_params > 0


def test_cma_es_builds_no_noise_table_it_would_not_read(tmp_path):
    """pycma draws its own samples, yet es-train filled the shared table for it: twice the
    memory and half a second more at the start of a run of 18 parameters."""
    from conftest import run_cli

    from es.core.noise import SeedNoise
    from es.parallel.comm import LocalComm
    from es.rl.trainer import make_noise

    cma = from_dict({"es": {"strategy": "cma", "mirrored": False}})
    assert not cma.es.uses_noise_table and isinstance(make_noise(cma, LocalComm()), SeedNoise)
    assert from_dict({}).es.uses_noise_table
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "es.strategy=cma", "--set",
                    "es.mirrored=false", "--set", "run.generations=1", "--run-dir",
                    str(tmp_path / "run")])
    assert done.returncode == 0, done.stderr
    assert "es-train: 1 node (" in done.stderr
    assert "), no noise table (es.strategy = 'cma' draws its own samples)\n" in done.stderr


def test_a_noise_table_smaller_than_the_policy_is_refused_where_one_is_built(tmp_path):
    """One check for the trainer and for es-compare before its first run."""
    from conftest import run_cli

    table = from_dict({"es": {"noise_table_size": 1000}}).es
    table.check_table_holds(1000)
    with pytest.raises(ValueError, match=r"^es.noise_table_size = 1000: must be >= the "
                                         r"policy's 1001 parameters$"):
        table.check_table_holds(1001)
    from_dict({"es": {"strategy": "cma", "mirrored": False,
                      "noise_table_size": 1000}}).es.check_table_holds(10**6)  # builds none
    done = run_cli(["es-train", "configs/cartpole.toml", "--set", "policy.kind=mlp", "--set",
                    "policy.hidden=[64, 64]", "--set", "es.noise_table_size=1000",
                    "--run-dir", str(tmp_path / "run")])
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("es-train: error: es.noise_table_size = 1000: must be >= "
                                   "the policy's 4610 parameters"), done.stderr
    assert not (tmp_path / "run").exists()


def test_a_shipped_config_is_found_by_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here: a pip-installed es, run from a project
    shipped = SHIPPED_CONFIGS / "cartpole.toml"
    for name in ("cartpole", "cartpole.toml", "configs/cartpole.toml"):
        assert locate_config(name) == shipped
    assert locate_config("configs/suites/mujoco.toml") == SHIPPED_CONFIGS / "suites/mujoco.toml"
    assert locate_config("baselines/cartpole_dqn") == (
        SHIPPED_CONFIGS / "baselines/cartpole_dqn.toml")
    assert load_config(locate_config("cartpole")).run.name == "cartpole"
    # What is neither comes back as given, for the loader's "not found", which names the way.
    for name in ("cartpol", "configs", "configs/nope.toml", str(tmp_path / "cartpole.toml")):
        assert locate_config(name) == Path(name)
    with pytest.raises(ConfigError, match="'cartpol': not found; did you mean cartpole\\? "
                       "\\(es-train --list-configs"):
        load_config(locate_config("cartpol"))
    with pytest.raises(ConfigError, match="'configs/halfchetah.toml': not found; did you mean "
                       "halfcheetah\\?"):
        load_config(locate_config("configs/halfchetah.toml"))
    with pytest.raises(ConfigError, match="'mine/run.toml': not found; from any folder a shipped "
                       "config's name works too.*es-train --list-configs"):
        load_config(locate_config("mine/run.toml"))
    with pytest.raises(ConfigError, match="not found$"):  # a path of one's own: no guess
        load_config(locate_config(tmp_path / "cartpol.toml"))
    with pytest.raises(ConfigError, match="'runs/cartpole/config.toml': not found$"):
        load_config("runs/cartpole/config.toml")  # a run folder's own file, not a name
    with pytest.raises(ConfigError, match="suite file 'suites/mujoc': not found; did you mean "
                       "suites/mujoco\\?"):
        read_toml(locate_config("suites/mujoc"), "suite file")
    with pytest.raises(ConfigError, match="suite file 'mine.toml': not found; from any folder "
                       "a shipped suite's name works too, e.g. suites/mujoco"):
        read_toml(locate_config("mine.toml"), "suite file")


def test_a_copy_in_the_working_folder_wins_over_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs/cartpole.toml").write_text("[env]\nid = 'Pendulum-v1'\n")
    for name in ("configs/cartpole.toml", "cartpole", "cartpole.toml", "configs/cartpole"):
        assert locate_config(name) == Path("configs/cartpole.toml"), name
    assert load_config(locate_config("cartpole")).env.id == "Pendulum-v1"
    (tmp_path / "cartpole.toml").write_text("[env]\nid = 'Acrobot-v1'\n")  # copied here
    assert locate_config("cartpole") == locate_config("cartpole.toml") == Path("cartpole.toml")
    assert locate_config("configs/cartpole.toml") == Path("configs/cartpole.toml")
    # A run folder named after the config (--resume-or-start hopper_ars) is not the config.
    (tmp_path / "hopper_ars").mkdir()
    assert locate_config("hopper_ars") == SHIPPED_CONFIGS / "hopper_ars.toml"
    # Only .toml is a config's suffix; nothing outside the shipped folder is reached.
    for name in ("cartpole.yaml", "hopper_ars.tmol", "../configs/cartpole.toml", "configs/..",
                 "x" * 300):
        assert locate_config(name) == Path(name), name


def test_the_shipped_configs_are_the_checkouts():
    """es/configs is the checkout's configs/ (a link there; copies in an sdist), so the wheel
    carries what the README and the docs run; every file is listed, by the name es-train
    takes."""
    on_disk = sorted(path.relative_to(REPO / "configs").with_suffix("").as_posix()
                     for path in (REPO / "configs").rglob("*.toml"))
    assert sorted(shipped_configs()) == on_disk and "cartpole" in on_disk
    for name in on_disk:
        assert ((SHIPPED_CONFIGS / f"{name}.toml").read_bytes()
                == (REPO / "configs" / f"{name}.toml").read_bytes()), name
    assert shipped_configs()[0] == "ant" and shipped_configs()[-1].startswith("suites/")
