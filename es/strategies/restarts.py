"""IPOP and BIPOP restarts over any strategy, behind the same ask/tell protocol.

A run of the inner strategy ends at a *local stop* (``LocalStop``), a pure function of the
fitness told so far and the search scale, defined for any strategy after Hansen 2009
("Benchmarking a BI-population CMA-ES on the BBOB-2009 function testbed") and the defaults of
pycma 4.5 (``cma.CMAOptions``, which end the runs of ``cma.fmin2(..., bipop=True)``), none
before the run's first generation is told (as pycma samples one even below ``tolx``):

- ``no_finite_value``: ``FAILED_GENERATIONS`` (10) generations in a row without a finite
  value (every evaluation failed: NaN, inf, an exception). Such a generation ranks nothing, so
  it counts toward no other stop: a start where the objective is NaN (infeasible) gets to
  sample its way out, as in pycma, and an objective that fails everywhere still ends;
- ``diverged``: the search distribution's standard deviation is no longer finite in some
  coordinate (a step size far too long: SNES's ``lr_sigma = 1e6`` overflowed it after one
  generation, and its infinite candidates then failed 10 generations as ``no_finite_value``,
  which blamed the objective);
- ``tolx``: the search distribution's standard deviation is below ``tolx`` in every
  coordinate (``search_scale``; a strategy may define ``tolx_scale``, as ``CMA`` does to
  compare pycma's evolution path too);
- ``tolfun`` (pycma's rule): the fitness range of the last generation and the range of the
  best fitness over the last ``floor(10 + 30 d / population)`` generations (fewer early in a
  run) are both below ``tolfun``;
- ``tolfunhist`` (pycma's): that history holds more than 9 generations and its range is below
  ``tolfunhist``, whatever the last generation's range;
- ``flatfitness`` (pycma's ``tolflatfitness``, default 1): the best fitness equalled the one
  at rank ``floor(0.75 population)`` in more than ``FLAT_GENERATIONS`` (1) consecutive
  generations: a flat fitness ranks nothing, and neither ``tolfun`` nor ``tolx`` need ever fire
  on a plateau. Hansen 2009's EqualFunVals (best against the ``1 + ceil(0.1 + population /
  4)``-th in a third of the last d generations) ended runs on BBOB's step ellipsoid f7 after
  one flat generation at d = 2, where pycma's rule let them step off the plateau;
- ``stagnation`` (pycma's ``tolstagnation``, with ``T = 100 + 100 d**1.5 / population``,
  ``population`` the first run's for every run, as ``fmin`` keeps its evaluated options):
  the best and median fitness of every fifth generation are recorded; after more than
  ``d (5 + 100 / population)`` generations and 100 records, the run's best fitness is more
  than ``T / 2`` generations old and, over the last two windows of ``max(T / 10, records /
  10)`` records, the median of both the best and the median fitness of the recent window is
  no better than the earlier one's. Hansen 2009's version (20% of the run, at least ``120 +
  30 d / population`` generations, no age condition) ended runs on BBOB's f19, f23 and f24
  that pycma's rule let go on to better precision;
- ``maxiter`` (pycma's default): ``100 + 150 (d + 3)**2 / sqrt(population)`` generations,
  ``population`` the first run's, for every run (pycma's ``fmin`` keeps the first run's
  value);
- a strategy's own condition, if it has a ``local_stop()`` method (``CMA``: pycma's
  numerical ones, such as ``tolconditioncov``).

Then a new run starts from the initial mean:

- **IPOP** (Auger & Hansen 2005, "A restart CMA evolution strategy with increasing
  population size"): restart k has population ``population * 2**k`` and the initial sigma.
- **BIPOP** (Hansen 2009): two interlaced regimes with equal budgets. The *large* regime is
  IPOP (the k-th large restart has ``population * 2**k``); the *small* regime draws
  ``lambda_s = floor(population * (lambda_large / population) ** (u1**2))`` and
  ``sigma_s = sigma * 10 ** (-2 u2)`` (u1, u2 uniform in [0, 1], ``lambda_large`` the last
  large population: Hansen's ``lambda_l / 2`` with his ``lambda_l`` the regime's next one, as
  pycma's ``fmin`` and DEAP's ``cma_bipop`` example read it), and a small run is capped at half
  the large regime's evaluations so far (pycma). The first run counts toward the small
  regime's evaluations (as pycma does), so the first restart is large; later a small run
  starts whenever the small regime has used fewer evaluations than the large one.
  ``max_restarts`` counts large restarts only (pycma's ``restarts`` does too).

Every decision is a pure function of the fitness told and the seed (restart k's strategy
seed and its BIPOP draws come from ``(seed, k)``; run 0 uses ``seed`` itself), so every rank
of a distributed run restarts alike, and ``state()``/``load_state()`` resume exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from es.core.seeding import SEED_BOUND, generator
from es.core.shaping import worst_for_failures
from es.strategies.base import Generation, Strategy

TAG_RESTART = 0x2E57A27  # a restart's strategy seed and its BIPOP draws

#: Builds the strategy of one run: ``factory(mean0, population, sigma, seed)``. It may round
#: the population (even for mirrored sampling); the restarts read ``strategy.population``.
Factory = Callable[[np.ndarray, int, float, int], Strategy]

FIRST, LARGE, SMALL = 0, 1, 2  # the regime of a run
STAGNATION_MAX = 20_000  # records of the stagnation history kept (pycma keeps as many)
STAGNATION_EVERY = 5  # generations per record (pycma's fit.histbest)
FLAT_GENERATIONS = 1  # pycma 4.5's tolflatfitness: flat generations tolerated in a row
#: Generations in a row without one finite value that end a run: an infeasible start (the
#: objective NaN there) must get to sample a feasible point, and one failing everywhere stop.
FAILED_GENERATIONS = 10


@dataclass(frozen=True)
class LocalStop:
    """When a run has converged or stalled (module docstring); None or False switches one
    off."""

    tolfun: float | None = 1e-11
    tolx: float | None = 1e-11
    tolfunhist: float | None = 1e-12
    stagnation: bool = True
    flatfitness: bool = True
    maxiter: bool = True


def search_scale(strategy: Any) -> np.ndarray:
    """Per-coordinate standard deviation of the strategy's next generation: its ``scale``
    if it has one, else the generation's ``scale`` (noise strategies), else the spread of the
    candidates around their mean (any other explicit generation)."""
    scale = getattr(strategy, "scale", None)
    generation = None
    if scale is None:
        generation = strategy.ask()
        scale = getattr(generation, "scale", None)
    if scale is None:
        candidates = np.asarray(generation.candidates, dtype=np.float64)  # type: ignore[union-attr]
        scale = candidates.std(axis=0)
    mean = np.asarray(strategy.mean)
    return np.abs(np.broadcast_to(np.asarray(scale, dtype=np.float64), mean.shape))


def tolx_scale(strategy: Any) -> np.ndarray:
    """What ``tolx`` compares: the strategy's ``tolx_scale`` if it has one, else its
    ``search_scale``."""
    own = getattr(strategy, "tolx_scale", None)
    return search_scale(strategy) if own is None else np.asarray(own, dtype=np.float64)


def tolfun_window(dim: int, population: int) -> int:
    """How many generations' best fitness ``tolfun`` looks at (pycma's ``fit.hist``)."""
    return math.floor(10 + 30 * dim / population)


def max_generations(dim: int, population: float) -> int:
    """pycma's default ``maxiter``: ``100 + 150 (d + 3)**2 // sqrt(population)``."""
    return 100 + math.floor(150 * (dim + 3) ** 2 / math.sqrt(population))


def is_flat(fitness: np.ndarray) -> bool:
    """The best fitness of a generation equals the one at rank ``floor(0.75 population)``
    (0-based, best first), as pycma tests it."""
    ranked = np.sort(fitness)[::-1]
    return bool(ranked[0] == ranked[int(0.75 * ranked.size)])


def stagnation_generations(dim: int, population: float) -> int:
    """pycma's default ``tolstagnation``: ``100 + 100 d**1.5 / population``."""
    return int(100 + 100 * dim**1.5 / population)


@dataclass
class RunHistory:
    """What a run's local stops look at, recorded as pycma records it (fitness maximised):
    the best of the recent generations (``tolfun``), the last generation, whether the recent
    ones were flat, the best and median of every fifth generation (``stagnation``) and the
    run's best so far with where in the run it was evaluated, in generations (pycma's
    ``best.evals`` over the population: generation ``g``'s member ``i`` of ``n`` is at
    ``g - 1 + (i + 1) / n``)."""

    generations: int = 0
    failed_in_row: int = 0
    recent_best: list[float] = field(default_factory=list)
    last: np.ndarray | None = None
    flat: list[bool] = field(default_factory=list)
    sampled_best: list[float] = field(default_factory=list)
    sampled_median: list[float] = field(default_factory=list)
    record: float = -math.inf
    record_position: float = 0.0

    def add(self, fitness: np.ndarray, keep_recent: int) -> None:
        """Record a generation's fitness (raw: non-finite for a failed evaluation). One with
        no finite value ranks nothing and says nothing of convergence: it is only counted."""
        self.generations += 1
        if not np.isfinite(fitness).any():
            self.failed_in_row += 1
            return
        self.failed_in_row = 0
        fitness = worst_for_failures(fitness)
        best = float(fitness.max())
        self.recent_best.append(best)
        self.flat.append(is_flat(fitness))
        del self.recent_best[:-keep_recent], self.flat[:-FLAT_GENERATIONS - 1]
        self.last = fitness
        if self.generations % STAGNATION_EVERY == 0:
            self.sampled_best.append(best)
            self.sampled_median.append(float(np.median(fitness)))
            del self.sampled_best[:-STAGNATION_MAX], self.sampled_median[:-STAGNATION_MAX]
        if best > self.record:
            member = int(np.argmax(fitness))
            self.record = best
            self.record_position = self.generations - 1 + (member + 1) / fitness.size

    def state(self) -> dict[str, np.ndarray]:
        return {
            "restart_best": np.array(self.recent_best, dtype=np.float64),
            "restart_last": (np.array(self.last, dtype=np.float64) if self.last is not None
                             else np.zeros(0)),
            "restart_flat": np.array(self.flat, dtype=bool),
            "restart_sampled": np.array([self.sampled_best, self.sampled_median],
                                        dtype=np.float64).reshape(2, -1),
            "restart_record": np.array([self.record, self.record_position], dtype=np.float64),
            "restart_failed": np.array(self.failed_in_row, dtype=np.int64),
        }

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], generations: int) -> RunHistory:
        sampled = np.asarray(state["restart_sampled"], dtype=np.float64)
        record, record_position = np.asarray(state["restart_record"], dtype=np.float64)
        return cls(generations=generations, failed_in_row=int(state["restart_failed"]),
                   recent_best=[float(v) for v in state["restart_best"]],
                   last=np.asarray(state["restart_last"], dtype=np.float64).copy()
                   if generations else None,
                   flat=[bool(v) for v in state["restart_flat"]],
                   sampled_best=sampled[0].tolist(), sampled_median=sampled[1].tolist(),
                   record=float(record), record_position=float(record_position))


def stagnated(dim: int, population: int, history: RunHistory, population0: float) -> bool:
    """The ``stagnation`` stop (module docstring), pycma's ``tolstagnation`` test."""
    patience = stagnation_generations(dim, population0)
    best, median = np.asarray(history.sampled_best), np.asarray(history.sampled_median)
    window = max(patience / STAGNATION_EVERY / 2, best.size / 10)
    if window > history.generations:
        return False
    window = int(window)
    return bool(history.generations > dim * (5 + 100 / population)
                and history.generations - history.record_position > patience / 2
                and best.size > 100 and 2 * window < best.size
                and np.median(best[-window:]) <= np.median(best[-2 * window:-window])
                and np.median(median[-window:]) <= np.median(median[-2 * window:-window]))


def local_stop(criteria: LocalStop, dim: int, population: int, history: RunHistory,
               population0: float, scale: np.ndarray) -> str:
    """The first generic local stop met (``""`` if none) by a run with ``history``;
    ``population0`` is the base population (``maxiter``, ``stagnation``). A run evaluates
    one generation before any (pycma's does too: a sigma below ``tolx`` still samples)."""
    if history.generations == 0:
        return ""
    if not np.isfinite(scale).all():
        return "diverged"
    if history.failed_in_row >= FAILED_GENERATIONS:
        return "no_finite_value"
    if criteria.tolx is not None and float(scale.max()) < criteria.tolx:
        return "tolx"
    recent = np.asarray(history.recent_best[-tolfun_window(dim, population):])
    if (criteria.tolfun is not None and history.last is not None
            and float(np.ptp(history.last)) < criteria.tolfun
            and float(np.ptp(recent)) < criteria.tolfun):
        return "tolfun"
    if (criteria.tolfunhist is not None and recent.size > 9
            and float(np.ptp(recent)) < criteria.tolfunhist):
        return "tolfunhist"
    flat = history.flat
    if (criteria.flatfitness and len(flat) > FLAT_GENERATIONS
            and all(flat[-FLAT_GENERATIONS - 1:])):
        return "flatfitness"
    if criteria.stagnation and stagnated(dim, population, history, population0):
        return "stagnation"
    if criteria.maxiter and history.generations >= max_generations(dim, population0):
        return "maxiter"
    return ""


def run_seed(seed: int, run: int) -> int:
    """The strategy seed of run ``run`` (0: the first) of restarts seeded ``seed``."""
    if run == 0:
        return seed
    return int(generator(seed, run, TAG_RESTART).integers(0, SEED_BOUND))


def small_run_draws(seed: int, run: int) -> tuple[float, float]:
    """BIPOP's uniform draws for a small run: (population exponent, sigma exponent)."""
    u1, u2 = generator(seed, run, TAG_RESTART, SMALL).random(2)
    return float(u1), float(u2)


class Restarts:
    """Restarts ``factory``'s strategy at each local stop (module docstring) until
    ``max_restarts`` are spent; then ``stop_reason`` names the last run's local stop."""

    name: ClassVar[str] = "restarts"

    def __init__(
        self,
        factory: Factory,
        mean0: np.ndarray,
        *,
        population: float,
        sigma: float,
        seed: int = 0,
        max_restarts: int = 0,
        bipop: bool = False,
        criteria: LocalStop = LocalStop(),  # noqa: B008  frozen, shared safely
    ) -> None:
        if max_restarts < 0:
            raise ValueError(f"max_restarts {max_restarts}: must be >= 0")
        self.factory, self.mean0 = factory, np.array(mean0, dtype=np.float64).ravel()
        # May be fractional (pycma's default 4 + 3 ln d): every run takes the floor of its
        # scaled value, as cma.fmin's restarts scale the unrounded default.
        self.population0, self.sigma0, self.seed = float(population), float(sigma), int(seed)
        self.max_restarts, self.bipop, self.criteria = int(max_restarts), bool(bipop), criteria
        self.generation = 0
        self.run = self.large_runs = 0  # runs started after the first; large ones among them
        self.evals = [0, 0]  # evaluations of the small (first run included) and large regimes
        self.stop_reason = ""
        self.ends: list[tuple[int, str]] = []  # (generation, reason) of each run's end
        self._begin(FIRST, math.floor(self.population0), self.sigma0, 0)
        self._settle()

    # The protocol, forwarded to the current run's strategy.
    @property
    def population(self) -> int:
        return self.inner.population

    @property
    def mean(self) -> np.ndarray:
        return self.inner.mean

    @property
    def mirrored(self) -> bool:
        return bool(getattr(self.inner, "mirrored", False))

    @property
    def scale(self) -> np.ndarray:
        return search_scale(self.inner)

    def ask(self) -> Generation:
        return self.inner.ask()

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """Tell the current run; restart (or stop) if it has reached a local stop."""
        if self.stop_reason:
            raise RuntimeError(f"the restarts are spent (last run ended by {self.stop_reason})")
        fitness = np.asarray(fitness, dtype=np.float64).ravel()
        # No finite value: a strategy that steps on ranks skips the generation; pycma is
        # told the flat values as they are (it goes on adapting sigma on them).
        skip = getattr(self.inner, "skip", None)
        failed = not np.isfinite(fitness).any()
        metrics = skip(fitness) if failed and skip is not None else self.inner.tell(fitness)
        self.generation += 1
        self.run_evals += fitness.size
        self.history.add(fitness, tolfun_window(self.mean0.size, self.population))
        run, population = self.run, self.population
        self._settle()
        return {**metrics, "restart": float(run), "population": float(population)}

    # Runs and their ends.
    def _begin(self, kind: int, population: int, sigma: float, cap: int) -> None:
        """Start a run; ``cap`` > 0 bounds its evaluations to ``cap / 2`` (BIPOP's small
        regime: half the large regime's, unrounded as pycma's ``maxiter`` for it)."""
        self.kind, self.run_population, self.run_sigma, self.cap = kind, population, sigma, cap
        self.inner = self.factory(self.mean0.copy(), population, sigma,
                                  run_seed(self.seed, self.run))
        self.run_evals = 0
        self.history = RunHistory()

    def _reason(self) -> str:
        if self.cap and 2 * self.run_evals >= self.cap:
            return "budget"
        dim = self.mean0.size
        reason = local_stop(self.criteria, dim, self.population, self.history,
                            self.population0, tolx_scale(self.inner))
        own = getattr(self.inner, "local_stop", None)
        return reason or (own() if own is not None else "")

    def _settle(self) -> None:
        """Restart as long as the current run is at a local stop and restarts are left."""
        while not self.stop_reason:
            reason = self._reason()
            if not reason:
                return
            self.ends.append((self.generation, reason))
            # A run costs at least one generation in the accounting, so that BIPOP's small
            # regime cannot restart forever on runs that stop before evaluating anything.
            self.evals[self.kind == LARGE] += max(self.run_evals, self.population)
            spent = self.large_runs if self.bipop else self.run
            if spent >= self.max_restarts:
                self.stop_reason = reason
                return
            self._next_run()

    def _next_run(self) -> None:
        self.run += 1
        small, large = self.evals
        if self.bipop and large > 0 and small < large:
            u1, u2 = small_run_draws(self.seed, self.run)
            # Up to the last large population, population0 * 2**large_runs (pycma's fmin).
            population = math.floor(self.population0 * (2**self.large_runs) ** (u1**2))
            self._begin(SMALL, population, self.sigma0 * 10 ** (-2 * u2), max(large, 1))
            return
        self.large_runs += 1
        doublings = self.large_runs if self.bipop else self.run
        self._begin(LARGE, math.floor(self.population0 * 2**doublings), self.sigma0, 0)

    # Checkpoints.
    def state(self) -> dict[str, np.ndarray]:
        """The restart bookkeeping, the run's fitness histories and the run's strategy state
        (``inner_*``): everything the next decision depends on."""
        inner = {f"inner_{key}": value for key, value in self.inner.state().items()}
        counters = [self.generation, self.run, self.large_runs, self.kind, self.run_population,
                    self.cap, self.history.generations, self.run_evals, *self.evals]
        return {
            "theta": np.array(self.mean, copy=True),
            "restart_counters": np.array(counters, dtype=np.int64),
            "restart_sigma": np.array(self.run_sigma, dtype=np.float64),
            **self.history.state(),
            "restart_stop_reason": np.array(self.stop_reason),
            **inner,
        }

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        counters = [int(value) for value in np.asarray(state["restart_counters"])]
        (self.generation, self.run, self.large_runs, kind, population, cap,
         run_generations, run_evals, small, large) = counters
        self._begin(kind, population, float(state["restart_sigma"]), cap)
        self.inner.load_state({key.removeprefix("inner_"): value for key, value in state.items()
                               if key.startswith("inner_")})
        self.inner.generation = run_generations  # the protocol keeps the counter outside state()
        self.run_evals, self.evals = run_evals, [small, large]
        self.history = RunHistory.from_state(state, run_generations)
        self.stop_reason = str(state["restart_stop_reason"])
