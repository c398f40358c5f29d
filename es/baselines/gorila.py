"""Gorila-style distributed DQN (Nair et al. 2015): actor ranks feed one learner rank.

Rank 0 is the learner: it holds the replay memory and the online/target Q-networks, trains
without waiting for anybody, and every ``dqn.gorila_sync_every`` gradient steps sends its
parameters to the actors. Ranks 1..N-1 are actors: each plays its own episodes
epsilon-greedily with the newest parameters it has received and sends its transitions in
chunks of ``dqn.gorila_chunk``; an actor more than ``dqn.gorila_lead`` transitions ahead of
the learner's replay ratio waits (on a cheap env such as CartPole, actors outrun any learner,
and acting with ever staler parameters stops learning). Messages are non-blocking
point-to-point, so nobody waits for a straggler; the price is that runs are not
reproducible bit for bit (message timing decides which parameters acted when), unlike ES and
PG.

The learner keeps DQN's replay ratio (``dqn.gradient_steps`` per ``dqn.train_every``
transitions received), so Gorila and DQN differ only in who acts where. Progress rows come
every ``dqn.steps_per_round`` transitions received; ``bytes_sent`` counts both directions
(parameters out, transitions in), and the progress line shows each.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from es.baselines.common import (
    BaselineResult,
    BaselineRun,
    Begin,
    checked_step,
    network_spec,
    progress_row,
    scaled_env,
)
from es.baselines.dqn import (
    TAG_REPLAY,
    QLearner,
    ReplayBuffer,
    check_discrete,
    epsilon_at,
    epsilon_greedy,
    pack_transition,
)
from es.config import Config, ConfigError
from es.core.seeding import TAG_ENV, generator
from es.parallel.comm import Comm, LocalComm, Pending
from es.rl.policies import ObsNorm, PolicySpec

log = logging.getLogger("es")

TAG_CHUNK, TAG_PARAMS, TAG_STOP = 11, 12, 13
POLL_S = 0.0005


def row_width(obs_dim: int) -> int:
    """A transition row (``pack_transition``) plus the episode's return where it ended."""
    return 2 * obs_dim + 4


def train(config: Config, comm: Comm, run_dir: Path | None,
          started: float | None = None, begin: Begin = lambda: None
          ) -> BaselineResult:
    if config.policy.kind == "cnn":
        raise ConfigError("policy.kind = 'cnn': gorila sends transitions as float64 rows (450 "
                          "KB per Atari frame pair); train pixels with es-baseline dqn")
    env, norm = scaled_env(config)
    spec = network_spec(config, env, "es-baseline gorila")
    check_discrete(spec, "es-baseline gorila")
    begin()
    if comm.rank == 0:
        result = Learner(config, comm, run_dir, spec, norm, started).run()
    else:
        Actor(config, comm, spec, env).run()
        result = None
    comm.barrier()
    return result if result is not None else BaselineResult(0, 0, None)


class Learner:
    def __init__(self, config: Config, comm: Comm, run_dir: Path | None, spec: PolicySpec,
                 norm: ObsNorm, started: float | None) -> None:
        self.config, self.comm, self.spec, self.cfg = config, comm, spec, config.dqn
        # The learner evaluates on its own: the actors keep acting meanwhile.
        self.run_log = BaselineRun(config, LocalComm(), run_dir, spec, norm, started)
        self.learner = QLearner(spec, self.cfg, config.run.seed)
        self.memory = ReplayBuffer(self.cfg.buffer_size, spec.obs_dim)
        self.rng = generator(config.run.seed, TAG_REPLAY, 0)
        self.actors = list(range(1, comm.size))
        width = row_width(spec.obs_dim)
        self.buffers = {a: np.empty((self.cfg.gorila_chunk + 1, width)) for a in self.actors}
        self.receives: dict[int, Pending] = {a: self._receive(a) for a in self.actors}
        self.param_sends: dict[int, Pending | None] = dict.fromkeys(self.actors)
        self.finished: set[int] = set()
        self.received, self.received_bytes, self.episode_returns = 0, 0, []
        self.failed = 0  # episodes the actors' environments broke, since the last row

    def _receive(self, actor: int) -> Pending:
        return self.comm.irecv(self.buffers[actor], actor, TAG_CHUNK)

    def poll(self) -> None:
        """Store every chunk that has arrived and listen for the next one."""
        for actor, pending in list(self.receives.items()):
            if not pending.done():
                continue
            width = self.buffers[actor].shape[1]
            rows = self.buffers[actor][1: pending.count // width]
            header = self.buffers[actor][0]
            self.received_bytes += pending.count * self.buffers[actor].itemsize
            dim = self.spec.obs_dim
            self.memory.add_rows(rows[:, : 2 * dim + 3])
            self.episode_returns += [float(r) for r in rows[:, -1] if not np.isnan(r)]
            self.failed += int(header[2])
            self.received += len(rows)
            if header[1]:  # the actor's last chunk
                self.finished.add(actor)
                del self.receives[actor]
            else:
                self.receives[actor] = self._receive(actor)

    def broadcast_params(self) -> None:
        """Send the online network and the update count to every actor whose previous copy
        has arrived."""
        params = np.append(self.learner.online, self.learner.updates).astype(np.float32)
        for actor in self.actors:
            previous = self.param_sends[actor]
            if previous is None or previous.done():
                self.param_sends[actor] = self.comm.isend(params.copy(), actor, TAG_PARAMS)

    def run(self) -> BaselineResult:
        cfg, run_log = self.cfg, self.run_log
        ratio = cfg.gradient_steps / cfg.train_every
        rounds, grad_norm, last = 0, None, False
        round_started, update_s = time.perf_counter(), 0.0
        bytes_before = received_before = received_steps = 0
        try:
            while not last:
                self.poll()
                trained = max(self.received - cfg.learning_starts, 0) * ratio
                if self.memory.size >= cfg.batch_size and self.learner.updates < trained:
                    update_started = time.perf_counter()
                    grad_norm = self.learner.learn(self.memory.sample(cfg.batch_size, self.rng),
                                                   self.received)
                    update_s += time.perf_counter() - update_started
                    if self.learner.updates % cfg.gorila_sync_every == 0:
                        self.broadcast_params()
                    # Target syncs follow the transitions received, as DQN's follow env steps.
                    if self.learner.updates % max(int(cfg.target_update_every * ratio), 1) == 0:
                        self.learner.sync_target()
                else:
                    time.sleep(POLL_S)
                # The clock ends the round under way, as DQN's (a round of pixels: minutes).
                out_of_time = run_log.out_of_time()
                if self.received < (rounds + 1) * cfg.steps_per_round and not out_of_time:
                    continue
                rounds += 1
                last = run_log.budget_spent(rounds, self.received) or out_of_time
                elapsed = time.perf_counter() - round_started
                sent = self.comm.bytes_sent - bytes_before
                received = self.received_bytes - received_before
                eval_started = time.perf_counter()
                evals = (run_log.evaluate(self.learner.online, rounds)
                         if run_log.due_for_eval(rounds, last) else None)
                row = progress_row(rounds, self.received, self.episode_returns, self.failed,
                                   self.received - received_steps, elapsed, eval_started,
                                   bytes_sent=sent + received, update_s=update_s,
                                   grad_norm=grad_norm)
                log.info("round %d: %d B of parameters to %d actors, %d B of transitions in",
                         rounds, sent, len(self.actors), received)
                run_log.record(row, self.learner.online, evals)
                self.episode_returns, self.failed, update_s = [], 0, 0.0
                round_started, bytes_before = time.perf_counter(), self.comm.bytes_sent
                received_before, received_steps = self.received_bytes, self.received
            self.stop_actors()  # their last chunks come in: not trained on, nor in a row
        finally:
            run_log.close()
        return BaselineResult(rounds, received_steps, run_log.eval_return)

    def stop_actors(self) -> None:
        """Tell every actor to stop once its parameters have arrived, then take in their last
        chunks (an actor may be mid-send: the learner keeps receiving, so nobody hangs)."""
        stops = []
        for actor in self.actors:
            previous = self.param_sends[actor]
            if previous is not None:
                previous.wait(self.poll)
            stops.append(self.comm.isend(np.ones(1), actor, TAG_STOP))
        while len(self.finished) < len(self.actors):
            self.poll()
            time.sleep(POLL_S)
        for pending in stops:
            pending.wait()


class Actor:
    def __init__(self, config: Config, comm: Comm, spec: PolicySpec, env) -> None:
        self.config, self.comm, self.spec, self.env = config, comm, spec, env
        self.cfg = config.dqn
        # The learner's initial network (same seed), so acting can start before any message.
        self.params = QLearner(spec, self.cfg, config.run.seed).online
        self.param_buffer = np.empty(spec.num_params + 1, dtype=np.float32)
        self.learner_updates = 0
        self.params_in = comm.irecv(self.param_buffer, 0, TAG_PARAMS)
        self.stop = comm.irecv(np.empty(1), 0, TAG_STOP)
        self.send: Pending | None = None
        self.rows: list[np.ndarray] = []
        self.failed = 0  # episodes the environment broke since the last chunk

    def refresh(self) -> None:
        """Take the newest parameters (and the learner's update count) if a copy has arrived,
        and listen for the next."""
        if self.params_in.done():
            self.params = self.param_buffer[:-1].copy()
            self.learner_updates = int(self.param_buffer[-1])
            self.params_in = self.comm.irecv(self.param_buffer, 0, TAG_PARAMS)

    def flush(self, final: bool) -> None:
        """Send the collected rows (header: count, final, episodes failed since the last
        send); the previous send must be done."""
        if self.send is not None:
            self.send.wait(self.refresh)
        header = np.zeros((1, row_width(self.spec.obs_dim)))
        header[0, :3] = len(self.rows), final, self.failed
        chunk = np.vstack([header, *self.rows]) if self.rows else header
        self.send = self.comm.isend(chunk, 0, TAG_CHUNK)
        self.rows, self.failed = [], 0

    def run(self) -> None:
        cfg, rank, actors = self.cfg, self.comm.rank, self.comm.size - 1
        rng = generator(self.config.run.seed, TAG_REPLAY, rank)
        env_seeds = generator(self.config.run.seed, TAG_ENV, rank)
        obs, _ = self.env.reset(seed=int(env_seeds.integers(2**31 - 1)))
        steps, episode_return = 0, 0.0
        ratio = cfg.gradient_steps / cfg.train_every
        while not self.stop.done():
            self.refresh()
            allowed = cfg.learning_starts + self.learner_updates / ratio + cfg.gorila_lead
            if cfg.gorila_lead and steps * actors > allowed:
                if self.rows:  # the learner may need these rows to make its next updates
                    self.flush(final=False)
                time.sleep(POLL_S)
                continue
            # Each actor follows the schedule at the pace of all actors together.
            action = epsilon_greedy(self.spec, self.params, obs,
                                    epsilon_at(steps * actors, cfg), rng)
            step = checked_step(self.env, action, f"actor {rank}: step {steps}")
            steps += 1
            if step is None:  # the environment broke: no transition, the episode failed
                self.failed += 1
                ended = True
            else:
                next_obs, reward, terminated, truncated = step
                episode_return += reward
                ended = terminated or truncated
                row = pack_transition(obs, action, reward, next_obs, terminated)
                self.rows.append(np.append(row, episode_return if ended else np.nan))
                obs = next_obs
            if ended:
                episode_return = 0.0
                obs, _ = self.env.reset(seed=int(env_seeds.integers(2**31 - 1)))
            if len(self.rows) == cfg.gorila_chunk:
                self.flush(final=False)
        self.flush(final=True)
        self.send.wait()
        # The learner sent STOP only after its last parameters arrived: nothing else comes.
        self.refresh()
        self.params_in.cancel()
