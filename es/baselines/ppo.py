"""PPO (Schulman et al. 2017) with the clipped surrogate and GAE(lambda) (Schulman et al.
2016), as cleanrl's ``ppo.py`` / ``ppo_continuous_action.py`` run it, data-parallel over MPI.

Every update plays ``ppo.steps_per_env`` steps in each of ``ppo.num_envs`` environments that
carry on across updates (an episode cut by the rollout's end is bootstrapped from the value
of its next observation). Environment ``e`` belongs to rank ``e mod size``; its reset seeds
and action draws depend on (run seed, e, update), never on the rank, so any number of ranks
(up to ``num_envs``) plays the same rollout. Then ``ppo.epochs`` passes over the batch in
``ppo.minibatches`` shuffled minibatches (one permutation of the global batch, seeded by the
update and epoch): each rank adds its samples' loss gradients and one ``Allreduce`` sums
them, so every rank takes the same Adam step.

The loss per minibatch: the clipped surrogate on advantages standardised over the minibatch,
the clipped value loss (``ppo.clip_value``), an entropy bonus; the global gradient norm is
clipped. Observations are standardised by running statistics of every rollout so far (frozen
during a rollout, updated from all ranks' sums after it; ``policy.npz`` saves them for
es-eval) and clipped; rewards are divided by the running standard deviation of the discounted
return (``ppo.normalize_reward``), as cleanrl's wrappers do for MuJoCo. Discrete actions: a
softmax policy; continuous: a Gaussian with a learned state-independent log std, actions
clipped to the space only when stepping. Separate policy and value networks (``policy.*``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from es.baselines import nn
from es.baselines.common import (
    BaselineResult,
    BaselineRun,
    Begin,
    checked_step,
    network_spec,
    progress_row,
)
from es.config import Config, ConfigError, PPOConfig
from es.core.optim import Adam
from es.core.seeding import TAG_ENV, TAG_INIT, episode_seeds, generator
from es.parallel.comm import Comm
from es.rl.envs import env_from_config
from es.rl.policies import ObsNorm, PolicySpec

TAG_PPO_ACTIONS = 0x990A  # an environment's action draws in one update
TAG_PPO_SHUFFLE = 0x990B  # the minibatch permutation of one epoch
EPSILON = 1e-8
ADAM_EPSILON = 1e-5  # PPO's usual (OpenAI baselines, cleanrl), not Adam's 1e-8


def gae(rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray,
        terminated: np.ndarray, episode_end: np.ndarray, gamma: float,
        lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates and returns (advantages + values) of one environment's
    steps in order. ``next_values[t]``: the value of the observation after step t (its last
    step's, or a cut episode's, bootstrap); ``terminated[t]``: no future after step t (a true
    end: nothing bootstrapped); ``episode_end[t]``: step t ended an episode (terminated or
    truncated), so the next step's advantage does not flow back into it."""
    advantages = np.zeros(len(rewards))
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        delta = rewards[t] + gamma * next_values[t] * (1.0 - terminated[t]) - values[t]
        running = delta + gamma * lam * (1.0 - episode_end[t]) * running
        advantages[t] = running
    return advantages, advantages + values


def clipped_surrogate(log_prob: np.ndarray, old_log_prob: np.ndarray, advantages: np.ndarray,
                      clip: float) -> tuple[float, np.ndarray]:
    """The sum over samples of ``max(-A r, -A clip(r, 1 - c, 1 + c))`` with
    ``r = exp(log_prob - old_log_prob)``, and its gradient with respect to ``log_prob``
    (zero where the clipped term is the larger: it is constant there)."""
    ratio = np.exp(log_prob - old_log_prob)
    unclipped = -advantages * ratio
    clipped = -advantages * np.clip(ratio, 1 - clip, 1 + clip)
    loss = float(np.maximum(unclipped, clipped).sum())
    return loss, np.where(unclipped >= clipped, unclipped, 0.0)


def clipped_value_loss(values: np.ndarray, old_values: np.ndarray, returns: np.ndarray,
                       clip: float) -> tuple[float, np.ndarray]:
    """The sum of ``max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2) / 2`` (c = 0: the
    plain squared error) and its gradient with respect to ``values``."""
    error = values - returns
    if clip <= 0:
        return float(0.5 * np.sum(error * error)), error
    moved = old_values + np.clip(values - old_values, -clip, clip)
    clipped_error = moved - returns
    inside = np.abs(values - old_values) <= clip
    use_plain = error * error >= clipped_error * clipped_error
    loss = float(0.5 * np.sum(np.maximum(error * error, clipped_error * clipped_error)))
    # The clipped branch moves with v only while v - v_old is inside the clip range.
    return loss, np.where(use_plain, error, np.where(inside, clipped_error, 0.0))


def categorical_entropy(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's entropy and, for a loss that sums them, the gradient with respect to the
    logits: ``dH/dz_j = -p_j (log p_j + H)``."""
    log_probs = nn.log_softmax(logits)
    probs = np.exp(log_probs)
    entropy = -(probs * log_probs).sum(axis=1)
    return entropy, -probs * (log_probs + entropy[:, None])


@dataclass
class RunningStats:
    """Mean and variance of a stream of vectors, merged batch by batch (Chan et al.); every
    rank merges the same all-reduced sums, so every rank holds the same numbers."""

    mean: np.ndarray
    var: np.ndarray
    count: float = EPSILON

    @classmethod
    def zeros(cls, dim: int) -> RunningStats:
        return cls(np.zeros(dim), np.ones(dim))

    def merge(self, total: float, sums: np.ndarray, squares: np.ndarray) -> None:
        if total <= 0:
            return
        batch_mean = sums / total
        batch_var = np.maximum(squares / total - batch_mean**2, 0.0)
        delta = batch_mean - self.mean
        count = self.count + total
        self.mean = self.mean + delta * total / count
        self.var = (self.var * self.count + batch_var * total
                    + delta**2 * self.count * total / count) / count
        self.count = count


@dataclass
class EnvSlot:
    """One of the ``num_envs`` environments: it carries on across updates."""

    index: int
    env: Any
    obs: np.ndarray | None = None
    episodes: int = 0  # started so far: the next reset seed's index
    episode_return: float = 0.0
    discounted: float = 0.0  # the running discounted return, for reward scaling
    finished: list[float] = field(default_factory=list)  # returns of episodes that ended
    failed: int = 0


@dataclass
class Rollout:
    """One rank's share of an update: its environments' steps, flattened env by env."""

    obs: np.ndarray  # (N, obs_dim), normalised as the policy saw them
    actions: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray
    index: np.ndarray  # each sample's position in the global batch (env * steps + t)


class PPO:
    """Policy (with the Gaussian's log std at its end) and value networks, float64."""

    def __init__(self, spec: PolicySpec, cfg: PPOConfig, seed: int) -> None:
        self.spec, self.cfg = spec, cfg
        self.value_spec = PolicySpec("mlp" if spec.hidden else "linear", spec.obs_dim, 1, False,
                                     spec.hidden, spec.activation)
        rng = generator(seed, TAG_INIT)
        self.policy = nn.orthogonal_params(spec, rng, output_gain=0.01)
        if not spec.discrete:
            self.policy = np.concatenate([self.policy, np.full(spec.act_dim, cfg.initial_log_std)])
        self.value = nn.orthogonal_params(self.value_spec, rng, output_gain=1.0)
        self.optimizer = Adam(self.policy.size + self.value.size, cfg.lr, eps=ADAM_EPSILON)

    @property
    def network(self) -> np.ndarray:
        return self.policy[: self.spec.num_params]

    @property
    def log_std(self) -> np.ndarray:
        return self.policy[self.spec.num_params:]

    def log_prob(self, out: np.ndarray, actions: np.ndarray) -> np.ndarray:
        if self.spec.discrete:
            return nn.log_softmax(out)[np.arange(len(actions)), actions.astype(np.int64)]
        z = (actions - out) * np.exp(-self.log_std)
        return (-0.5 * (z * z).sum(axis=1) - self.log_std.sum()
                - 0.5 * out.shape[1] * np.log(2 * np.pi))

    def act(self, obs: np.ndarray, rngs: list[np.random.Generator]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(actions, their log probabilities, the states' values) for a batch of normalised
        observations, one per environment; each environment draws from its own generator."""
        out, _ = nn.forward(self.spec, self.network, obs)
        values = nn.forward(self.value_spec, self.value, obs)[0][:, 0]
        if self.spec.discrete:
            probs = np.exp(nn.log_softmax(out))
            actions = np.array([min(int(np.searchsorted(np.cumsum(row), rng.random())),
                                    len(row) - 1) for row, rng in zip(probs, rngs, strict=True)])
        else:
            noise = np.array([rng.standard_normal(self.spec.act_dim) for rng in rngs])
            actions = out + np.exp(self.log_std) * noise
        return actions, self.log_prob(out, actions), values

    def loss_gradient(self, batch: Rollout, rows: np.ndarray, adv_mean: float, adv_std: float,
                      total: int) -> tuple[np.ndarray, dict[str, float]]:
        """This rank's part (``rows`` of its rollout) of one minibatch's loss gradient, summed
        over its samples and divided by the minibatch's global size ``total``."""
        cfg = self.cfg
        obs, actions = batch.obs[rows], batch.actions[rows]
        advantages = batch.advantages[rows]
        if cfg.normalize_advantages:
            advantages = (advantages - adv_mean) / (adv_std + EPSILON)
        out, trace = nn.forward(self.spec, self.network, obs)
        new_log_prob = self.log_prob(out, actions)
        surrogate, d_log_prob = clipped_surrogate(new_log_prob, batch.log_probs[rows],
                                                  advantages, cfg.clip)
        weights = d_log_prob / total  # d(loss)/d(log prob) of each sample
        if self.spec.discrete:
            _, grad_out = nn.categorical_log_prob(out, actions.astype(np.int64), weights)
            entropy, d_entropy = categorical_entropy(out)
            grad_out = grad_out - cfg.entropy_coef * d_entropy / total
            policy_grad = nn.backward(self.spec, self.network, trace, grad_out)
        else:
            _, grad_mean, grad_log_std = nn.gaussian_log_prob(out, self.log_std, actions, weights)
            entropy = np.full(len(rows), self.log_std.sum() + 0.5 * out.shape[1] * np.log(
                2 * np.pi * np.e))
            grad_log_std = grad_log_std - cfg.entropy_coef * len(rows) / total
            policy_grad = np.concatenate([nn.backward(self.spec, self.network, trace, grad_mean),
                                          grad_log_std])
        values, value_trace = nn.forward(self.value_spec, self.value, obs)
        value_loss, d_values = clipped_value_loss(values[:, 0], batch.values[rows],
                                                  batch.returns[rows], cfg.clip_value)
        value_grad = nn.backward(self.value_spec, self.value, value_trace,
                                 (cfg.value_coef * d_values / total)[:, None])
        info = {"surrogate": surrogate / total, "value_loss": value_loss / total,
                "entropy": float(entropy.sum()) / total}
        return np.concatenate([policy_grad, value_grad]), info

    def apply(self, gradient: np.ndarray) -> float:
        """One Adam step on both networks after clipping the gradient's global norm."""
        norm = float(np.linalg.norm(gradient))
        if self.cfg.max_grad_norm > 0 and norm > self.cfg.max_grad_norm:
            gradient = gradient * (self.cfg.max_grad_norm / norm)
        step = self.optimizer.step(gradient)
        self.policy += step[: self.policy.size]
        self.value += step[self.policy.size:]
        return norm


def check_ranks(config: Config, ranks: int) -> None:
    """Each rank plays at least one of ``ppo.num_envs`` environments (es-compare asks before
    its first run, not after the runs before PPO's have spent their budgets)."""
    if ranks > config.ppo.num_envs:
        raise ConfigError(f"{ranks} ranks: ppo.num_envs = {config.ppo.num_envs} environments "
                          "are split over the ranks, at least one each")


def train(config: Config, comm: Comm, run_dir: Path | None,
          started: float | None = None, begin: Begin = lambda: None
          ) -> BaselineResult:
    cfg, seed = config.ppo, config.run.seed
    check_ranks(config, comm.size)
    if cfg.anneal_lr and config.run.max_timesteps <= 0:
        raise ConfigError("ppo.anneal_lr = true: anneals over run.max_timesteps, which is 0; "
                          "set it, or ppo.anneal_lr = false")
    if config.policy.kind == "cnn":  # before the CNN's own checks, whose fix would not do
        raise ConfigError("policy.kind = 'cnn': es-baseline ppo trains linear and MLP "
                          "policies on vector observations; train pixels with es-baseline "
                          "dqn or pg")
    probe = env_from_config(config)
    spec = network_spec(config, probe, "es-baseline ppo")
    if not isinstance(spec, PolicySpec):
        raise ConfigError("es-baseline ppo: policy.kind must be 'linear' or 'mlp'")
    begin()
    obs_stats, return_stats = RunningStats.zeros(spec.obs_dim), RunningStats.zeros(1)
    run = BaselineRun(config, comm, run_dir, spec, _obs_norm(obs_stats, cfg), started)
    learner = PPO(spec, cfg, seed)
    slots = [EnvSlot(e, probe if e == comm.rank else env_from_config(config))
             for e in range(comm.rank, cfg.num_envs, comm.size)]
    total = cfg.num_envs * cfg.steps_per_env
    updates, timesteps, last = 0, 0, False
    try:
        while not last:
            round_started, bytes_before = time.perf_counter(), comm.world_bytes_sent
            wait_before = comm.wait_s
            if cfg.anneal_lr:
                learner.optimizer.lr = cfg.lr * max(1 - timesteps / config.run.max_timesteps, 0)
            scale = float(np.sqrt(return_stats.var[0] + EPSILON)) if cfg.normalize_reward else 1
            played = _play(learner, slots, obs_stats, scale, seed, updates)
            rollout_s = time.perf_counter() - round_started
            update_started = time.perf_counter()
            batch = Rollout(*played.samples)
            grad_norm = _optimise(learner, batch, total, comm, seed, updates)
            # The rollout's statistics summed over ranks, its episodes, and whether any
            # rank's clock says the time budget is spent (all must stop at the same update).
            raw, discounted = played.raw_obs, played.discounted
            finished = [r for slot in slots for r in slot.finished]
            failed = sum(slot.failed for slot in slots)
            sums = comm.allreduce_sum(np.concatenate([
                [len(raw)], raw.sum(axis=0), np.square(raw).sum(axis=0),
                [len(discounted), discounted.sum(), np.square(discounted).sum(),
                 float(run.out_of_time()), failed]]))
            dim = spec.obs_dim
            obs_stats.merge(sums[0], sums[1: 1 + dim], sums[1 + dim: 1 + 2 * dim])
            count, total_sum, squares, late, failed_all = sums[1 + 2 * dim:]
            return_stats.merge(count, np.array([total_sum]), np.array([squares]))
            run.norm = _obs_norm(obs_stats, cfg)
            update_s = time.perf_counter() - update_started
            counts = comm.allgather_rows(np.array([float(len(finished))]), counts=[1] * comm.size)
            all_finished = comm.allgather_rows(np.array(finished, dtype=np.float64),
                                               counts=[int(c) for c in counts])
            for slot in slots:
                slot.finished, slot.failed = [], 0
            updates += 1
            timesteps += total
            last = late > 0 or run.budget_spent(updates, timesteps)
            eval_started = time.perf_counter()
            evals = (run.evaluate(learner.network, updates)
                     if run.due_for_eval(updates, last) else None)
            elapsed = time.perf_counter() - round_started
            row = progress_row(updates, timesteps, all_finished.tolist(), int(failed_all),
                               total, elapsed, eval_started,
                               bytes_sent=comm.world_bytes_sent - bytes_before,
                               rollout_s=rollout_s, wait_s=comm.wait_s - wait_before,
                               update_s=update_s, grad_norm=grad_norm)
            run.record(row, learner.network, evals)
    finally:
        run.close()
    return BaselineResult(updates, timesteps, run.eval_return)


def _obs_norm(stats: RunningStats, cfg: PPOConfig) -> ObsNorm:
    """The running statistics as the policy applies them (and ``policy.npz`` saves them)."""
    if not cfg.normalize_obs:
        return ObsNorm.identity(stats.mean.size, float("inf"))
    return ObsNorm(stats.mean.astype(np.float32),
                   np.sqrt(stats.var + EPSILON).astype(np.float32), cfg.obs_clip)


@dataclass
class Played:
    """A rank's environments' part of an update: their samples (``Rollout``'s fields, env by
    env) and what the running statistics need (raw observations, discounted returns)."""

    samples: tuple[np.ndarray, ...]
    raw_obs: np.ndarray
    discounted: np.ndarray


def _play(learner: PPO, slots: list[EnvSlot], stats: RunningStats, reward_scale: float,
          seed: int, update: int) -> Played:
    """``ppo.steps_per_env`` steps of each of this rank's environments in lockstep (one
    forward pass for all of them a step), each from where it stopped. A truncated episode and
    the rollout's last step bootstrap from the value of the observation that follows; a
    terminated one from nothing, nor a truncated one with ``ppo.bootstrap_truncated`` off."""
    cfg, steps, count = learner.cfg, learner.cfg.steps_per_env, len(slots)
    norm = _obs_norm(stats, cfg)
    mean, std = norm.mean.astype(np.float64), norm.std.astype(np.float64)

    def normalised(obs: np.ndarray) -> np.ndarray:
        return np.clip((np.ravel(obs).astype(np.float64) - mean) / std, -norm.clip, norm.clip)

    rngs = [generator(seed, slot.index, update, TAG_PPO_ACTIONS) for slot in slots]
    shape = (count, steps)
    xs, raws = np.zeros((*shape, mean.size)), np.zeros((*shape, mean.size))
    actions = np.zeros(shape if learner.spec.discrete else (*shape, learner.spec.act_dim))
    log_probs, values, rewards = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    terminated, ends, discounted = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    bootstrap: dict[tuple[int, int], np.ndarray] = {}  # (env, step) -> the next observation
    for t in range(steps):
        for slot in slots:
            if slot.obs is None:
                reset_seeds = episode_seeds(seed, slot.episodes, cfg.num_envs, TAG_ENV)
                slot.obs, _ = slot.env.reset(seed=reset_seeds[slot.index])
                slot.episodes += 1
                slot.episode_return = slot.discounted = 0.0
        batch = np.array([normalised(slot.obs) for slot in slots])
        chosen, chosen_log_probs, chosen_values = learner.act(batch, rngs)
        xs[:, t], actions[:, t] = batch, chosen
        log_probs[:, t], values[:, t] = chosen_log_probs, chosen_values
        for i, slot in enumerate(slots):
            raws[i, t] = np.ravel(slot.obs)
            action = (int(chosen[i]) if learner.spec.discrete else
                      np.clip(chosen[i], learner.spec.action_low, learner.spec.action_high))
            step = checked_step(slot.env, action, f"ppo env {slot.index}")
            if step is None:  # a broken environment: the episode ends, failed; no future
                slot.failed += 1
                slot.obs = None
                terminated[i, t] = ends[i, t] = 1.0
                discounted[i, t] = slot.discounted
                continue
            slot.obs, reward, term, trunc = step
            slot.episode_return += reward
            slot.discounted = slot.discounted * cfg.gamma + reward
            discounted[i, t] = slot.discounted
            rewards[i, t] = np.clip(reward / reward_scale, -cfg.reward_clip, cfg.reward_clip)
            cut_off = trunc and not term
            terminated[i, t] = float(term or (cut_off and not cfg.bootstrap_truncated))
            ends[i, t] = float(term or trunc)
            if term or trunc:
                slot.finished.append(slot.episode_return)
                if cut_off and cfg.bootstrap_truncated:
                    bootstrap[i, t] = normalised(slot.obs)
                slot.obs = None
            elif t == steps - 1:
                bootstrap[i, t] = normalised(slot.obs)
    next_values = np.concatenate([values[:, 1:], np.zeros((count, 1))], axis=1)
    next_values[ends.astype(bool)] = 0.0  # within an episode: the next step's value
    if bootstrap:
        out, _ = nn.forward(learner.value_spec, learner.value, np.array(list(bootstrap.values())))
        for (i, t), value in zip(bootstrap, out[:, 0], strict=True):
            next_values[i, t] = value
    advantages, returns = np.zeros(shape), np.zeros(shape)
    for i in range(count):
        advantages[i], returns[i] = gae(rewards[i], values[i], next_values[i], terminated[i],
                                        ends[i], cfg.gamma, cfg.gae_lambda)
    index = np.concatenate([slot.index * steps + np.arange(steps) for slot in slots])

    def flat(array: np.ndarray) -> np.ndarray:
        return array.reshape(count * steps, *array.shape[2:])

    return Played((flat(xs), flat(actions), flat(log_probs), flat(values), flat(advantages),
                   flat(returns), index), flat(raws), flat(discounted))


def _optimise(learner: PPO, batch: Rollout, total: int, comm: Comm, seed: int,
              update: int) -> float | None:
    """``ppo.epochs`` passes of minibatch steps over the global batch; every rank walks the
    same global permutation and contributes the samples it holds."""
    cfg = learner.cfg
    where = np.full(total, -1)
    where[batch.index] = np.arange(len(batch.index))  # global position -> this rank's row
    size = total // cfg.minibatches
    grad_norm = None
    for epoch in range(cfg.epochs):
        order = generator(seed, update, epoch, TAG_PPO_SHUFFLE).permutation(total)
        for start in range(0, size * cfg.minibatches, size):
            rows = where[order[start: start + size]]
            rows = rows[rows >= 0]
            adv = batch.advantages[rows]
            moments = comm.allreduce_sum(np.array([adv.sum(), np.square(adv).sum()]))
            adv_mean = moments[0] / size
            adv_std = float(np.sqrt(max(moments[1] / size - adv_mean**2, 0.0)
                                    * size / max(size - 1, 1)))
            local, _ = learner.loss_gradient(batch, rows, adv_mean, adv_std, size)
            grad_norm = learner.apply(comm.allreduce_sum(local))
    return grad_norm
