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

from es.seeding import TAG_DIRECTION, TAG_OFFSETS, TAG_TABLE, generator


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

    The array may live in MPI shared memory (one copy per node, see ``es.comm``); this class
    only reads it.
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


class SeededDirections:
    def __init__(self, seed: int, generation: int, count: int, dim: int) -> None:
        self.seed, self.generation, self.count, self.dim = seed, generation, count, dim

    def __len__(self) -> int:
        return self.count

    def vector(self, k: int) -> np.ndarray:
        rng = generator(self.seed, self.generation, k, TAG_DIRECTION)
        return rng.standard_normal(self.dim, dtype=np.float32)

    def weighted_sum(self, weights: np.ndarray, squared: bool = False) -> np.ndarray:
        return _stream_weighted_sum(weights, self.vector, self.dim, squared)


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
