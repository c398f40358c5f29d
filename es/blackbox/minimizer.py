"""Black-box minimisation from Python: ``minimize`` and the ask/tell ``AskTell``, a facade over
the strategies of ``es.strategies`` (the ones ``es-train`` uses: one implementation each).

>>> import numpy as np, es
>>> res = es.minimize(es.functions.sphere, x0=np.full(10, 3.0), sigma0=1.0, seed=1,
...                   ftarget=1e-10)
>>> res.stop_reason, res.fun <= 1e-10, res.method
('ftarget', True, 'cma')
>>> opt = es.AskTell("cma", x0=np.zeros(3), sigma0=0.5, popsize=8, seed=0, max_generations=5)
>>> while not opt.stop():
...     xs = opt.ask()
...     opt.tell(xs, [float(np.sum((x - 1) ** 2)) for x in xs])
>>> opt.result.ngen, opt.stop_reason
(5, 'max_generations')
>>> res = es.minimize(es.functions.rastrigin, np.full(3, 3.0), 2.0, restarts=6, seed=1,
...                   ftarget=1e-8, max_evals=50_000)
>>> res.stop_reason, res.restarts > 0
('ftarget', True)

Strategies maximise a fitness (higher is better, as RL returns); this module is the one place
that negates: ``tell(xs, values)`` passes ``-values`` on. A non-finite value (a failed
evaluation) counts as worse than every finite one.

Every random draw is a pure function of ``(seed, generation, ...)``, so ask/tell,
``minimize``, ``minimize(workers=N)`` and every rank of ``mpiexec -n N`` visit the same points
and return the same bits.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from es.blackbox import checks
from es.core.messages import callback_error
from es.strategies.restarts import LocalStop, Restarts, search_scale

#: ``method="auto"`` uses full CMA-ES up to this dimension (its O(d^2) memory and time per
#: generation stay small there) and separable CMA-ES above it (O(d)).
AUTO_CMA_MAX_DIM = 100

#: The methods whose default is *not* mirrored sampling (their population is not made even).
UNMIRRORED = ("cma",)


def strategy_classes() -> dict[str, type]:
    """Every strategy by name (``es.strategies.STRATEGIES``)."""
    from es.strategies import STRATEGIES

    return STRATEGIES


def resolve_method(method: str, dim: int) -> str:
    """The strategy's name for ``method`` ("auto": cma up to ``AUTO_CMA_MAX_DIM``, else
    sepcma); an unknown name is a one-line ValueError listing the allowed ones."""
    classes = strategy_classes()
    allowed = ", ".join(repr(name) for name in ["auto", *sorted(classes)])
    if not isinstance(method, str):
        raise TypeError(f"method {checks.short(method)}: must be a strategy's name, one of "
                        f"{allowed} (the start point is x0: es.AskTell(method, x0, sigma0), "
                        "es.minimize(fun, x0, sigma0, method=...))")
    if method == "auto":
        return "cma" if dim <= AUTO_CMA_MAX_DIM else "sepcma"
    if method not in classes:
        raise ValueError(f"method {method!r}: allowed are {allowed}")
    return method


def default_popsize(dim: int, mirrored: bool) -> float:
    """pycma's default ``4 + 3 ln d``, unrounded: the first run has its floor and restarts
    scale the unrounded value, as ``cma.fmin`` does (d = 2: 6, then 12, 24, 48, 97, ...). For
    mirrored sampling the floor, made even (rounded up): restarts double that even number
    (d = 5: 8, 16, 32, 64, 128, ...)."""
    population = 4 + 3 * math.log(dim)
    if not mirrored:
        return population
    return int(population) + int(population) % 2


def own_keywords() -> set[str]:
    """The facade's own argument names (offered as close matches of an unknown keyword)."""
    names: set[str] = set()
    for function in (minimize, AskTell):
        names |= {parameter.name for parameter in inspect.signature(function).parameters.values()
                  if parameter.kind is not parameter.VAR_KEYWORD}
    return names - {"self", "fun"}


#: The largest float64: a Python int beyond it is no objective value float() can read.
FLOAT64_MAX = float(np.finfo(np.float64).max)


class FunctionValueError(TypeError):
    """``fun`` returned something that is not a number (None, a string, ...)."""


def is_number_like(value: Any) -> bool:
    """Whether ``value`` converts to float64 as a number (a string would convert too, quietly:
    "1.5" is no objective value)."""
    if value is None:
        return False
    try:
        kind = np.asarray(value).dtype.kind
    except Exception:  # e.g. a torch tensor that requires grad: float() will say
        return True
    if kind in "iuf":
        return True
    if kind != "O":
        return False
    try:  # numbers of other types (Fraction, Decimal); a None among them would read as NaN
        np.asarray(value, dtype=np.float64)
        entries = np.asarray(value, dtype=object).ravel()
    except (TypeError, ValueError, OverflowError):  # 10**400: no float64 holds it
        return False
    return all(entry is not None for entry in entries)


@dataclass(frozen=True)
class CheckedFunction:
    """``fun`` whose values are checked: one that is not a number is a one-line
    ``FunctionValueError`` naming it and the point, instead of ``float()``'s TypeError.
    Picklable (spawned workers get it), and the values pass through unchanged."""

    fun: Callable[[np.ndarray], Any]
    vectorized: bool

    def __call__(self, x: np.ndarray) -> Any:
        value = self.fun(x)
        if isinstance(value, float | np.floating | np.integer) or (
                isinstance(value, int) and not isinstance(value, bool)
                and abs(value) <= FLOAT64_MAX):
            return value  # the usual: no cost (a bool is a mistake)
        if not is_number_like(value):
            what = (f"vectorized fun returned {checks.short(value)} ({type(value).__name__}) "
                    f"for {len(x)} rows" if self.vectorized else
                    f"fun returned {checks.short(value)} ({type(value).__name__}) at x = "
                    f"{checks.short(np.asarray(x))}")
            raise FunctionValueError(f"{what}: it must return a number"
                                     f"{' per row' if self.vectorized else ''} within "
                                     "float64's range (NaN or inf for a failed evaluation)")
        return value


def make_factory(method: str, dim: int, options: dict[str, Any]) -> StrategyFactory:
    """``factory(mean0, population, sigma, seed)`` for ``Restarts``: the strategy with the
    black-box defaults. Every strategy runs in float64 and regenerates its directions from
    seeds (``SeedNoise``): no table to build or size, O(d) memory, and on a black-box problem
    the function, not the O(population d) draws, is the cost."""
    classes = strategy_classes()
    if method not in classes:
        allowed = ", ".join(repr(name) for name in sorted(classes))
        raise ValueError(f"method {method!r} is not available yet: available are {allowed}")
    return StrategyFactory(method, dim, dict(options))


@dataclass
class StrategyFactory:
    """``make_factory``'s factory: an object, not a closure, so that an optimizer holding it
    can be copied and pickled (``copy.deepcopy``, ``pickle``) as any other value."""

    method: str
    dim: int
    options: dict[str, Any]

    def __call__(self, mean0: np.ndarray, population: int, sigma: float, seed: int) -> Any:
        from es.core.noise import SeedNoise

        cls = strategy_classes()[self.method]
        extra = dict(self.options)
        mirrored = bool(extra.get("mirrored", self.method not in UNMIRRORED))
        population += population % 2 if mirrored else 0
        if self.method == "openai":
            from es.core.optim import Adam

            # Adam's step is ~lr per coordinate whatever the gradient's scale: a tenth of
            # the search scale by default.
            lr = extra.pop("lr", None)
            extra["optimizer"] = Adam(self.dim, 0.1 * sigma if lr is None else lr)
        elif self.method == "ars":
            # ARS divides the values by their spread, so its step is ~lr sqrt(d / b) whatever
            # their scale: a fifth of the search scale by default (the paper's 0.02 at the
            # default sigma0 of 0.1), where a fixed 0.02 left a search of scale 1e-4 27,000
            # times higher than it started.
            extra.setdefault("lr", 0.2 * sigma)
        if "dtype" in inspect.signature(cls).parameters:
            extra["dtype"] = np.float64
        return cls(mean0, population=population, sigma=sigma, noise=SeedNoise(), seed=seed,
                   **extra)


@dataclass(repr=False)
class Result:
    """What a minimisation returns (``x``: the best point evaluated, ``fun``: its value,
    ``x_mean``: the last run's mean, ``restarts``: how many runs followed the first).

    Its repr is a summary, as scipy's ``OptimizeResult``: long vectors abbreviated, the
    history as its length (a long run's would be megabytes in a notebook)."""

    x: np.ndarray
    fun: float
    nfev: int
    ngen: int
    stop_reason: str
    x_mean: np.ndarray
    history: list[dict[str, float]] = field(default_factory=list)
    method: str = ""
    restarts: int = 0

    def __repr__(self) -> str:
        def vector(x: np.ndarray) -> str:
            with np.printoptions(threshold=10, edgeitems=3, precision=6, sign="-"):
                return " ".join(np.array2string(np.asarray(x), separator=", ").split())

        rows = {"method": repr(self.method), "stop_reason": repr(self.stop_reason),
                "fun": repr(self.fun), "x": vector(self.x), "nfev": str(self.nfev),
                "ngen": str(self.ngen), "restarts": str(self.restarts),
                "x_mean": vector(self.x_mean),
                "history": f"{len(self.history)} rows (one per generation)"}
        width = max(map(len, rows))
        return "\n".join(f"{name:>{width}}: {text}" for name, text in rows.items())


class AskTell:
    """Ask/tell minimiser over the strategy ``method``; ``stop()`` tells when a criterion is
    met (``stop_reason`` says which).

    Criteria (each off when None), checked between generations in this order: ``ftarget``
    (best value at or below it), ``max_evals``, ``max_generations``, then the local stops of
    the last run once ``restarts`` are spent (``tolx``: the search scale below it in every
    coordinate; ``tolfun``: the values of a generation and the best values over the last
    ``10 + 30 d / popsize`` generations all within it; ``tolfunhist``: those best values
    alone, over more than 9 generations; ``flatfitness``: the best equal to the 75th
    percentile in 2 generations in a row (pycma's ``tolflatfitness``); defaults as pycma's;
    ``stagnation``; ``maxiter``: pycma's ``100 + 150 (d + 3)**2 / sqrt(popsize)``
    generations per run (these three: False turns them off); ``budget`` (a BIPOP small
    run's cap); a strategy's own, e.g. pycma's ``tolconditioncov``; see
    ``es.strategies.restarts``), and ``timeout_s`` (wall seconds since construction).

    ``restarts=k`` restarts at each local stop up to k times with a doubled population
    (IPOP), or with ``bipop=True`` interlaces BIPOP's small-population runs (which do not
    count toward k). The first run's population is ``popsize`` (default: pycma's
    ``4 + 3 ln d``, see ``default_popsize``); restarts double it.

    ``options`` go to the strategy: the keywords of its constructor (for ``openai`` also
    ``lr``, Adam's step), or for ``cma`` pycma's options less those this class sets or
    decides itself (``maxfevals`` is ``max_evals`` here, ``popsize``, ``seed``, the stop
    tolerances, ...). ``bounds`` (``cma`` only): pycma's ``[lower, upper]``, scipy's
    ``(low, high)`` per coordinate, or an object with ``lb`` and ``ub``; see
    ``es.blackbox.checks``. Every mistake in the arguments is a one-line ``TypeError`` or
    ``ValueError`` naming the argument, raised here, before anything runs.
    """

    def __init__(
        self,
        method: str,
        x0: Sequence[float] | np.ndarray,
        sigma0: float = 0.1,
        popsize: int | None = None,
        seed: int = 0,
        *,
        restarts: int = 0,
        bipop: bool = False,
        max_evals: int | None = None,
        max_generations: int | None = None,
        ftarget: float | None = None,
        tolfun: float | None = 1e-11,
        tolx: float | None = 1e-11,
        tolfunhist: float | None = 1e-12,
        stagnation: bool = True,
        flatfitness: bool = True,
        maxiter: bool = True,
        timeout_s: float | None = None,
        **options: Any,
    ) -> None:
        x0 = checks.as_x0(x0)
        sigma0 = checks.check_sigma0(sigma0)
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed {seed!r}: must be an integer >= 0")
        for name, value in (("max_evals", max_evals), ("max_generations", max_generations),
                            ("timeout_s", timeout_s)):
            checks.check_limit(name, value)
        checks.check_integer("restarts", restarts, 0)
        if popsize is not None:
            checks.check_integer("popsize", popsize, 2)
            if max_evals is not None and popsize > max_evals:  # a generation is evaluated whole
                raise ValueError(f"popsize {popsize}: more than max_evals = {max_evals}, and "
                                 "each generation evaluates all of its popsize points: lower "
                                 "popsize or raise max_evals")
        checks.check_ftarget(ftarget)
        for name, value in (("tolfun", tolfun), ("tolx", tolx), ("tolfunhist", tolfunhist)):
            checks.check_tolerance(name, value)
        checks.check_flag("bipop", bipop)
        checks.check_flag("stagnation", stagnation)
        checks.check_flag("flatfitness", flatfitness)
        checks.check_flag("maxiter", maxiter, " (pycma's per-run default on or off; a "
                          "generation budget is max_generations)")
        dim = x0.size
        self.method = resolve_method(method, dim)
        label = (f"method {method!r}" if method == self.method
                 else f"method {method!r} (here {self.method!r}, d = {dim})")
        options = checks.check_options(self.method, label, options,
                                       strategy_classes()[self.method], own_keywords())
        self.bounds = checks.check_bounds(options.pop("bounds", None), dim, x0, self.method,
                                          label)
        if self.bounds is not None:
            options["bounds"] = self.bounds
        factory = make_factory(self.method, dim, options)
        mirrored = bool(options.get("mirrored", self.method not in UNMIRRORED))
        if popsize is None:
            popsize = default_popsize(dim, mirrored)
            if max_evals is not None and int(popsize) > max_evals:  # as for a popsize given
                largest = max_evals - max_evals % 2 if mirrored else max_evals  # mirrored: even
                raise ValueError(f"max_evals {max_evals}: less than one generation, whose "
                                 f"{int(popsize)} points (the default popsize at d = {dim}) "
                                 "are evaluated whole: raise max_evals" + (
                                     f" or give popsize <= {largest}"
                                     + (" (even: mirrored pairs)" if mirrored else "")
                                     if largest >= 2 else ""))
        if mirrored and popsize % 2:
            raise ValueError(f"popsize {popsize}: {self.method!r} samples mirrored pairs, so "
                             f"it must be even ({popsize - 1} or {popsize + 1}; or "
                             "mirrored=False)")
        self.strategy = Restarts(factory, x0, population=popsize, sigma=sigma0,
                                 seed=seed, max_restarts=restarts, bipop=bipop,
                                 criteria=LocalStop(tolfun=tolfun, tolx=tolx,
                                                    tolfunhist=tolfunhist,
                                                    stagnation=stagnation,
                                                    flatfitness=flatfitness, maxiter=maxiter))
        self.limits = {"max_evals": max_evals, "max_generations": max_generations,
                       "ftarget": ftarget, "timeout_s": timeout_s}
        self.generation = self.nfev = 0
        self.best_x, self.best_f = x0.copy(), math.inf
        self.history: list[dict[str, float]] = []
        self.stop_reason = ""
        self._pending: np.ndarray | None = None
        self._started = time.perf_counter()

    def __copy__(self) -> AskTell:
        """A fork that goes on alone, as ``copy.deepcopy`` makes: a shallow copy shared the
        strategy with the original, and telling both told it each generation twice, quietly."""
        import copy

        return copy.deepcopy(self)

    def __repr__(self) -> str:
        """A summary for a notebook's cell, which showed only the object's address."""
        return (f"AskTell(method={self.method!r}, d={self.best_x.size}, "
                f"generation={self.generation}, nfev={self.nfev}, best_f={self.best_f!r}, "
                f"stop_reason={self.stop_reason!r})")

    @property
    def mean(self) -> np.ndarray:
        """The current run's mean; with ``bounds``, mapped into them as pycma maps its
        candidates (pycma's ``result.xfavorite``: its own mean may lie outside)."""
        if self.bounds is not None:
            optimizer = self.strategy.inner.optimizer
            return np.asarray(optimizer.gp.pheno(optimizer.mean,
                                                 into_bounds=optimizer.boundary_handler.repair),
                              dtype=np.float64)
        return np.asarray(self.strategy.mean, dtype=np.float64)

    def ask(self) -> np.ndarray:
        """The generation's candidates, one per row (asking again returns the same ones)."""
        if self._pending is None:
            if self.strategy.stop_reason:  # tell() would refuse their values
                raise RuntimeError(f"ask() after the last run ended ({self.strategy.stop_reason}"
                                   "; restarts spent): stop() says so, and nothing is left "
                                   "to ask for; a new es.AskTell starts again")
            generation = self.strategy.ask()
            candidates = getattr(generation, "candidates", None)
            if candidates is None:
                candidates = [generation.params(member) for member in range(generation.population)]
            self._pending = np.array(candidates, dtype=np.float64)
        return self._pending.copy()

    def tell(self, xs: Sequence[np.ndarray] | np.ndarray, values: Sequence[float]) -> None:
        """Values of the asked candidates (same order); NaN or inf count as worst."""
        if self._pending is None:
            if self.generation:
                raise RuntimeError(f"tell() again: generation {self.generation}'s values were "
                                   "told already; ask() for the next candidates first")
            raise RuntimeError("tell() without ask(): ask for the candidates first")
        candidates = self._pending
        try:
            told = np.asarray(xs, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"tell() got xs {checks.short(xs)}: must be the candidates ask() "
                            "returned") from None
        if not np.array_equal(told, candidates, equal_nan=True):
            rounded = (told.shape == candidates.shape and np.asarray(xs).dtype != np.float64
                       and np.array_equal(told, candidates.astype(np.asarray(xs).dtype)))
            raise ValueError("tell() got other points than ask() returned" + (
                f": ask()'s, rounded to {np.asarray(xs).dtype}; pass back the float64 array "
                "ask() returned (the update uses the points as asked)" if rounded else ""))
        if isinstance(values, Iterator):  # map(f, xs): one pass, and no length to check
            raise TypeError(f"tell() got values as {type(values).__name__} (an iterator): "
                            "pass a list or an array, e.g. [f(x) for x in xs]")
        if not is_number_like(values):  # None would read as NaN, "1.5" as 1.5: quietly
            entries = list(np.asarray(values, dtype=object).ravel()) if values is not None \
                else [None]
            i = next((i for i, value in enumerate(entries) if not is_number_like(value)), 0)
            raise FunctionValueError(f"tell() got {checks.short(entries[i])} "
                                     f"({type(entries[i]).__name__}) as value {i}: values "
                                     "must be numbers within float64's range (NaN or inf for "
                                     "a failed evaluation)")
        from es.parallel.evaluate import masked_as_failed

        values = masked_as_failed(values, "tell()")
        if values.shape not in ((len(candidates),), (len(candidates), 1)):
            what = (f"{values.size} values" if values.ndim <= 1
                    else f"values of shape {values.shape}")
            raise ValueError(f"tell() got {what} for {len(candidates)} candidates: one value "
                             "per candidate, in their order")
        values = values.ravel()
        values = np.where(np.isfinite(values), values, np.inf)
        population, restart = len(candidates), self.strategy.run
        self.strategy.tell(-values)  # strategies maximise
        best = int(np.argmin(values))
        if values[best] < self.best_f:
            self.best_f, self.best_x = float(values[best]), candidates[best].copy()
        self.generation += 1
        self.nfev += population
        self._pending = None
        self.history.append({"ngen": self.generation, "nfev": self.nfev,
                             "best_f": self.best_f, "f_min": float(values[best]),
                             "f_median": float(np.median(values)),
                             "sigma_mean": float(search_scale(self.strategy).mean()),
                             "population": population, "restart": restart,
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
            # Every value NaN or inf (an objective that fails everywhere) leaves nothing to
            # rank: the local stop that follows would name flatness, not the cause.
            "no_finite_value": bool(self.strategy.stop_reason) and self.nfev > 0
            and self.best_f == math.inf,
            self.strategy.stop_reason: bool(self.strategy.stop_reason),
            "timeout_s": limits["timeout_s"] is not None
            and time.perf_counter() - self._started >= limits["timeout_s"],
        }
        return next((name for name, met in checks.items() if met), "")

    @property
    def result(self) -> Result:
        return Result(self.best_x.copy(), self.best_f, self.nfev, self.generation,
                      self.stop_reason, self.mean.copy(), list(self.history), self.method,
                      self.strategy.run)


def minimize(
    fun: Callable[[np.ndarray], float],
    x0: Sequence[float] | np.ndarray,
    sigma0: float = 0.1,
    *,
    method: str = "auto",
    workers: int = 1,
    vectorized: bool = False,
    restarts: int = 0,
    bipop: bool = False,
    popsize: int | None = None,
    seed: int = 0,
    max_evals: int | None = None,
    max_generations: int | None = None,
    ftarget: float | None = None,
    tolfun: float | None = 1e-11,
    tolx: float | None = 1e-11,
    tolfunhist: float | None = 1e-12,
    stagnation: bool = True,
    flatfitness: bool = True,
    maxiter: bool = True,
    timeout_s: float | None = None,
    callback: Callable[[dict[str, float]], object] | None = None,
    **strategy_options: Any,
) -> Result:
    """Minimise ``fun`` from ``x0`` with the strategy ``method`` (``AskTell``); runs until a
    stopping criterion is met.

    ``method="auto"`` is ``"cma"`` (full CMA-ES through pycma) up to ``AUTO_CMA_MAX_DIM``
    dimensions and ``"sepcma"`` above; ``strategy_options`` go to the strategy (``AskTell``
    says which: an unknown one is a one-line error naming it, before anything runs), and
    ``bounds=`` with ``method="cma"`` to pycma's boundary handling. Without a
    budget (``max_evals``, ``max_generations`` or ``timeout_s``) ``max_evals`` is
    1e4 * dimension. ``restarts``/``bipop``: IPOP or BIPOP restarts at local stops.

    ``vectorized=True``: ``fun`` takes an ``(n, d)`` array of candidates and returns ``n``
    values (as pycma's ``parallel_objective``, or a NumPy function written over rows), one
    call per generation (per worker or rank, on its share). The result is the same for any
    number of workers if a row's value does not depend on the other rows.

    ``workers=N`` evaluates each generation on N MPI worker processes that it spawns (the
    function is shipped with cloudpickle, so lambdas and closures from a notebook work). The
    workers do not run the caller's main script again, so scripts without an
    ``if __name__ == "__main__":`` guard, ``python - < script.py`` and Jupyter kernels work;
    they run BLAS on one thread. Spawning needs MPI's ``mpiexec``: from PATH, or else the one
    beside the Python interpreter (a venv that is not activated); with neither it raises
    ``es.parallel.evaluate.WorkerStartError`` (a ``RuntimeError``) at once, and workers that do not
    start within a minute raise it too, never hang. A worker that dies (a crash in C code)
    raises ``es.parallel.evaluate.WorkerDiedError``; the calling process never joins the
    workers' MPI job, so it lives on. Under ``mpiexec`` (more than one rank)
    every rank runs this call and evaluates its share instead, BLAS on one thread (the
    caller's setting is back afterwards); nothing is spawned. Either way
    the result is bit-identical to ``workers=1``.

    A value of ``fun`` that is not a number (None, a string) is a ``FunctionValueError`` (a
    ``TypeError``) naming it, the point and the generation; NaN and inf are failed
    evaluations, ranked below every value.

    ``callback(row)`` is called after every generation with its ``Result.history`` row
    (``ngen``, ``nfev``, ``best_f``, ``f_min``, ``f_median``, ``sigma_mean``, ``population``,
    ``restart``, ``time_s``); returning ``False`` stops there with ``stop_reason``
    ``"callback"``. Under ``mpiexec`` rank 0's callback decides for every rank.
    """
    _check_ranks_agree(x0=x0, sigma0=sigma0, method=method, vectorized=vectorized,
                       restarts=restarts, bipop=bipop, popsize=popsize, seed=seed,
                       max_evals=max_evals, max_generations=max_generations, ftarget=ftarget,
                       tolfun=tolfun, tolx=tolx, tolfunhist=tolfunhist, stagnation=stagnation,
                       flatfitness=flatfitness, maxiter=maxiter, **strategy_options)
    from es.parallel.comm import (
        LocalComm,
        MPIComm,
        make_comm,
        refused_together,
        under_mpi_launcher,
    )

    # fun, callback and workers are not compared across ranks: a rank that refused one alone
    # would have left the others waiting in their first exchange.
    with refused_together(MPIComm() if under_mpi_launcher() else LocalComm(), "es.minimize"):
        if not callable(fun):
            raise TypeError(f"fun {checks.short(fun)}: must be callable, the function to "
                            "minimise")
        if problem := callback_error(callback, "a history row"):  # else a traceback later
            raise ValueError(problem)
        checks.check_integer("workers", workers, 1)
        checks.check_flag("vectorized", vectorized)
        x0 = checks.as_x0(x0)
        if max_evals is None and max_generations is None and timeout_s is None:
            max_evals = 10_000 * x0.size
            if isinstance(popsize, int) and not isinstance(popsize, bool) \
                    and popsize > max_evals:  # AskTell's refusal would name it as if given
                raise ValueError(f"popsize {popsize}: more than the default max_evals = "
                                 f"{max_evals} (10,000 per dimension), and each generation "
                                 "evaluates all of its popsize points: lower popsize or set "
                                 "max_evals")
        comm = make_comm() if callback is not None or timeout_s is not None else None
        # Under mpiexec each rank's clock would end the run at its own generation: rank 0's
        # decides for all, as for the callback.
        agreed_timeout = timeout_s if comm is not None and comm.size > 1 else None
        optimizer = AskTell(method, x0, sigma0, popsize, seed, restarts=restarts, bipop=bipop,
                            max_evals=max_evals, max_generations=max_generations,
                            ftarget=ftarget, tolfun=tolfun, tolx=tolx, tolfunhist=tolfunhist,
                            stagnation=stagnation, flatfitness=flatfitness, maxiter=maxiter,
                            timeout_s=None if agreed_timeout else timeout_s,
                            **strategy_options)
    started = time.perf_counter()
    try:
        _run(optimizer, fun, vectorized, workers, callback, comm, agreed_timeout, started)
    except KeyboardInterrupt as interrupt:  # Ctrl-C, a notebook's interrupt: keep the work
        optimizer.stop_reason = "interrupted"
        interrupt.result = optimizer.result  # type: ignore[attr-defined]
        interrupt.args = (f"es.minimize interrupted after {optimizer.nfev} evaluations, best "
                          f"f = {optimizer.best_f:g}; the result so far is this exception's "
                          ".result",)
        raise
    return optimizer.result


def _check_ranks_agree(**arguments: Any) -> None:
    """Under ``mpiexec`` every rank must pass the same arguments (``fun`` and ``callback``
    aside): ranks with another ``x0`` (an unseeded random start), seed or method returned
    results whose ``fun`` was not the value of their ``x``, and another ``popsize`` hung.
    Checked before anything else, so that a bad argument raises on every rank alike."""
    from es.parallel.comm import MPIComm, disagreement, under_mpi_launcher

    if not under_mpi_launcher():
        return
    differing = disagreement(MPIComm(), {name: _summary(value)
                                         for name, value in arguments.items()})
    if differing:
        hint = (" (a random x0: draw it from a seeded generator, np.random.default_rng(0))"
                if "x0 (" in differing else "")
        raise ValueError(f"es.minimize under mpiexec: the ranks were given different "
                         f"{differing}; every rank must call it with the same arguments{hint}")


def _summary(value: Any) -> str:
    """A short text that is equal on two ranks when their values are: an array's dtype,
    shape and hash, or the value's ``repr`` (an object's type, where its repr holds its
    address)."""
    if isinstance(value, (np.ndarray, list, tuple)):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged
            array = None
        if array is not None and array.dtype != object:
            digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
            return f"{array.dtype}{array.shape} {digest}"
    text = repr(value)
    return type(value).__qualname__ if " at 0x" in text else text


def _run(optimizer: AskTell, fun: Callable[[np.ndarray], float], vectorized: bool,
         workers: int, callback: Callable[[dict[str, float]], object] | None, comm: Any,
         agreed_timeout: float | None, started: float) -> None:
    """``minimize``'s loop: ask, evaluate, tell until a criterion stops it."""
    from es.parallel.comm import rank_zero_decides
    from es.parallel.evaluate import make_evaluator

    with make_evaluator(CheckedFunction(fun, vectorized), workers, vectorized) as evaluate:
        while not optimizer.stop():
            candidates = optimizer.ask()
            try:  # a copy: fun may write into its x (pycma's users do), tell checks the points
                values = evaluate(candidates.copy())
            except FunctionValueError as error:
                raise FunctionValueError(f"{error}, in generation {optimizer.generation + 1}"
                                         ) from None
            optimizer.tell(candidates, values)
            if callback is not None and not rank_zero_decides(comm, callback,
                                                              dict(optimizer.history[-1])):
                optimizer.stop_reason = "callback"
            if agreed_timeout and not optimizer.stop() and comm.broadcast(
                    time.perf_counter() - started >= agreed_timeout if comm.rank == 0
                    else None):
                optimizer.stop_reason = "timeout_s"
