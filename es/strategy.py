"""OpenAI-ES (Salimans et al. 2017) as a pure ask/tell object.

No MPI, no Gymnasium, no files: a ``Generation`` from ``ask()`` says how to build each
member's parameters, ``tell(fitness)`` turns the members' fitness (higher is better) into an
optimizer step along

    g = 1 / (n sigma) * sum_i F_i eps_i,    F = centered ranks of the fitness,

with mirrored sampling (member 2k is theta + sigma eps_k, member 2k+1 is theta - sigma eps_k)
and L2 weight decay as the authors' released code applies it (``l2coeff``): the optimizer
minimises ``-g + (l2 / sigma) * theta``. Their code leaves out the ``1 / sigma`` of ``g`` and
steps along ``-sigma g + l2 theta``; this is the same vector divided by ``sigma``, so ``l2``
means what the paper's ``l2coeff`` means (Adam, which the paper used, ignores the common
scale), while ``g`` stays the gradient estimate of the smoothed objective that SGD's step
size refers to.
Every random draw is a pure function of ``(seed, generation, direction)``. Optional
exponential decay of sigma and of the step size (as in evosax's OpenES) is a pure function of
the generation too, so the whole state stays (theta, optimizer state, generation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from es.noise import NoiseSource, Perturbations
from es.optim import Optimizer


def centered_ranks(fitness: np.ndarray) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5]; tied values share their average rank.

    Ties matter in RL (many CartPole members score exactly 500): giving them distinct ranks
    would inject a gradient that depends only on member order.
    """
    x = np.asarray(fitness, dtype=np.float64).ravel()
    n = x.size
    if n < 2:
        raise ValueError(f"centered ranks need at least 2 values, got {n}")
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    ranks = np.empty(n, dtype=np.float64)
    # Average the ranks of each run of equal values.
    boundaries = np.flatnonzero(np.diff(sorted_x) != 0) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [n]))
    for start, end in zip(starts, ends, strict=True):
        ranks[order[start:end]] = (start + end - 1) / 2.0
    return (ranks / (n - 1) - 0.5).astype(np.float32)


def standardized(fitness: np.ndarray) -> np.ndarray:
    """(F - mean) / std: keeps how much better a member was, not just its rank."""
    x = np.asarray(fitness, dtype=np.float64).ravel()
    std = x.std()
    if not std > 0:
        return np.zeros(x.size, dtype=np.float32)
    return ((x - x.mean()) / std).astype(np.float32)


FITNESS_SHAPINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "centered_ranks": centered_ranks,
    "standardized": standardized,
}


@dataclass(frozen=True)
class Generation:
    """One generation's population, described without materialising it."""

    index: int
    theta: np.ndarray
    sigma: float
    mirrored: bool
    population: int
    directions: Perturbations

    def direction_of(self, member: int) -> tuple[int, float]:
        """(direction index, sign) of a member."""
        if not 0 <= member < self.population:
            raise IndexError(f"member {member} outside population of {self.population}")
        if self.mirrored:
            return member // 2, (1.0 if member % 2 == 0 else -1.0)
        return member, 1.0

    def params(self, member: int) -> np.ndarray:
        direction, sign = self.direction_of(member)
        return self.theta + np.float32(sign * self.sigma) * self.directions.vector(direction)


class OpenES:
    """The strategy's state: parameters, optimizer, generation counter."""

    def __init__(
        self,
        theta0: np.ndarray,
        *,
        population: int,
        sigma: float,
        noise: NoiseSource,
        optimizer: Optimizer,
        l2: float = 0.0,
        mirrored: bool = True,
        seed: int = 0,
        sigma_decay: float = 1.0,
        sigma_min: float = 0.0,
        lr_decay: float = 1.0,
        lr_min: float = 0.0,
        fitness_shaping: Callable[[np.ndarray], np.ndarray] = centered_ranks,
    ) -> None:
        if population < 2:
            raise ValueError(f"population {population}: must be at least 2")
        if mirrored and population % 2:
            raise ValueError(f"population {population}: must be even with mirrored sampling")
        if not sigma > 0:
            raise ValueError(f"sigma {sigma}: must be > 0")
        self.theta = np.array(theta0, dtype=np.float32).ravel()
        for name, decay in (("sigma_decay", sigma_decay), ("lr_decay", lr_decay)):
            if not 0 < decay <= 1:
                raise ValueError(f"{name} {decay}: must be in (0, 1]")
        self.population, self.sigma0, self.l2 = population, float(sigma), float(l2)
        self.sigma_decay, self.sigma_min = float(sigma_decay), float(sigma_min)
        self.lr0, self.lr_decay, self.lr_min = float(optimizer.lr), float(lr_decay), float(lr_min)
        self.noise, self.optimizer, self.fitness_shaping = noise, optimizer, fitness_shaping
        self.mirrored, self.seed = mirrored, seed
        self.generation = 0
        self._pending: Generation | None = None

    @property
    def sigma(self) -> float:
        """This generation's perturbation scale."""
        return max(self.sigma0 * self.sigma_decay**self.generation, self.sigma_min)

    @property
    def lr(self) -> float:
        """This generation's optimizer step size."""
        return max(self.lr0 * self.lr_decay**self.generation, self.lr_min)

    @property
    def num_directions(self) -> int:
        return self.population // 2 if self.mirrored else self.population

    def ask(self) -> Generation:
        if self._pending is None:
            directions = self.noise.sample(
                self.seed, self.generation, self.num_directions, self.theta.size
            )
            self._pending = Generation(
                self.generation, self.theta, self.sigma, self.mirrored, self.population, directions
            )
        return self._pending

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """Step the parameters from the fitness of every member, in member order.

        A non-finite fitness (a failed evaluation) counts as worse than every finite one.
        """
        generation = self.ask()
        fitness = np.asarray(fitness, dtype=np.float64).ravel()
        if fitness.size != self.population:
            raise ValueError(f"got {fitness.size} fitness values for {self.population} members")
        finite = np.isfinite(fitness)
        if not finite.all():
            worst = fitness[finite].min() - 1.0 if finite.any() else 0.0
            fitness = np.where(finite, fitness, worst)
        shaped = self.fitness_shaping(fitness)
        weights = shaped[0::2] - shaped[1::2] if self.mirrored else shaped
        ascent = generation.directions.weighted_sum(weights) / np.float32(
            self.population * generation.sigma
        )
        gradient = -ascent + np.float32(self.l2 / generation.sigma) * self.theta
        self.optimizer.lr = self.lr
        step = self.optimizer.step(gradient)
        self.theta = self.theta + step
        self.generation += 1
        self._pending = None
        return {
            "fitness_mean": float(fitness.mean()),
            "fitness_max": float(fitness.max()),
            "fitness_min": float(fitness.min()),
            "grad_norm": float(np.linalg.norm(gradient)),
            "update_ratio": float(np.linalg.norm(step) / (np.linalg.norm(self.theta) + 1e-12)),
        }
