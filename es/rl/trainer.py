"""The SPMD generation loop: every rank runs it, evaluates its share, applies the same update.

Per generation the ranks exchange one float32 return per member (``es.parallel.exchange``),
one int64 block of step count and observation statistics, and one (stop signal, parameter
checksum, out of time, peak memory) row per rank; nothing else.
Each rank rebuilds every member from the shared noise (table slice or seed) and steps the
identical strategy state (``es.strategies``), so the parameters are bit-identical on every
rank and for every rank count. Only rank 0 writes files. The whole state can be checkpointed and
restored, so a resumed run continues exactly as if it had not stopped.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import resource
import signal
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w

from es.config import Config, ConfigError, read_toml
from es.core.noise import NoiseSource, NoiseTable, SeedNoise, fill_table
from es.core.optim import make_optimizer
from es.core.pauses import PauseClock
from es.core.seeding import (
    TAG_ACTION_NOISE,
    TAG_ENV,
    TAG_EVAL,
    TAG_INIT,
    TAG_MODULE,
    TAG_VBN,
    episode_seeds,
    generator,
)
from es.core.shaping import FITNESS_SHAPINGS
from es.parallel.comm import Comm, rank_zero_decides
from es.parallel.exchange import (
    GenerationResults,
    share_results,
    share_side_results,
    spread,
    static_share,
)
from es.rl.checkpoint import TrainingState, save_checkpoint, save_policy, write_atomically
from es.rl.envs import check_env_api, env_from_config, without_time_limit
from es.rl.kept import CONFIRM_ROUND, Nomination, NominationPool, Verdict, policy_score
from es.rl.metrics import (
    COLUMNS,
    ProgressLog,
    append_stop,
    evaluation_columns,
    last_evaluation,
    progress_line,
    read_stops,
)
from es.rl.policies import ObsNorm, PolicySpec, with_action_noise
from es.rl.policy import UserPolicy, make_policy
from es.rl.rollout import (
    Episode,
    LockstepEpisode,
    ObsStats,
    failures_told_once,
    random_observations,
    safe_episode,
)
from es.rl.runs import TRANSIENT, end_status_line
from es.strategies import ARS, CMA, PGPE, SNES, Generation, OpenAIES, SepCMA, Strategy
from es.strategies.restarts import search_scale

log = logging.getLogger("es")


#: Called with each generation's progress row; returning False stops the run (checkpointed).
Callback = Callable[[dict[str, Any]], object]


@dataclass
class TrainResult:
    params: np.ndarray
    generations: int
    timesteps: int
    eval_return: float | None
    best_return: float | None  # policy_best.npz's confirmed score (None: none kept)
    best_generation: int | None
    ended_by: str  # the budget that ended the run ("run.max_seconds = 60") or "the callback"
    stop_confirm_s: float = 0.0  # what confirming the waiting nominations at the stop took
    stop_confirm_episodes: int = 0  # and how many episodes it played


class TrainingError(RuntimeError):
    """The run cannot go on (too many failed episodes, ranks out of step); state is saved."""


class DivergedError(TrainingError):
    """An update made the parameters NaN or inf: the newest checkpoint, before it, stands."""


class Stopped(Exception):
    """A rank received SIGINT, SIGTERM, SIGUSR1 or SIGUSR2; every rank stops after the same
    generation."""

    def __init__(self, signum: int, generation: int, message: str = "") -> None:
        super().__init__(message or
                         f"stopped by {signal.Signals(signum).name} after generation {generation}")
        self.signum, self.generation = signum, generation


#: What stops a run with its checkpoint written. SIGUSR1/2: what schedulers send ahead of a
#: time limit (Slurm's --signal).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


class SecondSignal(KeyboardInterrupt):
    """A second stop signal: the run ends at once, the generation in progress lost (the
    caller knows the run folder and says how it continues)."""


class StopFlag:
    """Set by a signal handler; read once per generation. A second signal stops at once,
    unless it comes within ``REPEAT_WINDOW_S`` of the first: then it is a copy of it. A batch
    system's SIGTERM (scancel, a time limit) and a terminal's Ctrl-C reach every rank and
    the launcher, and Hydra forwards its own copy to the ranks, so a rank sees two; taken as
    a second request, the copy cut the run short: exit 130 without the checkpoint, or one
    rank interrupted mid-exchange and the other left waiting."""

    #: Seconds in which a further signal is the first one's copy (copies come within ms).
    REPEAT_WINDOW_S = 2.0

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 announce: str | None = None) -> None:
        """``announce``: a line for standard error when the first signal arrives (a
        generation may take a minute: the user should know the stop is coming)."""
        self.signum = 0
        self.clock = clock
        self.first_at = 0.0
        self.announce = announce

    def install(self) -> None:
        """For es-train: over every stop signal but one the process was started ignoring,
        as a shell starts a script's background job (``es-train ... &``) ignoring SIGINT: a
        Ctrl-C at the terminal is not for it, and it stopped the run."""
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, self._handle)

    def install_over_defaults(self) -> dict[int, Any]:
        """``install`` for ``es.train``, a call inside someone's program: only over the stop
        signals that have Python's default handling, and only from the main thread (where
        signals are handled). Returns the handlers replaced, for ``restore``."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        defaults = (signal.SIG_DFL, signal.default_int_handler)
        replaced = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS
                    if signal.getsignal(signum) in defaults}
        for signum in replaced:
            signal.signal(signum, self._handle)
        return replaced

    @staticmethod
    def restore(handlers: dict[int, Any]) -> None:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    def received_before(self, signum: int) -> None:
        """A signal that came before this flag was installed (held at start-up): taken as
        the first, and announced like it (a Ctrl-C in the run's first fifth of a second
        stopped it with no word that it would)."""
        self._handle(signum, None)

    def _handle(self, signum: int, frame: object) -> None:
        now = self.clock()
        if not self.signum:
            self.signum, self.first_at = signum, now
            if self.announce:  # os.write: safe inside a signal handler, unlike print
                os.write(2, f"{self.announce.format(signal=signal.Signals(signum).name)}\n"
                         .encode())
        elif now - self.first_at > self.REPEAT_WINDOW_S:
            raise SecondSignal


def make_noise(config: Config, comm: Comm) -> NoiseSource:
    """The shared table lives once per node (an MPI shared window under MPI)."""
    if not config.es.uses_noise_table:
        return SeedNoise()
    table = comm.node_shared_array(
        config.es.noise_table_size, np.float32, lambda out: fill_table(out, config.run.seed)
    )
    return NoiseTable(table)


def make_strategy(config: Config, theta0: np.ndarray, noise: NoiseSource) -> Strategy:
    """The strategy ``es.strategy`` names, with the config's settings: ``[es]`` holds what
    every strategy shares (population, sigma, mirrored sampling), each strategy's own section
    the rest (OpenAI-ES's live in ``[es]`` too, where they always were)."""
    es_cfg, seed = config.es, config.run.seed
    common = {"population": es_cfg.population, "sigma": es_cfg.sigma, "noise": noise,
              "seed": seed, "mirrored": es_cfg.mirrored}
    if es_cfg.strategy == "openai":
        optimizer = make_optimizer(es_cfg.optimizer, theta0.size, es_cfg.lr, es_cfg.momentum)
        return OpenAIES(theta0, **common, optimizer=optimizer, l2=es_cfg.l2,
                        sigma_decay=es_cfg.sigma_decay, sigma_min=es_cfg.sigma_min,
                        lr_decay=es_cfg.lr_decay, lr_min=es_cfg.lr_min,
                        fitness_shaping=FITNESS_SHAPINGS[es_cfg.fitness_shaping])
    if es_cfg.strategy == "snes":
        return SNES(theta0, **common, lr_mean=config.snes.lr_mean,
                    lr_sigma=config.snes.lr_sigma or None)
    if es_cfg.strategy == "sepcma":
        return SepCMA(theta0, **common, mu=config.sepcma.mu or None,
                      cov_scale=config.sepcma.cov_scale, step_size=config.sepcma.step_size)
    if es_cfg.strategy == "ars":
        ars = config.ars
        return ARS(theta0, **common, lr=ars.lr, top=ars.top or None,
                   sigma_decay=es_cfg.sigma_decay, sigma_min=es_cfg.sigma_min,
                   lr_decay=es_cfg.lr_decay, lr_min=es_cfg.lr_min,
                   contrast_from=ars.contrast_from, contrast_lr=ars.contrast_lr or None,
                   contrast_sigma=ars.contrast_sigma or None,
                   contrast_top=ars.contrast_top or None)
    if es_cfg.strategy == "pgpe":
        pgpe = config.pgpe
        return PGPE(theta0, **common, center_lr=pgpe.center_lr or None,
                    optimizer=pgpe.optimizer, max_speed=pgpe.max_speed or None,
                    sigma_lr=pgpe.sigma_lr, sigma_max_change=pgpe.sigma_max_change)
    if es_cfg.strategy == "cma":  # pycma, the same seeded instance on every rank
        return CMA(theta0, **common)
    raise ValueError(f"es.strategy = {es_cfg.strategy!r}: not available in es-train")


#: What the waiting nominations' parameters may take (``run.best_pool``).
POOL_BYTES = 64 * 2**20


def _target_score(config_toml: Path) -> float | None:
    """The ``run.target_score`` a run folder's config.toml holds (its last session's); None
    when it cannot be read."""
    try:
        return float(read_toml(config_toml)["run"]["target_score"])
    except (ConfigError, KeyError, TypeError, ValueError):
        return None


def checksum(array: np.ndarray) -> int:
    """CRC-32 of an array's bytes: equal on two ranks only if the arrays are bit-identical."""
    return zlib.crc32(np.ascontiguousarray(array).view(np.uint8))


class Trainer:
    def __init__(
        self,
        config: Config,
        comm: Comm,
        run_dir: Path | None,
        start_time: float | None = None,
        stop_flag: StopFlag | None = None,
        policy: Any = None,
    ) -> None:
        """``policy``: the user's policy from Python (a factory, class or instance; see
        ``es.rl.policy``) instead of the one ``policy.kind`` names."""
        self.config, self.comm, self.run_dir = config, comm, run_dir
        self.start_time = time.time() if start_time is None else start_time
        self.stop_flag = stop_flag or StopFlag()
        self.elapsed_before = 0.0  # running seconds of earlier sessions of a resumed run
        self.paused_before = 0.0  # and the seconds they stood stopped
        self.pause_clock = PauseClock()
        self.resumed_at: int | None = None
        es_cfg = config.es
        self.env = env_from_config(config)
        check_env_api(self.env, config.env.id)
        seed = config.run.seed
        self.policy = make_policy(config, self.env, policy,
                                  int(generator(seed, TAG_MODULE).integers(2**31)))
        if getattr(self.policy, "vbn", False):
            self.policy = dataclasses.replace(self.policy, reference=self._reference_batch())
        es_cfg.check_table_holds(self.policy.num_params)
        theta0 = self.policy.initial_params(generator(seed, TAG_INIT))
        self.lockstep = None  # several members in step, for a policy that batches them
        self.probe_digest: str | None = None
        if isinstance(self.policy, UserPolicy):
            self.policy.probe(self.env, theta0)
            self.probe_digest = self.policy.probe_digest()
            if config.run.lockstep > 1:
                self.lockstep = self.policy.lockstep(config.run.lockstep)
        self.envs = [self.env]  # the lockstep's, made when first needed
        self._agree_on_start(theta0)
        self.noise = make_noise(config, comm)
        self.strategy = make_strategy(config, theta0, self.noise)
        self.obs_stats = ObsStats(self.policy.obs_dim, config.es.population)
        self.warned_large_observations = False
        self.timesteps = 0
        self.mean_episode_length = 0.0  # of the last generation, for es.episode_cap
        self.out_of_time = False  # run.max_seconds spent, as the ranks agreed
        self.rollout_s = 0.0  # this rank's own episode time in the current generation
        self.side_s = 0.0  # of which in confirmation episodes played beside the members
        self.side_eval_s = 0.0  # and in the last generation's evaluation episodes
        # The ranks' mean seconds in them (evaluation, confirmation): the machine's cost.
        self.side_ranks_s = (0.0, 0.0)
        self.io_s = 0.0  # rank 0's file writes after the previous generation
        self.peak_rss_mb = 0.0  # the largest rank's peak resident memory, as they agreed
        self.policy_saved_at: int | None = None  # the generation policy.npz holds
        self.best_return: float | None = None  # the kept policy's confirmed score
        self.best_generation: int | None = None
        self.confirm_steps = 0  # env steps played by confirmations (run.best_share)
        run_cfg = config.run
        self.nominations = NominationPool(self._pool_size(), run_cfg.best_episodes,
                                          run_cfg.best_by, seed)
        self.confirmed: Nomination | None = None  # kept in this generation: rank 0 saves it
        self.stop_confirm_s = 0.0
        self.stop_confirm_episodes = 0
        self.kept_last = False  # whether the stop kept the last policy (run.target_score)
        # An evaluated generation's row, waiting for its evaluation episodes: they are played
        # beside the next generation's members (no rank idles while the others finish them),
        # or at the stop.
        self.held_row: dict[str, Any] | None = None
        # The held row's evaluation returns, once it is written and the callback said stop.
        self.seen_returns: np.ndarray | None = None

    def _pool_size(self) -> int:
        """``run.best_pool``, or fewer where the waiting parameters (kept in memory and in
        every checkpoint) would pass ``POOL_BYTES``: a pool of 16 large networks is not worth
        gigabytes."""
        norm = self.norm
        per_nomination = self.strategy.mean.nbytes + norm.mean.nbytes + norm.std.nbytes
        return max(1, min(self.config.run.best_pool, POOL_BYTES // per_nomination))

    def close(self) -> None:
        """Free the noise table (an MPI shared window, not freed by garbage collection) and
        the environment. Every rank calls it; the trainer cannot train afterwards."""
        if isinstance(self.noise, NoiseTable):
            self.comm.release_shared(self.noise.table)
            self.noise = self.strategy = None
        try:
            self.env.close()
        except Exception as error:  # the user's code, once the run's files are written: a
            # warning, where it had ended a finished run with exit 1 and no done: line
            log.warning("%s: closing the env raised %s: %s", self.config.env.id,
                        type(error).__name__, error)

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        # Freeing the table is collective: only on the ways out that every rank takes alike.
        if kind is None or issubclass(kind, Stopped | TrainingError):
            self.close()

    def _agree_on_start(self, theta0: np.ndarray) -> None:
        """Every rank must start from the same parameters: a user's module built with
        unseeded randomness, or an instance made differently on each rank, would not. One
        checksum per rank, once."""
        sums = self.comm.allgather_rows(np.array([float(checksum(theta0))]),
                                        counts=[1] * self.comm.size)
        if np.unique(sums).size > 1:
            raise TrainingError("the ranks built different initial parameters: the policy's "
                                "construction is not a function of the run's seed (seed torch "
                                "before making a module instance, or pass a factory)")

    @property
    def norm(self) -> ObsNorm:
        if not self.config.policy.obs_norm:
            return ObsNorm.identity(self.policy.obs_dim, self.config.policy.obs_clip)
        return self.obs_stats.norm(self.config.policy.obs_clip)

    def my_members(self, generation: Generation) -> Iterable[int]:
        """The members this rank evaluates: its static share, or, with ``run.schedule =
        "dynamic"``, whichever member is next when the rank is free (finer units balance
        uneven episode lengths better)."""
        if self.config.run.schedule == "dynamic":
            return self.comm.work_units(generation.population)
        return static_share(
            self.comm.rank, self.comm.size, generation.population, generation.mirrored
        ).tolist()

    def my_units(self, generation: Generation, side: int) -> Iterable[int]:
        """This rank's work: units below ``side`` are extra episodes played beside the
        members (round-robin, or served first under the dynamic schedule: they are the
        long, noise-free ones), unit ``side + m`` is member ``m``."""
        if self.config.run.schedule == "dynamic":
            return self.comm.work_units(side + generation.population)
        return [*range(self.comm.rank, side, self.comm.size),
                *(side + member for member in self.my_members(generation))]

    def evaluate_population(self, generation: Generation,
                            side: Sequence[tuple[np.ndarray, ObsNorm, int]] = (),
                            evaluations: int = 0) -> GenerationResults:
        """All members' returns (member order), the total steps and the merged obs sums; and
        the returns of the ``side`` episodes (parameters, normalisation, reset seed: played
        without noise, recording or cap, as evaluations are) played beside them, which fill
        the time ranks would otherwise wait for each other: the first ``evaluations`` are the
        last generation's evaluation, the others a confirmation round, whose steps are
        counted (``side_steps``).

        A failed episode (an exception, a non-finite reward or observation) has return NaN;
        the strategy ranks it below every other member.
        """
        seeds = episode_seeds(self.config.run.seed, generation.index, generation.keys, TAG_ENV)
        norm, record = self.norm, self.config.policy.obs_norm
        increment = self.obs_stats.empty_increment() if record else np.zeros(0, np.int64)
        members, returns, steps = [], [], 0
        side_returns: dict[int, float] = {}
        self.side_s = self.side_eval_s = 0.0
        side_steps = 0  # this rank's confirmation steps
        cap, shift = self.episode_cap(), self.config.es.reward_shift
        started, wait_before = time.perf_counter(), self.comm.wait_s

        def play_side(unit: int) -> None:
            nonlocal side_steps
            side_started = time.perf_counter()
            label = f"evaluation episode {unit}" if unit < evaluations else \
                f"confirmation episode {unit - evaluations}"
            episode = self._noise_free_episode(*side[unit], label)
            side_returns[unit] = episode.total_return
            if unit < evaluations:
                self.side_eval_s += time.perf_counter() - side_started
            else:
                self.side_s += time.perf_counter() - side_started
                side_steps += episode.length

        def members_played() -> Iterator[tuple[int, Episode]]:
            for unit in self.my_units(generation, len(side)):
                if unit < len(side):
                    play_side(unit)
                else:
                    member = unit - len(side)
                    yield member, self._one_episode(generation, member, seeds, norm, record,
                                                    cap)

        if self.lockstep is not None:  # the extra episodes first, one at a time
            for unit in range(self.comm.rank, len(side), self.comm.size):
                play_side(unit)
            played = self._in_lockstep(generation, seeds, norm, record, cap)
        else:
            played = members_played()
        for member, episode in played:
            if record and not self.obs_stats.add_episode(increment, episode) \
                    and np.isfinite(episode.total_return):
                self._warn_large_observations()
            members.append(member)
            returns.append(episode.total_return - shift * episode.length)
            steps += episode.length
        # Rank 0's wait for the dynamic schedule's last units counts as waiting, not playing.
        self.rollout_s = (time.perf_counter() - started - self.side_s - self.side_eval_s
                          - (self.comm.wait_s - wait_before))
        results = share_results(
            self.comm, generation.population, generation.mirrored, members, returns, steps,
            increment, dynamic=self.config.run.schedule == "dynamic",
        )
        if not side:
            return results
        side_all, side_total, seconds = share_side_results(
            self.comm, len(side), side_returns, side_steps, (self.side_eval_s, self.side_s))
        return dataclasses.replace(results, side_returns=side_all, side_steps=side_total,
                                   side_seconds=(float(seconds[0]), float(seconds[1])))

    def _one_episode(self, generation: Generation, member: int, seeds: np.ndarray,
                     norm: ObsNorm, record: bool, cap: int | None) -> Episode:
        seed = seeds[generation.key_of(member)]
        act = self._serving(self.member_act(generation.params(member), norm, seed))
        return safe_episode(self.env, act, seed, f"rank {self.comm.rank}: member {member}",
                            record, cap)

    def _in_lockstep(self, generation: Generation, seeds: np.ndarray, norm: ObsNorm,
                     record: bool, cap: int | None) -> list[tuple[int, Episode]]:
        """``_played_in_lockstep``'s episodes in the order their members were taken (the
        static schedule's order, which the exchange relies on)."""
        taken: list[int] = []
        played = dict(self._played_in_lockstep(generation, seeds, norm, record, cap, taken))
        return [(member, played[member]) for member in taken]

    def _played_in_lockstep(self, generation: Generation, seeds: np.ndarray, norm: ObsNorm,
                            record: bool, cap: int | None,
                            taken: list[int]) -> Iterator[tuple[int, Episode]]:
        """This rank's members played side by side, each in its own copy of the env, one
        policy forward for all per step; a slot whose episode ends takes the next member.
        Each member's episode is the one ``_one_episode`` plays (the same reset seed, action
        noise, recording, cap and failure handling), and its actions do not depend on the
        members beside it (``es.rl.torch_policy.Lockstep``), so the results are the same."""
        lockstep, queue = self.lockstep, iter(self.my_members(generation))
        while len(self.envs) < lockstep.slots:
            self.envs.append(env_from_config(self.config))
        std = self.config.policy.action_noise
        space = self.env.action_space
        playing: dict[int, LockstepEpisode] = {}

        def start(slot: int) -> Iterator[tuple[int, Episode]]:
            """Fill ``slot`` with the next member (yielding those that fail at reset)."""
            for member in queue:
                taken.append(member)
                seed = int(seeds[generation.key_of(member)])
                label = f"rank {self.comm.rank}: member {member}"
                noise = (with_action_noise(lambda action: action, space.low, space.high, std,
                                           generator(seed, TAG_ACTION_NOISE))
                         if std > 0 else None)
                episode = LockstepEpisode(member, self.envs[slot], seed, label, record, cap,
                                          noise)
                if episode.failed is not None:
                    yield member, episode.failed
                    continue
                lockstep.load(slot, generation.params(member))
                playing[slot] = episode
                return

        for slot in range(lockstep.slots):
            yield from start(slot)
        observations = np.zeros((lockstep.slots, self.policy.obs_dim))
        model_inputs = self.policy.model_inputs(norm)
        while playing:
            self.comm.serve()
            for slot, episode in playing.items():
                observations[slot] = np.ravel(episode.observation)
            actions = self.policy.lockstep_actions(lockstep.outputs(model_inputs(observations)))
            for slot in list(playing):
                episode = playing[slot]
                if episode.step(actions[slot]):
                    del playing[slot]
                    yield episode.member, episode.result
                    yield from start(slot)

    def member_act(self, params: np.ndarray, norm: ObsNorm, seed: int
                   ) -> Callable[[Any], Any]:
        """The member's policy, with the configured action noise (seeded by the episode, so a
        mirrored pair sees the same noise): what its episode plays
        (``scripts/bench_throughput.py`` replays members with it, bare)."""
        act = self.policy.bind(params, norm)
        std = self.config.policy.action_noise
        if std > 0:
            space = self.env.action_space
            low, high = ((self.policy.action_low, self.policy.action_high)
                         if isinstance(self.policy, PolicySpec) else (space.low, space.high))
            act = with_action_noise(act, low, high, std, generator(seed, TAG_ACTION_NOISE))
        return act

    def _serving(self, act: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``act``, which on rank 0 under the dynamic schedule also answers the other ranks'
        requests for units between its env steps (``Comm.serve``): rank 0 plays episodes
        too, and a thread serving beside them slowed them by a tenth."""
        if self.config.run.schedule != "dynamic" or self.comm.rank != 0 or self.comm.size == 1:
            return act
        serve = self.comm.serve

        def act_and_serve(observation: Any) -> Any:
            serve()
            return act(observation)

        return act_and_serve

    def _reference_batch(self) -> np.ndarray:
        """The VBN reference batch: observations of a seeded random policy, collected by every
        rank alike (no data travels); a checksum comparison proves they are identical."""
        batch = random_observations(self.env, self.config.policy.vbn_batch,
                                    generator(self.config.run.seed, TAG_VBN))
        sums = self.comm.allgather_rows(np.array([float(checksum(batch))]),
                                        counts=[1] * self.comm.size)
        if np.unique(sums).size > 1:
            raise TrainingError("the ranks collected different VBN reference batches: the "
                                "environment is not deterministic under a seed")
        return batch

    def episode_cap(self) -> int | None:
        """Step cap of this generation's training episodes: ``es.train_steps`` (until
        ``es.train_steps_until`` env steps, if set), and ``es.episode_cap`` times the previous
        generation's mean length (both known alike on every rank), the smaller of those set;
        or none."""
        es_cfg = self.config.es
        cut = es_cfg.train_steps and (not es_cfg.train_steps_until
                                      or self.timesteps < es_cfg.train_steps_until)
        caps = [es_cfg.train_steps] if cut else []
        factor = self.config.es.episode_cap
        if factor and self.mean_episode_length:
            caps.append(max(1, int(np.ceil(factor * self.mean_episode_length))))
        return min(caps, default=None)

    def evaluation_seeds(self, index: int) -> list[int]:
        """The reset seeds of generation ``index``'s evaluation episodes."""
        return episode_seeds(self.config.run.seed, index, self.config.run.eval_episodes,
                             TAG_EVAL)

    def evaluate_mean(self, index: int) -> np.ndarray:
        """Noise-free returns of the current mean policy on generation ``index``'s evaluation
        episodes, spread over the ranks."""
        return self.play(self.strategy.mean, self.norm, self.evaluation_seeds(index),
                         "evaluation")

    def play(self, params: np.ndarray, norm: ObsNorm, seeds: list[int], what: str) -> np.ndarray:
        """A policy's noise-free returns on these reset seeds, the episodes spread over the
        ranks: an evaluation or a confirmation round (``what``) played as its own phase, at
        a stop."""
        with failures_told_once(f"rank {self.comm.rank}"):
            return spread(self.comm, len(seeds), lambda j: self._noise_free_episode(
                params, norm, seeds[j], f"{what} episode {j}").total_return)

    def _noise_free_episode(self, params: np.ndarray, norm: ObsNorm, seed: int,
                            label: str) -> Episode:
        """One episode of a policy as evaluations play it: a fresh binding (a recurrent
        policy starts clean), no action noise, no recording, no step cap."""
        return safe_episode(self.env, self._serving(self.policy.bind(params, norm)), seed,
                            f"rank {self.comm.rank}: {label}")

    def nominate(self, index: int, eval_returns: np.ndarray) -> None:
        """Nominate the mean policy if the run keeps a policy (``run.best_episodes``), the
        generation is ``run.best_from`` or later, and its evaluation's score (``run.best_by``
        over the episodes that finished) beats the kept score (see ``es.rl.kept``)."""
        finished = eval_returns[np.isfinite(eval_returns)]
        run_cfg = self.config.run
        if not run_cfg.best_episodes or not finished.size or index < run_cfg.best_from:
            return
        # ``self.norm`` is computed afresh at each call: the nomination owns its arrays.
        nomination = Nomination(index, policy_score(finished, self.config.run.best_by),
                                self.strategy.mean.copy(), self.norm)
        self.nominations.nominate(nomination, self.best_return)

    def side_round(self) -> tuple[Nomination, list[int]] | None:
        """The confirmation round to play beside this generation's members, if the
        confirmations, this round included, cost at most ``run.best_share`` of the trained
        steps (the round priced at the last generation's mean episode length), or whatever
        they cost if the nomination may still reach ``run.target_score``, which would end
        the run."""
        target = self.config.run.target_score
        planned = self.nominations.next_round(target)
        if planned is None or self.nominations.may_reach(planned[0], target):
            return planned
        estimate = CONFIRM_ROUND * self.mean_episode_length
        if self.confirm_steps + estimate > self.config.run.best_share * self.timesteps:
            return None
        return planned

    def judge(self, verdict: Verdict, index: int) -> None:
        """A confirmed nomination becomes the kept policy (saved after the generation)."""
        if verdict.confirmed is not None:
            self.best_return = verdict.confirmed
            self.best_generation = verdict.nomination.generation
            self.confirmed = verdict.nomination
        self._report(verdict, f"generation {index}: ")

    def _warn_large_observations(self) -> None:
        """Once a run, on the rank that saw it: an episode whose observations are too large
        for the statistics keeps its return (a long, good episode may be the one) but is left
        out of them, and a run where all are never normalises."""
        if self.warned_large_observations:
            return
        self.warned_large_observations = True
        limit = self.obs_stats.limit
        log.warning(f"an episode's observations are too large for policy.obs_norm's statistics "
                    f"(with es.population = {self.config.es.population}, an episode's sums of "
                    f"observations and of their squares must stay within {limit:.2g}: values "
                    f"up to {np.sqrt(limit / 1000):.2g} over 1,000 steps); such episodes are left "
                    "out of them: scale the observations (a gymnasium wrapper) or set "
                    "policy.obs_norm = false")

    def _report(self, verdict: Verdict, when: str) -> None:
        """One line when a confirmation ends."""
        if self.comm.rank != 0 or not verdict.ended:
            return
        nomination, returns, by = verdict.nomination, verdict.returns, self.config.run.best_by
        what = f"{when}generation {nomination.generation}'s policy (evaluation " \
               f"{nomination.score:.2f})"
        if verdict.confirmed is not None:
            log.info(f"{what} kept as policy_best.npz, judged by its {by}: "
                     f"{returns.size} episodes, mean {returns.mean():.2f} +- "
                     f"{returns.std():.2f}, worst {returns.min():.2f}")
        elif failed := int(np.sum(~np.isfinite(returns))):
            log.info(f"{what} not kept: {failed} of {returns.size} confirmation episodes "
                     "failed")
        else:
            log.info(f"{what} not kept: {by} of {returns.size} confirmation episodes "
                     f"{policy_score(returns, by):.2f}")

    def confirm_at_stop(self) -> tuple[float | None, int | None]:
        """Confirm the waiting nominations, the one that may still score highest first, and
        write the best confirmed as ``policy_best.npz``. Judged by the mean, the first that
        holds is kept; judged by the worst episode, the others go on while they may still
        beat it (a round with an episode at or below it ends one), since the first to hold
        may be a policy that fails from some starts, kept only for want of a better one. At
        most ``run.best_pool`` x ``run.best_episodes`` episodes, spread over the ranks. The
        run's own state is left as it was, so a resumed run goes on exactly as one that never
        stopped. Returns the kept policy's score and generation."""
        pool, kept = self.nominations.copy(), self.best_return
        best: tuple[float | None, int | None] = (self.best_return, self.best_generation)
        # The last policy, if nominated: what the race plays of it counts for the target too.
        raced = [n for n in pool.waiting if n.generation == self.strategy.generation]
        started = time.perf_counter()
        if pool and self.comm.rank == 0:
            log.info(f"confirming {len(pool.waiting)} waiting nomination(s) before stopping")
        while (planned := pool.next_round()) is not None:
            nomination, seeds = planned
            returns = self.play(nomination.params, nomination.norm, seeds, "confirmation")
            self.stop_confirm_episodes += len(seeds)
            verdict = pool.record(nomination, returns, kept)
            self._report(verdict, "stop: ")
            if verdict.confirmed is None:
                continue
            kept = verdict.confirmed
            best = (kept, nomination.generation)
            if self.comm.rank == 0 and self.run_dir is not None:
                self._save_policy("policy_best.npz", nomination)
            if self.config.run.best_by == "mean":
                break
        target = self.config.run.target_score
        if target and kept is not None and kept >= target \
                and best[1] != self.strategy.generation:
            best = self._keep_last_if_it_holds(target, best, raced[0].returns if raced else [])
        self.stop_confirm_s = time.perf_counter() - started
        return best

    def _keep_last_if_it_holds(self, target: float, best: tuple[float | None, int | None],
                               played: list[float]) -> tuple[float | None, int | None]:
        """Past ``run.target_score``, the run's last policy replaces the kept one if it holds
        the target on ``run.best_episodes`` confirmation episodes of its own (``run.best_by``;
        judged by the worst episode, a round with an episode below the target ends it).
        Both are good enough, and the kept one was the first of many nominations to pass,
        where a policy that falls from 3 starts in 100 passes 50 episodes one time in five;
        on Humanoid the kept policies of two seeds fell from 3 of 100 unplayed starts, the
        policies those runs stopped with from none. The same seeds a nomination of that
        generation plays, so the episodes the stop's race ``played`` of it count: a resumed
        stop decides the same."""
        run_cfg = self.config.run
        last = Nomination(self.strategy.generation, float("nan"), self.strategy.mean.copy(),
                          self.norm, list(played))
        seeds = self.nominations.confirmation_seeds(last.generation)

        def short(returns: list[float]) -> bool:
            """Judged by the worst episode, one below the target (or failed) ends it."""
            return run_cfg.best_by == "worst" and not policy_score(np.array(returns),
                                                                   "worst") >= target

        start = len(last.returns)
        while start < len(seeds) and not (last.returns and short(last.returns)):
            round_returns = self.play(last.params, last.norm,
                                      seeds[start:start + CONFIRM_ROUND], "confirmation")
            self.stop_confirm_episodes += len(round_returns)
            last.returns.extend(float(r) for r in round_returns)
            start = len(last.returns)
        returns = np.array(last.returns)
        score = policy_score(returns, run_cfg.best_by)
        holds = returns.size == len(seeds) and score >= target
        if self.comm.rank == 0:
            what = (f"stop: the last policy (generation {last.generation}) "
                    f"{'holds' if holds else 'does not hold'} run.target_score = {target:g}: "
                    f"{run_cfg.best_by} of {returns.size} confirmation episodes {score:.2f}")
            log.info(f"{what}, kept as policy_best.npz instead of generation {best[1]}'s"
                     if holds else what)
        if not holds:
            return best
        if self.comm.rank == 0 and self.run_dir is not None:
            self._save_policy("policy_best.npz", last)
        self.kept_last = True
        return score, last.generation

    def state(self) -> TrainingState:
        return TrainingState(
            generation=self.strategy.generation,
            timesteps=self.timesteps,
            elapsed_s=self.elapsed_s,
            paused_s=self.paused_s,
            strategy=self.strategy.state(),
            obs_sum=self.obs_stats.sum.copy(),
            obs_sumsq=self.obs_stats.sumsq.copy(),
            obs_count=self.obs_stats.count,
            mean_episode_length=self.mean_episode_length,
            best_return=self.best_return,
            best_generation=self.best_generation,
            confirm_steps=self.confirm_steps,
            nominations=self.nominations.copy().waiting,
            held_row=self.held_row,
            probe=self.probe_digest,
        )

    def restore(self, state: TrainingState) -> None:
        """Continue from a checkpoint: the next generation is ``state.generation + 1``."""
        theta = state.strategy["theta"]
        if theta.shape != self.strategy.mean.shape:
            raise ValueError(f"checkpoint holds {theta.size} parameters, the policy has "
                             f"{self.strategy.mean.size}")
        if (self.comm.rank == 0 and None not in (state.probe, self.probe_digest)
                and state.probe != self.probe_digest):
            log.warning(f"warning: policy.kind = {self.config.policy.kind!r} acts otherwise "
                        "than when this run was checkpointed (the start-up probe's actions at "
                        "generation 0's parameters differ): its code, or the env's, changed "
                        "since, so the run goes on as another run than the one it was")
        self.strategy.load_state(state.strategy)
        self.strategy.generation = state.generation
        self.obs_stats.sum, self.obs_stats.sumsq = state.obs_sum.copy(), state.obs_sumsq.copy()
        self.obs_stats.count = state.obs_count
        self.timesteps = state.timesteps
        self.mean_episode_length = state.mean_episode_length
        self.best_return, self.best_generation = state.best_return, state.best_generation
        self.confirm_steps = state.confirm_steps
        self.nominations.waiting = state.nominations
        self.held_row = state.held_row
        self.elapsed_before = state.elapsed_s
        self.paused_before = state.paused_s
        self.resumed_at = state.generation
        # Spent in earlier sessions: known alike on every rank (it comes from the checkpoint).
        limit = self.config.run.max_seconds
        self.out_of_time = limit > 0 and state.elapsed_s >= limit

    @property
    def elapsed_s(self) -> float:
        """Running seconds of every session: what ``run.max_seconds`` and ``time_s`` count.
        A stopped process (SIGSTOP, a scheduler's suspend) is not running, as Slurm's time
        limit leaves a suspended job's time out."""
        return self.elapsed_before + time.time() - self.start_time - self.pause_clock.paused_s

    @property
    def paused_s(self) -> float:
        """Seconds the run stood stopped, every session."""
        return self.paused_before + self.pause_clock.paused_s

    def run(self, callback: Callback | None = None) -> TrainResult:
        """Train until a budget is spent or ``callback`` returns False; raises ``Stopped`` or
        ``TrainingError`` after saving.

        ``callback`` is called on rank 0 with each generation's ``progress.csv`` row (a dict
        of its columns; None for an empty cell), after the row is written; the other ranks
        follow its answer. An evaluated generation's row is finished by the next
        generation's episodes, beside which its evaluation is played; if the callback stops
        the run there, that generation's update is not applied. Whatever ends the loop, the
        last finished generation is checkpointed first; then the nominations still waiting
        are confirmed, so every stop leaves its kept policy (``confirm_at_stop``).
        """
        if self.comm.rank == 0 and without_time_limit(self.config, self.env):
            log.warning(f"warning: env.id = {self.config.env.id!r} has no time limit: an "
                        "episode that never ends holds up its generation, and run.max_seconds "
                        "and a stop signal with it; cap them with env.max_episode_steps (e.g. "
                        "--set env.max_episode_steps=1000)")  # once the run is sure to train
        self.pause_clock.start()
        try:
            return self._train(callback)
        finally:
            self.pause_clock.stop()

    def _step_keys(self) -> str:
        """Where the strategy's step size is set, for the message of a diverged update."""
        return {"openai": "es.lr", "snes": "snes.lr_mean", "ars": "ars.lr",
                "pgpe": "pgpe.center_lr", "sepcma": "es.sigma",
                "cma": "es.sigma"}[self.config.es.strategy]

    def _ended_already(self) -> TrainResult | None:
        """A resumed run whose budget is spent where its last stop was, at this very
        generation, with the same ``run.target_score``: that stop's race left its kept policy,
        and running the stop again would replay the race episode for episode (the state is
        as the stop left it) and add a second stop row, whose seconds ``es-bench suite`` would
        count twice. So a requeued sweep's finished runs cost nothing when resumed again, nor
        does a resume with a smaller budget than the run has spent (another budget's name
        than the stop's: the race is the same whichever ended it). Decided on rank 0, which
        holds the run folder; None when anything is to do."""
        ended_by = self._spent_budget() if self.resumed_at is not None else None
        found = None
        if ended_by is not None and self.comm.rank == 0 and self.run_dir is not None:
            stops = read_stops(self.run_dir)
            last = stops[-1] if stops else {}
            before = _target_score(self.run_dir / "config.toml")
            if last.get("generation") == str(self.strategy.generation) \
                    and "kept_return" in last and before == self.config.run.target_score:
                kept = (float(last["kept_return"]), int(last["kept_generation"])) \
                    if last["kept_return"] else (None, None)
                found = (*kept, last_evaluation(self.run_dir / "progress.csv"))
        if ended_by is None or (found := self.comm.broadcast(found)) is None:
            return None
        best_return, best_generation, eval_return = found
        if self.comm.rank == 0:
            goes_on = ("a higher run.target_score" if ended_by.startswith("run.target_score")
                       else "a larger budget")
            log.info(f"ended already at generation {self.strategy.generation} ({ended_by}), "
                     f"its kept policy confirmed then: nothing to train or confirm ({goes_on} "
                     "goes on)")
        return TrainResult(self.strategy.mean.copy(), self.strategy.generation, self.timesteps,
                           eval_return, best_return, best_generation, ended_by)

    def _train(self, callback: Callback | None) -> TrainResult:
        if (ended := self._ended_already()) is not None:
            return ended
        writer = self.comm.rank == 0 and self.run_dir is not None
        progress = None
        if writer:
            config_toml = tomli_w.dumps(self.config.to_dict())
            write_atomically(self.run_dir / "config.toml",
                             lambda handle: handle.write(config_toml.encode()))
            # A held row was not final when its checkpoint was written: it is written again.
            kept_rows = None if self.resumed_at is None else \
                self.resumed_at - (self.held_row is not None)
            progress = ProgressLog(
                self.run_dir / "progress.csv", kept_rows,
                tensorboard_config=config_toml if self.config.run.tensorboard else None)
        eval_return, saved_at, torn = None, self.strategy.generation, False
        stop: Stopped | None = None
        best_eval = progress.best_eval if progress else None  # of the sessions before too
        first = (self.strategy.generation, self.timesteps, time.perf_counter())

        def write(row: dict) -> None:
            """Log and write a finished row; save its policy if evaluated (the mean policy
            still: a row is finished before the next update)."""
            nonlocal eval_return, best_eval
            if row["eval_return"] is not None:
                eval_return = row["eval_return"]
                best_eval = max(eval_return, best_eval if best_eval is not None else -np.inf)
            if self.comm.rank == 0:
                log.info(progress_line(row, best_eval, self._eta_s(*first)),
                         extra=None if row["eval_return"] is not None else TRANSIENT)
                if progress:
                    progress.write(row)
            if writer and row["evaluated"]:
                self._save_policy("policy.npz")

        def go_on(row: dict) -> bool:
            """The callback's answer (every rank gets rank 0's)."""
            return callback is None or rank_zero_decides(
                self.comm, callback, {key: row.get(key) for key in COLUMNS})

        held = self.held_row
        if held is not None and held["generation"] % self.config.run.eval_every \
                and self._spent_budget() is None:
            # Evaluated only because the last session's budget ended there: a run that never
            # stopped does not evaluate it, so neither does this one (nor nominate it). Its
            # row goes back into progress.csv as that run writes it.
            write(held | {"evaluated": False})
            self.held_row = self.seen_returns = None

        def finish(row: dict) -> bool:
            """A held row, finished by the next generation's episodes: written, and the
            callback asked whether that generation's update is applied."""
            write_started = time.perf_counter()
            write(row)
            self.io_s += time.perf_counter() - write_started
            return go_on(row)

        try:
            try:
                while (ended_by := self._spent_budget()) is None:
                    row = self._generation(finish)
                    if row is None:
                        break  # the callback stopped the run at the previous generation
                    io_started = time.perf_counter()
                    if self.held_row is None:
                        write(row)
                    if writer and row["new_best"]:
                        self._save_policy("policy_best.npz", self.confirmed)
                    if self.strategy.generation % self.config.run.checkpoint_every == 0:
                        saved_at = self._checkpoint()
                    self.io_s = time.perf_counter() - io_started
                    if row["stop_signal"]:
                        stop = Stopped(row["stop_signal"], self.strategy.generation)
                        break
                    if self.held_row is None:
                        if not go_on(row):
                            break
                        if callback is not None and (signum := self._agree_signal()):
                            stop = Stopped(signum, self.strategy.generation)
                            break
            except (KeyboardInterrupt, DivergedError):
                torn = True  # mid-update, or a NaN update: keep the last checkpoint
                raise
            except TrainingError:  # too many failed episodes: the mean stands, as at a stop
                if writer and self.policy_saved_at != self.strategy.generation:
                    self._save_policy("policy.npz")
                raise
            finally:
                if not torn and saved_at != self.strategy.generation:
                    self._checkpoint()
            # After the checkpoint, which keeps the row held: a resumed run plays this
            # evaluation beside its next generation, as a run that never stopped does (one
            # held only because the budget ended here, it writes unevaluated: see above).
            if (row := self.evaluate_held()) is not None:
                finish(row)
            if writer and self.policy_saved_at != self.strategy.generation:
                # Stopped between evaluations (a signal, the callback): policy.npz is the
                # mean the run stopped at, the checkpoint's, as it is at a budget's end.
                self._save_policy("policy.npz")
        finally:
            if progress:
                progress.close()
            end_status_line()
        best_return, best_generation = self.confirm_at_stop()
        if self.kept_last:
            # Unlike a race's winner, which waits in the checkpoint's pool and wins again at
            # the next stop, the last policy is in no pool: the state keeps it, so a run
            # resumed with another target goes on from the policy_best.npz on disk.
            self.best_return, self.best_generation = best_return, best_generation
            self._checkpoint()
        if self.comm.rank == 0 and self.run_dir is not None:
            append_stop(self.run_dir, {
                "generation": self.strategy.generation, "timesteps": self.timesteps,
                "ended_by": ended_by or (signal.Signals(stop.signum).name if stop is not None
                                         else "the callback"),
                "confirm_episodes": self.stop_confirm_episodes,
                "confirm_s": round(self.stop_confirm_s, 6),
                "kept_return": "" if best_return is None else best_return,
                "kept_generation": "" if best_generation is None else best_generation})
        if stop is not None:
            raise stop
        return TrainResult(self.strategy.mean.copy(), self.strategy.generation, self.timesteps,
                           eval_return, best_return, best_generation,
                           ended_by or "the callback", self.stop_confirm_s,
                           self.stop_confirm_episodes)

    def _agree(self) -> int:
        """One row per rank: the signal it received (0: none), whether its clock says
        ``run.max_seconds`` is spent, every ``check_every`` generations a checksum of its
        parameters, and its peak resident memory. Returns the signal to stop on, if any;
        sets ``out_of_time`` alike on every rank (clocks differ a little, so the ranks must
        agree, or some would wait forever for the others): rank 0's clock decides, the one
        that writes ``time_s`` and the checkpoint's running seconds; and ``peak_rss_mb``, the
        largest rank's."""
        index = self.strategy.generation
        check = index % self.config.run.check_every == 0
        theta_sum = checksum(self.strategy.mean) if check else 0
        limit = self.config.run.max_seconds
        late = limit > 0 and self.elapsed_s >= limit
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        rows = self.comm.allgather_rows(
            np.array([[self.comm.rank, self.stop_flag.signum, theta_sum, late, peak_kib]],
                     dtype=np.float64),
            counts=[1] * self.comm.size,
        )
        self.out_of_time = bool(rows[0, 3])
        self.peak_rss_mb = float(rows[:, 4].max()) / 1024
        if check and np.unique(rows[:, 2]).size > 1:
            reference = rows[0, 2]
            odd = [int(r) for r, _, c, *_ in rows if c != reference]
            raise TrainingError(
                f"generation {index}: parameters differ between ranks (ranks {odd} disagree "
                "with rank 0); the ranks run different code, libraries or hardware"
            )
        return int(rows[:, 1].max())

    def _agree_signal(self) -> int:
        """The stop signal any rank received since ``_agree``: one that came while the
        callback ran (which may take long) stops the run now, on every rank alike, rather
        than after one more generation played after it."""
        signums = self.comm.allgather_rows(
            np.array([[self.stop_flag.signum]], dtype=np.float64), counts=[1] * self.comm.size)
        return int(signums.max())

    def _checkpoint(self) -> int:
        if self.comm.rank == 0 and self.run_dir is not None:
            save_checkpoint(
                self.run_dir / "checkpoints",
                self.state(),
                self.config.to_dict(),
                self.config.run.keep_checkpoints,
            )
        return self.strategy.generation

    def _eta_s(self, generation0: int, timesteps0: int, started: float) -> float | None:
        """Seconds left at this session's pace, to whichever budget ends the run first."""
        spent = time.perf_counter() - started - self.pause_clock.paused_s
        run_cfg = self.config.run
        done_generations = self.strategy.generation - generation0
        if done_generations <= 0:
            return None
        estimates = [spent / done_generations * (run_cfg.generations - self.strategy.generation)]
        if run_cfg.max_timesteps > 0 and self.timesteps > timesteps0:
            rate = (self.timesteps - timesteps0) / spent
            estimates.append(max(run_cfg.max_timesteps - self.timesteps, 0) / rate)
        if run_cfg.max_seconds > 0:  # all sessions' wall time, as the stop rule counts it
            estimates.append(run_cfg.max_seconds - self.elapsed_s)
        return max(min(estimates), 0.0)

    def _spent_budget(self) -> str | None:
        """The budget that ends the run now, as its config setting (``run.max_seconds = 5``),
        or None while the run goes on."""
        run_cfg = self.config.run
        if self.out_of_time:
            return f"run.max_seconds = {run_cfg.max_seconds:g}"
        if run_cfg.max_timesteps > 0 and self.timesteps >= run_cfg.max_timesteps:
            return f"run.max_timesteps = {run_cfg.max_timesteps}"
        if self.strategy.generation >= run_cfg.generations:
            return f"run.generations = {run_cfg.generations}"
        if run_cfg.target_score and self.best_return is not None \
                and self.best_return >= run_cfg.target_score:
            return f"run.target_score = {run_cfg.target_score:g}"
        return None

    def evaluate_held(self) -> dict | None:
        """At a stop, after the last checkpoint (which keeps the row held: a resumed run plays
        its evaluation beside its next generation, as a run that never stopped does): the
        held row's evaluation, played now unless the callback saw it and stopped the run,
        and its nomination. Returns the row if it is still to be written."""
        if self.held_row is None:
            return None
        if self.seen_returns is not None:
            self._release_held(self.seen_returns)
            return None
        started, wait_before = time.perf_counter(), self.comm.wait_s
        eval_returns = self.evaluate_mean(self.held_row["generation"])
        wall_s = time.perf_counter() - started  # every rank played, or waited for the rest
        row = self._finished_row(eval_returns, wall_s - (self.comm.wait_s - wait_before), wall_s)
        self._release_held(eval_returns)
        return row

    def _finished_row(self, eval_returns: np.ndarray, eval_s: float,
                      eval_ranks_s: float) -> dict:
        """The held row with its evaluation and its cost: rank 0's seconds and the ranks'
        mean."""
        return self.held_row | evaluation_columns(eval_returns) | {
            "eval_s": eval_s, "eval_ranks_s": eval_ranks_s}

    def _release_held(self, eval_returns: np.ndarray) -> None:
        """The held row is written: its evaluation nominates its generation's mean policy
        (still the current one: no update since)."""
        self.nominate(self.held_row["generation"], eval_returns)
        self.held_row = self.seen_returns = None

    def _generation(self, emit: Callable[[dict], bool] | None = None) -> dict | None:
        """Play and apply one generation; its row (held in ``held_row`` while its evaluation
        waits for the next generation). The held row of the previous generation is completed
        by this one's episodes and handed to ``emit`` (none: dropped) before the update; if
        ``emit`` says stop, the update is not applied (the run ends where that row left it)
        and None is returned."""
        started = time.perf_counter()
        bytes_before, wait_before = self.comm.world_bytes_sent, self.comm.wait_s
        generation = self.strategy.ask()
        planned = self.side_round()
        held, mean, norm = self.held_row, self.strategy.mean, self.norm
        evaluation = [(mean, norm, seed) for seed in self.evaluation_seeds(held["generation"])] \
            if held is not None else []
        confirmation = [(planned[0].params, planned[0].norm, seed) for seed in planned[1]] \
            if planned else []
        with failures_told_once(f"rank {self.comm.rank}"):
            results = self.evaluate_population(generation, [*evaluation, *confirmation],
                                               len(evaluation))
        self.side_ranks_s = results.side_seconds
        if held is not None:
            eval_returns = results.side_returns[:len(evaluation)]
            finished = self._finished_row(eval_returns, self.side_eval_s, self.side_ranks_s[0])
            if emit is not None and not emit(finished):
                self.seen_returns = eval_returns  # the run ends here: the row still held
                return None
            self._release_held(eval_returns)
        returns = results.returns
        failed = int(np.isnan(returns).sum())
        allowed = self.config.run.max_failed_fraction
        if failed > allowed * len(returns):
            raise TrainingError(
                f"generation {generation.index + 1}: {failed} of {len(returns)} episodes failed "
                f"(more than run.max_failed_fraction = {allowed}); see the warnings above (a "
                "resume may raise run.max_failed_fraction)"
            )
        update_started = time.perf_counter()
        sigma_mean = float(search_scale(self.strategy).mean())  # the one this generation used
        stats = self.strategy.tell(returns)
        if not np.all(np.isfinite(self.strategy.mean)):  # the same on every rank
            raise DivergedError(
                f"generation {generation.index + 1}: the update made the parameters NaN or "
                f"inf, a step too long for them ({self._step_keys()}); the newest checkpoint "
                "holds the last finite ones")
        if self.config.policy.obs_norm:
            self.obs_stats.apply(results.obs_increment)
        update_s = time.perf_counter() - update_started
        steps = results.steps
        self.timesteps += steps
        self.mean_episode_length = steps / len(returns)
        index = self.strategy.generation
        stop_signal = self._agree()
        self.confirmed = None
        if planned:
            self.confirm_steps += results.side_steps
            self.judge(self.nominations.record(planned[0], results.side_returns[len(evaluation):],
                                               self.best_return), index)
        evaluated = index % self.config.run.eval_every == 0 or self._spent_budget() is not None
        elapsed = time.perf_counter() - started
        row = {
            "generation": index,
            "timesteps": self.timesteps,
            "time_s": self.elapsed_s,
            "paused_s": self.paused_s,
            "return_mean": float(np.nanmean(returns)),
            "return_min": float(np.nanmin(returns)),
            "return_max": float(np.nanmax(returns)),
            "failed_episodes": failed,
            **evaluation_columns(None),
            "evaluated": evaluated,
            "new_best": self.confirmed is not None,
            "best_return": self.best_return,
            "confirm_steps": results.side_steps,
            "confirm_s": self.side_s,
            "eval_ranks_s": 0.0,
            "confirm_ranks_s": self.side_ranks_s[1],
            "episodes": len(returns),
            "evals_per_s": len(returns) / elapsed,
            "steps_per_s": steps / elapsed,
            "bytes_sent": self.comm.world_bytes_sent - bytes_before,
            "rollout_s": self.rollout_s,
            "wait_s": self.comm.wait_s - wait_before,
            "update_s": update_s,
            "eval_s": 0.0,
            "io_s": self.io_s,
            "grad_norm": stats.get("grad_norm"),
            "sigma_mean": sigma_mean,
            "peak_rss_mb": self.peak_rss_mb,
            # Which process wrote the row (peak_rss_mb is per process): 0 for the first.
            "resumed_from": self.resumed_at or 0,
            "stop_signal": stop_signal,
        }
        if evaluated:  # JSON-able: a checkpoint keeps it
            self.held_row = {key: value.item() if isinstance(value, np.generic) else value
                             for key, value in row.items()}
        return row

    def _save_policy(self, name: str, nomination: Nomination | None = None) -> None:
        """The mean policy, or a nominated one."""
        params, norm, generation = ((self.strategy.mean, self.norm, self.strategy.generation)
                                    if nomination is None else
                                    (nomination.params, nomination.norm, nomination.generation))
        if nomination is None:
            self.policy_saved_at = generation
        save_policy(self.run_dir / name, self.policy, params, norm, self.config.env.id,
                    generation)
