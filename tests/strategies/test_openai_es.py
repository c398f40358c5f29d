"""OpenAI-ES exactly: mirrored members, the paper's gradient estimate, weight decay as the
released code's, step-size decays; and convergence on classic test functions."""

import numpy as np
import pytest

from es.core.noise import NoiseTable
from es.core.optim import SGD, Adam
from es.core.shaping import centered_ranks
from es.strategies.openai_es import OpenAIES


@pytest.fixture(scope="module")
def table() -> NoiseTable:
    return NoiseTable.build(200_000, seed=0)


def test_mirrored_members_are_symmetric_around_theta(table):
    es = OpenAIES(np.arange(10.0), population=6, sigma=0.1, noise=table, optimizer=Adam(10, 0.01))
    generation = es.ask()
    for k in range(3):
        plus, minus = generation.params(2 * k), generation.params(2 * k + 1)
        np.testing.assert_allclose((plus + minus) / 2, es.theta, atol=1e-6)
        eps = generation.directions.vector(k)
        np.testing.assert_allclose(plus - es.theta, 0.1 * eps, atol=1e-6)
        assert not np.allclose(plus, minus)
    assert generation.direction_of(5) == (2, -1.0)


def test_unmirrored_population_uses_one_direction_per_member(table):
    es = OpenAIES(np.zeros(4), population=5, sigma=1.0, noise=table, optimizer=Adam(4, 0.1),
                mirrored=False)
    generation = es.ask()
    assert len(generation.directions) == 5
    assert generation.direction_of(4) == (4, 1.0)


def test_invalid_hyperparameters_are_refused(table):
    with pytest.raises(ValueError, match="even"):
        OpenAIES(np.zeros(3), population=5, sigma=0.1, noise=table, optimizer=Adam(3, 0.1))
    with pytest.raises(ValueError, match="sigma"):
        OpenAIES(np.zeros(3), population=4, sigma=0.0, noise=table, optimizer=Adam(3, 0.1))
    with pytest.raises(ValueError, match="at least 2"):
        OpenAIES(np.zeros(3), population=1, sigma=0.1, noise=table, optimizer=Adam(3, 0.1),
               mirrored=False)


def test_tell_steps_along_the_paper_estimate(table):
    """One step by hand: g = sum_i F_i eps_i / (n sigma), grad = -g + (l2 / sigma) theta, SGD."""
    theta0 = np.linspace(-1, 1, 8)
    es = OpenAIES(theta0, population=4, sigma=0.5, noise=table, optimizer=SGD(8, 1.0, 0.0), l2=0.1)
    generation = es.ask()
    fitness = np.array([3.0, 1.0, 0.0, 2.0])
    es.tell(fitness)
    shaped = centered_ranks(fitness)
    eps = [generation.directions.vector(k).astype(np.float64) for k in range(2)]
    g = (shaped[0] * eps[0] - shaped[1] * eps[0] + shaped[2] * eps[1] - shaped[3] * eps[1]) / (
        4 * 0.5
    )
    expected = theta0 - 1.0 * (-g + 0.1 / 0.5 * theta0.astype(np.float32))
    np.testing.assert_allclose(es.theta, expected, rtol=1e-5, atol=1e-6)
    assert es.generation == 1


def test_weight_decay_means_the_released_codes_l2coeff_under_adam(table):
    """OpenAI's released es.py steps Adam along ``-g' + l2coeff * theta`` with
    ``g' = sum_i F_i eps_i / n`` (no 1/sigma). Our update is that vector over sigma, and
    Adam ignores a common scale, so ``es.l2 = 0.005`` is the paper's humanoid.json value."""
    theta0 = np.linspace(-1, 1, 8).astype(np.float32)
    sigma, l2 = 0.02, 0.005
    es = OpenAIES(theta0, population=4, sigma=sigma, noise=table, optimizer=Adam(8, 0.01), l2=l2)
    reference = Adam(8, 0.01)
    theta = theta0.copy()
    for fitness in ([3.0, 1.0, 0.0, 2.0], [0.5, 2.0, 1.0, -1.0], [1.0, 0.0, 2.0, 3.0]):
        generation = es.ask()
        shaped = centered_ranks(np.array(fitness))
        weights = shaped[0::2] - shaped[1::2]
        released = sum(w * generation.directions.vector(k).astype(np.float64)
                       for k, w in enumerate(weights)) / 4
        theta = theta + reference.step((-released + l2 * theta).astype(np.float32))
        es.tell(np.array(fitness))
        np.testing.assert_allclose(es.theta, theta, rtol=1e-4, atol=1e-6)
    # The old reading (decay added to g with its 1/sigma, i.e. sigma times weaker) is far off.
    weaker = OpenAIES(theta0, population=4, sigma=sigma, noise=table, optimizer=Adam(8, 0.01),
                    l2=l2 * sigma)
    for fitness in ([3.0, 1.0, 0.0, 2.0], [0.5, 2.0, 1.0, -1.0], [1.0, 0.0, 2.0, 3.0]):
        weaker.ask()
        weaker.tell(np.array(fitness))
    assert np.abs(weaker.theta - theta).max() > 100 * np.abs(es.theta - theta).max()


def test_tell_refuses_the_wrong_number_of_fitness_values(table):
    es = OpenAIES(np.zeros(3), population=4, sigma=0.1, noise=table, optimizer=Adam(3, 0.1))
    with pytest.raises(ValueError, match="3 fitness values for 4 members"):
        es.tell(np.zeros(3))


def _minimise(f, x0, sigma, lr, population, generations, table):
    es = OpenAIES(x0, population=population, sigma=sigma, noise=table,
                optimizer=Adam(x0.size, lr), seed=1)
    for _ in range(generations):
        generation = es.ask()
        es.tell(np.array([-f(generation.params(i)) for i in range(population)]))
    return es.theta.astype(np.float64)


def test_converges_on_the_sphere_in_20_dimensions(table):
    def sphere(x):
        return float(np.sum(np.square(x, dtype=np.float64)))

    x = _minimise(sphere, np.full(20, 3.0), 0.05, 0.05, 50, 400, table)
    assert sphere(x) < 1e-2  # from 180


def test_converges_on_rosenbrock_in_20_dimensions(table):
    def rosenbrock(x):
        x = x.astype(np.float64)
        return float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))

    x = _minimise(rosenbrock, np.zeros(20), 0.02, 0.01, 50, 3000, table)
    assert rosenbrock(x) < 1.0  # from 19; the nearest local minimum has f ~ 3.98
    assert np.max(np.abs(x - 1.0)) < 0.5


def test_sigma_and_lr_decay_per_generation_with_floors(table):
    adam = Adam(5, 0.1)
    es = OpenAIES(np.zeros(5), population=4, sigma=1.0, noise=table, optimizer=adam,
                sigma_decay=0.5, sigma_min=0.2, lr_decay=0.9, lr_min=0.05)
    sigmas, lrs = [], []
    for _ in range(4):
        generation = es.ask()
        sigmas.append(generation.scale)
        np.testing.assert_allclose(generation.params(0) - generation.mean,
                                   generation.scale * generation.directions.vector(0), atol=1e-6)
        es.tell(np.arange(4.0))
        lrs.append(adam.lr)
    assert sigmas == [1.0, 0.5, 0.25, 0.2]
    np.testing.assert_allclose(lrs, [0.1, 0.09, 0.081, 0.0729])
    with pytest.raises(ValueError, match="lr_decay"):
        OpenAIES(np.zeros(5), population=4, sigma=1.0, noise=table, optimizer=Adam(5, 0.1),
               lr_decay=1.5)
