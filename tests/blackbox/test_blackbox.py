"""es.minimize and es.AskTell over the strategies: convergence budgets, bit-identity across ways
of evaluating (ask/tell, minimize, spawned workers, mpiexec ranks), the pycma adapter (same bits
as plain pycma, replay resume, global-RNG isolation), IPOP/BIPOP restarts, stopping, errors."""

import copy
import doctest
import os
import pickle
import re
import subprocess
import sys
import tomllib
import warnings

import cma
import numpy as np
import pytest
from conftest import REPO, minimize_spmd_reference, tool
from threadpoolctl import threadpool_limits

import es
import es.functions
from es.blackbox import functions, minimizer
from es.strategies.external import CMA, CmaRandn, External
from es.strategies.restarts import (
    FIRST,
    LARGE,
    SMALL,
    LocalStop,
    Restarts,
    RunHistory,
    is_flat,
    local_stop,
    max_generations,
)


@pytest.fixture
def one_blas_thread():
    """pycma's eigendecompositions on this shared 2-core box: two OpenBLAS threads made a
    100x100 eigh 80x slower (213 ms vs 2.7 ms) under load."""
    with threadpool_limits(limits=1):
        yield


def sphere_values(xs: np.ndarray) -> np.ndarray:
    return np.sum((np.asarray(xs) - 0.5) ** 2, axis=1)


# ---- es.minimize: convergence, bit-identity, stopping, errors -------------------------------

@pytest.mark.usefixtures("one_blas_thread")
@pytest.mark.parametrize(("name", "dim", "target", "budget", "x0"), [
    ("sphere", 100, 1e-8, 100_000, 3.0),
    ("ellipsoid", 20, 1e-6, 50_000, 3.0),
    ("rosenbrock", 10, 1e-2, 500_000, 0.0),
])
def test_minimize_reaches_the_target_within_the_budget(name, dim, target, budget, x0):
    # CMA-ES ends in Rosenbrock's local minimum (f ~ 4) in a fair share of runs in 10-D:
    # restarts make reaching the target a property of the method, not of the seed.
    result = es.minimize(getattr(es.functions, name), x0=np.full(dim, x0), sigma0=1.0, seed=1,
                         ftarget=target, max_evals=budget, restarts=3)
    assert result.method == "cma"  # the default up to d = 100
    assert result.stop_reason == "ftarget", (result.fun, result.nfev)
    assert result.fun <= target and result.nfev <= budget
    assert getattr(es.functions, name)(result.x) == result.fun
    assert len(result.history) == result.ngen


def available_methods() -> list[str]:
    return sorted(minimizer.strategy_classes())


@pytest.mark.parametrize("method", available_methods())
def test_every_available_method_minimizes_the_sphere(method):
    # From f = 45 (d = 5, x0 = 3): CMA-ES converges; OpenAI-ES with its fixed sigma (no decay)
    # stalls near the noise floor, so the bar is a 100-fold decrease for every method.
    result = es.minimize(es.functions.sphere, x0=np.full(5, 3.0), sigma0=1.0, method=method,
                         seed=1, max_evals=5_000)
    assert result.method == method and result.nfev <= 5_000 + 2 * result.history[-1]["population"]
    assert result.fun < 0.45, (method, result.fun, result.stop_reason)
    assert es.functions.sphere(result.x) == result.fun


@pytest.mark.parametrize("method", ["cma", "openai"])
def test_ask_tell_and_minimize_agree_bit_for_bit(method):
    fun = es.functions.rastrigin
    opt = es.AskTell(method, x0=np.full(8, 2.0), sigma0=0.5, popsize=12, seed=3,
                     max_generations=40)
    while not opt.stop():
        xs = opt.ask()
        opt.tell(xs, [fun(x) for x in xs])
    res = es.minimize(fun, x0=np.full(8, 2.0), sigma0=0.5, method=method, popsize=12, seed=3,
                      max_generations=40)
    assert opt.stop_reason == res.stop_reason == "max_generations"
    assert np.array_equal(opt.result.x, res.x) and np.array_equal(opt.result.x_mean, res.x_mean)
    assert opt.result.fun == res.fun and opt.result.nfev == res.nfev == 40 * 12
    # A notebook cell ending in the optimizer showed only its address.
    assert repr(opt) == (f"AskTell(method={method!r}, d=8, generation=40, nfev=480, "
                         f"best_f={res.fun!r}, stop_reason='max_generations')")


@pytest.mark.parametrize("method", ["openai", "snes", "ars", "pgpe", "sepcma", "cma"])
def test_a_copy_or_pickle_of_an_optimizer_goes_on_as_it_would_and_apart_from_it(method):
    """A deep copy and a pickled copy of an optimizer mid-run ask what it asks next, and
    asking on them first leaves its own draws alone (pycma's randn was a closure whose
    generator the copies shared)."""
    def run(opt: es.AskTell, generations: int) -> np.ndarray:
        for _ in range(generations):
            xs = opt.ask()
            opt.tell(xs, [es.functions.sphere(x) for x in xs])
        return opt.ask()

    opt = es.AskTell(method, np.ones(4), 0.5, seed=0)
    run(opt, 2)
    copies = [copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))]
    asked = [run(twin, 3) for twin in copies]
    alone = es.AskTell(method, np.ones(4), 0.5, seed=0)
    run(alone, 2)
    expected = run(alone, 3)
    assert all(np.array_equal(x, expected) for x in [*asked, run(opt, 3)])


def test_spawned_workers_evaluate_a_lambda_to_the_same_bits():
    offset = 0.5
    fun = lambda x: float(np.sum((x - offset) ** 2))  # noqa: E731  a closure, not importable
    single = es.minimize(fun, x0=np.zeros(6), sigma0=0.3, seed=4, max_generations=30)
    spread = es.minimize(fun, x0=np.zeros(6), sigma0=0.3, seed=4, max_generations=30, workers=2)
    assert np.array_equal(single.x, spread.x) and single.fun == spread.fun
    assert single.fun < 0.05


def test_funs_own_exception_comes_back_from_the_workers_as_itself():
    """A class defined in a notebook (here: in a function) cannot be pickled by reference:
    the caller got "Can't pickle <class '__main__.MyError'>" instead of its own error."""
    class OutOfRange(Exception):
        pass

    def checked(x):
        if x[0] > 0.5:
            raise OutOfRange(f"x[0] = {x[0]:.2f}")
        return float(np.sum(x ** 2))

    with pytest.raises(OutOfRange, match=r"x\[0\] = ") as raised:
        es.minimize(checked, np.zeros(3), 1.0, seed=0, max_evals=200, workers=2)
    # Its traceback ended in es's own module, naming no line of fun: the worker's comes
    # with it, as its cause (as concurrent.futures' process pools do).
    remote = str(raised.value.__cause__)
    assert type(raised.value.__cause__).__name__ == "RemoteTraceback"
    assert ", in checked\n" in remote and "OutOfRange: x[0] = " in remote


def test_funs_error_ends_the_workers_by_asking_them(monkeypatch):
    """The workers were killed after fun's error, though idle: their MPI job left its
    shared memory in /dev/shm (two segments each time, RAM held until removed by hand)."""
    from es.parallel import evaluate

    brokers = []

    class Recorded(evaluate._Broker):
        def __init__(self, workers: int) -> None:
            super().__init__(workers)
            brokers.append(self)

    monkeypatch.setattr(evaluate, "_Broker", Recorded)
    with pytest.raises(ZeroDivisionError):
        es.minimize(lambda x: 1 / 0, np.zeros(2), 1.0, seed=0, max_evals=20, workers=2)
    assert [broker.process.returncode for broker in brokers] == [0]  # not -9: SIGKILL


def blas_threads() -> float:
    """The number of threads BLAS uses in this process."""
    from threadpoolctl import threadpool_info

    return float(max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"))


def test_spawned_workers_run_blas_on_one_thread():
    # Workers import NumPy themselves, after the pool sets their environment: OpenBLAS
    # would otherwise start one thread per core in each worker, and they thrash.
    def threads_in_worker(x):  # a local function travels by value
        from threadpoolctl import threadpool_info

        return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")

    result = es.minimize(threads_in_worker, x0=np.zeros(2), sigma0=1.0, popsize=4,
                         max_generations=1, workers=2)
    assert result.fun == 1.0 and result.history[-1]["f_median"] == 1.0

def test_under_mpiexec_the_ranks_run_blas_on_one_thread_and_restore_it():
    done = subprocess.run([tool("mpiexec"), "-n", "2", sys.executable,
                           str(REPO / "tests/mpi_scripts/minimize_blas.py")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr
    lines = sorted(x for x in done.stdout.splitlines() if x.startswith("BLAS"))
    assert lines == ["BLAS 2 1.0 1.0 2"] * 2  # 2 before, 1 in every evaluation, 2 after


def test_under_mpiexec_every_rank_evaluates_its_share_to_the_same_bits():
    # The script's function draws from NumPy's global RNG a rank-dependent number of times
    # (each rank evaluates other rows): pycma, which samples from that global RNG, must not
    # notice. Runs with IPOP restarts too, so the restart decisions agree across ranks.
    reference = minimize_spmd_reference()
    assert reference[1][2] == "2"  # the restarts did happen
    done = subprocess.run([tool("mpiexec"), "-n", "3", sys.executable,
                           str(REPO / "tests/mpi_scripts/minimize_spmd.py")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [x.split()[1:] for x in done.stdout.splitlines() if x.startswith("RESULT")]
    assert lines == reference



def test_workers_spawn_under_an_mpiexec_of_one_rank_to_the_same_bits():
    """``mpiexec -n 1`` leaves its socket's number in ``PMI_FD``: the spawning broker kept it
    and failed in ``PMI_Init`` (WorkerStartError)."""
    script = ("import numpy as np, es\n"
              "f = lambda x: float(np.sum((x - 0.5) ** 2))\n"
              "for workers in (1, 2):\n"
              "    r = es.minimize(f, np.zeros(4), 0.5, seed=3, max_generations=8,"
              " workers=workers)\n"
              "    print('RESULT', r.x.tobytes().hex(), r.nfev)\n")
    done = subprocess.run([tool("mpiexec"), "-n", "1", sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT")]
    assert len(lines) == 2 and lines[0] == lines[1], done.stdout


def uneven_ranks(mode: str) -> dict[str, str]:
    done = subprocess.run([tool("mpiexec"), "-n", "2", sys.executable,
                           str(REPO / "tests/mpi_scripts/minimize_uneven_ranks.py"), mode],
                          capture_output=True, text=True, timeout=120)
    said = dict(line.split(" ", 2)[1:] for line in done.stdout.splitlines()
                if line.startswith("RANK"))
    assert sorted(said) == ["0", "1"], (done.stdout, done.stderr)
    return said


def test_under_mpiexec_rank_0_s_clock_ends_a_timed_run_for_every_rank():
    """Each rank's own clock stopped it at its own generation: the ranks then took each
    other's gathers for their next runs' and hung."""
    said = uneven_ranks("timeout")
    assert said["0"] == said["1"]
    assert [run.split()[0] for run in said["0"].split(" | ")] == ["timeout_s"] * 3


def test_under_mpiexec_fun_raising_on_one_rank_raises_on_every_rank():
    said = uneven_ranks("raises")
    assert said == {"1": "ValueError: rank 1's fun fails",
                    "0": "RuntimeError: fun raised on rank 1 of 2: ValueError: rank 1's fun "
                         "fails"}

def test_stopping_criteria_and_their_reasons():
    def flat(**switches):
        result = es.minimize(lambda x: 1.0, x0=np.zeros(3), sigma0=0.1, max_generations=500,
                             **switches)
        return result.stop_reason, result.ngen

    assert flat() == ("tolfun", 1)  # as pycma: no spread now, none in the history so far
    assert flat(tolfun=None) == ("flatfitness", 2)  # 2 flat in a row
    assert flat(tolfun=None, flatfitness=False) == ("tolfunhist", 10)
    converged = es.minimize(es.functions.sphere, x0=np.ones(3), sigma0=0.1, tolfun=1e-6,
                            max_generations=500)
    assert converged.stop_reason == "tolfun" and converged.ngen < 500
    # As pycma: its stop() is {} before the first tell, tolx after it (6 evaluations at d = 2).
    tiny = es.minimize(es.functions.sphere, x0=np.ones(2), sigma0=1e-13, tolx=1e-12)
    assert (tiny.stop_reason, tiny.ngen, tiny.nfev) == ("tolx", 1, 6) and tiny.fun < np.inf
    capped = es.minimize(es.functions.sphere, x0=np.ones(4), sigma0=0.1, max_evals=40)
    assert capped.stop_reason == "max_evals" and capped.nfev == 40
    stalled = es.minimize(es.functions.sphere, x0=np.full(5, 3.0), sigma0=1.0, method="openai",
                          seed=1, max_evals=50_000)
    assert stalled.stop_reason == "stagnation" and stalled.nfev < 50_000
    failing = es.minimize(lambda x: float("nan"), x0=np.zeros(3), sigma0=0.5, max_evals=1_000)
    assert failing.stop_reason == "no_finite_value" and failing.fun == np.inf
    assert failing.ngen == 10 and failing.nfev < 1_000  # 10 failed generations in a row
    # sigma overflowed after one generation; its infinite candidates then failed 10
    # generations, and the stop named the objective (no_finite_value).
    with np.errstate(over="ignore"):
        diverged = es.minimize(es.functions.sphere, np.ones(3), 0.5, method="snes",
                               lr_sigma=1e6, seed=0, max_evals=5_000)
    assert diverged.stop_reason == "diverged" and diverged.ngen == 1


def test_ars_steps_alike_on_an_objective_of_any_finite_scale():
    """ARS steps on return differences over their spread: scaling the objective changes
    nothing. Differences of 1e38 overflowed its float32 sum (the mean went to -inf), squares
    of 1e200 its spread (no step at all); differences of 1e-50 rounded to 0 in that sum, and
    squares of 1e-200 to 0 in the spread (the mean never moved)."""
    def run(scale):  # the stops on small value changes off: they end a 1e-40 run at once
        return es.minimize(lambda x: scale * float(x @ x), np.ones(3), 0.5, method="ars",
                           max_evals=600, tolfun=None, tolfunhist=None, flatfitness=False,
                           stagnation=False).x_mean

    plain = run(1.0)
    assert np.linalg.norm(plain) < 0.1
    for scale in (1e38, 1e40, 1e200, 1e-40, 1e-50, 1e-200):
        np.testing.assert_allclose(run(scale), plain, rtol=1e-5, atol=1e-7)


def _sphere_progress(method: str, scale: float, dim: int, **options) -> float:
    """f(the last mean) / f(x0) on the sphere from x0 = scale, sigma0 = scale / 2."""
    x0 = np.full(dim, scale)
    result = es.minimize(es.functions.sphere, x0, 0.5 * scale, method=method, seed=1,
                         popsize=20, max_evals=100 * dim, **options)
    return es.functions.sphere(result.x_mean) / es.functions.sphere(x0)


def test_ars_default_step_follows_the_search_scale():
    """ARS's default step size is set from sigma0, so a problem and the same one scaled by
    1e-4 (x0 and sigma0 with it) take the same steps: with a fixed 0.02 the small one ended
    8,000 to 170,000 times above its start."""
    for dim in (10, 400):
        unit, small = _sphere_progress("ars", 1.0, dim), _sphere_progress("ars", 1e-4, dim)
        assert unit < 1e-6, (dim, unit)  # measured: 2.3e-8 and 4.6e-17
        assert small == pytest.approx(unit, rel=1e-3), (dim, small, unit)


def test_pgpe_with_adam_takes_steps_as_long_as_clipups():
    """ClipUp's radius rule sets the length of the whole step; read by Adam as a length per
    coordinate it made the steps sqrt(d) times longer: at d = 400 the sphere went from 1 to
    0.63 of its start where ClipUp reaches 0.17 (measured)."""
    for scale in (1.0, 1e-4):
        assert _sphere_progress("pgpe", scale, 400, optimizer="adam") < 1e-3  # 1.3e-5, 1.5e-5


@pytest.mark.parametrize("method", ["cma", "sepcma", "snes", "openai", "ars", "pgpe"])
def test_a_start_where_the_objective_fails_samples_its_way_out(method):
    """x0 infeasible (NaN there, as the docs advise), a feasible region a sigma away: a
    generation without a finite value ranks nothing, so it neither ends the run (it did after
    one, as flat: 9 of 20 seeds with cma) nor steps (member order would pick a direction)."""
    def fun(x):
        return float(x @ x) if x[0] > 1.6 else np.nan

    found = [es.minimize(fun, np.ones(3), 0.5, method=method, max_evals=3000, seed=seed)
             for seed in range(8)]
    assert sum(result.fun < 3.0 for result in found) >= 6, [r.stop_reason for r in found]
    assert all(result.fun >= 2.56 for result in found)  # x[0] > 1.6: f > 2.56


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match="x0 must be a non-empty finite vector"):
        es.AskTell("cma", x0=[np.nan], sigma0=1.0)
    with pytest.raises(ValueError, match="sigma0 -1"):
        es.AskTell("cma", x0=[0.0], sigma0=-1)
    # A budget of nothing is a mistake, not a run that returns x0 with fun = inf.
    for limit in ({"max_evals": 0}, {"max_generations": -1}, {"timeout_s": 0.0}):
        (name, value), = limit.items()
        with pytest.raises(ValueError, match=f"^{name} {value}: must be > 0"):
            es.minimize(es.functions.sphere, np.zeros(2), **limit)
    with pytest.raises(ValueError, match="restarts -1: must be >= 0"):
        es.minimize(es.functions.sphere, np.zeros(2), restarts=-1)
    with pytest.raises(ValueError, match="popsize 0: must be >= 2"):  # not the default
        es.minimize(es.functions.sphere, np.zeros(2), popsize=0)
    # Mirrored pairs: an odd popsize is refused, not quietly asked as one more.
    with pytest.raises(ValueError, match=r"popsize 5: 'openai' samples mirrored pairs.*4 or 6"):
        es.AskTell("openai", x0=np.zeros(3), sigma0=0.5, popsize=5)
    assert len(es.AskTell("openai", np.zeros(3), 0.5, 5, mirrored=False).ask()) == 5
    with pytest.raises(ValueError, match="^seed -1: must be an integer >= 0$"):
        es.minimize(es.functions.sphere, np.zeros(2), seed=-1)
    with pytest.raises(ValueError, match=r"^sigma0 \[1, 2\]: must be one number > 0"):
        es.minimize(es.functions.sphere, np.zeros(2), sigma0=[1, 2])
    with pytest.raises(ValueError, match=r"fun returned shape \(2,\) for one point"):
        es.minimize(lambda x: x, np.zeros(2), max_evals=10)
    with pytest.raises(ValueError, match="^callback 3: must be callable"):
        es.minimize(es.functions.sphere, np.zeros(2), callback=3)
    # The bound is the pairs' winners (4), named as such, not "population 4" of a popsize 8.
    with pytest.raises(ValueError, match=r"^mu 50: must be in \[1, 4\], the winners of "
                                         r"population 8's mirrored pairs$"):
        es.minimize(es.functions.sphere, np.zeros(3), method="sepcma", mu=50, popsize=8)
    # An option of the wrong kind failed deep in pycma with numpy's words, naming nothing.
    with pytest.raises(ValueError, match=r"^cma options \{'CMA_diagonal': 'abc'\}: pycma "
                                         r"could not start with them \(TypeError: "), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pycma's own about evaluating the string
        es.minimize(es.functions.sphere, np.zeros(3), method="cma", CMA_diagonal="abc")
    # The value given, alone: not beside a default lr_mean the user never set.
    with pytest.raises(ValueError, match=r"^lr_sigma -1.0: must be >= 0 \(None: the default"):
        es.minimize(es.functions.sphere, np.zeros(3), method="snes", lr_sigma=-1.0)
    with pytest.raises(ValueError) as unknown:
        es.minimize(es.functions.sphere, np.zeros(2), method="cmaes")
    message = str(unknown.value)
    assert "\n" not in message and message.startswith("method 'cmaes': allowed are 'auto', ")
    assert all(repr(name) in message for name in available_methods())
    with pytest.raises(ValueError, match="pycma's option randn=.* is not taken.*use seed"):
        es.AskTell("cma", x0=np.zeros(2), sigma0=1.0, randn=np.random.randn)
    opt = es.AskTell("cma", x0=np.zeros(2), sigma0=1.0, popsize=4)
    with pytest.raises(RuntimeError, match="without ask"):
        opt.tell(np.zeros((4, 2)), [0.0] * 4)
    xs = opt.ask()
    with pytest.raises(ValueError, match="3 values for 4 candidates"):
        opt.tell(xs, [0.0] * 3)
    with pytest.raises(ValueError, match=r"values of shape \(2, 2\) for 4 candidates"):
        opt.tell(xs, np.zeros((2, 2)))  # once taken, flattened
    with pytest.raises(ValueError, match="other points"):
        opt.tell(xs + 1, [0.0] * 4)
    opt.tell(xs, [np.nan, 1.0, 2.0, np.inf])  # non-finite values rank last, no crash
    assert np.all(np.isfinite(opt.mean)) and opt.result.fun == 1.0


def test_auto_is_cma_up_to_100_dimensions_then_sepcma():
    assert minimizer.resolve_method("auto", 100) == "cma"
    assert minimizer.resolve_method("auto", 101) == "sepcma"
    assert minimizer.default_popsize(10, mirrored=False) == 4 + 3 * np.log(10)  # pycma's
    assert minimizer.default_popsize(2, mirrored=True) == 6  # 4 + 2, even
    assert minimizer.default_popsize(3, mirrored=True) == 8  # 4 + 3, made even


# ---- the pycma adapter ------------------------------------------------------------------------

def plain_pycma(x0, sigma0, popsize, seed, generations):
    """pycma driven directly, as its users do, sampling through the adapter's ``randn``."""
    strategy = cma.CMAEvolutionStrategy(x0, sigma0, {"randn": CmaRandn(seed),
                                                     "popsize": popsize, "verbose": -9})
    asked = []
    for _ in range(generations):
        xs = strategy.ask()
        asked.append(np.array(xs))
        strategy.tell(xs, list(sphere_values(xs)))
    return asked, strategy.mean.copy()


def run_adapter(strategy, generations, between=lambda: None):
    asked = []
    for _ in range(generations):
        candidates = strategy.ask().candidates
        asked.append(candidates.copy())
        between()
        strategy.tell(-sphere_values(candidates))  # higher is better
    return asked


def test_cma_adapter_asks_what_plain_pycma_asks_bit_for_bit():
    x0 = np.linspace(-1, 1, 6)
    expected, mean = plain_pycma(x0, 0.7, 9, seed=5, generations=60)
    adapter = CMA(x0, population=9, sigma=0.7, noise=None, seed=5, dtype=np.float64)
    asked = run_adapter(adapter, 60)
    assert all(np.array_equal(a, b) for a, b in zip(asked, expected, strict=True))
    assert np.array_equal(adapter.mean, mean)
    assert adapter.generation == 60 and not adapter.ask().mirrored


def test_cma_adapter_is_isolated_from_numpys_global_rng():
    x0 = np.linspace(-1, 1, 6)
    expected, _ = plain_pycma(x0, 0.7, 9, seed=5, generations=30)
    np.random.seed(12345)
    outside = np.random.rand(100)
    np.random.seed(12345)
    drawn = []
    adapter = CMA(x0, population=9, sigma=0.7, noise=None, seed=5, dtype=np.float64)
    # A user's function (or Gymnasium) drawing from np.random between generations, and even
    # reseeding it, changes nothing the adapter asks ...
    asked = run_adapter(adapter, 30, between=lambda: drawn.extend(np.random.rand(1)))
    assert all(np.array_equal(a, b) for a, b in zip(asked, expected, strict=True))
    reseeding = CMA(x0, population=9, sigma=0.7, noise=None, seed=5, dtype=np.float64)
    assert all(np.array_equal(a, b) for a, b in zip(
        run_adapter(reseeding, 30, between=lambda: np.random.seed(0)), expected, strict=True))
    # ... and the adapter takes nothing from the global stream the user sees.
    np.random.seed(12345)
    drawn.clear()
    run_adapter(CMA(x0, population=9, sigma=0.7, noise=None, seed=5, dtype=np.float64), 100,
                between=lambda: drawn.extend(np.random.rand(1)))
    assert np.array_equal(drawn, outside)


def test_cma_adapter_resumes_by_replay_exactly():
    x0 = np.full(4, 2.0)
    straight = CMA(x0, population=8, sigma=0.5, noise=None, seed=2, dtype=np.float64)
    run_adapter(straight, 25)
    state = straight.state()
    assert state["fitness"].shape == (25, 8) and np.array_equal(state["theta"], straight.mean)
    assert all(isinstance(value, np.ndarray) and value.dtype != object for value in state.values())
    expected = run_adapter(straight, 20)
    resumed = CMA(x0, population=8, sigma=0.5, noise=None, seed=2, dtype=np.float64)
    resumed.load_state(state)
    assert resumed.generation == 25
    assert all(np.array_equal(a, b)
               for a, b in zip(run_adapter(resumed, 20), expected, strict=True))
    assert np.array_equal(resumed.mean, straight.mean)
    other = CMA(x0, population=8, sigma=0.5, noise=None, seed=3, dtype=np.float64)
    with pytest.raises(ValueError, match="did not reproduce the saved mean"):
        other.load_state(state)  # another seed replays elsewhere: refused, not resumed


PYCMA_NAMES = {"flatfitness": "tolflatfitness"}  # our reason -> pycma's stop() key


def step_sphere(x: np.ndarray) -> float:
    return float(np.sum(np.floor(4 * x) ** 2))  # flat plateaus around the optimum


@pytest.mark.parametrize("fun, dim, seed", [
    (es.functions.sphere, 2, 1), (es.functions.sphere, 5, 2), (es.functions.rosenbrock, 3, 3),
    (step_sphere, 2, 4), (step_sphere, 4, 5), (lambda x: 1.0, 3, 6),
    (es.functions.rastrigin, 2, 7)])
def test_a_cma_run_ends_where_pycmas_own_stop_ends_it(fun, dim, seed):
    # The same random numbers (pycma's randn): es.minimize's generic stops (tolfun,
    # tolfunhist, flat fitness, ...) end the run at pycma's generation, for pycma's reason.
    reference = cma.CMAEvolutionStrategy(np.full(dim, 1.0), 0.5,
                                         {"randn": CmaRandn(seed), "verbose": -9})
    while not reference.stop():
        xs = reference.ask()
        reference.tell(xs, [fun(x) for x in xs])
    ours = es.minimize(fun, x0=np.full(dim, 1.0), sigma0=0.5, method="cma", seed=seed,
                       max_evals=10**6)
    assert ours.ngen == reference.countiter
    assert PYCMA_NAMES.get(ours.stop_reason, ours.stop_reason) in reference.stop()


@pytest.mark.parametrize("dim, seed, popsize", [(2, 6, 24), (2, 10, 24), (5, 6, 12)])
def test_a_cma_run_stops_at_tolx_where_pycma_does(dim, seed, popsize):
    """pycma compares the evolution path's step signed: a large negative component does not
    hold its tolx stop. Compared by its size, these runs went on one generation more."""
    fun = es.functions.ackley
    reference = cma.CMAEvolutionStrategy(np.full(dim, 3.0), 2.0, {
        "randn": CmaRandn(seed), "verbose": -9, "popsize": popsize})
    while not reference.stop():
        xs = reference.ask()
        reference.tell(xs, [fun(x) for x in xs])
    assert "tolx" in reference.stop()
    ours = es.minimize(fun, np.full(dim, 3.0), 2.0, method="cma", seed=seed, popsize=popsize)
    assert (ours.nfev, ours.stop_reason) == (reference.countevals, "tolx")


def test_cma_adapter_reports_pycmas_divergence_stop_as_a_local_stop():
    # On a linear function sigma grows without bound: pycma's tolfacupx (1e3 times the
    # initial step) ends the run, as it ends a run of cma.fmin2.
    strategy = CMA(np.zeros(3), population=8, sigma=1e-3, noise=None, seed=1,
                   dtype=np.float64)
    while not strategy.local_stop() and strategy.generation < 1000:
        strategy.tell(strategy.ask().candidates.sum(axis=1))  # fitness up along (1, 1, 1)
    assert strategy.local_stop() == "tolfacupx" and strategy.scale.max() > 1e3 * 1e-3


class Unseeded:
    """A random search that breaks the adapter's contract: its RNG ignores any seed."""

    def __init__(self) -> None:
        self.mean, self.rng = np.zeros(3), np.random.default_rng()

    def ask(self) -> list[np.ndarray]:
        return [self.mean + self.rng.standard_normal(3) for _ in range(4)]

    def tell(self, xs: list[np.ndarray], values: np.ndarray) -> None:
        self.mean = xs[int(np.argmin(values))]


def test_external_adapter_refuses_to_resume_an_optimizer_that_breaks_the_contract():
    strategy = External(Unseeded, population=4, mean_of=lambda opt: opt.mean, dtype=np.float64)
    for _ in range(3):
        candidates = strategy.ask().candidates
        strategy.tell(-sphere_values(candidates))
    with pytest.raises(ValueError, match="not deterministic given its seed"):
        External(Unseeded, population=4, mean_of=lambda opt: opt.mean).load_state(
            strategy.state())


# ---- restarts -----------------------------------------------------------------------------------

class Stalls:
    """A stand-in strategy that reaches a local stop after ``population // 2`` generations."""

    name = "stalls"

    def __init__(self, mean0, population, sigma, seed):
        self.population, self.sigma, self.seed = population, sigma, seed
        self.mean, self.generation = np.asarray(mean0, dtype=np.float64), 0
        self.scale = np.full(self.mean.size, sigma)

    def ask(self):
        from es.strategies.base import ExplicitGeneration

        return ExplicitGeneration(self.generation, np.tile(self.mean, (self.population, 1)))

    def tell(self, fitness):
        self.generation += 1
        return {}

    def local_stop(self):
        return "stalled" if self.generation >= self.population // 2 else ""

    def state(self):
        return {"theta": self.mean.copy(), "generation": np.array(self.generation)}

    def load_state(self, state):
        self.generation = int(state["generation"])


#: Only the strategy's own local stop: ``Stalls`` is told a flat fitness.
OWN_STOP_ONLY = LocalStop(tolfun=None, tolx=None, tolfunhist=None, stagnation=False,
                          flatfitness=False, maxiter=False)


def drive(restarts: Restarts, generations: int) -> list[tuple[int, int, float, int]]:
    """(regime, population, sigma, seed) of every generation's run."""
    seen = []
    for _ in range(generations):
        if restarts.stop_reason:
            break
        seen.append((restarts.kind, restarts.population, restarts.inner.sigma,
                     restarts.inner.seed))
        restarts.tell(np.zeros(restarts.population))
    return seen


def runs_of(seen):
    return [run for i, run in enumerate(seen) if i == 0 or run != seen[i - 1]]


def test_restarts_scale_pycmas_unrounded_default_population_as_cma_fmin():
    # cma.fmin's restarts double 4 + 3 ln 2 = 6.08 unrounded: 6, 12, 24, 48, 97, 194.
    restarts = Restarts(Stalls, np.zeros(2), population=minimizer.default_popsize(2, False),
                        sigma=1.0, max_restarts=5, criteria=OWN_STOP_ONLY)
    populations = [population for _, population, _, _ in runs_of(drive(restarts, 10_000))]
    assert populations == [6, 12, 24, 48, 97, 194]


def test_ipop_doubles_the_population_at_each_local_stop():
    restarts = Restarts(Stalls, np.zeros(2), population=6, sigma=1.0, seed=7, max_restarts=3,
                        criteria=OWN_STOP_ONLY)
    runs = runs_of(drive(restarts, 1000))
    assert [(kind, population, sigma) for kind, population, sigma, _ in runs] == [
        (FIRST, 6, 1.0), (LARGE, 12, 1.0), (LARGE, 24, 1.0), (LARGE, 48, 1.0)]
    assert runs[0][3] == 7 and len({seed for *_, seed in runs}) == 4  # fresh seed per run
    assert restarts.stop_reason == "stalled" and restarts.run == 3
    assert restarts.generation == 3 + 6 + 12 + 24


def test_bipop_interlaces_small_runs_while_their_budget_is_below_the_large_one():
    def make(seed):
        return Restarts(Stalls, np.zeros(2), population=6, sigma=2.0, seed=seed, bipop=True,
                        max_restarts=4, criteria=OWN_STOP_ONLY)

    restarts = make(7)
    seen = drive(restarts, 10_000)
    runs = runs_of(seen)
    kinds = [kind for kind, *_ in runs]
    assert kinds[:2] == [FIRST, LARGE] and kinds.count(LARGE) == 4 and SMALL in kinds
    small = large = 0
    large_population = 6
    for kind, population, sigma, _ in runs:
        evals = sum(p for k, p, s, _ in seen if (k, p, s) == (kind, population, sigma))
        if kind == SMALL:
            assert small < large  # the rule that chose this run
            assert 6 <= population <= large_population and 0.02 <= sigma <= 2.0
            small += evals
        elif kind == LARGE:
            assert population == 2 * large_population and sigma == 2.0
            large_population, large = population, large + evals
        else:
            small += evals
    assert restarts.stop_reason == "stalled" and kinds[-1] == LARGE
    # Deterministic: a pure function of the seed (and the fitness told).
    assert drive(make(7), 10_000) == seen
    assert drive(make(8), 10_000) != seen


def test_bipop_small_populations_span_the_default_to_the_last_large_one():
    # Hansen 2009 as pycma's fmin reads it: lambda_s = floor(6 * (lambda_l / 6) ** (u**2)) with
    # lambda_l the last large population, so up to lambda_l itself (not lambda_l / 2), and
    # sigma_s = 2 * 10 ** (-2 u').
    drawn = []
    for seed in range(40):
        restarts = Restarts(Stalls, np.zeros(2), population=6, sigma=2.0, seed=seed,
                            bipop=True, max_restarts=3, criteria=OWN_STOP_ONLY)
        runs = runs_of(drive(restarts, 10_000))
        large = 6
        for kind, population, sigma, _ in runs:
            if kind == LARGE:
                large = population
            elif kind == SMALL:
                assert 6 <= population <= large and 0.02 <= sigma <= 2.0
                drawn.append((population, population / large, sigma))
    populations, ratios, sigmas = np.array(drawn).T
    assert populations.min() == 6 and ratios.max() > 0.75
    assert sigmas.min() < 0.1 and sigmas.max() > 1.0


def test_flatfitness_stops_a_run_flat_in_more_than_one_generation_in_a_row():
    # pycma's test: the best equals the value at rank int(0.75 * 8) = 6 (best first).
    assert is_flat(np.array([3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, -1.0]))
    assert not is_flat(np.array([3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 2.9, -1.0]))
    only = LocalStop(tolfun=None, tolx=None, tolfunhist=None, stagnation=False, maxiter=False)

    def reason(flat):
        history = RunHistory(generations=len(flat), flat=flat)
        return local_stop(only, 6, 8, history, 8, np.ones(6))

    assert reason([True]) == ""  # pycma's tolflatfitness = 1: one flat generation is tolerated
    assert reason([True, True, False]) == ""
    assert reason([True, False, True, False, True]) == ""  # not in a row
    assert reason([False, True, True]) == "flatfitness"


def test_maxiter_is_pycmas_default_from_the_first_runs_population():
    for dim, population in [(2, 6), (5, 8), (10, 10), (40, 15)]:
        options = cma.CMAEvolutionStrategy(np.zeros(dim), 1.0, {"popsize": population,
                                                                "verbose": -9}).opts
        assert max_generations(dim, population) == options["maxiter"]
        default = cma.CMAEvolutionStrategy(np.zeros(dim), 1.0, {"verbose": -9}).opts
        unrounded = minimizer.default_popsize(dim, mirrored=False)
        assert max_generations(dim, unrounded) == default["maxiter"]
    only = LocalStop(tolfun=None, tolx=None, tolfunhist=None, stagnation=False,
                     flatfitness=False)
    for generations, expected in [(3493, ""), (3494, "maxiter")]:
        assert local_stop(only, 5, 64, RunHistory(generations=generations), 8,
                          np.ones(5)) == expected


@pytest.mark.parametrize("bipop", [False, True])
def test_restarts_resume_exactly_from_their_state(bipop):
    def make():
        return Restarts(Stalls, np.zeros(2), population=6, sigma=2.0, seed=3, bipop=bipop,
                        max_restarts=3, criteria=OWN_STOP_ONLY)

    straight = make()
    drive(straight, 40)
    state = straight.state()
    expected = drive(straight, 10_000)
    resumed = make()
    resumed.load_state(state)
    assert drive(resumed, 10_000) == expected
    assert resumed.stop_reason == straight.stop_reason == "stalled"


@pytest.mark.usefixtures("one_blas_thread")
@pytest.mark.parametrize("method", available_methods())
def test_restarts_over_every_method_resume_exactly(method):
    # The state holds the restart bookkeeping and the current run's strategy state (for cma
    # its fitness history, replayed); the generation counter is restored as es-train does.
    def make():
        return es.AskTell(method, np.full(4, 3.0), 2.0, seed=3, restarts=4, bipop=True,
                          tolx=1e-3)

    def generations(opt, count):
        asked = []
        for _ in range(count):
            xs = opt.ask()
            asked.append(xs)
            opt.tell(xs, list(es.functions.rastrigin(xs)))
        return asked

    straight = make()
    generations(straight, 700)  # ars, pgpe and openai restart by stagnation (after 500)
    state = straight.strategy.state()
    expected = generations(straight, 50)
    resumed = make()
    resumed.strategy.load_state(state)
    assert straight.strategy.run >= 1  # at least one restart on the way
    assert all(np.array_equal(a, b)
               for a, b in zip(generations(resumed, 50), expected, strict=True))
    assert resumed.strategy.run == straight.strategy.run


@pytest.mark.usefixtures("one_blas_thread")
def test_minimize_with_ipop_restarts_solves_rastrigin_where_one_run_does_not():
    kwargs = dict(x0=np.full(3, 3.0), sigma0=2.0, seed=1, ftarget=1e-8, max_evals=50_000)
    single = es.minimize(es.functions.rastrigin, **kwargs)
    assert single.stop_reason != "ftarget" and single.restarts == 0
    ipop = es.minimize(es.functions.rastrigin, restarts=6, **kwargs)
    populations = [h["population"] for h in ipop.history]
    assert ipop.stop_reason == "ftarget" and ipop.restarts >= 1
    base = 4 + 3 * np.log(3)  # pycma's default, doubled unrounded
    assert sorted(set(populations)) == [int(base * 2**k) for k in range(ipop.restarts + 1)]


def test_test_functions_are_zero_at_their_minimum_and_vectorised():
    for name, minimum in (("sphere", 0.0), ("ellipsoid", 0.0), ("rastrigin", 0.0),
                          ("ackley", 0.0), ("rosenbrock", 1.0)):
        fun = getattr(es.functions, name)
        assert fun(np.full(7, minimum)) == pytest.approx(0.0, abs=1e-12)
        rows = np.random.default_rng(0).standard_normal((5, 7))
        assert np.allclose(fun(rows), [fun(row) for row in rows])
        assert np.all(fun(rows) > 0)
        # Summing (n, d) rows over the wrong axis, or a broadcasting error from inside.
        with pytest.raises(ValueError, match=r"^x of shape \(2, 2, 3\): the test functions "
                                             r"take one point, shape \(d,\), or a row per"):
            fun(np.ones((2, 2, 3)))
    assert es.functions.ackley(np.zeros(3)) == 0.0  # 4.4e-16, which ftarget=0 never reached


def test_es_functions_is_the_public_path_of_every_test_function():
    public = {name for name, value in vars(functions).items()
              if callable(value) and not name.startswith("_")
              and value.__module__ == functions.__name__}
    assert set(es.functions.__all__) == public
    assert all(getattr(es.functions, name) is getattr(functions, name) for name in public)


def test_docstring_examples_run():
    for module in (minimizer, functions):
        outcome = doctest.testmod(module)
        assert outcome.attempted > 0 and outcome.failed == 0


def test_train_from_python_solves_cartpole_and_returns_a_callable_policy(tmp_path):
    import gymnasium as gym

    run = es.train(REPO / "configs/cartpole.toml", overrides={"run.generations": 40},
                   run_dir=tmp_path / "run")
    assert run.eval_return is not None and run.eval_return >= 475
    assert run.run_dir == tmp_path / "run" and (run.run_dir / "config.toml").is_file()
    assert run.history[-1]["generation"] == run.generations and len(run.history) >= 1
    observation, _ = gym.make("CartPole-v1").reset(seed=0)
    assert run.policy(observation) in (0, 1)
    with pytest.raises(ValueError, match=r"already holds a run; continue it with es.resume\("
                                         r".* pass force=True"):
        es.train(REPO / "configs/cartpole.toml", run_dir=tmp_path / "run")
    with pytest.raises(ValueError, match="unknown key es.sigmaa"):
        es.train(REPO / "configs/cartpole.toml", overrides={"es.sigmaa": 1.0})
    with pytest.raises(ValueError, match="^callback 3: must be callable"):
        es.train(REPO / "configs/cartpole.toml", run_dir=tmp_path / "cb", callback=3)
    assert not (tmp_path / "cb").exists()
    # An environment that cannot be built: nothing written, the run it would replace whole.
    kept = (run.run_dir / "policy.npz").read_bytes()
    for folder, force in ((tmp_path / "new", False), (run.run_dir, True)):
        with pytest.raises(ValueError, match="env.kwargs.bogus"):
            es.train(REPO / "configs/cartpole.toml", overrides={"env.kwargs.bogus": 1},
                     run_dir=folder, force=force)
    assert not (tmp_path / "new").exists()
    assert (run.run_dir / "policy.npz").read_bytes() == kept


@pytest.mark.parametrize(("arguments", "fragment"), [
    ({"config": None}, "config None: must be a config file's path, a Config or a dict"),
    ({"overrides": ["es.sigma=0.1"]}, "overrides ['es.sigma=0.1']: must be a dict of dotted "
                                      "keys"),
    ({"force": "no"}, "force 'no': must be True or False"),
    ({"quiet": "no"}, "quiet 'no': must be True or False"),  # taken as true
    # Its TypeError came after generation 1 had trained.
    ({"callback": lambda: True}, "callback <lambda>(): must take one argument, a progress row"),
    ({"run_dir": 5}, "run_dir 5: must be a folder's path"),
    ({"run_dir": ""}, "run_dir '': must be a folder's path"),  # was a new folder in runs/
    ({"policy": "mlp"}, "policy 'mlp': a name is policy.kind's value, overrides={'policy.kind'"),
    # An AttributeError from inside: 'int' object has no attribute 'split'.
    ({"overrides": {1: 3}}, "override key 1: must be a dotted 'section.key' string"),
])
def test_train_arguments_of_the_wrong_kind_are_one_line_errors(tmp_path, arguments, fragment):
    call = {"config": REPO / "configs/cartpole.toml", "run_dir": tmp_path / "run", **arguments}
    with pytest.raises(ValueError) as raised:
        es.train(**call)
    assert fragment in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "run").exists() and not (tmp_path / "5").exists()


def test_train_takes_numpy_numbers_and_a_dict_config_as_a_file_would_give_them(tmp_path):
    python = es.train(REPO / "configs/pendulum.toml", {"run.generations": 2, "es.sigma": 0.05,
                                                       "policy.hidden": [8]},
                      run_dir=tmp_path / "python")
    numpy = es.train(REPO / "configs/pendulum.toml",
                     {"run.generations": np.int64(2), "es.sigma": np.float64(0.05),
                      "policy.hidden": np.array([8])}, run_dir=tmp_path / "numpy")
    assert np.array_equal(python.saved.params, numpy.saved.params)
    table = es.train({"env": {"id": "Pendulum-v1"}, "run": {"generations": 2}},
                     run_dir=tmp_path / "table")
    assert table.generations == 2
    # In a dict config they were refused: "run.generations = np.int64(2): must be an integer".
    numpy_table = es.train({"env": {"id": "Pendulum-v1"}, "run": {
        "generations": np.int64(2), "runs_dir": tmp_path / "elsewhere"},
        "policy": {"kind": "mlp", "hidden": np.array([8])}}, run_dir=tmp_path / "numpy_table")
    assert numpy_table.generations == 2


def test_runs_started_in_one_second_without_a_run_dir_get_folders_of_their_own(tmp_path,
                                                                                 monkeypatch):
    """A loop over overrides without run_dir put its runs in one stamped folder: the second
    was refused as "already holds a run", and with force=True it replaced the first."""
    import es.rl.runs

    class Frozen:  # every run starts in the same second
        @staticmethod
        def now():
            from datetime import datetime
            return datetime(2026, 1, 2, 3, 4, 5)

    monkeypatch.setattr(es.rl.runs, "datetime", Frozen)
    config = {"env": {"id": "CartPole-v1"}, "run": {"name": "loop", "generations": 1,
                                                    "runs_dir": str(tmp_path)}}
    folders = [es.train(config, {"es.sigma": sigma}, force=force).run_dir
               for sigma, force in ((0.05, True), (0.1, True), (0.2, False))]
    stamped = tmp_path / "CartPole-v1__loop__0__20260102-030405"
    assert folders == [stamped, stamped.with_name(stamped.name + "-2"),
                       stamped.with_name(stamped.name + "-3")]
    assert [tomllib.loads((folder / "config.toml").read_text())["es"]["sigma"]
            for folder in folders] == [0.05, 0.1, 0.2]


def test_train_runs_blas_on_one_thread_and_restores_it(tmp_path, monkeypatch):
    import es.rl.trainer

    before = blas_threads()
    seen = []
    run = es.rl.trainer.Trainer.run

    def spy(trainer, callback=None):
        seen.append(blas_threads())
        return run(trainer, callback)

    monkeypatch.setattr(es.rl.trainer.Trainer, "run", spy)
    es.train(REPO / "configs/cartpole.toml", overrides={"run.generations": 1},
             run_dir=tmp_path / "run")
    assert seen == [1.0]  # NumPy is loaded already, as in a notebook: env vars are too late
    assert blas_threads() == before


def test_ctrl_c_in_minimize_keeps_the_result_so_far_on_the_exception(tmp_path):
    """A notebook's interrupt lost every evaluation made: KeyboardInterrupt came out bare."""
    from conftest import interrupt_job, start_terminal_job

    started = tmp_path / "started"
    script = ("import sys, time\nimport numpy as np\nimport es\n"
              "calls = 0\n"
              "def slow(x):\n"
              "    global calls\n"
              "    calls += 1\n"
              f"    if calls == 50: open({str(started)!r}, 'w').close()\n"
              "    time.sleep(0.002)\n"
              "    return float(np.sum(x**2))\n"
              "try:\n"
              "    es.minimize(slow, np.ones(5), 0.5, max_evals=10**7)\n"
              "except KeyboardInterrupt as interrupt:\n"
              "    r = interrupt.result\n"
              "    print(f'INTERRUPTED {interrupt} | {r.stop_reason} {r.nfev} {calls} '\n"
              "          f'{r.fun == min(row[\"best_f\"] for row in r.history)} {r.fun}',\n"
              "          file=sys.stderr)\n")
    job = start_terminal_job([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    err = interrupt_job(job, "ctrl-c", ready=started.exists)
    found = re.search(r"INTERRUPTED es.minimize interrupted after (\d+) evaluations, best f = "
                      r"(\S+); the result so far is this exception's .result \| interrupted "
                      r"(\d+) (\d+) True (\S+)", err)
    assert found, err
    nfev, best, told, calls, fun = found.groups()
    assert nfev == told and int(told) >= 40 and int(calls) >= int(told)  # a generation cut
    assert float(best) == pytest.approx(float(fun), rel=1e-5)  # short the last generation


def test_a_core_install_minimises_without_pycmas_matplotlib_warning():
    """Without matplotlib (a core install), the README's first es.minimize printed pycma's
    "Could not import matplotlib.pyplot, therefore cma.plot() etc. is not available"."""
    script = ("import sys\nsys.modules['matplotlib'] = None  # as if not installed\n"
              "import numpy as np, es\n"
              "print(es.minimize(es.functions.sphere, np.ones(3), 0.5, max_evals=100).nfev)\n")
    done = subprocess.run([sys.executable, "-W", "default", "-c", script],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and int(done.stdout) >= 100, done.stderr
    assert "matplotlib" not in done.stderr, done.stderr
