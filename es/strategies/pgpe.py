"""PGPE, policy gradients with parameter-based exploration (Sehnke, Osendorfer, Rückstieß,
Graves, Peters, Schmidhuber 2010, "Parameter-exploring policy gradients", Neural Networks
23(4)), with symmetric sampling and adaptive per-coordinate sigma, as a pure ask/tell strategy
(``es.strategies.base``). The centre moves through ClipUp (Toklu, Liskowski, Srivastava 2020)
by default, with centered-rank fitness shaping: the combination EvoTorch uses for Humanoid.

Members come in symmetric pairs ``mu +- sigma * eps_k`` (``sigma`` one per coordinate, ``eps_k``
unit normals). With ``u+_k, u-_k`` the centered ranks of a pair's fitness and ``b`` their mean
(the baseline; 0 for centered ranks), the paper's symmetric-sampling gradients are, over the
``N`` pairs, with the perturbation ``sigma * eps_k`` written out:

    g_mu    = 1/N sum_k (u+_k - u-_k) / 2          * sigma eps_k
    g_sigma = 1/N sum_k ((u+_k + u-_k) / 2 - b)    * sigma (eps_k**2 - 1)

and the update is ``mu <- mu + optimizer ascent along g_mu``,
``sigma <- sigma + sigma_lr * g_sigma``, each coordinate of sigma kept within
``sigma_max_change`` (relative) of its old value. Both sums stream over the noise
(``weighted_sum``; the squares with ``squared=True``): no ``(N, d)`` matrix is formed.

``center_lr`` left as None follows the ClipUp paper's advice for choosing the step: a
maximum speed of 1/15 of the search distribution's initial radius ``|sigma0|`` (its norm over
the ``d`` coordinates), the step size half of that. Adam's step size is a length per
coordinate, not ClipUp's length of the whole step, so with Adam the same rule is divided by
``sqrt(d)`` (the root mean square of sigma0, / 30): its first step, about ``center_lr`` in
every coordinate, is then as long as ClipUp's (the rule itself made Adam's steps ``sqrt(d)``
times longer: at d = 1000, a sphere minimised from sigma0 = 0.5 ended twice as high as it
started).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from es.core.noise import NoiseSource
from es.core.optim import Adam, ClipUp, Optimizer
from es.core.shaping import centered_ranks
from es.strategies.base import NoiseStrategy, fitness_summary

OPTIMIZERS = ("clipup", "adam")


class PGPE(NoiseStrategy):
    """Symmetric PGPE with adaptive per-coordinate sigma and a ClipUp (or Adam) centre."""

    name: ClassVar[str] = "pgpe"
    needs_pairs: ClassVar[bool] = True

    def __init__(
        self,
        mean0: np.ndarray,
        *,
        population: int,
        sigma: float | np.ndarray,
        noise: NoiseSource,
        seed: int = 0,
        mirrored: bool = True,
        dtype: type | np.dtype = np.float32,
        center_lr: float | None = None,
        optimizer: str = "clipup",
        max_speed: float | None = None,
        sigma_lr: float = 0.1,
        sigma_max_change: float = 0.2,
    ) -> None:
        """``sigma``: one initial value, or one per coordinate. ``center_lr``: the optimizer's
        step size (None: ClipUp's rule from the initial radius, per coordinate for Adam, see
        the module docstring).
        ``max_speed``: ClipUp's (None: ``2 * center_lr``). ``sigma_lr``: the step along
        ``g_sigma``; ``sigma_max_change``: the largest relative change of a sigma per
        generation (0.2: within 20%)."""
        super().__init__(mean0, population=population, sigma=sigma, noise=noise, seed=seed,
                         mirrored=mirrored, dtype=dtype)
        dim = self.theta.size
        sigma0 = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (dim,)).astype(dtype)
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {optimizer!r}: allowed are "
                             + ", ".join(repr(o) for o in OPTIMIZERS))
        if not sigma_lr >= 0:
            raise ValueError(f"sigma_lr {sigma_lr}: must be >= 0")
        if not 0 <= sigma_max_change < 1:
            raise ValueError(f"sigma_max_change {sigma_max_change}: must be in [0, 1)")
        if center_lr is None:
            center_lr = float(np.linalg.norm(sigma0.astype(np.float64))) / 30.0
            if optimizer == "adam":
                center_lr /= math.sqrt(dim)
        if not (center_lr > 0 and math.isfinite(center_lr)):
            raise ValueError(f"center_lr {center_lr}: must be finite and > 0")
        self.sigma = sigma0
        self.center_lr, self.sigma_lr = float(center_lr), float(sigma_lr)
        self.sigma_max_change = float(sigma_max_change)
        self.optimizer: Optimizer = (
            ClipUp(dim, self.center_lr, max_speed=max_speed, dtype=dtype)
            if optimizer == "clipup" else Adam(dim, self.center_lr)
        )
        self._gradient_dtype = self.theta.dtype if optimizer == "clipup" else np.float32

    @property
    def scale(self) -> np.ndarray:
        return self.sigma

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """Move the centre and adapt sigma from the fitness of every member, in member order
        (higher is better; a non-finite fitness ranks below every finite one)."""
        generation = self.ask()
        fitness = self._fitness(fitness)
        utilities = centered_ranks(fitness).astype(np.float64)
        baseline = utilities.mean()
        # direction_weights folds (u+, u-) into (u+ - u-, u+ + u-) per pair.
        difference, total = generation.direction_weights(utilities)
        n, dtype = self.num_directions, self.theta.dtype.type
        directions = generation.directions
        g_mu = self.sigma * directions.weighted_sum(difference / (2 * n)).astype(dtype)
        pair_weights = (total / 2 - baseline) / n
        # sum_k w_k (eps_k**2 - 1) = sum_k w_k eps_k**2 - sum_k w_k
        g_sigma = self.sigma * (directions.weighted_sum(pair_weights, squared=True).astype(dtype)
                                - dtype(pair_weights.sum()))
        # The optimizer minimises: descend along -g_mu. Adam keeps float32 moments (and would
        # turn them float64 on a float64 gradient, which its state could not restore).
        step = self.optimizer.step((-g_mu).astype(self._gradient_dtype))
        self.theta = self.theta + step.astype(self.theta.dtype)
        low, high = 1 - self.sigma_max_change, 1 + self.sigma_max_change
        self.sigma = np.clip(self.sigma + dtype(self.sigma_lr) * g_sigma,
                             dtype(low) * self.sigma, dtype(high) * self.sigma)
        self.generation += 1
        self._pending = None
        return {
            **fitness_summary(fitness),
            "grad_norm": float(np.linalg.norm(g_mu)),
            "sigma_mean": float(self.sigma.mean()),
            "sigma_min": float(self.sigma.min()),
            "sigma_max": float(self.sigma.max()),
        }

    def state(self) -> dict[str, np.ndarray]:
        """The centre, the sigmas and the optimizer's moments."""
        optimizer = {f"optimizer_{key}": value for key, value in self.optimizer.state().items()}
        return {"theta": self.theta.copy(), "sigma": self.sigma.copy(), **optimizer}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        for key in ("theta", "sigma"):
            if state[key].shape != self.theta.shape:
                raise ValueError(f"the state's {key} holds {state[key].size} values, the "
                                 f"strategy has {self.theta.size} parameters")
        self.theta = np.asarray(state["theta"], dtype=self.theta.dtype).copy()
        self.sigma = np.asarray(state["sigma"], dtype=self.theta.dtype).copy()
        self.optimizer.load_state({key.removeprefix("optimizer_"): value
                                   for key, value in state.items()
                                   if key.startswith("optimizer_")})
        self._pending = None
