"""Separable CMA-ES (Ros and Hansen 2008, "A Simple Modification in CMA-ES Achieving Linear Time
and Space Complexity", PPSN X) as a pure ask/tell strategy (``es.strategies.base``).

CMA-ES with its covariance matrix restricted to the diagonal ``C = diag(c)``: sampling, update
and memory are O(d) per member, so it runs on a noise table at d = 1e5 and beyond. Members are
``x_k = m + sigma * y_k`` with ``y_k = sqrt(c) * z_k`` and ``z_k`` from the shared noise (member
2k+1 takes ``-z_k`` when mirrored). With the best ``mu`` members ranked ``1:lambda ..
mu:lambda`` and positive weights ``w`` (summing to 1), one generation is, as in Hansen's tutorial
("The CMA Evolution Strategy: A Tutorial", 2016) with ``C`` diagonal:

    z_w     = sum_i w_i z_{i:lambda},   y_w = sqrt(c) * z_w
    m      <- m + sigma * y_w
    p_sigma <- (1 - c_sigma) p_sigma + sqrt(c_sigma (2 - c_sigma) mu_eff) z_w
    p_c     <- (1 - c_c) p_c + h_sigma sqrt(c_c (2 - c_c) mu_eff) y_w
    c       <- (1 - c_1 - c_mu) c + c_1 (p_c**2 + (1 - h_sigma) c_c (2 - c_c) c)
                                   + c_mu sum_i w_i y_{i:lambda}**2
    sigma   <- sigma exp(c_sigma / d_sigma (|p_sigma| / E|N(0, I)| - 1))

(``C^{-1/2} y_w = z_w`` because ``C`` is diagonal.) The constants are the tutorial's; the
covariance learning rates ``c_1`` and ``c_mu`` are multiplied by ``(d + 2) / 3`` as Ros and
Hansen do for the diagonal model, which has d, not d^2, degrees of freedom to learn.
``sum_i w_i y_i**2`` is ``c * sum_i w_i z_i**2``: the noise's streaming ``weighted_sum(...,
squared=True)``, never an (n, d) matrix.

Mirrored sampling uses pairwise selection (Auger, Brockhoff and Hansen 2011, "Mirrored Sampling
in Evolution Strategies with Weighted Recombination", GECCO): only the better member of each
pair is recombined. Selecting both members of a pair cancels their steps, which shortens
``p_sigma`` and biases sigma downwards; measured here on Rosenbrock d = 10, mirrored sampling
without it stalled at f ~ 3e-2 after 2e5 evaluations, with it reached 1e-8 in ~5e4.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from es.noise import NoiseSource
from es.strategies.base import NoiseStrategy, fitness_summary
from es.strategies.shaping import by_rank


def recombination_weights(population: int, mu: int | None = None) -> np.ndarray:
    """Positive weights ``ln(mu + 1/2) - ln(i)`` for the best ``mu`` (= population // 2)
    members, summing to one, then zeros: best first, as ``by_rank`` takes them."""
    mu = population // 2 if mu is None else mu
    if not 1 <= mu <= population:
        raise ValueError(f"mu {mu}: must be in [1, population {population}]")
    raw = math.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
    weights = np.zeros(population)
    weights[:mu] = raw / raw.sum()
    return weights


class SepCMA(NoiseStrategy):
    """Mean, step size, diagonal covariance and the two evolution paths of sep-CMA-ES.

    ``mu``: how many members are recombined (population // 2; with pairwise selection, the
    winners of every pair). ``cov_scale`` multiplies both covariance learning rates (0 turns
    the covariance off: CSA-ES). ``pairwise``: pairwise selection when ``mirrored``.
    """

    name: ClassVar[str] = "sepcma"

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
        mu: int | None = None,
        cov_scale: float = 1.0,
        pairwise: bool = True,
    ) -> None:
        super().__init__(mean0, population=population, sigma=sigma, noise=noise, seed=seed,
                         mirrored=mirrored, dtype=dtype)
        n = self.theta.size
        if not cov_scale >= 0:
            raise ValueError(f"cov_scale {cov_scale}: must be >= 0")
        self.pairwise = mirrored and pairwise
        # mu = population // 2 by default: with pairwise selection, the winner of every pair.
        mu = population // 2 if mu is None else mu
        self.weights = recombination_weights(population // 2 if self.pairwise else population, mu)
        mu_eff = 1.0 / float(np.sum(self.weights**2))
        self.mu_eff = mu_eff
        # Step-size control (cumulative step-size adaptation), the tutorial's constants.
        self.c_sigma = (mu_eff + 2) / (n + mu_eff + 5)
        self.d_sigma = 1 + 2 * max(0.0, math.sqrt((mu_eff - 1) / (n + 1)) - 1) + self.c_sigma
        self.chi_n = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n**2))  # E|N(0, I)|
        # Covariance: the tutorial's c_c, c_1, c_mu; c_1 and c_mu times (n + 2) / 3 (Ros & Hansen).
        self.c_c = (4 + mu_eff / n) / (n + 4 + 2 * mu_eff / n)
        c_1 = 2 / ((n + 1.3) ** 2 + mu_eff)
        c_mu = 2 * (mu_eff - 2 + 1 / mu_eff) / ((n + 2) ** 2 + mu_eff)
        separable = cov_scale * (n + 2) / 3
        self.c_1 = min(1.0, separable * c_1)
        self.c_mu = min(1.0 - self.c_1, separable * c_mu)
        self.sigma = float(sigma)
        self.diag_c = np.ones(n)
        self.p_sigma = np.zeros(n)
        self.p_c = np.zeros(n)

    @property
    def scale(self) -> np.ndarray:
        """Each coordinate's standard deviation, ``sigma * sqrt(C_ii)``, in the mean's dtype."""
        return (self.sigma * np.sqrt(self.diag_c)).astype(self.theta.dtype)

    def member_weights(self, fitness: np.ndarray) -> np.ndarray:
        """Recombination weight of each member: by rank; with pairwise selection only the better
        member of each mirrored pair (the first on a tie) takes part."""
        if not self.pairwise:
            return by_rank(self.weights, fitness)
        second_wins = fitness[1::2] > fitness[0::2]
        winners = 2 * np.arange(fitness.size // 2) + second_wins
        weights = np.zeros(fitness.size)
        weights[winners] = by_rank(self.weights, fitness[winners])
        return weights

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """One sep-CMA-ES update from every member's fitness (member order, higher is better;
        a non-finite fitness ranks below every finite one)."""
        generation = self.ask()
        fitness = self._fitness(fitness)
        w = self.member_weights(fitness)
        signed, plain = generation.direction_weights(w)
        z_w = generation.directions.weighted_sum(signed).astype(np.float64)
        z2_w = generation.directions.weighted_sum(plain, squared=True).astype(np.float64)
        sqrt_c = np.sqrt(self.diag_c)
        y_w = sqrt_c * z_w
        n, cs, cc = self.theta.size, self.c_sigma, self.c_c
        self.theta = (self.theta + self.sigma * y_w).astype(self.theta.dtype)
        self.p_sigma = (1 - cs) * self.p_sigma + math.sqrt(cs * (2 - cs) * self.mu_eff) * z_w
        norm = float(np.linalg.norm(self.p_sigma))
        # h_sigma stalls p_c while p_sigma is long (early on, or after a fast move);
        # generation + 1 updates so far, counting this one.
        bound = math.sqrt(1 - (1 - cs) ** (2 * (self.generation + 1)))
        h_sigma = float(norm / bound < (1.4 + 2 / (n + 1)) * self.chi_n)
        self.p_c = (1 - cc) * self.p_c + h_sigma * math.sqrt(cc * (2 - cc) * self.mu_eff) * y_w
        c_1, c_mu = self.c_1, self.c_mu
        rank_mu = self.diag_c * z2_w  # sum_i w_i y_i**2
        self.diag_c = ((1 - c_1 - c_mu) * self.diag_c
                       + c_1 * (self.p_c**2 + (1 - h_sigma) * cc * (2 - cc) * self.diag_c)
                       + c_mu * rank_mu)
        self.sigma *= math.exp(cs / self.d_sigma * (norm / self.chi_n - 1))
        self.generation += 1
        self._pending = None
        scale = self.scale
        return {
            **fitness_summary(fitness),
            "sigma": self.sigma,
            "sigma_mean": float(scale.mean()),
            "sigma_max": float(scale.max()),
            "sigma_min": float(scale.min()),
            "axis_ratio": float(math.sqrt(self.diag_c.max() / self.diag_c.min())),
        }

    def state(self) -> dict[str, np.ndarray]:
        return {"theta": self.theta.copy(), "sigma": np.array(self.sigma),
                "diag_c": self.diag_c.copy(), "p_sigma": self.p_sigma.copy(),
                "p_c": self.p_c.copy()}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        for key in ("theta", "diag_c", "p_sigma", "p_c"):
            if np.shape(state[key]) != self.theta.shape:
                raise ValueError(f"the state's {key} holds {np.size(state[key])} values, the "
                                 f"strategy has {self.theta.size}")
        self.theta = np.array(state["theta"], dtype=self.theta.dtype)
        self.sigma = float(state["sigma"])
        self.diag_c = np.array(state["diag_c"], dtype=np.float64)
        self.p_sigma = np.array(state["p_sigma"], dtype=np.float64)
        self.p_c = np.array(state["p_c"], dtype=np.float64)
        self._pending = None
