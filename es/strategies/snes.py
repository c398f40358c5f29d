"""Separable NES (Schaul, Glasmachers and Schmidhuber 2011, "High Dimensions and Heavy Tails for
Natural Evolution Strategies", GECCO) as a pure ask/tell strategy (``es.strategies.base``).

The search distribution is ``N(mu, diag(sigma)^2)``. With utilities ``u`` given by rank (best
member first, ``nes_utilities``) and members ``mu + sigma * z_i``, one generation is the
natural-gradient step of the paper:

    mu    <- mu + eta_mu * sigma * sum_i u_i z_i
    sigma <- sigma * exp(eta_sigma / 2 * sum_i u_i (z_i**2 - 1))

with ``eta_mu = 1`` and ``eta_sigma = (3 + ln d) / (5 sqrt d)``. Mirrored sampling (member 2k
takes ``+z_k``, member 2k+1 ``-z_k``) is optional and on by default, as in the ``es.minimize``
of before this family. The sums stream over the shared noise (``Perturbations.weighted_sum``),
so memory stays O(d) for any population.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from es.core.noise import NoiseSource
from es.core.shaping import by_rank, nes_utilities
from es.strategies.base import NoiseStrategy, fitness_summary


class SNES(NoiseStrategy):
    """Mean and per-coordinate sigma of a separable Gaussian, adapted by natural gradients."""

    name: ClassVar[str] = "snes"

    def __init__(
        self,
        mean0: np.ndarray,
        *,
        population: int,
        sigma: float,
        noise: NoiseSource,
        seed: int = 0,
        mirrored: bool = True,
        dtype: type = np.float32,
        lr_mean: float = 1.0,
        lr_sigma: float | None = None,
    ) -> None:
        super().__init__(mean0, population=population, sigma=sigma, noise=noise, seed=seed,
                         mirrored=mirrored, dtype=dtype)
        dim = self.theta.size
        if not lr_mean > 0:
            raise ValueError(f"lr_mean {lr_mean}: must be > 0")
        if lr_sigma is not None and not lr_sigma >= 0:
            raise ValueError(f"lr_sigma {lr_sigma}: must be >= 0 (None: the default, "
                             "(3 + ln d) / (5 sqrt d))")
        if lr_sigma is None:
            lr_sigma = (3 + math.log(dim)) / (5 * math.sqrt(dim))
        self.sigma = np.full(dim, float(sigma))  # float64 whatever the mean's dtype
        self.lr_mean, self.lr_sigma = float(lr_mean), float(lr_sigma)
        self.utilities = nes_utilities(population)

    @property
    def scale(self) -> np.ndarray:
        return self.sigma.astype(self.theta.dtype)

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """One natural-gradient step from every member's fitness (member order, higher is
        better; a non-finite fitness ranks below every finite one)."""
        generation = self.ask()
        fitness = self._fitness(fitness)
        u = by_rank(self.utilities, fitness)
        signed, plain = generation.direction_weights(u)
        grad_mean = generation.directions.weighted_sum(signed).astype(np.float64)  # sum u z
        grad_sigma = (generation.directions.weighted_sum(plain, squared=True).astype(np.float64)
                      - u.sum())  # sum u (z**2 - 1)
        self.theta = (self.theta + self.lr_mean * self.sigma * grad_mean).astype(self.theta.dtype)
        self.sigma = self.sigma * np.exp(0.5 * self.lr_sigma * grad_sigma)
        self.generation += 1
        self._pending = None
        return {
            **fitness_summary(fitness),
            "sigma_mean": float(self.sigma.mean()),
            "sigma_max": float(self.sigma.max()),
            "sigma_min": float(self.sigma.min()),
        }

    def state(self) -> dict[str, np.ndarray]:
        return {"theta": self.theta.copy(), "sigma": self.sigma.copy()}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        for key, want in (("theta", self.theta), ("sigma", self.sigma)):
            if np.shape(state[key]) != want.shape:
                raise ValueError(f"the state's {key} holds {np.size(state[key])} values, the "
                                 f"strategy has {want.size}")
        self.theta = np.array(state["theta"], dtype=self.theta.dtype)
        self.sigma = np.array(state["sigma"], dtype=np.float64)
        self._pending = None
