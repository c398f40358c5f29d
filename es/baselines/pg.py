"""REINFORCE with a learned value baseline (Williams 1992; Karpathy's "Pong from pixels"),
data-parallel over MPI ranks.

Each update, ``pg.episodes_per_update`` episodes are split over the ranks. Every episode's
reset seed and action draws are a pure function of (run seed, update, episode), never of the
rank, so any number of ranks plays the same episodes. Each rank sums the gradients of its own
episodes; one ``Allreduce`` adds them up, and every rank takes the same Adam step: the
gradients travel, unlike ES where only returns do (``bytes_sent`` in ``progress.csv`` shows
the difference). Discrete actions use a softmax policy; continuous ones a Gaussian with a
learned, state-independent log standard deviation. ``policy.npz`` holds the greedy/mean
policy, which ``es-eval`` plays.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
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
from es.config import Config, PGConfig
from es.core.optim import Adam
from es.core.seeding import TAG_ENV, TAG_INIT, episode_seeds, generator
from es.parallel.comm import Comm
from es.parallel.exchange import round_robin
from es.rl.cnn import ConvNetSpec
from es.rl.policies import PolicySpec

TAG_PG_ACTIONS = 0x9A7  # an episode's action sampling

#: The most a forward pass's trace may hold: a CNN's (its patch matrices) is ~1.6 MB a step,
#: so 16 Pong episodes in one pass asked for ~30 GB and the OOM killer ended the run. A
#: batch goes through in passes of as many steps as fit (a pass's backward needs about as
#: much again); an MLP's batch is one pass.
TRACE_BUDGET_BYTES = 128 * 2**20


@dataclass
class Trajectory:
    obs: np.ndarray  # (T, obs_dim)
    actions: np.ndarray  # (T,) discrete or (T, act_dim) continuous
    rewards: np.ndarray  # (T,)

    @property
    def total_return(self) -> float:
        return float(self.rewards.sum())


@dataclass
class Batch:
    """One rank's episodes of an update, prepared once for both the advantage statistics
    and the gradients."""

    obs: np.ndarray  # (N, obs_dim)
    actions: np.ndarray  # (N,) or (N, act_dim)
    returns: np.ndarray  # (N,) returns-to-go
    values: np.ndarray  # (N, 1) the value network's estimates
    advantages: np.ndarray  # (N,) returns - values, before standardisation

    def statistics(self) -> np.ndarray:
        """[sum of advantages, sum of squares, steps]: what the ranks add up to standardise
        advantages over the whole batch."""
        return np.array([self.advantages.sum(), np.square(self.advantages).sum(),
                         self.advantages.size])


def returns_to_go(rewards: np.ndarray, gamma: float) -> np.ndarray:
    """``G_t = r_t + gamma * G_{t+1}`` (0 after the last step)."""
    out = np.empty(len(rewards), dtype=np.float64)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


class PolicyGradient:
    """Policy and value networks (float64, so sums over ranks stay close to exact)."""

    def __init__(self, spec: PolicySpec | ConvNetSpec, cfg: PGConfig, seed: int) -> None:
        self.spec, self.cfg = spec, cfg
        if isinstance(spec, ConvNetSpec):  # the same torso, one output
            self.value_spec = dataclasses.replace(spec, n_outputs=1)
        else:
            self.value_spec = PolicySpec("mlp" if spec.hidden else "linear", spec.obs_dim, 1,
                                         False, spec.hidden, spec.activation)
        rng = generator(seed, TAG_INIT)
        self.policy = nn.initial_params(spec, rng).astype(np.float64)
        if not spec.discrete:  # the Gaussian's log std rides at the end of the policy vector
            self.policy = np.concatenate([self.policy, np.full(spec.act_dim, cfg.initial_log_std)])
        self.value = nn.initial_params(self.value_spec, rng).astype(np.float64)
        self.policy_optimizer = Adam(self.policy.size, cfg.lr)
        self.value_optimizer = Adam(self.value.size, cfg.value_lr)
        self.pass_steps = max(1, TRACE_BUDGET_BYTES // max(
            nn.trace_bytes_per_row(spec, self.network),
            nn.trace_bytes_per_row(self.value_spec, self.value)))

    @property
    def network(self) -> np.ndarray:
        """The policy network's parameters (without the log std): what ``policy.npz`` holds."""
        return self.policy[: self.spec.num_params]

    def play(self, env, seed: int, max_steps: int | None = None) -> Trajectory | None:
        """One episode with actions sampled from the policy (draws seeded by the episode);
        None if the environment broke (``checked_step``): the episode failed."""
        rng = generator(seed, TAG_PG_ACTIONS)
        observations, actions, rewards = [], [], []
        obs, _ = env.reset(seed=seed)
        log_std = self.policy[self.spec.num_params:]
        while True:
            x = np.ravel(obs)  # its own dtype: uint8 frames stay small
            out, _ = nn.forward(self.spec, self.network, x[None, :])
            if self.spec.discrete:
                probs = np.exp(nn.log_softmax(out)[0])
                action = int(min(np.searchsorted(np.cumsum(probs), rng.random() * probs.sum()),
                                 len(probs) - 1))
                step_action = action
            else:
                action = out[0] + np.exp(log_std) * rng.standard_normal(self.spec.act_dim)
                step_action = np.clip(action, self.spec.action_low, self.spec.action_high)
            observations.append(x)
            actions.append(action)
            step = checked_step(env, step_action, f"episode seed {seed}")
            if step is None:
                return None
            obs, reward, terminated, truncated = step
            rewards.append(reward)
            if terminated or truncated or len(rewards) == max_steps:
                break
        return Trajectory(np.asarray(observations), np.asarray(actions),
                          np.asarray(rewards, dtype=np.float64))

    def passes(self, steps: int) -> list[slice]:
        """A batch's steps in passes whose traces fit ``TRACE_BUDGET_BYTES``."""
        return [slice(start, start + self.pass_steps)
                for start in range(0, steps, self.pass_steps)]

    def prepare(self, trajectories: list[Trajectory]) -> Batch:
        """This rank's episodes as one batch, with the value network's estimates."""
        obs = np.concatenate([t.obs for t in trajectories])
        returns = np.concatenate([returns_to_go(t.rewards, self.cfg.gamma) for t in trajectories])
        values = np.concatenate([nn.forward(self.value_spec, self.value, obs[part])[0]
                                 for part in self.passes(len(obs))])
        return Batch(obs, np.concatenate([t.actions for t in trajectories]), returns, values,
                     returns - values[:, 0])

    def gradient_sums(self, batch: Batch, adv_mean: float, adv_std: float,
                      total_steps: int) -> np.ndarray:
        """This batch's share of the loss gradients, [policy, value], each a sum over steps
        divided by the *global* step count: adding every rank's shares gives the gradient
        of the whole batch."""
        advantages = batch.advantages
        if self.cfg.normalize_advantages:
            advantages = (advantages - adv_mean) / (adv_std + 1e-8)
        weights = advantages / total_steps
        policy_grad, value_grad = np.zeros(self.policy.size), np.zeros(self.value.size)
        for part in self.passes(len(batch.obs)):
            out, trace = nn.forward(self.spec, self.network, batch.obs[part])
            if self.spec.discrete:
                _, grad_out = nn.categorical_log_prob(
                    out, batch.actions[part].astype(np.int64), weights[part])
                policy_grad -= nn.backward(self.spec, self.network, trace, grad_out)
            else:
                log_std = self.policy[self.spec.num_params:]
                _, grad_mean, grad_log_std = nn.gaussian_log_prob(
                    out, log_std, batch.actions[part], weights[part])
                policy_grad -= np.concatenate(
                    [nn.backward(self.spec, self.network, trace, grad_mean), grad_log_std])
            del trace  # one pass's trace at a time
            _, value_trace = nn.forward(self.value_spec, self.value, batch.obs[part])
            value_grad += nn.backward(
                self.value_spec, self.value, value_trace,
                (batch.values[part] - batch.returns[part, None]) / total_steps)
        return np.concatenate([policy_grad, value_grad])

    def apply(self, gradient: np.ndarray) -> float:
        """One Adam step on each network from the summed gradient; returns the policy
        gradient's norm."""
        policy_grad, value_grad = gradient[: self.policy.size], gradient[self.policy.size:]
        policy_grad, norm = clip_by_norm(policy_grad, self.cfg.max_grad_norm)
        value_grad, _ = clip_by_norm(value_grad, self.cfg.max_grad_norm)
        self.policy += self.policy_optimizer.step(policy_grad)
        self.value += self.value_optimizer.step(value_grad)
        return norm


def train(config: Config, comm: Comm, run_dir: Path | None,
          started: float | None = None, begin: Begin = lambda: None
          ) -> BaselineResult:
    cfg, seed = config.pg, config.run.seed
    env, norm = scaled_env(config)
    spec = network_spec(config, env, "es-baseline pg")
    begin()
    run = BaselineRun(config, comm, run_dir, spec, norm, started)
    learner = PolicyGradient(spec, cfg, seed)
    count = cfg.episodes_per_update
    shares = round_robin(count, comm.size)
    updates, timesteps, last = 0, 0, False
    try:
        while not last:
            round_started, bytes_before = time.perf_counter(), comm.world_bytes_sent
            wait_before = comm.wait_s
            seeds = episode_seeds(seed, updates, count, TAG_ENV)
            played = [learner.play(env, seeds[e]) for e in shares[comm.rank]]
            mine = [t for t in played if t is not None]  # failed episodes teach nothing
            rollout_s = time.perf_counter() - round_started
            update_started = time.perf_counter()
            batch = learner.prepare(mine) if mine else None  # a rank may have no episode
            # One small all-reduce: advantage statistics, and whether any rank's clock says
            # the time budget is spent (all ranks must stop at the same update).
            late = float(run.out_of_time())
            local_stats = batch.statistics() if batch else np.zeros(3)
            stats = comm.allreduce_sum(np.append(local_stats, late))
            steps = int(stats[2])
            grad_norm = None
            if steps:  # every episode of the batch failed: no update (Adam would still move)
                adv_mean = stats[0] / steps
                adv_std = float(np.sqrt(max(stats[1] / steps - adv_mean**2, 0.0)))
                local = (learner.gradient_sums(batch, adv_mean, adv_std, steps) if batch
                         else np.zeros(learner.policy.size + learner.value.size))
                grad_norm = learner.apply(comm.allreduce_sum(local))
            update_s = time.perf_counter() - update_started
            returns = np.array([np.nan if t is None else t.total_return for t in played])
            all_returns = comm.allgather_rows(returns, counts=[len(s) for s in shares])
            finished = all_returns[np.isfinite(all_returns)]
            updates += 1
            timesteps += steps
            last = stats[3] > 0 or run.budget_spent(updates, timesteps)
            eval_started = time.perf_counter()
            evals = (run.evaluate(learner.network, updates)
                     if run.due_for_eval(updates, last) else None)
            elapsed = time.perf_counter() - round_started
            row = progress_row(updates, timesteps, finished.tolist(), count - finished.size,
                               steps, elapsed, eval_started,
                               bytes_sent=comm.world_bytes_sent - bytes_before,
                               rollout_s=rollout_s, wait_s=comm.wait_s - wait_before,
                               update_s=update_s, grad_norm=grad_norm)
            run.record(row, learner.network, evals)
    finally:
        run.close()
    return BaselineResult(updates, timesteps, run.eval_return)
