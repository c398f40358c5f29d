"""DQN (Mnih et al. 2013/2015) with the Double-DQN target (van Hasselt et al. 2016).

One process: act epsilon-greedily, store transitions in a replay memory, every
``dqn.train_every`` steps take ``dqn.gradient_steps`` Adam steps on the Huber TD error of
sampled batches against a target network that is synced every ``dqn.target_update_every``
steps. Discrete actions only (classic control, Atari RAM). The pieces (``ReplayBuffer``,
``QLearner``, ``epsilon_at``) are shared with the Gorila-style distributed version
(``es.baselines.gorila``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from es.baselines import nn
from es.baselines.common import (
    BaselineResult,
    BaselineRun,
    Begin,
    checked_step,
    clip_by_norm,
    network_spec,
    progress_row,
    scaled_env,
)
from es.config import Config, ConfigError, DQNConfig
from es.core.optim import Adam
from es.core.seeding import TAG_ENV, TAG_INIT, generator
from es.parallel.comm import Comm

TAG_REPLAY = 0xDE1A  # replay sampling and epsilon-greedy draws


class ReplayBuffer:
    """A circular memory of transitions; the oldest is overwritten once it is full."""

    def __init__(self, capacity: int, obs_dim: int, dtype: np.dtype = np.float32) -> None:
        """``dtype``: float32 for scaled vectors, uint8 for frames (a quarter of the memory)."""
        self.capacity = capacity
        self.obs = np.zeros((capacity, obs_dim), dtype=dtype)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=dtype)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float64)
        # Terminated (not truncated): a time limit does not make the next state worthless.
        self.terminated = np.zeros(capacity, dtype=bool)
        self.position = 0
        self.size = 0

    def add(self, obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray,
            terminated: bool) -> None:
        i = self.position
        self.obs[i], self.next_obs[i] = np.ravel(obs), np.ravel(next_obs)
        self.actions[i], self.rewards[i], self.terminated[i] = action, reward, terminated
        self.position = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def add_rows(self, rows: np.ndarray) -> None:
        """Transitions packed by ``pack_transition`` (what Gorila's actors send)."""
        dim = self.obs.shape[1]
        for row in rows:
            self.add(row[:dim], int(row[dim]), float(row[dim + 1]), row[dim + 2: 2 * dim + 2],
                     bool(row[2 * dim + 2]))

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A uniform batch (with replacement) of the stored transitions."""
        if self.size == 0:
            raise ValueError("the replay memory is empty")
        index = rng.integers(0, self.size, size=batch_size)
        return {"obs": self.obs[index], "actions": self.actions[index],
                "rewards": self.rewards[index], "next_obs": self.next_obs[index],
                "terminated": self.terminated[index]}


def pack_transition(obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray,
                    terminated: bool) -> np.ndarray:
    """One transition as a float64 row: obs, action, reward, next obs, terminated."""
    return np.concatenate([np.ravel(obs), [action, reward], np.ravel(next_obs), [terminated]])


def epsilon_at(step: int, cfg: DQNConfig) -> float:
    """Linear decay from ``epsilon_start`` to ``epsilon_end`` over ``epsilon_decay_steps``."""
    fraction = min(step / cfg.epsilon_decay_steps, 1.0)
    return cfg.epsilon_start + fraction * (cfg.epsilon_end - cfg.epsilon_start)


def lr_at(step: int, cfg: DQNConfig) -> float:
    """Linear from ``lr`` to ``lr_end`` over ``lr_decay_steps`` env steps (0: constant)."""
    if cfg.lr_decay_steps == 0:
        return cfg.lr
    fraction = min(step / cfg.lr_decay_steps, 1.0)
    return cfg.lr + fraction * (cfg.lr_end - cfg.lr)


def greedy_action(spec: nn.Network, params: np.ndarray, obs: np.ndarray) -> int:
    q, _ = nn.forward(spec, params, np.ravel(obs)[None, :])
    return int(np.argmax(q[0]))


def epsilon_greedy(spec: nn.Network, params: np.ndarray, obs: np.ndarray, epsilon: float,
                   rng: np.random.Generator) -> int:
    if rng.random() < epsilon:
        return int(rng.integers(spec.act_dim))
    return greedy_action(spec, params, obs)


class QLearner:
    """The online and target Q-networks and the TD update."""

    def __init__(self, spec: nn.Network, cfg: DQNConfig, seed: int) -> None:
        self.spec, self.cfg = spec, cfg
        self.online = nn.initial_params(spec, generator(seed, TAG_INIT))
        self.target = self.online.copy()
        self.optimizer = Adam(spec.num_params, cfg.lr)
        self.updates = 0

    def td_targets(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """``r + gamma * Q_target(s', a*)`` (0 after termination); ``a*`` is the target net's
        argmax, or with Double DQN the online net's."""
        next_q_target, _ = nn.forward(self.spec, self.target, batch["next_obs"])
        if self.cfg.double:
            next_q_online, _ = nn.forward(self.spec, self.online, batch["next_obs"])
            chosen = np.argmax(next_q_online, axis=1)
        else:
            chosen = np.argmax(next_q_target, axis=1)
        next_value = next_q_target[np.arange(len(chosen)), chosen]
        return batch["rewards"] + self.cfg.gamma * next_value * ~batch["terminated"]

    def loss_and_grad(self, batch: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
        """Huber TD loss of the taken actions' Q-values and its gradient (targets fixed)."""
        targets = self.td_targets(batch)
        q, trace = nn.forward(self.spec, self.online, batch["obs"])
        rows = np.arange(len(targets))
        loss, grad_taken = nn.huber(q[rows, batch["actions"]], targets, self.cfg.huber_delta)
        grad_q = np.zeros_like(q)
        grad_q[rows, batch["actions"]] = grad_taken
        return loss, nn.backward(self.spec, self.online, trace, grad_q)

    def learn(self, batch: dict[str, np.ndarray], env_steps: int) -> float:
        """One Adam step at the step size of ``env_steps`` (``lr_at``); returns the gradient
        norm before clipping."""
        self.optimizer.lr = lr_at(env_steps, self.cfg)
        _, grad = self.loss_and_grad(batch)
        grad, norm = clip_by_norm(grad, self.cfg.max_grad_norm)
        self.online += self.optimizer.step(grad)
        self.updates += 1
        return norm

    def sync_target(self) -> None:
        """Copy the online network into the target (``tau`` = 1) or move part way there."""
        tau = self.cfg.tau
        self.target = self.online.copy() if tau == 1 else (
            tau * self.online + (1 - tau) * self.target)


def check_discrete(spec: nn.Network, program: str) -> None:
    if not spec.discrete:
        raise ConfigError(f"{program} needs discrete actions; this env's are continuous "
                          "(use es-baseline pg or ppo)")


def train(config: Config, comm: Comm, run_dir: Path | None,
          started: float | None = None, begin: Begin = lambda: None
          ) -> BaselineResult:
    """DQN in this process (rank 0 of ``comm``; other ranks would duplicate the work)."""
    cfg, seed = config.dqn, config.run.seed
    env, norm = scaled_env(config)
    spec = network_spec(config, env, "es-baseline dqn")
    check_discrete(spec, "es-baseline dqn")
    begin()
    run = BaselineRun(config, comm, run_dir, spec, norm, started)
    learner = QLearner(spec, cfg, seed)
    pixels = env.observation_space.dtype == np.uint8 and config.policy.kind == "cnn"
    memory = ReplayBuffer(cfg.buffer_size, spec.obs_dim, np.uint8 if pixels else np.float32)
    rng = generator(seed, TAG_REPLAY)
    env_seeds = generator(seed, TAG_ENV)
    obs, _ = env.reset(seed=int(env_seeds.integers(2**31 - 1)))
    episode_return, finished, failed = 0.0, [], 0
    steps, rounds, grad_norm = 0, 0, None
    round_started, update_s = time.perf_counter(), 0.0
    try:
        last = False
        round_steps = 0
        while not last:  # budgets are checked between rounds, and the clock at every step
            action = epsilon_greedy(spec, learner.online, obs, epsilon_at(steps, cfg), rng)
            step = checked_step(env, action, f"step {steps}")
            if step is not None:
                next_obs, reward, terminated, truncated = step
                memory.add(obs, action, reward, next_obs, terminated)
                episode_return += reward
                obs = next_obs
            steps += 1
            round_steps += 1
            if step is None or terminated or truncated:
                if step is None:
                    failed += 1
                else:
                    finished.append(episode_return)
                episode_return = 0.0
                obs, _ = env.reset(seed=int(env_seeds.integers(2**31 - 1)))
            if steps > cfg.learning_starts and steps % cfg.train_every == 0:
                update_started = time.perf_counter()
                for _ in range(cfg.gradient_steps):
                    grad_norm = learner.learn(memory.sample(cfg.batch_size, rng), steps)
                update_s += time.perf_counter() - update_started
            if steps % cfg.target_update_every == 0:
                learner.sync_target()
            # A round of pixels takes minutes (a 250-step round of Pong: 19 s): the time
            # budget ends the round under way rather than overrun it by one.
            out_of_time = run.out_of_time()
            if steps % cfg.steps_per_round == 0 or out_of_time:
                rounds += 1
                elapsed = time.perf_counter() - round_started
                last = run.budget_spent(rounds, steps) or out_of_time
                eval_started = time.perf_counter()
                evals = (run.evaluate(learner.online, rounds)
                         if run.due_for_eval(rounds, last) else None)
                row = progress_row(rounds, steps, finished, failed, round_steps,
                                   elapsed, eval_started, rollout_s=elapsed - update_s,
                                   update_s=update_s, grad_norm=grad_norm)
                run.record(row, learner.online, evals)
                finished, failed, update_s, round_steps = [], 0, 0.0, 0
                round_started = time.perf_counter()
    finally:
        run.close()
    return BaselineResult(rounds, steps, run.eval_return)
