"""es.minimize and the ask/tell OpenES: convergence budgets, bit-identity across ways of
evaluating (ask/tell, minimize, spawned workers, mpiexec ranks), stopping and errors."""

import doctest
import hashlib
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, tool

import es
import es.blackbox
import es.functions


@pytest.mark.parametrize(("name", "dim", "target", "budget", "x0"), [
    ("sphere", 100, 1e-8, 100_000, 3.0),
    ("ellipsoid", 20, 1e-6, 50_000, 3.0),
    ("rosenbrock", 10, 1e-2, 500_000, 0.0),
])
def test_minimize_reaches_the_target_within_the_budget(name, dim, target, budget, x0):
    result = es.minimize(getattr(es.functions, name), x0=np.full(dim, x0), sigma0=1.0, seed=1,
                         ftarget=target, max_evals=budget)
    assert result.stop_reason == "ftarget", (result.fun, result.nfev)
    assert result.fun <= target and result.nfev <= budget
    assert getattr(es.functions, name)(result.x) == result.fun
    assert len(result.history) == result.ngen


def test_ask_tell_and_minimize_agree_bit_for_bit():
    fun = es.functions.rastrigin
    opt = es.OpenES(x0=np.full(8, 2.0), sigma=0.5, popsize=12, seed=3, max_generations=40)
    while not opt.stop():
        xs = opt.ask()
        opt.tell(xs, [fun(x) for x in xs])
    res = es.minimize(fun, x0=np.full(8, 2.0), sigma0=0.5, popsize=12, seed=3,
                      max_generations=40)
    assert opt.stop_reason == res.stop_reason == "max_generations"
    assert np.array_equal(opt.result.x, res.x) and np.array_equal(opt.result.x_mean, res.x_mean)
    assert opt.result.fun == res.fun and opt.result.nfev == res.nfev == 40 * 12


def test_spawned_workers_evaluate_a_lambda_to_the_same_bits():
    offset = 0.5
    fun = lambda x: float(np.sum((x - offset) ** 2))  # noqa: E731  a closure, not importable
    single = es.minimize(fun, x0=np.zeros(6), sigma0=0.3, seed=4, max_generations=30)
    spread = es.minimize(fun, x0=np.zeros(6), sigma0=0.3, seed=4, max_generations=30, workers=2)
    assert np.array_equal(single.x, spread.x) and single.fun == spread.fun
    assert single.fun < 0.05




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

def test_under_mpiexec_every_rank_evaluates_its_share_to_the_same_bits():
    offset = 0.5
    reference = es.minimize(lambda x: float(np.sum((x - offset) ** 2)), x0=np.zeros(6),
                            sigma0=0.3, seed=4, max_generations=30)
    digest = hashlib.sha256(reference.x.tobytes() + reference.x_mean.tobytes()).hexdigest()
    done = subprocess.run([tool("mpiexec"), "-n", "3", sys.executable,
                           str(REPO / "tests/mpi_scripts/minimize_spmd.py")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT"))
    assert line.split()[1:3] == [digest, str(reference.nfev)]


def test_stopping_criteria_and_their_reasons():
    flat = es.minimize(lambda x: 1.0, x0=np.zeros(3), sigma0=0.1, max_generations=500,
                       tolfun=1e-9)
    assert flat.stop_reason == "tolfun" and flat.ngen < 500
    tiny = es.minimize(es.functions.sphere, x0=np.ones(2), sigma0=1e-13, tolx=1e-12)
    assert tiny.stop_reason == "tolx" and tiny.ngen == 0
    capped = es.minimize(es.functions.sphere, x0=np.ones(4), sigma0=0.1, max_evals=40)
    assert capped.stop_reason == "max_evals" and capped.nfev == 40


def test_bad_input_gives_clear_errors():
    with pytest.raises(ValueError, match="x0 must be a non-empty finite vector"):
        es.OpenES(x0=[np.nan], sigma=1.0)
    with pytest.raises(ValueError, match="sigma -1"):
        es.OpenES(x0=[0.0], sigma=-1)
    opt = es.OpenES(x0=np.zeros(2), sigma=1.0, popsize=4)
    with pytest.raises(RuntimeError, match="without ask"):
        opt.tell(np.zeros((4, 2)), [0.0] * 4)
    xs = opt.ask()
    with pytest.raises(ValueError, match="3 values for 4 candidates"):
        opt.tell(xs, [0.0] * 3)
    with pytest.raises(ValueError, match="other points"):
        opt.tell(xs + 1, [0.0] * 4)
    opt.tell(xs, [np.nan, 1.0, 2.0, np.inf])  # non-finite values rank last, no crash
    assert np.all(np.isfinite(opt.mean))


def test_test_functions_are_zero_at_their_minimum_and_vectorised():
    for name, minimum in (("sphere", 0.0), ("ellipsoid", 0.0), ("rastrigin", 0.0),
                          ("ackley", 0.0), ("rosenbrock", 1.0)):
        fun = getattr(es.functions, name)
        assert fun(np.full(7, minimum)) == pytest.approx(0.0, abs=1e-12)
        rows = np.random.default_rng(0).standard_normal((5, 7))
        assert np.allclose(fun(rows), [fun(row) for row in rows])
        assert np.all(fun(rows) > 0)


def test_docstring_examples_run():
    for module in (es.blackbox, es.functions):
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
    with pytest.raises(ValueError, match="already holds a run"):
        es.train(REPO / "configs/cartpole.toml", run_dir=tmp_path / "run")
    with pytest.raises(ValueError, match="unknown key es.sigmaa"):
        es.train(REPO / "configs/cartpole.toml", overrides={"es.sigmaa": 1.0})


def test_train_runs_blas_on_one_thread_and_restores_it(tmp_path, monkeypatch):
    import es.trainer

    before = blas_threads()
    seen = []
    run = es.trainer.Trainer.run

    def spy(trainer):
        seen.append(blas_threads())
        return run(trainer)

    monkeypatch.setattr(es.trainer.Trainer, "run", spy)
    es.train(REPO / "configs/cartpole.toml", overrides={"run.generations": 1},
             run_dir=tmp_path / "run")
    assert seen == [1.0]  # NumPy is loaded already, as in a notebook: env vars are too late
    assert blas_threads() == before
