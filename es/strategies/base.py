"""The protocol every evolution strategy follows, for ``es-train`` and ``es.minimize`` alike.

A strategy is a pure ask/tell object: no MPI, no Gymnasium, no files, every random draw a
pure function of ``(seed, generation, ...)``.

- ``ask()`` returns a ``Generation``: it describes the population by the current mean plus
  integers (noise-table offsets or seeds, inside ``directions``), so every rank can rebuild
  any member locally (``params(member)``) and the ranks exchange fitness scalars only.
- ``tell(fitness)`` takes one fitness per member, in member order, **higher is better** (an RL
  return). ``es.minimize`` is the one place that negates a value to minimise it. A non-finite
  fitness (a failed evaluation) ranks below every finite one.
- ``state()`` / ``load_state()`` hold everything that decides the rest of the run, as named
  arrays (a checkpoint writes them to an ``.npz``), so a resumed run continues exactly.
- ``mean`` is the current solution: the policy ``es-train`` evaluates, the point
  ``es.minimize`` reports as ``x_mean``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from es.core.noise import NoiseSource, Perturbations
from es.core.shaping import worst_for_failures


class Generation(Protocol):
    """One generation's population, described without sending any vector."""

    index: int
    population: int
    mirrored: bool  # members 2k and 2k+1 share direction k: keep them on one rank

    @property
    def keys(self) -> int:
        """How many episode keys (directions) the members use; ``key_of`` maps into them."""

    def key_of(self, member: int) -> int:
        """Members with the same key share their episode (reset seed, action noise): a
        mirrored pair is evaluated on the same episode, as antithetic sampling wants."""

    def params(self, member: int) -> np.ndarray:
        """The member's parameter vector, rebuilt locally."""


class Strategy(Protocol):
    name: ClassVar[str]
    population: int
    generation: int  # generations told so far; the next ask() is generation ``generation``

    @property
    def mean(self) -> np.ndarray: ...
    def ask(self) -> Generation: ...
    def tell(self, fitness: np.ndarray) -> dict[str, float]: ...
    def state(self) -> dict[str, np.ndarray]: ...
    def load_state(self, state: dict[str, np.ndarray]) -> None: ...


@dataclass(frozen=True)
class NoiseGeneration:
    """Members ``mean + sign * scale * eps_k`` with ``eps_k`` from shared noise (a table
    slice or a seed): ``scale`` is one sigma, or one per coordinate. With ``mirrored``,
    member ``2k`` is ``+eps_k`` and member ``2k+1`` is ``-eps_k``."""

    index: int
    mean: np.ndarray
    scale: float | np.ndarray
    mirrored: bool
    population: int
    directions: Perturbations

    @property
    def keys(self) -> int:
        return len(self.directions)

    def direction_of(self, member: int) -> tuple[int, float]:
        """(direction index, sign) of a member."""
        if not 0 <= member < self.population:
            raise IndexError(f"member {member} outside population of {self.population}")
        if self.mirrored:
            return member // 2, (1.0 if member % 2 == 0 else -1.0)
        return member, 1.0

    def key_of(self, member: int) -> int:
        return self.direction_of(member)[0]

    def params(self, member: int) -> np.ndarray:
        direction, sign = self.direction_of(member)
        vector = self.directions.vector(direction)
        if np.ndim(self.scale) == 0:
            return self.mean + self.mean.dtype.type(sign * self.scale) * vector
        return self.mean + (sign * self.scale) * vector

    def direction_weights(self, member_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-member weights folded onto the directions: ``(sum_m w_m s_m, sum_m w_m)`` over
        the members of each direction (sign ``s_m``). Then ``sum_m w_m (s_m eps)`` is
        ``directions.weighted_sum(first)`` and ``sum_m w_m eps**2`` is
        ``directions.weighted_sum(second, squared=True)``: no (n, d) matrix is formed."""
        w = np.asarray(member_weights, dtype=np.float64)
        if not self.mirrored:
            return w, w
        return w[0::2] - w[1::2], w[0::2] + w[1::2]


@dataclass(frozen=True)
class ExplicitGeneration:
    """Members given as a matrix that every rank computed alike (an external optimizer's
    seeded ``ask``): nothing travels either, but each rank holds the whole population."""

    index: int
    candidates: np.ndarray
    mirrored: bool = False

    @property
    def population(self) -> int:
        return len(self.candidates)

    @property
    def keys(self) -> int:
        return self.population

    def key_of(self, member: int) -> int:
        return member

    def params(self, member: int) -> np.ndarray:
        return self.candidates[member]


def fitness_summary(fitness: np.ndarray) -> dict[str, float]:
    """The statistics every ``tell`` reports of the fitness it was given (failures already
    ranked last)."""
    return {"fitness_mean": float(fitness.mean()), "fitness_max": float(fitness.max()),
            "fitness_min": float(fitness.min())}


def decayed(start: float, decay: float, floor: float, generation: int) -> float:
    """An exponential schedule, ``max(start * decay**generation, floor)``: a pure function of
    the generation, so a strategy that uses one keeps no extra state (as evosax's OpenES)."""
    return max(start * decay**generation, floor)


def check_decay(name: str, decay: float, floor_name: str, floor: float) -> None:
    """A ``decayed`` schedule's factor, in (0, 1], and its floor, >= 0."""
    if not 0 < decay <= 1:
        raise ValueError(f"{name} {decay}: must be in (0, 1]")
    if not floor >= 0:
        raise ValueError(f"{floor_name} {floor}: must be >= 0")


class NoiseStrategy:
    """What every strategy that samples ``mean + sign * scale * eps_k`` from shared noise has
    in common: checked settings, the pending generation (asking twice gives the same one) and
    the checks on a generation's fitness. A subclass provides ``scale`` (one sigma, or one per
    coordinate), ``tell``, ``state`` and ``load_state``."""

    name: ClassVar[str]
    needs_pairs: ClassVar[bool] = False  # compares the two members of each mirrored pair

    def __init__(self, mean0: np.ndarray, *, population: int, sigma: float | np.ndarray,
                 noise: NoiseSource, seed: int, mirrored: bool, dtype: type | np.dtype) -> None:
        if self.needs_pairs and not mirrored:
            raise ValueError(f"{self.name} compares the two members of a mirrored pair: "
                             "mirrored=False is not supported")
        self.theta = np.array(mean0, dtype=dtype).ravel()
        if self.theta.size < 1 or not np.all(np.isfinite(self.theta)):
            raise ValueError("mean0 must be a non-empty finite vector")
        if population < 2:
            raise ValueError(f"population {population}: must be at least 2")
        if mirrored and population % 2:
            raise ValueError(f"population {population}: must be even with mirrored sampling")
        sigmas = np.asarray(sigma, dtype=np.float64)
        if not (np.all(np.isfinite(sigmas)) and np.all(sigmas > 0)):
            raise ValueError(f"sigma {sigma}: must be a finite number > 0")
        self.population, self.noise, self.seed, self.mirrored = population, noise, seed, mirrored
        self.generation = 0
        self._pending: NoiseGeneration | None = None

    @property
    def num_directions(self) -> int:
        return self.population // 2 if self.mirrored else self.population

    @property
    def mean(self) -> np.ndarray:
        return self.theta

    @property
    def scale(self) -> float | np.ndarray:
        """This generation's sigma: one number, or one per coordinate."""
        raise NotImplementedError

    def ask(self) -> NoiseGeneration:
        if self._pending is None:
            self._pending = NoiseGeneration(
                self.generation, self.theta, self.scale, self.mirrored, self.population,
                self._directions(),
            )
        return self._pending

    def _directions(self) -> Perturbations:
        """This generation's directions: the shared noise's (a strategy that places some
        members itself replaces those)."""
        return self.noise.sample(self.seed, self.generation, self.num_directions, self.theta.size)

    def skip(self, fitness: np.ndarray) -> dict[str, float]:
        """End a generation in which no member has a finite fitness, without a step: failures
        alone rank by member order, a step along an arbitrary direction (momentum would carry
        it on). The next generation samples afresh, from its own seeds. The restarts of the
        black-box API call this; es-train's episodes do not fail all at once."""
        self._fitness(fitness)
        self.generation += 1
        self._pending = None
        return {}

    def _fitness(self, fitness: np.ndarray) -> np.ndarray:
        """The generation's fitness, checked; a failed evaluation below every other."""
        fitness = worst_for_failures(fitness)
        if fitness.size != self.population:
            raise ValueError(f"got {fitness.size} fitness values for {self.population} members")
        return fitness
