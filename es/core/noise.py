"""Where perturbations come from: a seeded shared noise table, or regeneration from seeds.

A generation's perturbations are described by a few integers per direction (table offsets, or
seeds), all pure functions of ``(run seed, generation, direction id)``. Every rank derives the
same integers, so no vector ever needs to be sent: a rank rebuilds any perturbation locally.

``weighted_sum`` is the ES update's inner loop, ``sum_k w_k eps_k``. It streams over table
slices in direction order (no ``(n, d)`` matrix), so its result is bit-identical on every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from es.core.seeding import TAG_DIRECTION, TAG_OFFSETS, TAG_TABLE, generator


class Perturbations(Protocol):
    """The ``count`` unit-variance directions of one generation."""

    def __len__(self) -> int: ...
    def vector(self, k: int) -> np.ndarray: ...
    def weighted_sum(self, weights: np.ndarray, squared: bool = False) -> np.ndarray: ...


class NoiseSource(Protocol):
    def sample(self, seed: int, generation: int, count: int, dim: int) -> Perturbations: ...


def fill_table(out: np.ndarray, seed: int) -> None:
    """Fill ``out`` (float32) with standard normals that depend on ``seed`` alone."""
    generator(seed, TAG_TABLE).standard_normal(out=out, dtype=np.float32)


class NoiseTable:
    """A block of standard normals; direction k of a generation is one contiguous slice.

    The array may live in MPI shared memory (one copy per node, see ``es.parallel.comm``); this
    class only reads it.
    """

    def __init__(self, table: np.ndarray) -> None:
        if table.dtype != np.float32 or table.ndim != 1:
            raise ValueError("the noise table must be a 1-D float32 array")
        self.table = table

    @classmethod
    def build(cls, size: int, seed: int) -> NoiseTable:
        table = np.empty(size, dtype=np.float32)
        fill_table(table, seed)
        return cls(table)

    def sample(self, seed: int, generation: int, count: int, dim: int) -> TableSlices:
        if dim > self.table.size:
            raise ValueError(
                f"noise table of {self.table.size} floats is smaller than the {dim} parameters"
            )
        offsets = generator(seed, generation, TAG_OFFSETS).integers(
            0, self.table.size - dim + 1, size=count
        )
        return TableSlices(self.table, offsets, dim)


class TableSlices:
    def __init__(self, table: np.ndarray, offsets: np.ndarray, dim: int) -> None:
        self.table, self.offsets, self.dim = table, offsets, dim

    def __len__(self) -> int:
        return len(self.offsets)

    def vector(self, k: int) -> np.ndarray:
        start = int(self.offsets[k])
        return self.table[start : start + self.dim]

    def weighted_sum(self, weights: np.ndarray, squared: bool = False) -> np.ndarray:
        return _stream_weighted_sum(weights, self.vector, self.dim, squared)


class SeedNoise:
    """No table: each direction is regenerated from its own seed (slower, no memory)."""

    def sample(self, seed: int, generation: int, count: int, dim: int) -> SeededDirections:
        return SeededDirections(seed, generation, count, dim)


#: Bytes of regenerated directions one generation keeps for reuse: a generation draws each
#: direction for its members' parameters and again for every weighted sum of the update, and
#: regenerating (seeding a generator, drawing d normals) is what a black-box generation costs
#: at d = 1000. Past the cap a direction is regenerated each time, so memory stays bounded.
CACHE_BYTES = 32 * 2**20


class SeededDirections:
    def __init__(self, seed: int, generation: int, count: int, dim: int) -> None:
        self.seed, self.generation, self.count, self.dim = seed, generation, count, dim
        self._cache: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self.count

    def vector(self, k: int) -> np.ndarray:
        """Direction k, read-only (it may be the kept copy)."""
        cached = self._cache.get(k)
        if cached is not None:
            return cached
        rng = generator(self.seed, self.generation, k, TAG_DIRECTION)
        eps = rng.standard_normal(self.dim, dtype=np.float32)
        eps.flags.writeable = False
        if (len(self._cache) + 1) * eps.nbytes <= CACHE_BYTES:
            self._cache[k] = eps
        return eps

    def weighted_sum(self, weights: np.ndarray, squared: bool = False) -> np.ndarray:
        return _stream_weighted_sum(weights, self.vector, self.dim, squared)


class ReplacedDirections:
    """Shared directions with a few replaced by given unit-variance-scale vectors (a strategy's
    own test points, such as sep-CMA-ES's two-point step-size adaptation along the last mean
    shift). Every rank computes the replacements from the same state, so they never travel."""

    def __init__(self, base: Perturbations, replaced: dict[int, np.ndarray]) -> None:
        if any(not 0 <= k < len(base) for k in replaced):
            raise IndexError(f"replaced directions {sorted(replaced)} outside 0..{len(base) - 1}")
        self.base = base
        self.replaced = {k: np.asarray(v, dtype=np.float32) for k, v in replaced.items()}

    def __len__(self) -> int:
        return len(self.base)

    def vector(self, k: int) -> np.ndarray:
        replaced = self.replaced.get(k)
        return replaced if replaced is not None else self.base.vector(k)

    def weighted_sum(self, weights: np.ndarray, squared: bool = False) -> np.ndarray:
        dim = self.vector(0).size
        return _stream_weighted_sum(weights, self.vector, dim, squared)


def _stream_weighted_sum(
    weights: np.ndarray, vector: Callable[[int], np.ndarray], dim: int, squared: bool = False
) -> np.ndarray:
    """``sum_k weights[k] * vector(k)`` (``* vector(k)**2`` if ``squared``: what the
    strategies that adapt a sigma per coordinate need) in float32, in index order, one vector
    at a time."""
    total = np.zeros(dim, dtype=np.float32)
    scaled = np.empty(dim, dtype=np.float32)
    for k, w in enumerate(np.asarray(weights, dtype=np.float32)):
        if w != 0.0:
            eps = vector(k)
            np.multiply(eps, w, out=scaled)
            if squared:
                scaled *= eps
            total += scaled
    return total
