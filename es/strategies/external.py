"""Distribute an external ask/tell optimizer scalar-only, by running it on every rank.

``External`` adapts any optimizer that meets this contract to the strategy protocol
(``es.strategies.base``):

1. **ask is deterministic given its seed and the history of tells**: a fresh instance made by
   the same ``make()`` and told the same values in the same order asks the same candidates,
   bit for bit (same platform, same library versions);
2. **tell is deterministic**: its effect depends only on the candidates it was asked and the
   values it is told;
3. **no hidden state outside the instance**: nothing that other code can change (files,
   clocks, threads, module globals such as NumPy's *global* RNG) decides what it asks. An
   optimizer that samples from a global RNG by default must be given a generator of its own
   (pycma: its ``randn`` option, as ``CMA`` does), so a user's function, Gymnasium or another
   strategy drawing from ``np.random`` between generations cannot change its samples.

Then every rank runs the same seeded instance: ``ask()`` returns an ``ExplicitGeneration``
whose candidate matrix every rank computed alike (nothing travels; each rank holds the whole
population, O(population * d) memory), and ``tell(fitness)`` passes the gathered fitness on
in member order, negated for an optimizer that minimises (``minimizes=True``, as pycma).

Checkpoints need no pickle: ``state()`` is the current mean (``"theta"``) plus every fitness
ever told (``"fitness"``, a ``(generations, population)`` array). ``load_state`` rebuilds the
optimizer from its seed and replays that history: resuming costs O(generations) asks and
tells (for CMA-ES in d = 100 with 10^4 generations, a few seconds), and it checks that the
replay reproduced the saved mean, so an optimizer that breaks the contract fails loudly
instead of resuming somewhere else.

``CMA`` is the adapter shown on pycma's ``CMAEvolutionStrategy`` (full CMA-ES, Hansen &
Ostermeier 2001; Hansen 2016, "The CMA Evolution Strategy: A Tutorial", arXiv 1604.00772).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from es.core.noise import NoiseSource
from es.core.seeding import TAG_CMA, generator
from es.core.shaping import worst_for_failures
from es.strategies.base import ExplicitGeneration, fitness_summary


def import_cma() -> Any:
    """pycma, without the warning its import prints where matplotlib is not installed (a core
    install's first es.minimize said "Could not import matplotlib.pyplot, therefore
    cma.plot() etc. is not available": pycma's plots are not es's)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Could not import matplotlib",
                                category=UserWarning)
        import cma
    return cma


class External:
    """The strategy protocol over an optimizer built by ``make()`` (see the module docstring).

    ``mean_of(optimizer)`` reads its current solution; ``scale_of(optimizer)``, if given, its
    per-coordinate search scale (the restarts' ``tolx`` reads it as ``scale``).
    """

    name: ClassVar[str] = "external"

    def __init__(
        self,
        make: Callable[[], Any],
        *,
        population: int,
        mean_of: Callable[[Any], np.ndarray],
        scale_of: Callable[[Any], np.ndarray] | None = None,
        minimizes: bool = True,
        dtype: type = np.float32,
    ) -> None:
        if population < 2:
            raise ValueError(f"population {population}: must be at least 2")
        self.population, self.minimizes, self.dtype = population, minimizes, np.dtype(dtype)
        self.mirrored = False
        self._make, self._mean_of, self._scale_of = make, mean_of, scale_of
        self._start()

    def _start(self) -> None:
        """A fresh optimizer, exactly as at construction (``load_state`` replays onto it)."""
        self.generation = 0
        self._told: list[np.ndarray] = []
        self._pending: tuple[ExplicitGeneration, Any] | None = None
        self.optimizer = self._make()
        self._after_tell()

    @property
    def mean(self) -> np.ndarray:
        """The optimizer's current solution."""
        return np.asarray(self._mean_of(self.optimizer), dtype=self.dtype)

    @property
    def scale(self) -> np.ndarray | None:
        """Per-coordinate standard deviation of the search distribution, when known."""
        if self._scale_of is None:
            return None
        return np.asarray(self._scale_of(self.optimizer), dtype=np.float64)

    def ask(self) -> ExplicitGeneration:
        """The optimizer's candidates (asking again returns the same ones)."""
        if self._pending is None:
            asked = self.optimizer.ask()
            candidates = np.array(asked, dtype=self.dtype)
            if candidates.ndim != 2 or len(candidates) != self.population:
                raise ValueError(f"the optimizer asked {np.shape(candidates)} candidates; "
                                 f"the population is {self.population} rows")
            candidates.setflags(write=False)
            self._pending = (ExplicitGeneration(self.generation, candidates), asked)
        return self._pending[0]

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """Tell the optimizer every member's fitness (higher is better, member order); a
        non-finite fitness counts as worse than every finite one."""
        if self._pending is None:
            self.ask()
        _, asked = self._pending  # type: ignore[misc]
        raw = np.asarray(fitness, dtype=np.float64).ravel()
        if raw.size != self.population:
            raise ValueError(f"got {raw.size} fitness values for {self.population} members")
        shaped = worst_for_failures(raw)
        self.optimizer.tell(asked, -shaped if self.minimizes else shaped)
        self._told.append(raw.copy())
        self.generation += 1
        self._pending = None
        self._after_tell()
        return fitness_summary(shaped)

    def _after_tell(self) -> None:
        """Hook run after construction and after every tell (replay included)."""

    def state(self) -> dict[str, np.ndarray]:
        """The mean and every fitness told: the optimizer is rebuilt by replay."""
        told = np.array(self._told, dtype=np.float64).reshape(len(self._told), self.population)
        return {"theta": self.mean.copy(), "fitness": told}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Rebuild the optimizer from its seed and replay every tell: O(generations)."""
        told = np.asarray(state["fitness"], dtype=np.float64)
        if told.ndim != 2 or told.shape[1] != self.population:
            raise ValueError(f"the state holds fitness of shape {told.shape}; this strategy "
                             f"has a population of {self.population}")
        self._start()
        for row in told:
            self.ask()
            self.tell(row)
        saved = np.asarray(state["theta"])
        if saved.shape != self.mean.shape or not np.array_equal(saved.astype(self.dtype),
                                                                self.mean):
            raise ValueError("replaying the saved fitness did not reproduce the saved mean: "
                             "the optimizer is not deterministic given its seed")


#: pycma's own default stopping conditions on its *model* (numerical breakdown, a step size
#: that diverged or crept up, a mean that no longer moves), the ones ``cma.fmin2`` ends a run
#: by besides those the restart wrapper (``es.strategies.restarts``) defines for every
#: strategy (tolfun, tolx, flat fitness, stagnation, maxiter); it treats them alike.
CMA_LOCAL_STOPS = ("tolconditioncov", "noeffectaxis", "noeffectcoord", "tolupsigma",
                   "tolfacupx", "tolxstagnation")


class CmaRandn:
    """pycma's ``randn(lam, N)``: standard normals from a generator of its own, fresh for
    every optimizer made (so a replay draws the same numbers). An object, not a closure, so
    that a copy of the optimizer (``copy.deepcopy``, ``pickle``) draws from a copy of it."""

    def __init__(self, seed: int) -> None:
        self.rng = generator(seed, TAG_CMA)

    def __call__(self, *shape: int) -> np.ndarray:
        return self.rng.standard_normal(shape)


def cma_mean(optimizer: Any) -> np.ndarray:
    return optimizer.gp.pheno(optimizer.mean)


def cma_scale(optimizer: Any) -> np.ndarray:
    return optimizer.stds


class CMA(External):
    """Full CMA-ES through pycma, distributed by running the same seeded instance everywhere.

    O(d^2) memory and O(d^2 population) time per generation (plus eigendecompositions): the
    method for small d (a policy of ~100 parameters, black-box problems up to a few thousand
    dimensions); ``sepcma`` scales further. ``noise`` and ``mirrored`` are accepted for the
    common constructor and unused: pycma samples its own candidates, never mirrored.
    ``options`` go to pycma (``CMA_diagonal``, ``CMA_active``, ``bounds``, ...). With
    ``dtype=np.float32`` (a policy) the members are pycma's float64 candidates rounded to
    float32, while pycma updates from its own float64 candidates.

    pycma draws its samples through its ``randn`` option, NumPy's global RNG by default; the
    adapter gives it a private generator instead, a pure function of ``seed`` (``CmaRandn``),
    so NumPy's global RNG is neither read nor reseeded and needs no swapping around every call
    (swapping its state cost ~0.2 ms per call, a third of a generation's time at d = 10). Plain
    pycma given ``{"randn": CmaRandn(seed)}`` asks the same candidates bit for bit.
    """

    name: ClassVar[str] = "cma"

    def __init__(
        self,
        mean0: np.ndarray,
        *,
        population: int,
        sigma: float,
        noise: NoiseSource | None = None,
        seed: int = 0,
        mirrored: bool = True,
        dtype: type = np.float32,
        **options: Any,
    ) -> None:
        del noise, mirrored  # see the class docstring
        if not sigma > 0:
            raise ValueError(f"sigma {sigma}: must be > 0")
        taken = sorted(set(options) & {"seed", "popsize", "randn"})
        if taken:
            raise ValueError(f"cma option {taken[0]!r} is set by the strategy itself")
        x0 = np.array(mean0, dtype=np.float64).ravel()
        self.sigma0, self.seed = float(sigma), int(seed)
        self.given_options = options  # the caller's, for an error that names them
        self.options = {"popsize": population, "verbose": -9, "verb_disp": 0, "verb_log": 0,
                        "signals_filename": "", **options}
        self.local_stop_reason, self.x0 = "", x0
        super().__init__(self._make_cma, population=population, mean_of=cma_mean,
                         scale_of=cma_scale, minimizes=True, dtype=dtype)

    def _make_cma(self) -> Any:
        cma = import_cma()
        try:
            return cma.CMAEvolutionStrategy(self.x0, self.sigma0,
                                            {**self.options, "randn": CmaRandn(self.seed)})
        except MemoryError:  # its options are not the cause: the d x d covariance is, or
            d, popsize = self.x0.size, self.options["popsize"]  # the population's d-vectors
            if d >= popsize:
                raise ValueError(
                    f"pycma ran out of memory starting: full CMA-ES keeps a d x d covariance, "
                    f"{d * d * 8 / 2**30:,.0f} GiB for d = {d} parameters; for this many use "
                    "sepcma, its diagonal form") from None
            raise ValueError(f"popsize {popsize}: pycma ran out of memory starting with a "
                             f"population this large (d = {d})") from None
        except Exception as error:  # an option of the wrong kind fails deep inside pycma
            reason = " ".join(f"{type(error).__name__}: {error}".split())
            raise ValueError(f"cma options {self.given_options}: pycma could not start with "
                             f"them ({reason})") from None

    @property
    def sigma(self) -> float:
        return float(self.optimizer.sigma)

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        return {**super().tell(fitness), "sigma": self.sigma}

    def _after_tell(self) -> None:
        # pycma's stop() updates counters of its own (flat-fitness iterations): run it after
        # every tell, replay included, so a resumed run decides exactly as an uninterrupted one.
        met = self.optimizer.stop() if self.generation else {}
        self.local_stop_reason = next((key for key in CMA_LOCAL_STOPS if key in met), "")

    def local_stop(self) -> str:
        """The name of a pycma condition in ``CMA_LOCAL_STOPS`` met now, else ``""``."""
        return self.local_stop_reason

    @property
    def tolx_scale(self) -> np.ndarray:
        """What pycma's ``tolx`` compares per coordinate: the search scale, or the step
        along the evolution path ``p_c`` where that is larger, signed as pycma compares it
        (a large negative component does not hold its stop; with ``abs`` a run went on one
        generation past pycma's, and every later restart with it)."""
        es = self.optimizer
        path = es.sigma * es.sigma_vec.scaling * es.pc
        return np.maximum(np.asarray(es.stds, dtype=np.float64), path)
