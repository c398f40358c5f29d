"""TOML config -> frozen, validated dataclasses; ``--set section.key=value`` overrides.

Every mistake a user can make in a config (bad TOML, an unknown section or key, a wrong type,
a value out of range) raises ``ConfigError`` with a one-line message that names the key, the
bad value and what is allowed. The CLI prints it and exits with code 2.

Rules that hold for every key, whatever its section: a float is finite (NaN and infinities
mean nothing for any key: "no limit" is spelt 0 where a key has one), an integer fits in 64
bits (as TOML's do), and text is valid Unicode without NUL characters (it ends up in file
names and in the run's ``config.toml``).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from es.core.messages import one_line
from es.strategies.sep_cma import STEP_SIZE_RULES, TPA_MIN_POPULATION


class ConfigError(ValueError):
    """A user error in the configuration: printed as one line, exit code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))  # it may quote a key or value with line breaks


def _doc(text: str, default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    return field(default=default, metadata={"doc": text}, **kwargs)


@dataclass(frozen=True)
class RunConfig:
    name: str = _doc("label in the run folder's name (default: the config file's stem)", "")
    seed: int = _doc("run seed: every random draw is a pure function of it", 0)
    generations: int = _doc("stop after this many generations", 100)
    max_timesteps: int = _doc("stop once training used this many env steps (0: no limit)", 0)
    eval_every: int = _doc(
        "evaluate the mean policy (no noise) every k generations (and at a budget's end); its "
        "episodes are played beside the next generation's members, so no rank idles", 5)
    eval_episodes: int = _doc("episodes per evaluation of the mean policy", 5)
    best_episodes: int = _doc(
        "fresh episodes that confirm a best policy: an evaluation that beats the kept "
        "policy's score nominates the mean policy, which plays this many more and replaces "
        "policy_best.npz only if their score (run.best_by) is higher, so a lucky short "
        "evaluation is never kept (0: keep no best policy)", 20,
    )
    best_by: str = _doc(
        "what makes a policy best (run.best_episodes): 'mean', its mean return, or "
        "'worst', its worst episode's, which a policy that fails on a few starts (a "
        "HalfCheetah that flips onto its back) loses; evaluations nominate by the same "
        "measure", "mean",
    )
    best_pool: int = _doc(
        "nominations that wait for their confirmation, the best evaluations (a better one "
        "goes ahead of earlier ones and drops the worst of a full pool); fewer where their "
        "parameters would take more than 64 MiB (at least one)", 16,
    )
    best_share: float = _doc(
        "what confirmations may cost while the run trains, as a share of the env steps "
        "trained so far: a round of 10 confirmation episodes is played beside a "
        "generation's members while they have cost no more; the nominations still waiting "
        "are confirmed at every stop (the end, a signal, the callback), the one that may "
        "still score highest first (0: only at stops)", 0.01,
    )
    best_from: int = _doc(
        "the first generation whose evaluation may nominate the kept policy (0: any): from "
        "ars.contrast_from, so that the consolidated policies compete, not the fast ones "
        "before them that fall from some starts; a run that ends before it keeps none, and "
        "es-train's last line says so", 0,
    )
    target_score: float = _doc(
        "stop once the kept policy's confirmed score (run.best_by over run.best_episodes "
        "fresh episodes) reaches this: a run that already has a policy good enough ends "
        "there, its checkpoint written; a nomination whose evaluation reaches it is confirmed "
        "beside the next generations whatever run.best_share allows, so a run that may be "
        "done is not kept waiting; at that stop the run's last policy is kept instead if it "
        "holds the target on run.best_episodes episodes of its own, since past the target a "
        "later policy is as good and the first nomination to pass is often a lucky one "
        "(0: no such stop; for a target of 0 itself, give a hair above it)", 0.0,
    )
    runs_dir: str = _doc("folder that holds one sub-folder per run", "runs")
    schedule: str = _doc(
        "who evaluates which member: 'dynamic' (work stealing: rank 0 hands the next member "
        "to whichever rank is free, between its own env steps; 16 bytes a member) or "
        "'static' (a fixed round-robin share; 4 bytes a member); bit-identical results "
        "either way; 'dynamic' wins where episode lengths or ranks' speeds differ (Hopper "
        "ARS on 2 ranks: 13% less wall time)",
        "dynamic",
    )
    lockstep: int = _doc(
        "members a rank plays side by side, one policy forward for all of them per step, for "
        "a user's torch MLP (a Sequential of Linear layers and elementwise activations; "
        "other policies play one member at a time): the per-call cost of torch spread over "
        "them; the same parameters for any value (1: one at a time)", 16,
    )
    checkpoint_every: int = _doc("checkpoint every k generations (and always at exit)", 10)
    keep_checkpoints: int = _doc("how many of the newest checkpoints to keep", 3)
    check_every: int = _doc("compare a parameter checksum across ranks every k generations", 10)
    peer_timeout_s: float = _doc(
        "under MPI: a rank that sends no heartbeat for this many seconds (stopped, hung or cut "
        "off) is lost, and the job ends with exit code 76 and a line naming it, its checkpoint "
        "intact, instead of waiting for it until the job's time limit; each rank beats once a "
        "second from a thread of its own, so a rank busy with a long episode is not lost",
        60.0,
    )
    max_failed_fraction: float = _doc(
        "stop if more than this fraction of a generation's episodes fail", 0.1
    )
    max_seconds: float = _doc(
        "stop after this many seconds since launch, all resumed sessions together (0: no "
        "limit), time stopped (SIGSTOP, a scheduler's suspend) left out as Slurm's time "
        "limit leaves it; every rank follows rank 0's clock, and the last generation is "
        "evaluated and saved; checked between generations, so the generation under way and "
        "the stop's confirmation come on top (a minute of Atari's 64 members); es-compare "
        "gives every method the same budget this way", 0.0
    )
    tensorboard: bool = _doc(
        "also write TensorBoard event files under RUN_DIR/tb/ (every progress.csv column "
        "against env steps, and this config); needs the tensorboard extra", False
    )

    def validate(self) -> None:
        # Part of a folder's name: one path component, short enough for any filesystem
        # (255 bytes, with the env id, seed and stamp beside it).
        if "/" in self.name or "\\" in self.name or len(self.name.encode()) > 100:
            raise ConfigError(f"run.name = {self.name[:40]!r}{'...' if len(self.name) > 40 else ''}"
                              ": must be at most 100 bytes without '/' or '\\', as it is part "
                              "of the run folder's name")
        _at_least("run.generations", self.generations, 1)
        _at_least("run.max_timesteps", self.max_timesteps, 0)
        _at_least("run.eval_every", self.eval_every, 1)
        _at_least("run.eval_episodes", self.eval_episodes, 1)
        _at_least("run.best_episodes", self.best_episodes, 0)
        _one_of("run.best_by", self.best_by, ("mean", "worst"))
        _at_least("run.best_pool", self.best_pool, 1)
        _at_least("run.best_from", self.best_from, 0)
        _at_least("run.best_share", self.best_share, 0)
        if self.target_score and not self.best_episodes:
            raise ConfigError(f"run.target_score = {self.target_score:g} needs a kept policy: "
                              "run.best_episodes = 0 keeps none (set it to 1 or more)")
        _at_least("run.seed", self.seed, 0)
        _one_of("run.schedule", self.schedule, ("static", "dynamic"))
        _at_least("run.lockstep", self.lockstep, 1)
        _at_least("run.checkpoint_every", self.checkpoint_every, 1)
        _at_least("run.keep_checkpoints", self.keep_checkpoints, 1)
        _at_least("run.check_every", self.check_every, 1)
        if not 2 <= self.peer_timeout_s < float("inf"):  # NaN fails too
            raise ConfigError(f"run.peer_timeout_s = {self.peer_timeout_s}: must be a finite "
                              "number >= 2 (seconds; heartbeats come once a second)")
        _at_least("run.max_seconds", self.max_seconds, 0)
        if not 0 <= self.max_failed_fraction <= 1:
            raise ConfigError(
                f"run.max_failed_fraction = {self.max_failed_fraction}: must be in [0, 1]"
            )


@dataclass(frozen=True)
class EnvConfig:
    id: str = _doc("any registered Gymnasium id, e.g. CartPole-v1, HalfCheetah-v5 ('ALE/...' "
                   "ids register ale-py, and gym's old Atari ids, PongNoFrameskip-v4, are "
                   "refused for them; 'module:Env-v0' imports module first, for your own "
                   "environments)", "CartPole-v1")
    max_episode_steps: int = _doc("episode step cap (0: the environment's own limit)", 0)
    kwargs: dict = _doc("keyword arguments for gymnasium.make", default_factory=dict)

    def validate(self) -> None:
        _at_least("env.max_episode_steps", self.max_episode_steps, 0)
        if "render_mode" in self.kwargs:  # 'human' opens a window on every rank, or aborts
            raise ConfigError(f"env.kwargs.render_mode = {self.kwargs['render_mode']!r}: es "
                              "sets it (none while training; es-eval --video films frames): "
                              "drop it")
        # gymnasium.make's own keyword beside es's key: env.max_episode_steps won unsaid (an
        # ALE game's: a TypeError); and the ALE keywords es sets from [atari].
        own = {"max_episode_steps": "env.max_episode_steps"}
        if self.id.startswith("ALE/"):
            own |= {"frameskip": "atari.frame_skip", "repeat_action_probability":
                    "atari.sticky_actions", "obs_type": "atari.obs"}
        for key, instead in own.items():
            if key in self.kwargs:
                raise ConfigError(f"env.kwargs.{key} = {self.kwargs[key]!r}: es sets it from "
                                  f"{instead}; set that instead")


@dataclass(frozen=True)
class AtariConfig:
    obs: str = _doc("ALE games: 'pixels' (84x84 grayscale frames, stacked) or 'ram' (128 bytes)",
                    "pixels")
    frame_skip: int = _doc("emulator frames per agent step (pixels: max-pooled over the last 2)", 4)
    frame_stack: int = _doc("pixel frames stacked into one observation", 4)
    noop_max: int = _doc("each episode starts with 1 to noop_max no-op frames (seeded)", 30)
    sticky_actions: float = _doc("probability that the previous action repeats (ALE v5: 0.25)",
                                 0.25)

    def validate(self) -> None:
        _one_of("atari.obs", self.obs, ("pixels", "ram"))
        _at_least("atari.frame_skip", self.frame_skip, 1)
        _at_least("atari.frame_stack", self.frame_stack, 1)
        _at_least("atari.noop_max", self.noop_max, 0)
        if not 0 <= self.sticky_actions <= 1:
            raise ConfigError(f"atari.sticky_actions = {self.sticky_actions}: must be in [0, 1]")


BUILT_IN_POLICIES = ("linear", "mlp", "cnn")
#: A user's policy factory, ``package.module:function`` (a dotted name on each side; the
#: function's may hold ``<locals>`` and ``<lambda>``: one es.train was given from a notebook).
FACTORY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_<][\w.<>]*")


@dataclass(frozen=True)
class PolicyConfig:
    kind: str = _doc("'linear', 'mlp' or 'cnn' (pixels: the DQN-Nature torso), or your own "
                     "policy's factory 'package.module:function', called with the observation "
                     "and action spaces: a torch.nn.Module or an object of the policy protocol "
                     "(docs/python-api.md)", "linear")
    kwargs: dict = _doc("keyword arguments for the factory of policy.kind", default_factory=dict)
    hidden: tuple = _doc("hidden layer sizes of the MLP", (64, 64))
    activation: str = _doc("hidden activation of the MLP: 'tanh' or 'relu'", "tanh")
    obs_norm: bool = _doc("normalise observations by running mean and std (as the paper); "
                          "a 'cnn' config must set it false (the CNN scales pixels by 1/255)",
                          True)
    obs_clip: float = _doc("clip normalised observations to [-obs_clip, obs_clip]; with "
                           "obs_norm = false the built-in linear and MLP policies clip the "
                           "raw ones (after a 150-s swimmer_ars run, one joint's speed "
                           "passed 5 in 7-9% of steps: raise it to pass them whole)", 5.0)
    torso: str = _doc("cnn: 'nature' (Mnih et al. 2015: conv 32 8x8/4, 64 4x4/2, 64 3x3/1, "
                      "dense 512) or 'small' (Mnih et al. 2013, A3C's: conv 16 8x8/4, "
                      "32 4x4/2, dense 256)",
                      "nature")
    vbn: bool = _doc("cnn: virtual batch normalisation of the hidden layers", True)
    vbn_batch: int = _doc("cnn: observations in the VBN reference batch", 128)
    action_noise: float = _doc(
        "std of Gaussian noise added to continuous (Box) actions in training episodes, never "
        "in evaluation (the paper: 0.01); refused for discrete actions", 0.0
    )
    clip_actions: bool = _doc(
        "the built-in linear and MLP policies clip continuous actions to the action space's "
        "bounds; false sends them as computed, as the code of ARS and of the ES paper does, "
        "and MuJoCo then charges its control cost on the whole action (the torque itself is "
        "clamped either way): the papers' objective, which a policy trained clipped scores "
        "lower on", True
    )

    def validate(self) -> None:
        if self.kind not in BUILT_IN_POLICIES and not FACTORY.fullmatch(self.kind):
            raise ConfigError(f"policy.kind = {self.kind!r}: allowed are "
                              f"{', '.join(map(repr, BUILT_IN_POLICIES))} or a factory "
                              "'package.module:function'")
        if self.kwargs and self.kind in BUILT_IN_POLICIES:
            raise ConfigError(f"policy.kwargs = {self.kwargs!r}: only for a factory "
                              f"policy.kind ('package.module:function'), not {self.kind!r}")
        _at_least("policy.vbn_batch", self.vbn_batch, 2)
        _one_of("policy.torso", self.torso, ("nature", "small"))
        _one_of("policy.activation", self.activation, ("tanh", "relu"))
        for size in self.hidden:
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise ConfigError(f"policy.hidden = {list(self.hidden)}: sizes must be ints >= 1")
        _positive("policy.obs_clip", self.obs_clip)
        _at_least("policy.action_noise", self.action_noise, 0)


#: The strategies es-train can run (``es.strategies``); the order is the README's.
STRATEGY_NAMES = ("openai", "snes", "ars", "pgpe", "sepcma", "cma")
#: The strategies whose sigma and step size follow es.sigma_decay / es.lr_decay.
SCHEDULED_STRATEGIES = ("openai", "ars")


@dataclass(frozen=True)
class ESConfig:
    strategy: str = _doc("the evolution strategy: " + ", ".join(map(repr, STRATEGY_NAMES))
                         + " (each reads [es] and its own section)", "openai")
    population: int = _doc("members per generation (even when mirrored)", 64)
    sigma: float = _doc("standard deviation of the parameter perturbations", 0.02)
    lr: float = _doc("optimizer step size; 'sgd' steps along the gradient estimate, which "
                     "holds 1 / sigma (the released code's SGD step sizes, which leave it out, "
                     "go here times sigma)", 0.01)
    sigma_decay: float = _doc("sigma is multiplied by this every generation ('openai' and "
                              "'ars'; the others adapt sigma themselves)", 1.0)
    sigma_min: float = _doc("floor of the decayed sigma", 0.0)
    lr_decay: float = _doc("the step size (es.lr; 'ars': ars.lr) is multiplied by this every "
                           "generation ('openai' and 'ars')", 1.0)
    lr_min: float = _doc("floor of the decayed step size", 0.0)
    fitness_shaping: str = _doc("'centered_ranks' (the paper; ties share their rank) or "
                                "'standardized' ((F - mean) / std)", "centered_ranks")
    optimizer: str = _doc("'adam' or 'sgd' (with momentum)", "adam")
    momentum: float = _doc("momentum of 'sgd'", 0.9)
    l2: float = _doc("L2 weight decay, the paper's l2coeff: the step follows "
                     "-g + (l2 / sigma) theta, its released code's -sigma g + l2 theta over "
                     "sigma (the same direction under Adam)", 0.005)
    mirrored: bool = _doc("evaluate each perturbation and its negative", True)
    noise: str = _doc("'table' (shared noise table) or 'seed' (regenerate from seeds)", "table")
    noise_table_size: int = _doc("floats in the shared noise table (4 bytes each; none is built "
                                 "for es.strategy = 'cma', which draws its own)", 25_000_000)
    episode_cap: float = _doc(
        "cut training episodes at this multiple of the previous generation's mean episode "
        "length (0: no cap; the paper: 2)", 0.0
    )
    train_steps: int = _doc(
        "cut training episodes at this many steps (0: no cap); evaluations always run full "
        "episodes. More generations per env step where a short episode ranks members as a "
        "full one would (a steady gait, no late failure: HalfCheetah)", 0
    )
    train_steps_until: int = _doc(
        "apply es.train_steps only until the run has taken this many env steps (0: "
        "throughout), whole episodes afterwards: the cut's cheap generations while the gait "
        "forms, then the late failures that a cut never sees", 0
    )
    reward_shift: float = _doc(
        "subtracted from every training step's reward, never in evaluation: ARS's 'shift' "
        "(Mania et al. 2018), which removes the alive bonus that traps Hopper, Walker2d, Ant "
        "and Humanoid in standing still (they used 1, and 5 for Humanoid)", 0.0
    )

    @property
    def uses_noise_table(self) -> bool:
        """Whether a run builds the shared table: not for seeded noise, nor for pycma's
        CMA-ES, which draws its own samples (its table took memory and start-up time)."""
        return self.noise == "table" and self.strategy != "cma"

    def check_table_holds(self, num_params: int) -> None:
        """The table must hold a perturbation of every parameter: known once the policy is
        built (the trainer; es-compare before its first run)."""
        if self.uses_noise_table and num_params > self.noise_table_size:
            raise ValueError(f"es.noise_table_size = {self.noise_table_size}: must be >= the "
                             f"policy's {num_params} parameters")

    def validate(self) -> None:
        _one_of("es.strategy", self.strategy, STRATEGY_NAMES)
        _at_least("es.population", self.population, 2)
        if self.mirrored and self.population % 2:
            raise ConfigError(
                f"es.population = {self.population}: must be even when es.mirrored = true"
            )
        _positive("es.sigma", self.sigma)
        _positive("es.lr", self.lr)
        for key, decay in (("es.sigma_decay", self.sigma_decay), ("es.lr_decay", self.lr_decay)):
            if not 0 < decay <= 1:
                raise ConfigError(f"{key} = {decay}: must be in (0, 1]")
        _at_least("es.sigma_min", self.sigma_min, 0)
        _at_least("es.lr_min", self.lr_min, 0)
        _one_of("es.optimizer", self.optimizer, ("adam", "sgd"))
        _one_of("es.fitness_shaping", self.fitness_shaping, ("centered_ranks", "standardized"))
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"es.momentum = {self.momentum}: must be in [0, 1)")
        _at_least("es.l2", self.l2, 0)
        _one_of("es.noise", self.noise, ("table", "seed"))
        _at_least("es.noise_table_size", self.noise_table_size, 1000)
        if self.episode_cap != 0 and not self.episode_cap > 1:  # at 1, episodes only shrink
            raise ConfigError(f"es.episode_cap = {self.episode_cap}: must be 0 (off) or > 1 "
                              "(a multiple of the last mean length: at 1 or less no episode "
                              "can outlast the mean, and they only shrink)")
        _at_least("es.train_steps", self.train_steps, 0)
        _at_least("es.train_steps_until", self.train_steps_until, 0)


@dataclass(frozen=True)
class SNESConfig:
    """``es.strategy = "snes"``: separable NES (Schaul et al. 2011), a sigma per coordinate
    that adapts; ``es.sigma`` is the initial sigma."""

    lr_mean: float = _doc("step size of the mean, in units of sigma (the paper: 1)", 1.0)
    lr_sigma: float = _doc("step size of log sigma (0: the paper's (3 + ln d) / (5 sqrt d))",
                           0.0)

    def validate(self) -> None:
        _positive("snes.lr_mean", self.lr_mean)
        _at_least("snes.lr_sigma", self.lr_sigma, 0)


@dataclass(frozen=True)
class SepCMAConfig:
    """``es.strategy = "sepcma"``: separable CMA-ES (Ros & Hansen 2008), a diagonal covariance
    in O(d); ``es.sigma`` is the initial step size."""

    mu: int = _doc("members recombined into the mean (0: half the population; at most "
                   "half when es.mirrored, the winners of the pairs)", 0)
    cov_scale: float = _doc("multiplies the covariance learning rates", 1.0)
    step_size: str = _doc("'csa' (cumulative), 'tpa' (two-point, es.population >= 4) or "
                          "'auto' (TPA from 300 parameters, as pycma, and a population of 4)",
                          "auto")

    def validate(self) -> None:
        _at_least("sepcma.mu", self.mu, 0)
        _positive("sepcma.cov_scale", self.cov_scale)
        _one_of("sepcma.step_size", self.step_size, STEP_SIZE_RULES)


@dataclass(frozen=True)
class ARSConfig:
    """``es.strategy = "ars"``: Augmented Random Search (Mania et al. 2018). ``es.sigma`` is the
    paper's nu, ``es.population`` twice its N (mirrored pairs); ``policy.obs_norm`` makes V1
    into V2, and ``es.reward_shift`` is its alive-bonus shift."""

    lr: float = _doc("step size alpha of theta += alpha / (b sigma_R) sum (r+ - r-) delta", 0.02)
    top: int = _doc("b: the best directions used, ranked by max(r+, r-) (0: all; V1-t/V2-t "
                    "use fewer)", 0)
    contrast_from: int = _doc("from this generation's update on, the directions are ranked "
                              "by |r+ - r-| instead, which steadies a fast gait that falls "
                              "from some starts (0: never; the paper), with the phase's own "
                              "ars.contrast_top, ars.contrast_sigma and ars.contrast_lr", 0)
    contrast_lr: float = _doc("alpha from ars.contrast_from on (0: ars.lr)", 0.0)
    contrast_sigma: float = _doc("nu from ars.contrast_from on (0: es.sigma)", 0.0)
    contrast_top: int = _doc("b from ars.contrast_from on (0: ars.top; with every direction "
                             "the ranking picks nothing, and the pairs that differ most weigh "
                             "most in the step)", 0)

    def validate(self) -> None:
        _positive("ars.lr", self.lr)
        _at_least("ars.top", self.top, 0)
        _at_least("ars.contrast_from", self.contrast_from, 0)
        _at_least("ars.contrast_lr", self.contrast_lr, 0)
        _at_least("ars.contrast_sigma", self.contrast_sigma, 0)
        _at_least("ars.contrast_top", self.contrast_top, 0)


@dataclass(frozen=True)
class PGPEConfig:
    """``es.strategy = "pgpe"``: PGPE (Sehnke et al. 2010) with the ClipUp optimizer (Toklu
    et al. 2020) and a sigma per coordinate; ``es.sigma`` is the initial sigma."""

    center_lr: float = _doc("the optimizer's step size for the mean (0: ClipUp's rule, the "
                            "norm of the initial sigma vector / 30, es.sigma x sqrt(d) / 30 "
                            "for d parameters; for 'adam', whose step size is per coordinate, "
                            "es.sigma / 30)", 0.0)
    optimizer: str = _doc("'clipup' or 'adam'", "clipup")
    max_speed: float = _doc("ClipUp's velocity limit (0: twice center_lr)", 0.0)
    sigma_lr: float = _doc("step size of the sigma update", 0.1)
    sigma_max_change: float = _doc("largest relative change of a sigma per generation", 0.2)

    def validate(self) -> None:
        _at_least("pgpe.center_lr", self.center_lr, 0)
        _one_of("pgpe.optimizer", self.optimizer, ("clipup", "adam"))
        _at_least("pgpe.max_speed", self.max_speed, 0)
        _at_least("pgpe.sigma_lr", self.sigma_lr, 0)
        if not 0 < self.sigma_max_change < 1:
            raise ConfigError(f"pgpe.sigma_max_change = {self.sigma_max_change}: must be in "
                              "(0, 1)")


@dataclass(frozen=True)
class DQNConfig:
    """``es-baseline dqn`` and ``gorila`` (Mnih et al. 2015). Defaults: after RL Baselines3
    Zoo's tuned CartPole DQN (a smaller net, a slower step), which solves CartPole in seconds
    here."""

    steps_per_round: int = _doc("env steps between progress rows (a baseline 'generation')",
                                1000)
    buffer_size: int = _doc("transitions the replay memory holds", 100_000)
    batch_size: int = _doc("transitions per gradient step", 64)
    lr: float = _doc("Adam step size", 5e-4)
    lr_decay_steps: int = _doc("env steps over which the step size falls linearly from lr to "
                               "lr_end, then stays (0: a constant lr)", 0)
    lr_end: float = _doc("the step size after lr_decay_steps", 0.0)
    gamma: float = _doc("discount factor", 0.99)
    learning_starts: int = _doc("env steps of experience before the first gradient step",
                                1000)
    train_every: int = _doc("env steps between training phases", 256)
    gradient_steps: int = _doc("gradient steps in each training phase", 128)
    target_update_every: int = _doc("env steps between target-network syncs", 1024)
    tau: float = _doc("target sync: 1 copies the online network, < 1 moves part way (Polyak)",
                      1.0)
    epsilon_start: float = _doc("epsilon-greedy exploration at the start", 1.0)
    epsilon_end: float = _doc("epsilon-greedy exploration after the decay", 0.04)
    epsilon_decay_steps: int = _doc("env steps over which epsilon falls linearly", 8000)
    double: bool = _doc("Double DQN: the online network picks the next action", True)
    huber_delta: float = _doc("Huber loss: quadratic within this error, linear beyond", 1.0)
    max_grad_norm: float = _doc("clip the gradient to this norm (0: no clipping)", 10.0)
    gorila_sync_every: int = _doc("gorila: learner gradient steps between parameter sends",
                                  50)
    gorila_chunk: int = _doc("gorila: transitions an actor sends per message", 100)
    gorila_lead: int = _doc(
        "gorila: transitions the actors together may run ahead of the learner's replay ratio "
        "(0: no limit, actors never wait, as in the paper)", 2000)

    def validate(self) -> None:
        for key in ("steps_per_round", "buffer_size", "batch_size", "train_every",
                    "target_update_every", "epsilon_decay_steps", "gradient_steps",
                    "gorila_sync_every", "gorila_chunk"):
            _at_least(f"dqn.{key}", getattr(self, key), 1)
        _at_least("dqn.learning_starts", self.learning_starts, 0)
        _at_least("dqn.lr_decay_steps", self.lr_decay_steps, 0)
        _at_least("dqn.lr_end", self.lr_end, 0)
        _at_least("dqn.gorila_lead", self.gorila_lead, 0)
        # An actor learns the learner's progress only with each parameter send: a smaller
        # lead would have the actors wait for updates the learner cannot make yet.
        needed = self.gorila_sync_every * self.train_every / self.gradient_steps
        if 0 < self.gorila_lead <= needed:
            raise ConfigError(f"dqn.gorila_lead = {self.gorila_lead}: must be 0 or more than "
                              f"gorila_sync_every * train_every / gradient_steps = {needed:g}")
        if self.batch_size > self.buffer_size:
            raise ConfigError(f"dqn.batch_size = {self.batch_size}: must be <= dqn.buffer_size "
                              f"({self.buffer_size})")
        _positive("dqn.lr", self.lr)
        _positive("dqn.huber_delta", self.huber_delta)
        _at_least("dqn.max_grad_norm", self.max_grad_norm, 0)
        for key in ("gamma", "tau", "epsilon_start", "epsilon_end"):
            value = getattr(self, key)
            if not 0 <= value <= 1:
                raise ConfigError(f"dqn.{key} = {value}: must be in [0, 1]")
        if self.tau == 0:
            raise ConfigError("dqn.tau = 0: must be in (0, 1] (0 never updates the target)")


@dataclass(frozen=True)
class PGConfig:
    """``es-baseline pg``: REINFORCE with a learned value baseline (Williams 1992)."""

    episodes_per_update: int = _doc(
        "episodes per gradient step, split over the ranks (each plays its share)", 16)
    lr: float = _doc("Adam step size of the policy", 0.01)
    value_lr: float = _doc("Adam step size of the value network", 0.01)
    gamma: float = _doc("discount factor of the returns-to-go", 0.99)
    normalize_advantages: bool = _doc("standardise advantages over the whole batch", True)
    initial_log_std: float = _doc("Gaussian actions: initial log standard deviation", -0.5)
    max_grad_norm: float = _doc("clip each gradient to this norm (0: no clipping)", 0.0)

    def validate(self) -> None:
        _at_least("pg.episodes_per_update", self.episodes_per_update, 1)
        _positive("pg.lr", self.lr)
        _positive("pg.value_lr", self.value_lr)
        if not 0 <= self.gamma <= 1:
            raise ConfigError(f"pg.gamma = {self.gamma}: must be in [0, 1]")
        _at_least("pg.max_grad_norm", self.max_grad_norm, 0)


@dataclass(frozen=True)
class PPOConfig:
    """``es-baseline ppo``: PPO with the clipped surrogate and GAE (Schulman et al. 2017,
    2016); the defaults are cleanrl's ``ppo_continuous_action.py`` (MuJoCo) settings."""

    num_envs: int = _doc("environments that play each rollout, split over the ranks (at "
                         "least one each)", 8)
    steps_per_env: int = _doc("steps each environment plays per update", 256)
    epochs: int = _doc("passes over each rollout", 10)
    minibatches: int = _doc("minibatches per pass (each num_envs * steps_per_env / "
                            "minibatches samples)", 32)
    lr: float = _doc("Adam step size of both networks", 3e-4)
    anneal_lr: bool = _doc("lower lr linearly to 0 over run.max_timesteps", False)
    gamma: float = _doc("discount factor", 0.99)
    gae_lambda: float = _doc("GAE's lambda", 0.95)
    bootstrap_truncated: bool = _doc("an episode cut by the time limit bootstraps from the value "
                                     "of its next observation (false: counted as an end, as "
                                     "cleanrl does)", True)
    clip: float = _doc("the surrogate's ratio clip epsilon", 0.2)
    clip_value: float = _doc("clip of the value update around the rollout's values (0: off)",
                             0.2)
    entropy_coef: float = _doc("weight of the entropy bonus", 0.0)
    value_coef: float = _doc("weight of the value loss", 0.5)
    max_grad_norm: float = _doc("clip the gradient's global norm (0: no clipping)", 0.5)
    normalize_advantages: bool = _doc("standardise advantages over each minibatch", True)
    normalize_obs: bool = _doc("standardise observations by running statistics (saved in "
                               "policy.npz)", True)
    obs_clip: float = _doc("clip standardised observations to +-obs_clip", 10.0)
    normalize_reward: bool = _doc("divide rewards by the running std of the discounted return",
                                  True)
    reward_clip: float = _doc("clip scaled rewards to +-reward_clip", 10.0)
    initial_log_std: float = _doc("Gaussian actions: initial log standard deviation", 0.0)

    def validate(self) -> None:
        _at_least("ppo.num_envs", self.num_envs, 1)
        _at_least("ppo.steps_per_env", self.steps_per_env, 1)
        _at_least("ppo.epochs", self.epochs, 1)
        _at_least("ppo.minibatches", self.minibatches, 1)
        if self.minibatches > self.num_envs * self.steps_per_env:
            raise ConfigError(f"ppo.minibatches = {self.minibatches}: must be at most the "
                              f"{self.num_envs * self.steps_per_env} samples of a rollout")
        _positive("ppo.lr", self.lr)
        for key, value in (("ppo.gamma", self.gamma), ("ppo.gae_lambda", self.gae_lambda)):
            if not 0 <= value <= 1:
                raise ConfigError(f"{key} = {value}: must be in [0, 1]")
        _positive("ppo.clip", self.clip)
        for key, value in (("ppo.clip_value", self.clip_value),
                           ("ppo.entropy_coef", self.entropy_coef),
                           ("ppo.value_coef", self.value_coef),
                           ("ppo.max_grad_norm", self.max_grad_norm)):
            _at_least(key, value, 0)
        _positive("ppo.obs_clip", self.obs_clip)
        _positive("ppo.reward_clip", self.reward_clip)


@dataclass(frozen=True)
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    atari: AtariConfig = field(default_factory=AtariConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    es: ESConfig = field(default_factory=ESConfig)
    snes: SNESConfig = field(default_factory=SNESConfig)
    sepcma: SepCMAConfig = field(default_factory=SepCMAConfig)
    ars: ARSConfig = field(default_factory=ARSConfig)
    pgpe: PGPEConfig = field(default_factory=PGPEConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    pg: PGConfig = field(default_factory=PGConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        out = dataclasses.asdict(self)
        out["policy"]["hidden"] = list(self.policy.hidden)
        return out


SECTIONS: dict[str, type] = typing.get_type_hints(Config)


def _at_least(key: str, value: float, low: float) -> None:
    if value < low:
        raise ConfigError(f"{key} = {value}: must be >= {low}")


def _positive(key: str, value: float) -> None:
    if not value > 0 or value != value or value == float("inf"):
        raise ConfigError(f"{key} = {value}: must be a finite number > 0")


def _one_of(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key} = {value!r}: allowed are {', '.join(map(repr, allowed))}")


def _coerce(key: str, value: Any, kind: Any) -> Any:
    """Check ``value`` against the field type; ints are accepted where floats are expected."""
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
             tuple: "a list of integers", dict: "a table"}
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        str: isinstance(value, str),
        tuple: isinstance(value, list | tuple),
        dict: isinstance(value, dict),
    }[kind]
    if not ok:
        raise ConfigError(f"{key} = {value!r}: must be {names[kind]}")
    _check_text(key, value)
    if kind is dict:
        _check_finite(key, value)
    if kind is int and not -(2**63) <= value < 2**63:
        raise ConfigError(f"{key} = {value}: must be an integer of at most 64 bits")
    if kind is float:
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            number = math.inf
        if not math.isfinite(number):
            raise ConfigError(f"{key} = {value}: must be a finite number")
        return number
    if kind is tuple:
        return tuple(value)
    return value


def _check_finite(key: str, value: Any) -> None:
    """Numbers anywhere in a table (``env.kwargs``, ``policy.kwargs``) must be finite, as every
    other number of a config: a NaN gravity failed every episode of a run that had started."""
    if isinstance(value, dict):
        for name, item in value.items():
            _check_finite(f"{key}.{name}", item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_finite(key, item)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key} = {value}: must be a finite number")


def _check_text(key: str, value: Any) -> None:
    """Strings anywhere in ``value`` (``env.kwargs`` nests) must be writable as UTF-8 TOML and
    usable in paths: no lone surrogates (undecodable command-line bytes), no NUL."""
    if isinstance(value, dict):
        for item in (*value.keys(), *value.values()):
            _check_text(key, item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_text(key, item)
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{key} = {value!r}: must be valid Unicode text (the command "
                              "line held bytes that are not UTF-8)") from None
        if "\0" in value:
            raise ConfigError(f"{key} = {value!r}: must not contain NUL characters")


def _build(section: str, values: Any) -> Any:
    cls = SECTIONS[section]
    if not isinstance(values, dict):
        raise ConfigError(f"[{section}] must be a table, got {values!r}")
    hints = typing.get_type_hints(cls)
    allowed = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in values.items():
        if key not in hints:
            raise ConfigError(
                f"unknown key {section}.{key}: allowed in [{section}] are {', '.join(allowed)}"
            )
        kwargs[key] = _coerce(f"{section}.{key}", value, hints[key])
    instance = cls(**kwargs)
    instance.validate()
    return instance


def from_dict(data: dict[str, Any]) -> Config:
    if isinstance(data.get("tasks"), dict) and "tasks" not in SECTIONS:
        raise ConfigError("[tasks]: this is an es-bench suite file, not a config; run it with "
                          "es-bench suite FILE, or train one of the configs it names")
    for section, values in data.items():
        if section in SECTIONS:
            continue
        if not isinstance(values, dict):  # `seed = 0` above every header: not a section
            homes = [name for name, cls in SECTIONS.items()
                     if section in {field.name for field in dataclasses.fields(cls)}]
            home = f" (a key of [{homes[0]}]: write it below that header)" if homes else ""
            raise ConfigError(f"{section} = {values!r}: a key outside any section{home}; "
                              f"the sections are {', '.join(map(str, SECTIONS))}")
        raise ConfigError(
            f"unknown section [{section}]: allowed are {', '.join(map(str, SECTIONS))}"
        )
    config = Config(**{name: _build(name, data.get(name, {})) for name in SECTIONS})
    _check_cnn(config)
    _check_strategy(config)
    return config


#: A CNN's pixels are not normalised: refused here for an ALE game's, and where the policy is
#: built for other envs (once their observations are known to be images: a CNN on a vector
#: env was first told to drop obs_norm, then refused for the vector).
CNN_OBS_NORM = ("policy.obs_norm = true: not used with policy.kind = 'cnn' (pixels are scaled "
                "by 1/255 and VBN normalises the layers); set policy.obs_norm = false")


def _check_cnn(config: Config) -> None:
    """The CNN takes stacked frames: of an ALE game's RAM it is refused first, since turning
    off ``obs_norm`` would only lead to that."""
    if config.policy.kind != "cnn" or not config.env.id.startswith("ALE/"):
        return
    if config.atari.obs == "ram":
        raise ConfigError("policy.kind = 'cnn': needs stacked frames, and atari.obs = 'ram' "
                          "gives the 128 bytes of RAM; set atari.obs = 'pixels', or "
                          "policy.kind = 'linear' or 'mlp' for RAM")
    if config.policy.obs_norm:
        raise ConfigError(CNN_OBS_NORM)


def _check_strategy(config: Config) -> None:
    """What a strategy needs of the shared ``[es]`` keys (each section validates itself)."""
    es = config.es
    if es.strategy not in SCHEDULED_STRATEGIES:
        for key in ("sigma_decay", "sigma_min", "lr_decay", "lr_min"):
            value = getattr(es, key)
            if value != ESConfig.__dataclass_fields__[key].default:
                raise ConfigError(
                    f"es.{key} = {value}: es.strategy = {es.strategy!r} sets its own step sizes;"
                    f" the decays apply to {' and '.join(map(repr, SCHEDULED_STRATEGIES))}")
    else:  # a floor above the start replaced it from the first generation, without a word
        lr_key, lr = ("ars.lr", config.ars.lr) if es.strategy == "ars" else ("es.lr", es.lr)
        for floor, value, start, start_key in (("sigma_min", es.sigma_min, es.sigma, "es.sigma"),
                                               ("lr_min", es.lr_min, lr, lr_key)):
            if value > start:
                raise ConfigError(f"es.{floor} = {value}: must be at most {start_key} = "
                                  f"{start}, the value it is the floor of")
    if es.strategy == "sepcma":
        most = es.population // 2 if es.mirrored else es.population
        if config.sepcma.mu > most:
            raise ConfigError(
                f"sepcma.mu = {config.sepcma.mu}: must be at most {most}, "
                + (f"the winners of es.population = {es.population}'s mirrored pairs"
                   if es.mirrored else f"es.population = {es.population}")
                + " (0: es.population // 2)")
        if config.sepcma.step_size == "tpa" and es.population < TPA_MIN_POPULATION:
            raise ConfigError(f"sepcma.step_size = 'tpa': needs es.population >= "
                              f"{TPA_MIN_POPULATION} (two members are its test points), not "
                              f"{es.population}; use 'csa'")
    if es.strategy in ("ars", "pgpe") and not es.mirrored:
        raise ConfigError(f"es.mirrored = false: es.strategy = {es.strategy!r} compares the two "
                          "members of mirrored pairs; set es.mirrored = true")
    if es.strategy == "ars":
        for key in ("top", "contrast_top"):
            value = getattr(config.ars, key)
            if value > es.population // 2:
                raise ConfigError(f"ars.{key} = {value}: must be at most the "
                                  f"{es.population // 2} directions of es.population = "
                                  f"{es.population} (0: all)")


#: The [es] keys that OpenAI-ES alone reads, and where each other strategy's step sizes are.
OPENAI_ONLY = ("lr", "optimizer", "momentum", "l2", "fitness_shaping")
OWN_STEP_SIZES = {"snes": "[snes]", "ars": "[ars]", "pgpe": "[pgpe]",
                  "sepcma": "adapted, [sepcma]", "cma": "adapted by pycma"}
#: The strategy sections, each read by the es.strategy of its name alone; and es-baseline's.
STRATEGY_SECTIONS = ("snes", "sepcma", "ars", "pgpe")
BASELINE_SECTIONS = ("dqn", "pg", "ppo")


def changed_settings(config: Config, section: str,
                     names: tuple[str, ...] | None = None) -> list[str]:
    """``section.key`` of each setting (of ``names``, or all) set away from its default."""
    ours, default = getattr(config, section), SECTIONS[section]()
    return [f"{section}.{f.name}" for f in dataclasses.fields(ours)
            if (names is None or f.name in names)
            and getattr(ours, f.name) != getattr(default, f.name)]


def ignored_settings(config: Config) -> list[str]:
    """What es-train will not read of the settings set away from their defaults, one
    sentence each: warnings, not errors, since a shipped config switched to another strategy,
    env or policy with --set keeps sections it no longer needs."""
    changed = functools.partial(changed_settings, config)
    said = []
    if config.es.strategy != "openai" and (keys := changed("es", OPENAI_ONLY)):
        said.append(f"{', '.join(keys)}: OpenAI-ES's, and es.strategy = "
                    f"{config.es.strategy!r} does not read them (its own step sizes: "
                    f"{OWN_STEP_SIZES[config.es.strategy]}); ignored")
    for section in STRATEGY_SECTIONS:
        if section != config.es.strategy and (keys := changed(section)):
            said.append(f"{', '.join(keys)}: es.strategy = {config.es.strategy!r} does not read "
                        f"[{section}]; ignored")
    for section in BASELINE_SECTIONS:
        if keys := changed(section):
            said.append(f"{', '.join(keys)}: [{section}] is es-baseline's; es-train ignores it")
    return [*unread_for_env_and_policy(config), *said, *unread_within_sections(config)]


def unread_for_env_and_policy(config: Config) -> list[str]:
    """The ``[atari]`` settings off an ALE game and the built-in networks' under another
    ``policy.kind``, one sentence each: es-train and es-baseline alike read neither."""
    changed = functools.partial(changed_settings, config)
    said = []
    if not config.env.id.startswith("ALE/") and (keys := changed("atari")):
        said.append(f"{', '.join(keys)}: {config.env.id} is not an ALE game; ignored")
    kind = config.policy.kind
    if kind != "mlp" and (keys := changed("policy", ("hidden", "activation"))):
        said.append(f"{', '.join(keys)}: a setting of the built-in MLP, but policy.kind = {kind!r}"
                    + ("; a factory takes its own settings in policy.kwargs"
                       if kind not in BUILT_IN_POLICIES else "") + "; ignored")
    if kind not in ("linear", "mlp") and (keys := changed("policy", ("clip_actions",))):
        said.append(f"{', '.join(keys)}: a setting of the built-in linear and MLP policies, but "
                    f"policy.kind = {kind!r}; ignored")
    if kind != "cnn" and (keys := changed("policy", ("torso", "vbn", "vbn_batch"))):
        said.append(f"{', '.join(keys)}: a setting of the built-in CNN, but policy.kind = "
                    f"{kind!r}; ignored")
    return said


def unread_within_sections(config: Config) -> list[str]:
    """The settings another of their own section's switches leaves unread (es.momentum under
    Adam, the contrast phase's with none), one sentence each: their runs trained the same
    bits as without them, without a word."""
    es, policy, strategy = config.es, config.policy, config.es.strategy
    rules = [  # (the settings, read only when, what the run does instead)
        ("es", ("momentum",), strategy != "openai" or es.optimizer == "sgd",
         f"SGD's, and es.optimizer = {es.optimizer!r}"),
        ("es", ("noise_table_size",), es.uses_noise_table,
         "no table is built: es.noise = 'seed' regenerates each perturbation from its seed"
         if es.noise == "seed" else "no table is built: pycma draws its own samples"),
        ("es", ("train_steps_until",), es.train_steps > 0,
         "the end of es.train_steps's cut, and es.train_steps = 0 (whole episodes)"),
        ("ars", ("contrast_lr", "contrast_sigma", "contrast_top"),
         strategy != "ars" or config.ars.contrast_from > 0,
         "the contrast phase's, and ars.contrast_from = 0 (no phase)"),
        ("pgpe", ("max_speed",), strategy != "pgpe" or config.pgpe.optimizer == "clipup",
         f"ClipUp's, and pgpe.optimizer = {config.pgpe.optimizer!r}"),
        ("run", ("best_by", "best_pool", "best_share", "best_from"),
         config.run.best_episodes > 0, "no policy is kept (run.best_episodes = 0)"),
        ("atari", ("frame_stack",), config.atari.obs == "pixels",
         "stacks pixel frames, and atari.obs = 'ram'"),
        ("policy", ("vbn_batch",), policy.kind != "cnn" or policy.vbn,
         "VBN's, and policy.vbn = false"),
        ("policy", ("obs_clip",), policy.kind != "cnn",
         "the CNN clips nothing (it scales raw pixels by 1/255)"),
        ("policy", ("obs_clip",), policy.obs_norm or policy.kind in BUILT_IN_POLICIES,
         "clips normalised observations, and policy.obs_norm = false (only the built-in "
         "policies clip raw ones)"),
    ]
    return [f"{', '.join(keys)}: {why}; ignored" for section, names, read, why in rules
            if not read and (keys := changed_settings(config, section, names))]


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` -> (path, value); the value is read as TOML, else as a string."""
    path, sep, raw = text.partition("=")
    keys = path.strip().split(".")
    if not sep or len(keys) < 2 or not all(keys):
        raise ConfigError(f"--set {text!r}: expected section.key=value, e.g. es.sigma=0.05")
    try:
        value = tomllib.loads(f"value = {raw.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return keys, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {text!r}: {key} is not a table")
            node = child
        node[keys[-1]] = value
    return data


SHIPPED_CONFIGS = Path(__file__).parent / "configs"
"""The configs folder of the checkout (``es/configs`` links to it), copied into the wheel:
a pip-installed ``es`` runs the README's commands from any folder."""


def shipped_configs() -> list[str]:
    """The shipped configs' names (``cartpole``, ``baselines/cartpole_dqn``, ...), sorted:
    the top folder's first."""
    names = [path.relative_to(SHIPPED_CONFIGS).with_suffix("").as_posix()
             for path in SHIPPED_CONFIGS.rglob("*.toml")]
    return sorted(names, key=lambda name: (name.count("/"), name))


def shipped_config(path: str) -> Path:
    """The shipped config at the README's ``configs/...`` path, whatever the working folder:
    the programs' own defaults (es-compare's, es-bench reference's)."""
    return SHIPPED_CONFIGS / Path(path).relative_to("configs")


def locate_config(path: str | Path) -> Path:
    """The config file ``path`` names: the file itself where it is one; else, for a relative
    path, a copy of one's own in the working folder (``NAME.toml``, ``configs/NAME.toml``),
    then the shipped config of that name (``cartpole``, ``cartpole.toml`` or
    ``configs/cartpole.toml``, the README's spelling, from any folder). Anything else comes
    back as given, for the loader's "not found"."""
    given = Path(path)
    name = _shipped_name(given)
    if _is_file(given) or given.is_absolute() or not name:
        return given
    own = [Path(f"{given}.toml")] if not given.name.endswith(".toml") else []
    if given.parts[0] != "configs":
        own.append(Path("configs") / f"{name}.toml")
    for candidate in (*own, SHIPPED_CONFIGS / f"{name}.toml"):
        if _is_file(candidate):
            return candidate
    return given


def _is_file(path: Path) -> bool:
    """``Path.is_file``, False where the name cannot be a file (too long): the loader then
    says why in its one line."""
    try:
        return path.is_file()
    except OSError:
        return False


def _shipped_name(path: Path) -> str:
    """The shipped config's name a relative path would be, ``configs/`` and ``.toml`` off;
    "" for a path that cannot be one (``..`` in it, nothing left)."""
    parts = path.parts[1:] if path.parts[:1] == ("configs",) else path.parts
    if not parts or ".." in parts:
        return ""
    return Path(*parts).as_posix().removesuffix(".toml")


def read_toml(path: str | Path, kind: str = "config file") -> dict[str, Any]:
    """The TOML file's tables; ``kind`` names the file in the one-line errors ("suite file")."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        hint = ""
        # A name the user gave, not a run folder's own config.toml gone missing.
        if kind in ("config file", "suite file") and not path.is_absolute() and (
                path.name != "config.toml"):
            near = difflib.get_close_matches(_shipped_name(path), shipped_configs(), 1, 0.8)
            example = ("cartpole or configs/hopper_ars.toml" if kind == "config file"
                       else "suites/mujoco or configs/suites/mujoco_steps.toml")
            hint = (f"; did you mean {near[0]}? (es-train --list-configs lists the configs that "
                    "come with es)" if near else f"; from any folder a shipped {kind[:-5]}'s name "
                    f"works too, e.g. {example} (es-train --list-configs lists them)")
        raise ConfigError(f"{kind} {str(path)!r}: not found{hint}") from None
    except IsADirectoryError:
        raise ConfigError(f"{kind} {str(path)!r}: is a directory") from None
    except OSError as error:  # unreadable: permissions, a file as a folder, a long name...
        raise ConfigError(f"{kind} {str(path)!r}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{kind} {str(path)!r}: invalid TOML: {error}") from None


def load_config(path: str | Path, overrides: list[str] = ()) -> Config:
    data = apply_overrides(read_toml(path), list(overrides))
    run = data.setdefault("run", {})
    if isinstance(run, dict) and not run.get("name"):
        run["name"] = Path(path).stem
    return from_dict(data)
