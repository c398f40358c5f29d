"""Augmented Random Search (Mania, Guy, Recht 2018, "Simple random search provides a
competitive approach to reinforcement learning", NeurIPS, arXiv 1803.07055) as a pure ask/tell
strategy (``es.strategies.base``).

Each generation evaluates ``N = population / 2`` mirrored pairs ``theta +- nu delta_k``, ranks
the directions by ``max(r+_k, r-_k)``, keeps the best ``b`` (``top``) and steps

    theta <- theta + alpha / (b sigma_R) * sum_{k in top b} (r+_k - r-_k) delta_k,

where ``sigma_R`` is the standard deviation of the ``2b`` returns used. There is no fitness
shaping and no optimizer: dividing by ``sigma_R`` is the method's only normalisation, so the
step adapts to the returns' scale.

Beyond the paper, ``nu`` and ``alpha`` may decay exponentially per generation (to a floor),
as OpenAI-ES's sigma and step size can: a fixed ``alpha`` that finds a good gait fast keeps
stepping as far once it is there, and a gait that is nearly right then tips over.

Also beyond it, a *contrast* phase from a chosen generation on: the directions are ranked by
``|r+ - r-|`` instead of ``max(r+, r-)``, with a step size, a nu and a number of directions of
its own. A pair with one side fallen (a HalfCheetah flipped onto its back) differs most, so
the step moves the mean away from what made that side fall: a fast, fragile gait found by the
paper's ranking is then consolidated into a steady one (docs/benchmarks.md, "Which policies
are steady"). With every direction in the phase's step the ranking picks nothing, and the
fallen pairs still weigh most in it, by their difference.

The paper's four variants:

- V1: the update above on raw observations; V1-t: with ``top < N``.
- V2 / V2-t: the same update, with the policy applied to observations normalised by their
  running mean and standard deviation. That is the trainer's observation normalisation
  (``policy.obs_norm``), not something this class does: ``ARS`` with ``obs_norm`` on is V2.
  The paper's survival-bonus removal (Hopper, Walker, Ant, Humanoid) is the trainer's
  ``es.reward_shift``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from es.core.noise import NoiseSource
from es.strategies.base import NoiseStrategy, check_decay, decayed, fitness_summary

#: Return differences beyond this are normalised before the float32 weighted sum, which they
#: would overflow (a black-box objective of scale 1e38: the mean went to inf), and so are
#: those below ``TINY_DIFFERENCE``, which it would round to 0 (of scale 1e-50: the mean never
#: moved). The ones between sum as they always have, so every run on record trains the same
#: bits.
HUGE_DIFFERENCE = 1e30
TINY_DIFFERENCE = 1e-30


def out_of_scale(peak: float) -> bool:
    """Whether values whose largest magnitude is ``peak`` are scaled before they are summed
    or squared (see ``HUGE_DIFFERENCE``); all zeros are not."""
    return peak > HUGE_DIFFERENCE or 0 < peak < TINY_DIFFERENCE


def spread(returns: np.ndarray) -> float:
    """The standard deviation of ``returns``; for returns beyond ``HUGE_DIFFERENCE`` or all
    below ``TINY_DIFFERENCE`` taken of them scaled by their largest magnitude, since their
    squares overflow (1e200: inf) or underflow (1e-200: 0)."""
    peak = float(np.abs(returns).max())
    if not out_of_scale(peak):
        return float(returns.std())
    return peak * float((returns / peak).std())


class ARS(NoiseStrategy):
    """ARS V1/V1-t (V2/V2-t with the trainer's observation normalisation)."""

    name: ClassVar[str] = "ars"
    needs_pairs: ClassVar[bool] = True

    def __init__(
        self,
        mean0: np.ndarray,
        *,
        population: int,
        sigma: float,
        noise: NoiseSource,
        seed: int = 0,
        mirrored: bool = True,
        dtype: type | np.dtype = np.float32,
        lr: float = 0.02,
        top: int | None = None,
        sigma_decay: float = 1.0,
        sigma_min: float = 0.0,
        lr_decay: float = 1.0,
        lr_min: float = 0.0,
        contrast_from: int = 0,
        contrast_lr: float | None = None,
        contrast_sigma: float | None = None,
        contrast_top: int | None = None,
    ) -> None:
        """``sigma`` is the paper's nu, ``lr`` its alpha, ``top`` its b (None: all directions,
        V1/V2; fewer: V1-t/V2-t); the decays multiply nu and alpha every generation, down to
        their floors (1: fixed, the paper). ``contrast_from``: the first generation whose
        update ranks the directions by ``|r+ - r-|`` (0: none), stepping with alpha
        ``contrast_lr`` (None: ``lr``) from then on, decayed as ``lr`` is, perturbing by nu
        ``contrast_sigma`` (None: ``sigma``), decayed as ``sigma`` is, along the best
        ``contrast_top`` directions (None: ``top``)."""
        super().__init__(mean0, population=population, sigma=sigma, noise=noise, seed=seed,
                         mirrored=mirrored, dtype=dtype)
        if not lr > 0:
            raise ValueError(f"lr {lr}: must be > 0")
        directions = population // 2
        top = directions if top is None else int(top)
        contrast_top = top if contrast_top is None else int(contrast_top)
        for name, value in (("top", top), ("contrast_top", contrast_top)):
            if not 1 <= value <= directions:
                raise ValueError(f"{name} {value}: must be between 1 and the {directions} "
                                 "directions")
        check_decay("sigma_decay", sigma_decay, "sigma_min", sigma_min)
        check_decay("lr_decay", lr_decay, "lr_min", lr_min)
        if contrast_from < 0:
            raise ValueError(f"contrast_from {contrast_from}: must be >= 0 (0: never)")
        for name, value in (("contrast_lr", contrast_lr), ("contrast_sigma", contrast_sigma)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} {value}: must be > 0")
        self.contrast_from = int(contrast_from)
        self.contrast_lr0 = float(lr if contrast_lr is None else contrast_lr)
        self.contrast_sigma0 = float(sigma if contrast_sigma is None else contrast_sigma)
        self.contrast_top = contrast_top
        self.sigma0, self.lr0, self.top = float(sigma), float(lr), top
        self.sigma_decay, self.sigma_min = float(sigma_decay), float(sigma_min)
        self.lr_decay, self.lr_min = float(lr_decay), float(lr_min)

    @property
    def sigma(self) -> float:
        """This generation's nu."""
        sigma0 = self.contrast_sigma0 if self.contrasting else self.sigma0
        return decayed(sigma0, self.sigma_decay, self.sigma_min, self.generation)

    scale = sigma

    @property
    def contrasting(self) -> bool:
        """Whether this generation's update is in the contrast phase (the update that makes
        generation ``contrast_from`` is its first)."""
        return bool(self.contrast_from) and self.generation + 1 >= self.contrast_from

    @property
    def lr(self) -> float:
        """This generation's alpha."""
        lr0 = self.contrast_lr0 if self.contrasting else self.lr0
        return decayed(lr0, self.lr_decay, self.lr_min, self.generation)

    @property
    def used_top(self) -> int:
        """This generation's b."""
        return self.contrast_top if self.contrasting else self.top

    def top_directions(self, fitness: np.ndarray) -> np.ndarray:
        """The ``used_top`` directions with the highest ``max(r+, r-)`` (in the contrast
        phase: ``|r+ - r-|``), best first (ties: lower direction index first, so the choice
        is a pure function of the fitness)."""
        fitness = np.asarray(fitness, dtype=np.float64)
        plus, minus = fitness[0::2], fitness[1::2]
        rank = np.abs(plus - minus) if self.contrasting else np.maximum(plus, minus)
        return np.argsort(-rank, kind="stable")[: self.used_top]

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """Step along the top directions' return differences (higher fitness is better; a
        non-finite one becomes worse than every finite one)."""
        generation = self.ask()
        fitness = self._fitness(fitness)
        used = self.top_directions(fitness)
        plus, minus = fitness[0::2], fitness[1::2]
        sigma_r = spread(np.concatenate((plus[used], minus[used])))
        if not sigma_r > 0:  # all used returns equal: every difference is 0 anyway
            sigma_r = 1.0
        # The member weights whose fold onto the directions is (r+ - r-) on the top b, 0 else.
        member_weights = np.zeros(self.population)
        member_weights[2 * used] = plus[used]
        member_weights[2 * used + 1] = minus[used]
        differences, _ = generation.direction_weights(member_weights)
        # g = 1 / (b sigma_R) sum_{top b} (r+ - r-) delta;  theta <- theta + alpha g
        norm = 1.0 / (self.used_top * sigma_r)
        if out_of_scale(float(np.abs(differences).max())):
            differences, norm = differences * norm, 1.0
        gradient = generation.directions.weighted_sum(differences).astype(self.theta.dtype)
        gradient *= self.theta.dtype.type(norm)
        self.theta = self.theta + self.theta.dtype.type(self.lr) * gradient
        self.generation += 1
        self._pending = None
        return {
            **fitness_summary(fitness),
            "grad_norm": float(np.linalg.norm(gradient)),
            "sigma_r": sigma_r,
        }

    def state(self) -> dict[str, np.ndarray]:
        """The parameters: ARS keeps nothing else (b, nu, alpha and the contrast phase are
        functions of the generation)."""
        return {"theta": self.theta.copy()}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        if state["theta"].shape != self.theta.shape:
            raise ValueError(f"the state holds {state['theta'].size} parameters, the strategy "
                             f"has {self.theta.size}")
        self.theta = np.asarray(state["theta"], dtype=self.theta.dtype).copy()
        self._pending = None
