"""Black-box minimisation from Python: an ask/tell ``OpenES`` and ``minimize``.

>>> import numpy as np, es
>>> res = es.minimize(es.functions.sphere, x0=np.full(10, 3.0), sigma0=1.0, seed=1,
...                   ftarget=1e-10)
>>> res.stop_reason, res.fun <= 1e-10
('ftarget', True)
>>> opt = es.OpenES(x0=np.zeros(3), sigma=0.5, popsize=8, seed=0, max_generations=5)
>>> while not opt.stop():
...     xs = opt.ask()
...     opt.tell(xs, [float(np.sum((x - 1) ** 2)) for x in xs])
>>> opt.result.ngen, opt.stop_reason
(5, 'max_generations')

The search direction is OpenES's (Salimans et al. 2017): mirrored pairs ``mean ± sigma * eps``
and rank-based fitness shaping, ``sum_i u_i eps_i``. It is taken as a natural-gradient step in
units of ``sigma``, and ``sigma`` (one per coordinate) adapts as in separable NES (Schaul et al.
2011): it grows along coordinates where good members lie far out and shrinks where they lie
close in, so the search converges at a linear rate on its own, without a tuned decay schedule.
``adapt_sigma=False`` keeps ``sigma`` fixed, as the paper's reinforcement-learning runs do.

Every random draw is a pure function of ``(seed, generation)``, so ask/tell, ``minimize`` and
``minimize(workers=N)`` visit the same points and return the same bits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from es.seeding import generator

TAG_MINIMIZE = 0x313E  # the directions of one generation


@dataclass
class Result:
    """What a minimisation returns (``x``: the best point evaluated, ``fun``: its value)."""

    x: np.ndarray
    fun: float
    nfev: int
    ngen: int
    stop_reason: str
    x_mean: np.ndarray
    history: list[dict[str, float]] = field(default_factory=list)


def nes_utilities(popsize: int) -> np.ndarray:
    """Rank-based weights (best first) that sum to zero: log-rank weights for the better half,
    minus their mean (Wierstra et al. 2014)."""
    ranks = np.arange(1, popsize + 1)
    raw = np.maximum(0.0, math.log(popsize / 2 + 1) - np.log(ranks))
    return raw / raw.sum() - 1.0 / popsize


class OpenES:
    """Ask/tell minimiser; ``stop()`` tells when a criterion is met (``stop_reason`` says which).

    Criteria (each off when None): ``max_evals``, ``max_generations``, ``ftarget`` (best value
    at or below it), ``tolfun`` (the values of a generation and the best values over the last
    generations all lie within it), ``tolx`` (every coordinate's sigma below it),
    ``timeout_s`` (wall seconds since construction).
    """

    def __init__(
        self,
        x0: Sequence[float] | np.ndarray,
        sigma: float = 0.1,
        popsize: int | None = None,
        seed: int = 0,
        *,
        mirrored: bool = True,
        adapt_sigma: bool = True,
        lr: float = 1.0,
        max_evals: int | None = None,
        max_generations: int | None = None,
        ftarget: float | None = None,
        tolfun: float | None = 1e-12,
        tolx: float | None = 1e-12,
        timeout_s: float | None = None,
    ) -> None:
        self.mean = np.array(x0, dtype=np.float64).ravel()
        dim = self.mean.size
        if dim < 1 or not np.all(np.isfinite(self.mean)):
            raise ValueError(f"x0 must be a non-empty finite vector, got {x0!r}")
        if not sigma > 0:
            raise ValueError(f"sigma {sigma}: must be > 0")
        popsize = popsize or 4 + int(3 * math.log(dim))
        popsize += popsize % 2 if mirrored else 0
        if popsize < 2:
            raise ValueError(f"popsize {popsize}: must be >= 2")
        self.sigma = np.full(dim, float(sigma))
        self.popsize, self.seed, self.mirrored, self.lr = popsize, seed, mirrored, lr
        self.sigma_lr = (3 + math.log(dim)) / (5 * math.sqrt(dim)) if adapt_sigma else 0.0
        self.utilities = nes_utilities(popsize)
        self.limits = {"max_evals": max_evals, "max_generations": max_generations,
                       "ftarget": ftarget, "tolfun": tolfun, "tolx": tolx,
                       "timeout_s": timeout_s}
        self.generation = self.nfev = 0
        self.best_x, self.best_f = self.mean.copy(), math.inf
        self.history: list[dict[str, float]] = []
        self.stop_reason = ""
        self._last_values: np.ndarray | None = None
        self._pending: tuple[np.ndarray, np.ndarray] | None = None
        self._started = time.perf_counter()

    def _directions(self) -> np.ndarray:
        """This generation's unit-variance directions, one row per member."""
        rng = generator(self.seed, self.generation, TAG_MINIMIZE)
        if not self.mirrored:
            return rng.standard_normal((self.popsize, self.mean.size))
        half = rng.standard_normal((self.popsize // 2, self.mean.size))
        return np.stack((half, -half), axis=1).reshape(self.popsize, -1)  # +eps_k, -eps_k

    def ask(self) -> np.ndarray:
        """The generation's candidates, one per row (asking again returns the same ones)."""
        if self._pending is None:
            directions = self._directions()
            self._pending = (directions, self.mean + self.sigma * directions)
        return self._pending[1].copy()

    def tell(self, xs: Sequence[np.ndarray] | np.ndarray, values: Sequence[float]) -> None:
        """Values of the asked candidates (same order); NaN or inf count as worst."""
        if self._pending is None:
            raise RuntimeError("tell() without ask(): ask for the candidates first")
        directions, candidates = self._pending
        if not np.array_equal(np.asarray(xs, dtype=np.float64), candidates):
            raise ValueError("tell() got other points than ask() returned")
        values = np.asarray(values, dtype=np.float64).ravel()
        if values.size != self.popsize:
            raise ValueError(f"tell() got {values.size} values for {self.popsize} candidates")
        values = np.where(np.isfinite(values), values, np.inf)
        order = np.argsort(values, kind="stable")
        weights = np.empty(self.popsize)
        weights[order] = self.utilities
        self.mean = self.mean + self.lr * self.sigma * (weights @ directions)
        self.sigma = self.sigma * np.exp(0.5 * self.sigma_lr * (weights @ (directions**2 - 1)))
        best = int(order[0])
        if values[best] < self.best_f:
            self.best_f, self.best_x = float(values[best]), candidates[best].copy()
        self.generation += 1
        self.nfev += self.popsize
        self._last_values, self._pending = values, None
        self.history.append({"ngen": self.generation, "nfev": self.nfev,
                             "best_f": self.best_f, "f_min": float(values[best]),
                             "f_median": float(np.median(values)),
                             "sigma_mean": float(self.sigma.mean()),
                             "time_s": time.perf_counter() - self._started})

    def stop(self) -> bool:
        """True once a criterion is met; ``stop_reason`` names the first one."""
        self.stop_reason = self.stop_reason or self._reason()
        return bool(self.stop_reason)

    def _reason(self) -> str:
        limits = self.limits
        checks = {
            "ftarget": limits["ftarget"] is not None and self.best_f <= limits["ftarget"],
            "max_evals": limits["max_evals"] is not None and self.nfev >= limits["max_evals"],
            "max_generations": limits["max_generations"] is not None
            and self.generation >= limits["max_generations"],
            "tolx": limits["tolx"] is not None and float(self.sigma.max()) < limits["tolx"],
            "tolfun": limits["tolfun"] is not None and self._flat(limits["tolfun"]),
            "timeout_s": limits["timeout_s"] is not None
            and time.perf_counter() - self._started >= limits["timeout_s"],
        }
        return next((name for name, met in checks.items() if met), "")

    def _flat(self, tolerance: float) -> bool:
        """The last generation's values and the recent best values all within ``tolerance``."""
        window = 10 + int(30 * self.mean.size / self.popsize)
        if self._last_values is None or len(self.history) < window:
            return False
        recent = [h["best_f"] for h in self.history[-window:]]
        last = self._last_values[np.isfinite(self._last_values)]
        return (last.size > 0 and float(np.ptp(last)) < tolerance
                and max(recent) - min(recent) < tolerance)

    @property
    def result(self) -> Result:
        return Result(self.best_x.copy(), self.best_f, self.nfev, self.generation,
                      self.stop_reason, self.mean.copy(), list(self.history))


def minimize(
    fun: Callable[[np.ndarray], float],
    x0: Sequence[float] | np.ndarray,
    sigma0: float = 0.1,
    *,
    workers: int = 1,
    **options: Any,
) -> Result:
    """Minimise ``fun`` from ``x0`` with ``OpenES``; runs until a stopping criterion is met.

    ``options`` are ``OpenES``'s keywords: ``popsize``, ``seed``, the stopping criteria
    (``max_evals``, ``max_generations``, ``ftarget``, ``tolfun``, ``tolx``, ``timeout_s``) and
    the update's settings. Without a budget (``max_evals``, ``max_generations`` or
    ``timeout_s``) ``max_evals`` is 1e4 * dimension.

    ``workers=N`` evaluates each generation on N MPI worker processes that it spawns (the
    function is shipped with cloudpickle, so lambdas and closures from a notebook work). The
    workers do not run the caller's main script again, so scripts without an
    ``if __name__ == "__main__":`` guard, ``python - < script.py`` and Jupyter kernels work;
    they run BLAS on one thread. Spawning needs MPI's ``mpiexec``: from PATH, or else the one
    beside the Python interpreter (a venv that is not activated); with neither it raises
    ``es.evaluate.WorkerStartError`` (a ``RuntimeError``) at once, and workers that do not
    start within a minute raise it too, never hang. Under ``mpiexec`` (more than one rank)
    every rank runs this call and evaluates its share instead; nothing is spawned. Either way
    the result is bit-identical to ``workers=1``.
    """
    from es.evaluate import make_evaluator

    if all(options.get(key) is None for key in ("max_evals", "max_generations", "timeout_s")):
        options["max_evals"] = 10_000 * np.asarray(x0).size
    optimizer = OpenES(x0, sigma0, **options)
    with make_evaluator(fun, workers) as evaluate:
        while not optimizer.stop():
            candidates = optimizer.ask()
            optimizer.tell(candidates, evaluate(candidates))
    return optimizer.result
