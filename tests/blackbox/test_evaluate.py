"""``es.minimize(..., vectorized=True)``: one call per generation on all rows (per worker or
rank, on its share), the same result as one call per row, and a clear error when the function
does not return one value per row."""

import numpy as np
import pytest
from conftest import run_cli

import es
from es.functions import rosenbrock

KWARGS = {"method": "sepcma", "seed": 3, "max_evals": 600}


def test_vectorized_gives_the_per_row_result_in_one_call_per_generation():
    calls = []

    def batch(rows: np.ndarray) -> np.ndarray:
        calls.append(rows.shape)
        return rosenbrock(rows)

    rows = es.minimize(rosenbrock, np.zeros(6), 0.5, **KWARGS)
    block = es.minimize(batch, np.zeros(6), 0.5, vectorized=True, **KWARGS)
    np.testing.assert_array_equal(block.x, rows.x)
    assert block.fun == rows.fun and block.nfev == rows.nfev
    assert len(calls) == block.ngen and all(shape == (10, 6) for shape in calls)


def test_vectorized_function_must_return_one_value_per_row():
    with pytest.raises(ValueError, match="returned 1 values for 10 rows"):
        es.minimize(lambda rows: float(np.sum(rows)), np.zeros(6), 0.5, vectorized=True,
                    **KWARGS)
    with pytest.raises(ValueError, match=r"returned shape \(2, 5\) for 10 rows: it must "
                                         r"return one value per row, shape \(10,\) or"):
        es.minimize(lambda rows: np.sum(rows, axis=1).reshape(2, -1), np.zeros(6), 0.5,
                    vectorized=True, **KWARGS)
    column = es.minimize(lambda rows: np.sum(rows**2, axis=1, keepdims=True), np.zeros(6),
                         0.5, vectorized=True, **KWARGS)  # (n, 1), as pycma's may return
    assert np.isfinite(column.fun)


SCRIPT = """
import numpy as np, es
from es.functions import rosenbrock
shapes = []
def batch(rows):
    shapes.append(len(rows))
    return rosenbrock(rows)
result = es.minimize(batch, np.zeros(6), 0.5, vectorized=True, method="sepcma", seed=3,
                     max_evals=600)
from mpi4py import MPI
if MPI.COMM_WORLD.rank == 0:
    print(repr(result.fun), result.x.tobytes().hex(), sorted(set(shapes)))
"""


def test_vectorized_under_mpiexec_evaluates_each_share_in_one_call(tmp_path):
    script = tmp_path / "vectorized.py"
    script.write_text(SCRIPT)
    done = run_cli(["python", str(script)], ranks=3, timeout=120)
    assert done.returncode == 0, done.stderr
    fun, x_hex, shapes = done.stdout.split(maxsplit=2)
    single = es.minimize(rosenbrock, np.zeros(6), 0.5, **KWARGS)
    assert float(fun) == single.fun and bytes.fromhex(x_hex) == single.x.tobytes()
    assert shapes.strip() == "[4]"  # 10 candidates: rank 0 evaluates its 4 in one call


EMPTY_SHARE = """
import numpy as np, es
def batch(rows):
    assert len(rows) > 0, "called with 0 rows"
    return es.functions.sphere(rows)
result = es.minimize(batch, np.ones(2), 0.5, vectorized=True, method="cma", popsize=2,
                     max_generations=3)
from mpi4py import MPI
counts = MPI.COMM_WORLD.gather(result.nfev)  # one line: the ranks' prints interleave
if MPI.COMM_WORLD.rank == 0:
    print(counts)
"""


def test_a_rank_without_a_share_does_not_call_a_vectorized_fun(tmp_path):
    """Fewer members than ranks (popsize 2, 3 ranks): rank 2 called fun on a (0, d) array,
    which a batch simulator or np.stack fails on, and every rank raised."""
    script = tmp_path / "empty_share.py"
    script.write_text(EMPTY_SHARE)
    done = run_cli(["python", str(script)], ranks=3, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[6, 6, 6]", done.stdout
