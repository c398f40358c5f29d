"""OpenAI-ES (Salimans et al. 2017, "Evolution Strategies as a Scalable Alternative to
Reinforcement Learning", arXiv 1703.03864) as a pure ask/tell strategy (``es.strategies.base``).

``ask()`` describes each member by a noise direction, ``tell(fitness)`` turns the members'
fitness (higher is better) into an optimizer step along

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
from typing import ClassVar

import numpy as np

from es.core.noise import NoiseSource
from es.core.optim import Optimizer
from es.core.shaping import centered_ranks
from es.strategies.base import NoiseStrategy, check_decay, decayed, fitness_summary


class OpenAIES(NoiseStrategy):
    """The strategy's state: parameters (float32, the policy's), optimizer, generation."""

    name: ClassVar[str] = "openai"

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
        super().__init__(theta0, population=population, sigma=sigma, noise=noise, seed=seed,
                         mirrored=mirrored, dtype=np.float32)
        check_decay("sigma_decay", sigma_decay, "sigma_min", sigma_min)
        check_decay("lr_decay", lr_decay, "lr_min", lr_min)
        if not optimizer.lr > 0:
            raise ValueError(f"lr {optimizer.lr}: must be > 0")
        if not l2 >= 0:
            raise ValueError(f"l2 {l2}: must be >= 0")
        if not callable(fitness_shaping):
            raise TypeError(f"fitness_shaping {fitness_shaping!r}: must be a function of the "
                            "fitness array (es.core.shaping.centered_ranks, the default)")
        self.sigma0, self.l2 = float(sigma), float(l2)
        self.sigma_decay, self.sigma_min = float(sigma_decay), float(sigma_min)
        self.lr0, self.lr_decay, self.lr_min = float(optimizer.lr), float(lr_decay), float(lr_min)
        self.optimizer, self.fitness_shaping = optimizer, fitness_shaping

    @property
    def sigma(self) -> float:
        """This generation's perturbation scale."""
        return decayed(self.sigma0, self.sigma_decay, self.sigma_min, self.generation)

    scale = sigma

    @property
    def lr(self) -> float:
        """This generation's optimizer step size."""
        return decayed(self.lr0, self.lr_decay, self.lr_min, self.generation)

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """Step the parameters from the fitness of every member, in member order.

        A non-finite fitness (a failed evaluation) counts as worse than every finite one.
        """
        generation = self.ask()
        fitness = self._fitness(fitness)
        weights, _ = generation.direction_weights(self.fitness_shaping(fitness))
        ascent = generation.directions.weighted_sum(weights) / np.float32(
            self.population * generation.scale
        )
        gradient = -ascent + np.float32(self.l2 / generation.scale) * self.theta
        self.optimizer.lr = self.lr
        step = self.optimizer.step(gradient)
        self.theta = self.theta + step
        self.generation += 1
        self._pending = None
        return {
            **fitness_summary(fitness),
            "grad_norm": float(np.linalg.norm(gradient)),
            "update_ratio": float(np.linalg.norm(step) / (np.linalg.norm(self.theta) + 1e-12)),
        }

    def state(self) -> dict[str, np.ndarray]:
        """The parameters and the optimizer's moments (sigma and the step size are pure
        functions of the generation)."""
        optimizer = {f"optimizer_{key}": value for key, value in self.optimizer.state().items()}
        return {"theta": self.theta.copy(), **optimizer}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        if state["theta"].shape != self.theta.shape:
            raise ValueError(f"the state holds {state['theta'].size} parameters, the strategy "
                             f"has {self.theta.size}")
        self.theta = np.asarray(state["theta"], dtype=np.float32).copy()
        self.optimizer.load_state({key.removeprefix("optimizer_"): value
                                   for key, value in state.items()
                                   if key.startswith("optimizer_")})
        self._pending = None
