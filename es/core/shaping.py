"""Fitness shaping: fitness values (higher is better) -> member weights.

Rank-based shaping makes a strategy invariant to monotone transformations of the fitness and
robust to outliers, which RL returns and black-box values both need.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np


def centered_ranks(fitness: np.ndarray) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5]; tied values share their average rank (Salimans et al.).

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


def nes_utilities(popsize: int) -> np.ndarray:
    """Rank-based weights (best first) that sum to zero: log-rank weights for the better half,
    minus their mean (Wierstra et al. 2014, the utilities of SNES and xNES)."""
    ranks = np.arange(1, popsize + 1)
    raw = np.maximum(0.0, math.log(popsize / 2 + 1) - np.log(ranks))
    return raw / raw.sum() - 1.0 / popsize


def by_rank(utilities: np.ndarray, fitness: np.ndarray) -> np.ndarray:
    """Give the best member ``utilities[0]``, the next ``utilities[1]``, ... (ties by member
    order, so the result is a pure function of the fitness values)."""
    order = np.argsort(-np.asarray(fitness, dtype=np.float64), kind="stable")
    weights = np.empty(len(order))
    weights[order] = utilities
    return weights


def worst_for_failures(fitness: np.ndarray) -> np.ndarray:
    """Non-finite fitness (a failed evaluation) becomes worse than every finite one."""
    fitness = np.asarray(fitness, dtype=np.float64).ravel()
    finite = np.isfinite(fitness)
    if finite.all():
        return fitness
    if not finite.any():
        return np.zeros_like(fitness)
    lowest = fitness[finite].min()
    # 1 below the worst finite value; at least one step below where 1 is lost (|x| > 1e16).
    worst = min(lowest - 1.0, np.nextafter(lowest, -np.inf))
    return np.where(finite, fitness, worst)


FITNESS_SHAPINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "centered_ranks": centered_ranks,
    "standardized": standardized,
}
