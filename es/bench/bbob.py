"""``es-bench bbob`` and ``es-bench highdim``: our strategies beside pycma, same budgets.

    es-bench bbob --dims 2,5,10,20 --instances 1-5 --methods auto,snes,pycma --jobs 2
    es-bench bbob --restarts 9 --bipop --budget-per-dim 10000 --methods auto,pycma
    es-bench highdim --dims 1000,10000 --methods auto,sepcma,pycma,pycma-diag

**bbob** runs the 24 noiseless BBOB functions (Hansen et al. 2009) through the ``ioh`` package
(``pip install 'mpi-es[bbob]'``), which exposes each instance's optimum f_opt. Every run starts at
the origin with sigma0 = 2 (a fifth of the [-5, 5] search box, as COCO's own example
experiment does) and a seed fixed per (function, instance), the same for every method and
dimension. The function an optimiser sees returns the precision f - f_opt; it counts the
evaluations and records, for each of the 51 targets 10^2, 10^1.8, ..., 10^-8, the evaluation
at which the best-so-far precision first reached it. One run therefore gives the ECDF (COCO's
"fraction of (problem, target) pairs reached") at every budget up to its own; a run ends at
its budget (no evaluation past it is counted), at precision 1e-8, or when the optimiser stops
itself. ``auto``, ``snes``, ... are passed through as ``es.minimize(method=name)``; ``pycma``
is ``cma.fmin2`` (with ``--restarts N --bipop``: ``fmin2(..., restarts=N, bipop=True)``, and
ours get ``restarts=N, bipop=True``). Results do not depend on ``--jobs``; wall times do.

**highdim** runs sphere, ellipsoid and Rastrigin from ``es.functions`` at d = 1000 and 10000
from x0 = 3 (sigma0 1, as ``scripts/bench_minimize.py``) with the same evaluation budget for
every method, and reports milliseconds per generation and the best f at equal evaluations.
pycma's full CMA-ES keeps d x d matrices (800 MB each at d = 10000) and its generations cost
seconds there: ``--budget-s`` stops a pycma run after that much wall time, its row then
says how many generations it did, and ``f_at_common_evals`` compares every method at the
evaluations that the shortest run of the group reached.

Both run BLAS on one thread (``threadpoolctl``) on every side, so ``--jobs N`` processes share
the cores without oversubscribing them. They write CSVs and ``results.md`` into ``--out``, and
with matplotlib (the ``[plot]`` extra) an ECDF plot.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import multiprocessing
import os
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from es.bench.report import markdown, partial_rows_kept, pyplot
from es.core.install import install_hint

TARGETS = 10.0 ** np.linspace(2.0, -8.0, 51)  # f - f_opt, COCO's 51 standard targets
SOLVED = TARGETS[-1]
X0_BBOB, SIGMA0_BBOB = 0.0, 2.0
X0_HIGHDIM, SIGMA0_HIGHDIM = 3.0, 1.0
#: pycma's full CMA-ES, its CMA_diagonal variant, and full CMA-ES drawing the same random
#: numbers as es.minimize's ``cma`` (its ``randn``; with restarts each run's, and BIPOP's
#: draws): a paired comparison, in which the two differ only by what es.minimize adds or
#: leaves out (its stopping and restart rules).
PYCMA = ("pycma", "pycma-diag", "pycma-paired")
HIGHDIM_FUNCTIONS = ("sphere", "ellipsoid", "rastrigin")


class Stop(Exception):
    """Raised by a counting objective once its run is over (budget, target or time)."""


def target_label(target: float) -> str:
    """1e2 -> '1e+02', 10**1.8 -> '10^1.8': column names of the per-target hits."""
    exponent = round(math.log10(target), 1)
    return f"1e{int(exponent):+03d}" if exponent == int(exponent) else f"10^{exponent:g}"


HIT_COLUMNS = [f"evals_to_{target_label(t)}" for t in TARGETS]


class Tracker:
    """An ioh BBOB problem seen as f - f_opt, counting evaluations and target hits.

    ``hits[k]`` is the evaluation count at which the best-so-far precision first reached
    ``TARGETS[k]`` (inf: never). Evaluating past ``budget``, or after precision 1e-8 was
    reached, raises ``Stop`` instead, so no optimiser can spend more than the budget.
    """

    def __init__(self, problem: Any, budget: int) -> None:
        self.problem, self.budget = problem, budget
        self.f_opt = float(problem.optimum.y)
        self.nfev, self.best, self.reached = 0, math.inf, 0
        self.hits = np.full(TARGETS.size, np.inf)

    def __call__(self, x: np.ndarray) -> float | np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1:
            return self._one(x)
        return np.array([self._one(row) for row in x])

    def _one(self, x: np.ndarray) -> float:
        if self.nfev >= self.budget or self.reached == TARGETS.size:
            raise Stop
        self.nfev += 1
        precision = float(self.problem(x)) - self.f_opt
        if precision < self.best:
            self.best = precision
            while self.reached < TARGETS.size and precision <= TARGETS[self.reached]:
                self.hits[self.reached] = self.nfev
                self.reached += 1
        return precision


def known_methods() -> list[str]:
    """What ``--methods`` accepts: ``auto`` (es.minimize's default), every registered
    strategy, and pycma's three."""
    from es.strategies import STRATEGIES

    return ["auto", *sorted(set(STRATEGIES) - {"auto"}), *PYCMA]


def run_ours(method: str, fun: Callable, x0: np.ndarray, sigma0: float, budget: int, seed: int,
             restarts: int = 0, bipop: bool = False, ftarget: float | None = SOLVED,
             vectorized: bool = False) -> Any:
    """``es.minimize(fun, x0, sigma0, method=method, ...)`` with its default stopping
    criteria."""
    from es.blackbox.minimizer import minimize

    return minimize(fun, x0, sigma0, method=method, seed=seed, max_evals=budget,
                       ftarget=ftarget, restarts=restarts, bipop=bipop, vectorized=vectorized)


def pycma_options(method: str, budget: int, seed: int, ftarget: float | None) -> dict:
    options = {"seed": seed, "maxfevals": budget, "verbose": -9, "verb_log": 0}
    if ftarget is not None:
        options["ftarget"] = ftarget
    if method == "pycma-diag":
        options["CMA_diagonal"] = True
    if method == "pycma-paired":
        from es.strategies.external import CmaRandn

        del options["seed"]  # pycma only reads it to seed NumPy's global RNG
        options["randn"] = CmaRandn(seed)
        # fmin2 evaluates each run's final mean, one evaluation es.minimize does not spend:
        # with restarts it would shift every later run's budget accounting.
        options["eval_final_mean"] = False
    return options


def run_pycma(method: str, fun: Callable, x0: np.ndarray, sigma0: float, budget: int,
              seed: int, restarts: int = 0, bipop: bool = False) -> None:
    """``cma.fmin2`` with pycma's defaults (its population size, its stopping criteria)."""
    import cma

    paired = method == "pycma-paired" and restarts
    with (warnings.catch_warnings(),  # pycma's numerical notes, thousands on ill-conditioning
          restarts_drawing_ours(seed) if paired else contextlib.nullcontext()):
        warnings.filterwarnings("ignore", module="cma")
        cma.fmin2(fun, x0, sigma0, pycma_options(method, budget, seed, SOLVED),
                  restarts=restarts, bipop=bipop)


@contextlib.contextmanager
def restarts_drawing_ours(seed: int) -> Iterator[None]:
    """Inside, ``cma.fmin2``'s restarts draw what ``es.minimize(seed=seed)``'s draw: run k's
    ``randn`` from ``run_seed(seed, k)`` and a BIPOP small run's two uniforms from
    ``small_run_draws`` (pycma draws the sigma's first). pycma has no option for either, so
    this swaps, for the call only, the class that ``fmin`` instantiates and NumPy's
    ``np.random.uniform`` that it draws from (this process only: the benchmark's worker)."""
    import cma.evolution_strategy as pycma_es

    from es.strategies.external import CmaRandn
    from es.strategies.restarts import run_seed, small_run_draws

    original, uniform = pycma_es.CMAEvolutionStrategy, np.random.uniform
    runs_started = 0
    pending: list[float] = []

    class Paired(original):  # type: ignore[misc, valid-type]
        def __init__(self, x0: Any, sigma0: Any, inopts: Any = None, **kwargs: Any) -> None:
            nonlocal runs_started
            inopts = {**inopts, "randn": CmaRandn(run_seed(seed, runs_started))}
            runs_started += 1
            super().__init__(x0, sigma0, inopts, **kwargs)

    def draws(*args: Any, **kwargs: Any) -> float:
        if pending:
            return pending.pop()
        population_draw, sigma_draw = small_run_draws(seed, runs_started)
        pending.append(population_draw)
        return sigma_draw

    pycma_es.CMAEvolutionStrategy, np.random.uniform = Paired, draws
    try:
        yield
    finally:
        pycma_es.CMAEvolutionStrategy, np.random.uniform = original, uniform


def bbob_seed(function: int, instance: int, offset: int = 0) -> int:
    """One seed per (function, instance), the same for every method and dimension (>= 1:
    pycma reads seed 0 as 'from the clock'); ``--seed-offset`` shifts them all, to see how
    much a method's ECDF moves with its random numbers alone."""
    return 1000 * function + instance + 100_000 * offset


def run_bbob(job: tuple[str, int, int, int, int, int, bool, int]) -> dict[str, Any]:
    """One (method, function, instance, dimension) run; the row of ``runs.csv``."""
    import ioh
    from threadpoolctl import threadpool_limits

    method, function, instance, dim, budget, restarts, bipop, offset = job
    problem = ioh.get_problem(function, instance=instance, dimension=dim,
                              problem_class=ioh.ProblemClass.BBOB)
    tracker = Tracker(problem, budget)
    seed = bbob_seed(function, instance, offset)
    runner = run_pycma if method in PYCMA else run_ours
    started = time.perf_counter()
    with threadpool_limits(limits=1):
        try:
            runner(method, tracker, np.full(dim, X0_BBOB), SIGMA0_BBOB, budget, seed,
                   restarts, bipop)
            ended = "budget" if tracker.nfev >= budget else "own stop"  # max_evals: spent
        except Stop:
            ended = "target" if tracker.reached == TARGETS.size else "budget"
    seconds = time.perf_counter() - started
    row = {"method": method, "function": function, "instance": instance, "dim": dim,
           "budget": budget, "restarts": restarts, "bipop": bipop, "seed": seed,
           "nfev": tracker.nfev, "best_precision": tracker.best, "ended": ended,
           "solved": bool(tracker.hits[-1] <= budget), "wall_s": seconds}
    return row | dict(zip(HIT_COLUMNS, tracker.hits.tolist(), strict=True))


def hits_of(row: dict[str, Any]) -> np.ndarray:
    return np.array([float(row[c]) if row[c] != "" else math.inf for c in HIT_COLUMNS])


def ecdf_at(rows: list[dict[str, Any]], evals_per_dim: float) -> float:
    """Fraction of (run, target) pairs reached within ``evals_per_dim * d`` evaluations
    (never more than each run's own budget)."""
    if not rows:
        return math.nan
    reached = [np.sum(hits_of(r) <= min(evals_per_dim * int(r["dim"]), int(r["budget"])))
               for r in rows]
    return float(np.sum(reached)) / (TARGETS.size * len(rows))


def summarise(rows: list[dict[str, Any]], methods: list[str], dims: list[int],
              budget_per_dim: int) -> list[dict[str, Any]]:
    """Per method and dimension, then over all dimensions: ECDF at the budget, problems
    solved to 1e-8, wall seconds."""
    out = []
    for method in methods:
        for dim in [*dims, "all"]:
            mine = [r for r in rows if r["method"] == method and dim in ("all", r["dim"])]
            out.append({"method": method, "dim": dim, "runs": len(mine),
                        "ecdf_at_budget": ecdf_at(mine, budget_per_dim),
                        "solved_1e-8": sum(bool(r["solved"]) for r in mine),
                        "wall_s": sum(float(r["wall_s"]) for r in mine)})
    return out


def ecdf_grid(rows: list[dict[str, Any]], methods: list[str], dims: list[int],
              budget_per_dim: int, points: int = 31) -> list[dict[str, Any]]:
    """The ECDF at log-spaced evaluations/d up to the budget: ``ecdf.csv``."""
    grid = np.geomspace(1.0, budget_per_dim, points)
    return [{"method": method, "dim": dim, "evals_per_dim": float(x),
             "ecdf": ecdf_at([r for r in rows if r["method"] == method
                              and dim in ("all", r["dim"])], x)}
            for method in methods for dim in [*dims, "all"] for x in grid]


def bbob_markdown(summary: list[dict[str, Any]], rows: list[dict[str, Any]],
                  methods: list[str], dims: list[int], title: str) -> str:
    """ECDF at the budget (solved/runs) per dimension and overall; then per function."""
    head = ["method", *[f"d={d}" for d in dims], "all", "wall s"]
    lines = [f"## {title}", "",
             "Fraction of (problem, target) pairs reached at the budget (problems solved to "
             "1e-8 / runs)", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in methods:
        mine = {s["dim"]: s for s in summary if s["method"] == method}
        cells = [f"{mine[d]['ecdf_at_budget']:.3f} ({mine[d]['solved_1e-8']}/{mine[d]['runs']})"
                 for d in [*dims, "all"]]
        lines.append("| " + " | ".join([method, *cells, f"{mine['all']['wall_s']:.1f}"]) + " |")
    functions = sorted({int(r["function"]) for r in rows})
    lines += ["", "Per function, all dimensions and instances: fraction of targets reached",
              "", "| f | " + " | ".join(methods) + " |", "|" + "---|" * (len(methods) + 1)]
    budget_per_dim = int(rows[0]["budget"]) // int(rows[0]["dim"])
    for function in functions:
        mine = [r for r in rows if int(r["function"]) == function]
        cells = [f"{ecdf_at([r for r in mine if r['method'] == m], budget_per_dim):.2f}"
                 for m in methods]
        lines.append(f"| f{function} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_ecdf(rows: list[dict[str, Any]], methods: list[str], dims: list[int],
              budget_per_dim: int, out: Path, title: str) -> None:
    """One panel per dimension and one over all: the runtime ECDF, evaluations/d on a log
    axis, one step line per method."""
    plt = pyplot()
    if plt is None:
        return
    panels = [*dims, "all"]
    figure, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6), sharey=True,
                                squeeze=False)
    for axis, dim in zip(axes[0], panels, strict=True):
        for method in methods:
            mine = [r for r in rows if r["method"] == method and dim in ("all", r["dim"])]
            if not mine:
                continue
            runtimes = np.sort(np.concatenate([hits_of(r) / int(r["dim"]) for r in mine]))
            runtimes = runtimes[runtimes <= budget_per_dim]
            fractions = np.arange(1, runtimes.size + 1) / (TARGETS.size * len(mine))
            x = np.concatenate([[1.0 / max(dims)], runtimes, [budget_per_dim]])
            y = np.concatenate([[0.0], fractions, [fractions[-1] if fractions.size else 0.0]])
            axis.step(x, y, where="post", label=method)
        axis.axvline(budget_per_dim, color="grey", linestyle=":")
        axis.set(xscale="log", xlabel="evaluations / d", ylim=(0, 1),
                 title=f"d = {dim}" if dim != "all" else "all dimensions")
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel("fraction of (problem, target) pairs")
    axes[0][-1].legend(loc="upper left", fontsize="small")
    figure.suptitle(title, fontsize="medium")
    figure.tight_layout()
    figure.savefig(out / "ecdf.png", dpi=100)
    print(f"wrote {out / 'ecdf.png'}")


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: "" if isinstance(v, float) and v == math.inf else v
                          for k, v in row.items()} for row in rows)


def run_jobs(work: Callable, jobs: list[tuple], processes: int,
             done: Callable[[dict], None] | None = None) -> list[dict[str, Any]]:
    """``work`` over ``jobs`` on ``processes`` processes (1: in this one); results in job
    order whatever the completion order."""
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    if processes == 1:
        for index, job in enumerate(jobs):
            results[index] = work(job)
            if done:
                done(results[index])
        return results  # type: ignore[return-value]
    # Leaving the block ends the workers, however it is left: an interrupt (Ctrl-C, or the
    # SIGTERM that es-bench turns into one) must not leave them computing the queue.
    with multiprocessing.Pool(processes, initializer=_leave_interrupts_to_parent) as pool:
        for index, result in pool.imap_unordered(_indexed, [(work, index, job) for index, job
                                                            in enumerate(jobs)]):
            results[index] = result
            if done:
                done(result)
    return results  # type: ignore[return-value]


def _leave_interrupts_to_parent() -> None:
    """A worker ignores Ctrl-C (the terminal sends it to the whole group) and dies quietly of
    the SIGTERM that ends the pool (not es-bench's handler, inherited by the fork): the
    parent handles the interrupt, once, with no traceback from every worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _indexed(task: tuple[Callable, int, tuple]) -> tuple[int, Any]:
    work, index, job = task
    return index, work(job)


def spans_text(values: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3,7': a list flag's value as a user writes it, for titles."""
    parts: list[list[int]] = []
    for value in values:
        if parts and value == parts[-1][-1] + 1:
            parts[-1].append(value)
        else:
            parts.append([value])
    return ",".join(f"{p[0]}-{p[-1]}" if len(p) > 1 else f"{p[0]}" for p in parts)


def need_pycma(methods: list[str]) -> None:
    """A one-line ValueError when ``methods`` name pycma's and it is not installed."""
    if any(m in PYCMA for m in methods):
        try:
            import cma  # noqa: F401
        except ImportError:
            raise ValueError("--methods: pycma is not installed (pip install cma)") from None


def bbob(args: argparse.Namespace) -> int:
    """``es-bench bbob``: runs, then ``runs.csv``, ``summary.csv``, ``ecdf.csv``,
    ``results.md`` and ``ecdf.png`` in ``--out``."""
    if args.bipop and not args.restarts:
        raise ValueError("--bipop: a rule for restarts, and there are none: add --restarts N")
    try:
        import ioh  # noqa: F401
    except ImportError:
        raise ValueError(f"the BBOB suite needs ioh: {install_hint('bbob')}") from None
    functions, instances, dims, methods = args.functions, args.instances, args.dims, args.methods
    need_pycma(methods)
    jobs = [(m, f, i, d, args.budget_per_dim * d, args.restarts, args.bipop, args.seed_offset)
            for m in methods for d in sorted(dims, reverse=True) for f in functions
            for i in instances]
    group_left = {(m, d): len(functions) * len(instances) for m in methods for d in dims}
    finished: list[dict[str, Any]] = []

    def progress(row: dict[str, Any]) -> None:
        finished.append(row)
        key = (row["method"], row["dim"])
        group_left[key] -= 1
        if group_left[key] == 0:
            mine = [r for r in finished if (r["method"], r["dim"]) == key]
            print(f"{row['method']:>10} d={row['dim']:<3} {len(mine)} runs: ECDF "
                  f"{ecdf_at(mine, args.budget_per_dim):.3f}, solved "
                  f"{sum(r['solved'] for r in mine)}, {sum(r['wall_s'] for r in mine):.1f} s",
                  flush=True)

    with partial_rows_kept(finished, len(jobs), "runs", args.out):
        rows = run_jobs(run_bbob, jobs, args.jobs, progress)
    rows.sort(key=lambda r: (methods.index(r["method"]), r["dim"], r["function"],
                             r["instance"]))
    restarts = (f", restarts {args.restarts}{' BIPOP' if args.bipop else ''}"
                if args.restarts else ", no restarts")
    title = (f"es-bench bbob: functions {spans_text(functions)} ({len(functions)}), instances "
             f"{spans_text(instances)}, budget {args.budget_per_dim}·d{restarts}")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(rows, methods, dims, args.budget_per_dim)
    write_csv(out / "runs.csv", rows)
    write_csv(out / "summary.csv", summary)
    write_csv(out / "ecdf.csv", ecdf_grid(rows, methods, dims, args.budget_per_dim))
    table = bbob_markdown(summary, rows, methods, dims, title)
    (out / "results.md").write_text(table)
    print("\n" + table)
    plot_ecdf(rows, methods, dims, args.budget_per_dim, out, title)
    return 0


class Counter:
    """An ``es.functions`` function counting evaluations. ``best`` is the best value among the
    first ``budget`` evaluations (a last generation that passes the budget is evaluated but
    not counted), ``trace`` holds (evaluations, best) at every improvement, and a call after
    ``max_seconds`` raises ``Stop``."""

    def __init__(self, function: Callable, budget: int, max_seconds: float | None) -> None:
        self.function, self.budget, self.max_seconds = function, budget, max_seconds
        self.first_call: float | None = None
        self.nfev, self.best = 0, math.inf
        self.trace: list[tuple[int, float]] = []

    def __call__(self, x: np.ndarray) -> float | np.ndarray:
        now = time.perf_counter()
        self.first_call = self.first_call or now
        if self.max_seconds is not None and now - self.first_call > self.max_seconds:
            raise Stop
        x = np.asarray(x, dtype=np.float64)
        values = self.function(x)
        counted = np.atleast_1d(values)[: max(self.budget - self.nfev, 0)]
        self.nfev += 1 if x.ndim == 1 else x.shape[0]
        if counted.size and float(np.min(counted)) < self.best:
            self.best = float(np.min(counted))
            self.trace.append((min(self.nfev, self.budget), self.best))
        return values


def pycma_generations(method: str, counter: Counter, dim: int, budget: int,
                      seed: int) -> tuple[int, int]:
    """pycma's ask/tell loop, the population evaluated at once; (generations, popsize).
    Only the budget (or the time limit) stops it."""
    import cma

    options = pycma_options(method, budget, seed, None)
    options |= {"tolfun": 0, "tolx": 0, "tolfunhist": 0, "tolflatfitness": 10**9,
                "tolstagnation": 10**9}
    strategy = cma.CMAEvolutionStrategy(np.full(dim, X0_HIGHDIM), SIGMA0_HIGHDIM, options)
    generations = 0
    with warnings.catch_warnings():  # pycma's numerical notes, thousands on ill-conditioning
        warnings.filterwarnings("ignore", module="cma")
        try:
            while not strategy.stop():
                candidates = strategy.ask()
                strategy.tell(candidates, list(counter(np.array(candidates))))
                generations += 1
        except Stop:
            pass
    return generations, strategy.popsize


def run_highdim(job: tuple[str, str, int, int, int, float]) -> dict[str, Any]:
    """One (method, function, dimension) run: the row of ``highdim.csv``. Time per
    generation is counted from the first evaluation (pycma's set-up, its d x d matrices, is
    ``setup_s``)."""
    from threadpoolctl import threadpool_limits

    from es.blackbox import functions

    method, name, dim, budget, seed, max_seconds = job
    function = getattr(functions, name)
    started = time.perf_counter()
    with threadpool_limits(limits=1):
        if method in PYCMA:
            counter = Counter(function, budget, max_seconds)
            generations, popsize = pycma_generations(method, counter, dim, budget, seed)
        else:  # ours stop at max_evals or by themselves: no time limit
            counter = Counter(function, budget, None)
            result = run_ours(method, counter, np.full(dim, X0_HIGHDIM), SIGMA0_HIGHDIM,
                              budget, seed, ftarget=None, vectorized=True)
            generations = result.ngen
            popsize = round(counter.nfev / max(generations, 1))
    ended = time.perf_counter()
    setup = (counter.first_call or ended) - started
    stopped = ("budget" if counter.nfev >= budget else
               "time" if method in PYCMA and ended - started >= max_seconds else "own stop")
    return {"function": name, "dim": dim, "method": method, "seed": seed, "popsize": popsize,
            "generations": generations, "evals": min(counter.nfev, budget), "budget": budget,
            "setup_s": setup, "seconds": ended - started,
            "ms_per_generation": 1e3 * (ended - started - setup) / max(generations, 1),
            "best_f": counter.best, "stopped": stopped, "trace": counter.trace}


#: Full CMA-ES's d x d float64 matrices that pycma holds at once (C, B and a product).
FULL_CMA_MATRICES = 3


def check_full_cma_fits(dims: list[int], methods: list[str]) -> None:
    """A one-line ValueError where pycma's full CMA-ES cannot hold its matrices at the
    largest dimension in this machine's memory: it failed after its setup with numpy's
    MemoryError traceback (74.5 GiB for one matrix at d = 100,000)."""
    full = [m for m in methods if m in ("pycma", "pycma-paired")]
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    largest = math.isqrt(memory // (8 * FULL_CMA_MATRICES))
    if full and max(dims) > largest:
        need = FULL_CMA_MATRICES * 8 * max(dims) ** 2 / 2**30
        raise ValueError(f"--dims {max(dims)} with --methods {full[0]}: full CMA-ES holds "
                         f"{FULL_CMA_MATRICES} d x d matrices, {need:,.0f} GiB, and this "
                         f"machine has {memory / 2**30:,.0f} GiB: at most d = {largest:,} here "
                         "(pycma-diag and sepcma are O(d))")


def highdim(args: argparse.Namespace) -> int:
    """``es-bench highdim``: ``highdim.csv`` and ``results.md`` in ``--out``."""
    dims, methods, functions = args.dims, args.methods, args.functions
    need_pycma(methods)
    check_full_cma_fits(dims, methods)
    from es.blackbox.minimizer import default_popsize

    for dim in dims:  # es.minimize's refusal suggested a popsize, which highdim takes not
        generation = int(default_popsize(dim, mirrored=True))
        if min(args.evals_per_dim * dim, args.max_evals) < generation:
            raise ValueError(f"--max-evals {args.max_evals} and --evals-per-dim "
                             f"{args.evals_per_dim}: less than one generation at d = {dim} "
                             f"({generation} points): raise them")
    jobs = [(m, f, d, min(args.evals_per_dim * d, args.max_evals), seed, args.budget_s)
            for d in dims for f in functions for m in methods for seed in args.seeds]

    finished: list[dict[str, Any]] = []

    def progress(row: dict[str, Any]) -> None:
        finished.append(row)
        print(f"{row['function']:>9} d={row['dim']:<6} {row['method']:>10} seed {row['seed']}: "
              f"{row['ms_per_generation']:.2f} ms/generation, {row['generations']} generations"
              f", best f {row['best_f']:.3g} ({row['stopped']})", flush=True)

    with partial_rows_kept(finished, len(jobs), "runs", args.out):
        rows = run_jobs(run_highdim, jobs, args.jobs, progress)
    for row in rows:  # compare at the evaluations the shortest run of its group reached
        group = [r for r in rows
                 if (r["function"], r["dim"], r["seed"]) == (row["function"], row["dim"],
                                                             row["seed"])]
        full = next((r for r in group if r["method"] == "pycma"), None)
        row["common_evals"] = min(r["evals"] for r in group)
        row["f_at_common_evals"] = row["best_f"] if row["evals"] <= row["common_evals"] else min(
            (f for n, f in row["trace"] if n <= row["common_evals"]), default=math.inf)
        row["pycma_ms_ratio"] = (full["ms_per_generation"] / row["ms_per_generation"]
                                 if full else math.nan)
    for row in rows:
        del row["trace"]
    summary = highdim_summary(rows)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "highdim.csv", rows)
    write_csv(out / "summary.csv", summary)
    columns = ["function", "dim", "method", "seeds", "popsize", "generations",
               "ms_per_generation", "pycma_ms_ratio", "evals", "best_f", "best_f_range",
               "common_evals", "f_at_common_evals"]
    table = (f"## es-bench highdim: budget {args.evals_per_dim}·d (at most {args.max_evals}), "
             f"pycma stopped after {args.budget_s:g} s; medians over seeds "
             f"{','.join(map(str, args.seeds))}\n\n"
             + markdown(summary, columns))
    (out / "results.md").write_text(table)
    print("\n" + table)
    return 0


def highdim_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (function, dim, method): medians over the seeds (``best_f_range``: the
    lowest and highest best f)."""
    summary = []
    for key in dict.fromkeys((r["function"], r["dim"], r["method"]) for r in rows):
        group = [r for r in rows if (r["function"], r["dim"], r["method"]) == key]
        best = [r["best_f"] for r in group]

        def median(column: str, group: list[dict[str, Any]] = group) -> float:
            return float(np.median([r[column] for r in group]))

        summary.append({
            "function": key[0], "dim": key[1], "method": key[2], "seeds": len(group),
            "popsize": group[0]["popsize"], "generations": round(median("generations")),
            "ms_per_generation": median("ms_per_generation"),
            "pycma_ms_ratio": median("pycma_ms_ratio"), "evals": round(median("evals")),
            "best_f": float(np.median(best)),
            "best_f_range": f"{min(best):.3g}..{max(best):.3g}",
            "common_evals": round(median("common_evals")),
            "f_at_common_evals": median("f_at_common_evals"),
        })
    return summary


COMMANDS = {"bbob": bbob, "highdim": highdim}
