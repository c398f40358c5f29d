"""Standard test functions for black-box minimisation, vectorised over rows.

Each takes ``x`` of shape ``(d,)`` or ``(n, d)`` and returns a float or an ``(n,)`` array;
every minimum is 0 (at the origin, or at ``(1, ..., 1)`` for Rosenbrock).

>>> import numpy as np
>>> float(sphere(np.zeros(5))), float(rosenbrock(np.ones(3)))
(0.0, 0.0)
>>> rastrigin(np.zeros((2, 4))).tolist()
[0.0, 0.0]
"""

from __future__ import annotations

import numpy as np


def _rows(x: np.ndarray) -> np.ndarray:
    rows = np.asarray(x, dtype=np.float64)
    if rows.ndim > 2:  # sphere summed the wrong axis, others failed to broadcast
        raise ValueError(f"x of shape {rows.shape}: the test functions take one point, "
                         "shape (d,), or a row per point, (n, d)")
    return np.atleast_2d(rows)


def _out(x: np.ndarray, values: np.ndarray) -> np.ndarray | float:
    return values if np.ndim(x) > 1 else float(values[0])


def sphere(x: np.ndarray) -> np.ndarray | float:
    """sum x_i^2: the easiest case, any working optimiser converges linearly."""
    return _out(x, np.square(_rows(x)).sum(axis=1))


def ellipsoid(x: np.ndarray, condition: float = 1e6) -> np.ndarray | float:
    """sum condition^((i-1)/(d-1)) x_i^2: axis scales spread over ``condition`` (1e6)."""
    rows = _rows(x)
    d = rows.shape[1]
    weights = condition ** (np.arange(d) / max(d - 1, 1))
    return _out(x, (weights * np.square(rows)).sum(axis=1))


def rosenbrock(x: np.ndarray) -> np.ndarray | float:
    """sum 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2: a curved valley, minimum at all ones."""
    rows = _rows(x)
    head, tail = rows[:, :-1], rows[:, 1:]
    return _out(x, (100.0 * np.square(tail - np.square(head)) + np.square(1.0 - head)).sum(axis=1))


def rastrigin(x: np.ndarray) -> np.ndarray | float:
    """10 d + sum x_i^2 - 10 cos(2 pi x_i): a grid of local minima around the global one."""
    rows = _rows(x)
    d = rows.shape[1]
    return _out(x, 10.0 * d + (np.square(rows) - 10.0 * np.cos(2 * np.pi * rows)).sum(axis=1))


def ackley(x: np.ndarray) -> np.ndarray | float:
    """-20 exp(-0.2 sqrt(mean x^2)) - exp(mean cos(2 pi x)) + 20 + e: flat outside, a deep hole
    at the origin."""
    rows = _rows(x)
    # Each term is 0 at the origin: summed in another order, they left 4.4e-16 there.
    first = 20.0 - 20.0 * np.exp(-0.2 * np.sqrt(np.square(rows).mean(axis=1)))
    second = np.e - np.exp(np.cos(2 * np.pi * rows).mean(axis=1))
    return _out(x, np.maximum(first + second, 0.0))


FUNCTIONS = {f.__name__: f for f in (sphere, ellipsoid, rosenbrock, rastrigin, ackley)}
