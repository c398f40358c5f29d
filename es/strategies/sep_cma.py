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

(``C^{-1/2} y_w = z_w`` because ``C`` is diagonal.) The step-size constants are the
tutorial's. The covariance learning rates are those pycma 4 gives its diagonal model
(``CMA_diagonal``): the full model's rates with d, not ~d^2 / 2, degrees of freedom,

    c_c  = (1 + 1/d + mu_eff/d) / (sqrt(d) + 1/d + 2 mu_eff/d)
    c_1  = 1 / (d + 2 sqrt(d) + mu_eff/d)
    c_mu = (1/4 + mu_eff + 1/mu_eff - 2) / (d + 4 sqrt(d) + mu_eff/2)

close to Ros and Hansen's ``(d + 2) / 3`` times the full rates at small d, but with a path
``c_c ~ 1/sqrt(d)`` instead of ``4/d`` at large d. Measured at d = 1000 (50,000 evaluations,
seeds 0-2), they reached sphere 7e-6..1.2e-5 where Ros and Hansen's reached 1.1e-5..1.5e-5,
and the same on the ellipsoid (6.6e5..6.9e5 against 6.7e5..8.1e5).
``sum_i w_i y_i**2`` is ``c * sum_i w_i z_i**2``: the noise's streaming ``weighted_sum(...,
squared=True)``, never an (n, d) matrix.

Mirrored sampling uses pairwise selection (Auger, Brockhoff and Hansen 2011, "Mirrored Sampling
in Evolution Strategies with Weighted Recombination", GECCO): only the better member of each
pair is recombined. Selecting both members of a pair cancels their steps, which shortens
``p_sigma`` and biases sigma downwards; measured here on Rosenbrock d = 10, mirrored sampling
without it stalled at f ~ 3e-2 after 2e5 evaluations, with it reached 1e-8 in ~5e4.

Step size: cumulative step-size adaptation (the update above) learns at a rate ~1/d, too slowly
for large d (at d = 1000 it lowered sigma by ~0.3% a generation where ~3% was due). From d = 300
on (``step_size="auto"``, as pycma's ``TPA_dimension``) sigma follows two-point step-size
adaptation (TPA; Hansen 2008, "CMA-ES with Two-Point Step-Size Adaptation", INRIA RR-6527, in
the form pycma 4 uses): members 0 and 1 of each generation after the first are ``m +- sigma *
sqrt(c) * z_tpa``, with ``z_tpa`` along the last mean shift in the metric of ``C``
(``(m - m_old) / sqrt(c)``) and as long as direction 0's own noise vector (a chi-distributed
length, as pycma draws one). Their ranks decide:

    z       = (#{better than member 1} - #{better than member 0}) / (lambda - 1)
    s      <- (1 - 0.3) s + 0.3 sign(z) |z|**0.5
    sigma  <- sigma exp(s / d_tpa),    d_tpa = 0.7 + 2 ln d + 2 ln max(1, lambda - d)

The forward point winning means the last step was too short. Every rank computes ``z_tpa``
from the same state, so the two points cost no communication; they are recombined like any
other member, and ``p_sigma`` is still kept for ``h_sigma``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from es.core.noise import NoiseSource, Perturbations, ReplacedDirections
from es.core.shaping import by_rank
from es.strategies.base import NoiseStrategy, fitness_summary

#: From this dimension on, ``step_size="auto"`` is two-point adaptation (pycma's threshold).
TPA_DIMENSION = 300
STEP_SIZE_RULES = ("auto", "csa", "tpa")
#: Two-point adaptation's least population: two members are its test points (with 2, every
#: step is a line search along the last one).
TPA_MIN_POPULATION = 4
TPA_AVERAGING = 0.3  # pycma's c: the weight of the newest rank difference in s
TPA_EXPONENT = 0.5  # pycma's z_exponent: sign(z) |z|**0.5 enlarges small rank differences


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
    ``step_size``: ``"csa"``, ``"tpa"`` or ``"auto"`` (TPA from d = 300, CSA below).
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
        step_size: str = "auto",
    ) -> None:
        super().__init__(mean0, population=population, sigma=sigma, noise=noise, seed=seed,
                         mirrored=mirrored, dtype=dtype)
        n = self.theta.size
        if not cov_scale >= 0:
            raise ValueError(f"cov_scale {cov_scale}: must be >= 0")
        if step_size not in STEP_SIZE_RULES:
            raise ValueError(f"step_size {step_size!r}: allowed are "
                             f"{', '.join(map(repr, STEP_SIZE_RULES))}")
        if step_size == "tpa" and population < TPA_MIN_POPULATION:
            raise ValueError(f"step_size 'tpa': needs a population of at least "
                             f"{TPA_MIN_POPULATION}, not {population} (with 2 every step is a "
                             "line search along the last one)")
        self.tpa = step_size == "tpa" or (step_size == "auto" and n >= TPA_DIMENSION
                                          and population >= TPA_MIN_POPULATION)
        self.d_tpa = 0.7 + 2 * math.log(n) + 2 * math.log(max(1, population - n))
        self.pairwise = mirrored and pairwise
        # mu = population // 2 by default: with pairwise selection, the winner of every pair.
        mu = population // 2 if mu is None else mu
        ranked = population // 2 if self.pairwise else population
        if not 1 <= mu <= ranked:  # named here: the weights' own check knows only the count
            raise ValueError(f"mu {mu}: must be in [1, {ranked}]" + (
                f", the winners of population {population}'s mirrored pairs"
                if self.pairwise else ", the population"))
        self.weights = recombination_weights(ranked, mu)
        mu_eff = 1.0 / float(np.sum(self.weights**2))
        self.mu_eff = mu_eff
        # Step-size control (cumulative step-size adaptation), the tutorial's constants.
        self.c_sigma = (mu_eff + 2) / (n + mu_eff + 5)
        self.d_sigma = 1 + 2 * max(0.0, math.sqrt((mu_eff - 1) / (n + 1)) - 1) + self.c_sigma
        self.chi_n = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n**2))  # E|N(0, I)|
        # Covariance: pycma's rates for the diagonal model (module docstring).
        self.c_c = (1 + 1 / n + mu_eff / n) / (math.sqrt(n) + 1 / n + 2 * mu_eff / n)
        self.c_1 = min(1.0, cov_scale / (n + 2 * math.sqrt(n) + mu_eff / n))
        self.c_mu = min(1.0 - self.c_1, cov_scale * (0.25 + mu_eff + 1 / mu_eff - 2)
                        / (n + 4 * math.sqrt(n) + mu_eff / 2))
        self.sigma = float(sigma)
        self.diag_c = np.ones(n)
        self.p_sigma = np.zeros(n)
        self.p_c = np.zeros(n)
        self.mean_shift = np.zeros(n)  # the last tell's m - m_old: TPA's line
        self.tpa_s = 0.0  # TPA's smoothed rank difference

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

    @property
    def tpa_points(self) -> bool:
        """Whether this generation's members 0 and 1 are TPA's two points (once a mean shift
        exists to place them along)."""
        return self.tpa and bool(np.any(self.mean_shift))

    def _directions(self) -> Perturbations:
        directions = super()._directions()
        if not self.tpa_points:
            return directions
        line = self.mean_shift / np.sqrt(self.diag_c)  # the shift in the metric of C
        length = float(np.linalg.norm(directions.vector(0).astype(np.float64)))
        forward = line * (length / float(np.linalg.norm(line)))
        if self.mirrored:  # member 1 is member 0's mirror already
            return ReplacedDirections(directions, {0: forward})
        return ReplacedDirections(directions, {0: forward, 1: -forward})

    def _tpa_multiplier(self, fitness: np.ndarray) -> float:
        """TPA's sigma factor from the ranks of members 0 (forward) and 1 (backward)."""
        z = (np.sum(fitness > fitness[1]) - np.sum(fitness > fitness[0])) / (fitness.size - 1)
        self.tpa_s = ((1 - TPA_AVERAGING) * self.tpa_s
                      + TPA_AVERAGING * math.copysign(abs(z) ** TPA_EXPONENT, z))
        return math.exp(self.tpa_s / self.d_tpa)

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """One sep-CMA-ES update from every member's fitness (member order, higher is better;
        a non-finite fitness ranks below every finite one)."""
        generation = self.ask()
        fitness = self._fitness(fitness)
        tpa_points = self.tpa_points
        w = self.member_weights(fitness)
        signed, plain = generation.direction_weights(w)
        z_w = generation.directions.weighted_sum(signed).astype(np.float64)
        z2_w = generation.directions.weighted_sum(plain, squared=True).astype(np.float64)
        sqrt_c = np.sqrt(self.diag_c)
        y_w = sqrt_c * z_w
        n, cs, cc = self.theta.size, self.c_sigma, self.c_c
        old_theta = self.theta
        self.theta = (self.theta + self.sigma * y_w).astype(self.theta.dtype)
        self.mean_shift = self.theta.astype(np.float64) - old_theta
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
        if not self.tpa:
            self.sigma *= math.exp(cs / self.d_sigma * (norm / self.chi_n - 1))
        elif tpa_points:
            self.sigma *= self._tpa_multiplier(fitness)
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
                "p_c": self.p_c.copy(), "mean_shift": self.mean_shift.copy(),
                "tpa_s": np.array(self.tpa_s)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore ``state()``; a state saved before TPA existed (no ``mean_shift``) resumes
        with no line yet, so TPA's points start one generation later."""
        vectors = ["theta", "diag_c", "p_sigma", "p_c"]
        for key in [*vectors, "mean_shift"] if "mean_shift" in state else vectors:
            if np.shape(state[key]) != self.theta.shape:
                raise ValueError(f"the state's {key} holds {np.size(state[key])} values, the "
                                 f"strategy has {self.theta.size}")
        self.theta = np.array(state["theta"], dtype=self.theta.dtype)
        self.sigma = float(state["sigma"])
        self.diag_c = np.array(state["diag_c"], dtype=np.float64)
        self.p_sigma = np.array(state["p_sigma"], dtype=np.float64)
        self.p_c = np.array(state["p_c"], dtype=np.float64)
        self.mean_shift = np.array(state.get("mean_shift", np.zeros(self.theta.size)),
                                   dtype=np.float64)
        self.tpa_s = float(state.get("tpa_s", 0.0))
        self._pending = None
