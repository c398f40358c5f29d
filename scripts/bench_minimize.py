"""es.minimize's methods against plain pycma CMA-ES on the standard functions, equal budgets.

    python scripts/bench_minimize.py                       # d = 10, 100, 1000; method auto
    python scripts/bench_minimize.py --dims 10,100 --evals-per-dim 500 --methods auto,snes,sepcma

For each function and dimension every optimiser starts from the same point with the same
sigma and the default population size of its own, and stops at the same number of function
evaluations (or earlier at f < 1e-10; local stops are off, no restarts), each generation
evaluated in one call (the functions are vectorised over rows). The table reports the
final best f and the wall time per generation, which for the noise strategies is their
O(n d) update and for CMA-ES its O(d^2) sampling plus its eigendecompositions. ``auto`` is
CMA-ES through the pycma adapter up to d = 100, so there it should match plain pycma's
precision (a different seed mapping aside) at a little more time per generation.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from report import emit, run_script, script_parser  # noqa: E402

import es  # noqa: E402
from es.bench.bbob import known_methods  # noqa: E402
from es.cli.args import add_flag, add_out, int_list, name_list  # noqa: E402

START = {"sphere": 3.0, "ellipsoid": 3.0, "rosenbrock": 0.0, "rastrigin": 3.0, "ackley": 3.0}
FTARGET = 1e-10


def run_es(method: str, name: str, dim: int, budget: int, seed: int) -> dict:
    started = time.perf_counter()
    result = es.minimize(getattr(es.functions, name), x0=np.full(dim, START[name]), sigma0=1.0,
                         method=method, seed=seed, max_evals=budget, ftarget=FTARGET,
                         tolfun=None, tolx=None, stagnation=False, flatfitness=False,
                         maxiter=False, vectorized=True)
    seconds = time.perf_counter() - started
    return {"method": result.method, "final_f": result.fun, "evals": result.nfev,
            "generations": result.ngen,
            "ms_per_generation": 1e3 * seconds / max(result.ngen, 1), "seconds": seconds}


def run_cma(name: str, dim: int, budget: int, seed: int) -> dict:
    import cma

    function = getattr(es.functions, name)
    options = {"seed": seed + 1, "maxfevals": budget, "ftarget": FTARGET, "verbose": -9,
               "tolfun": 0, "tolx": 0, "tolfunhist": 0, "tolstagnation": int(1e9)}
    started = time.perf_counter()
    strategy = cma.CMAEvolutionStrategy(np.full(dim, START[name]), 1.0, options)
    while not strategy.stop():
        candidates = strategy.ask()
        strategy.tell(candidates, list(function(np.array(candidates))))
    seconds = time.perf_counter() - started
    return {"method": "cma", "final_f": float(strategy.result.fbest),
            "evals": strategy.result.evaluations,
            "generations": strategy.result.iterations,
            "ms_per_generation": 1e3 * seconds / max(strategy.result.iterations, 1),
            "seconds": seconds}


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_minimize.py",
        "python scripts/bench_minimize.py --dims 10,100 --evals-per-dim 500 "
        "--methods auto,snes,sepcma"])
    add_flag(parse, "--functions", f"among {', '.join(START)}", default=",".join(START),
             type=name_list(list(START)))
    add_flag(parse, "--dims", default="10,100,1000", type=int_list(1))
    add_flag(parse, "--evals-per-dim", default=1000)
    add_flag(parse, "--max-evals", default=200_000)
    add_flag(parse, "--seed", "of every run (pycma's: this + 1)", default=1)
    ours = [method for method in known_methods() if not method.startswith("pycma")]
    add_flag(parse, "--methods", f"es.minimize's, among {', '.join(ours)}; pycma always runs "
             "beside them", default="auto", type=name_list(ours))
    add_out(parse, "bench_minimize")
    return parse


def main() -> None:
    args = parser().parse_args()
    optimisers = {f"es.minimize[{method}]": functools.partial(run_es, method)
                  for method in args.methods}
    optimisers["pycma"] = run_cma
    for run in optimisers.values():  # imports (pycma's for auto) out of every clock
        run("sphere", 2, 20, args.seed)
    rows = []
    for dim in args.dims:
        budget = min(args.evals_per_dim * dim, args.max_evals)
        for name in args.functions:
            for label, run in optimisers.items():
                measured = run(name, dim, budget, args.seed)
                rows.append({"function": name, "dim": dim, "budget": budget,
                             "optimiser": label, **measured})
                print(f"{name:>10} d={dim:<5} {label:<20} f={measured['final_f']:.3g} "
                      f"{measured['ms_per_generation']:.2f} ms/generation", flush=True)
    emit(rows, args.out, "es.minimize vs pycma CMA-ES, equal evaluation budgets")


if __name__ == "__main__":
    run_script(main)
