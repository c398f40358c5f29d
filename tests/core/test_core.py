"""The pure pieces, exactly: centered ranks and the other fitness shapings, Adam and SGD
against hand computations, and the noise sources (a shared table or per-member seeds) as pure
functions of (seed, generation, index)."""

import numpy as np
import pytest

from es.core.noise import NoiseTable, SeedNoise
from es.core.optim import SGD, Adam
from es.core.shaping import centered_ranks


@pytest.fixture(scope="module")
def table() -> NoiseTable:
    return NoiseTable.build(200_000, seed=0)


def test_centered_ranks_exact_values():
    ranks = centered_ranks(np.array([10.0, -3.0, 7.0, 100.0, 0.0]))
    np.testing.assert_array_equal(ranks, np.array([0.25, -0.5, 0.0, 0.5, -0.25], np.float32))


def test_centered_ranks_average_ties_and_sum_to_zero():
    ranks = centered_ranks(np.array([5.0, 1.0, 5.0, 5.0]))
    # Sorted: 1 -> rank 0; the three 5s share ranks 1, 2, 3 -> 2. Scaled by 1/3, minus 0.5.
    np.testing.assert_allclose(ranks, [1 / 6, -0.5, 1 / 6, 1 / 6], rtol=1e-6)
    assert abs(float(centered_ranks(np.random.default_rng(0).normal(size=101)).sum())) < 1e-5


def test_centered_ranks_reject_a_single_value():
    with pytest.raises(ValueError, match="at least 2"):
        centered_ranks(np.array([1.0]))


def test_adam_matches_a_hand_computation():
    adam = Adam(2, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    g1, g2 = np.array([1.0, -2.0], np.float32), np.array([0.5, 0.5], np.float32)
    step1 = adam.step(g1)
    # t=1: m = 0.1 g, v = 0.001 g^2, a = 0.1 sqrt(0.001) / 0.1 -> step = -0.1 * sign(g) (nearly)
    m, v = 0.1 * g1, 0.001 * g1**2
    a = 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9)
    np.testing.assert_allclose(step1, -a * m / (np.sqrt(v) + 1e-8), rtol=1e-6)
    np.testing.assert_allclose(step1, [-0.1, 0.1], rtol=1e-6)
    step2 = adam.step(g2)
    m = 0.9 * m + 0.1 * g2
    v = 0.999 * v + 0.001 * g2**2
    a = 0.1 * np.sqrt(1 - 0.999**2) / (1 - 0.9**2)
    np.testing.assert_allclose(step2, -a * m / (np.sqrt(v) + 1e-8), rtol=1e-6)
    assert adam.t == 2


def test_sgd_momentum_matches_a_hand_computation():
    sgd = SGD(1, lr=0.5, momentum=0.9)
    assert sgd.step(np.array([2.0], np.float32))[0] == pytest.approx(-0.5 * 0.2)
    assert sgd.step(np.array([1.0], np.float32))[0] == pytest.approx(-0.5 * (0.9 * 0.2 + 0.1))


def test_optimizer_state_round_trips():
    adam = Adam(3, 0.1)
    adam.step(np.ones(3, np.float32))
    restored = Adam(3, 0.1)
    restored.load_state(adam.state())
    g = np.array([0.3, -1.0, 2.0], np.float32)
    np.testing.assert_array_equal(adam.step(g), restored.step(g))


def test_table_and_seed_noise_weighted_sums_match_a_dense_reference(table):
    weights = np.random.default_rng(1).normal(size=7).astype(np.float32)
    for noise in (table, SeedNoise()):
        directions = noise.sample(seed=3, generation=2, count=7, dim=50)
        dense = np.stack([directions.vector(k) for k in range(7)]).astype(np.float64)
        np.testing.assert_allclose(
            directions.weighted_sum(weights), weights @ dense, rtol=1e-5, atol=1e-5
        )


def test_perturbations_are_pure_functions_of_seed_generation_and_index(table):
    a = table.sample(seed=1, generation=5, count=4, dim=30)
    b = table.sample(seed=1, generation=5, count=4, dim=30)
    c = table.sample(seed=1, generation=6, count=4, dim=30)
    np.testing.assert_array_equal(a.vector(3), b.vector(3))
    assert not np.array_equal(a.vector(3), c.vector(3))
    seeded = SeedNoise().sample(seed=1, generation=5, count=4, dim=30)
    np.testing.assert_array_equal(seeded.vector(2), SeedNoise().sample(1, 5, 9, 30).vector(2))
    assert abs(float(np.std(table.table)) - 1.0) < 0.01


def test_regenerated_directions_are_kept_up_to_the_cap_and_read_only(monkeypatch):
    """A generation keeps the directions it regenerated (each is needed for the parameters and
    again for each weighted sum) up to ``CACHE_BYTES``; past it they are regenerated. Either
    way the vectors, and so every result, are the same."""
    import es.core.noise

    fresh = [SeedNoise().sample(4, 1, 6, 100).vector(k) for k in range(6)]
    monkeypatch.setattr(es.core.noise, "CACHE_BYTES", 3 * 100 * 4)  # room for three directions
    directions = SeedNoise().sample(4, 1, 6, 100)
    vectors = [directions.vector(k) for k in range(6)]
    assert sorted(directions._cache) == [0, 1, 2]
    assert directions.vector(1) is vectors[1] and directions.vector(4) is not vectors[4]
    for got, want in zip(vectors, fresh, strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="read-only"):
        vectors[0] += 1.0
    weights = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(directions.weighted_sum(weights),
                                  SeedNoise().sample(4, 1, 6, 100).weighted_sum(weights))


def test_replaced_directions_stream_like_the_others(table):
    from es.core.noise import ReplacedDirections

    base = table.sample(seed=2, generation=3, count=4, dim=20)
    line = np.linspace(-1.0, 1.0, 20)
    replaced = ReplacedDirections(base, {0: line, 1: -line})
    assert len(replaced) == 4 and replaced.vector(0).dtype == np.float32
    np.testing.assert_array_equal(replaced.vector(1), -line.astype(np.float32))
    np.testing.assert_array_equal(replaced.vector(2), base.vector(2))
    dense = np.stack([replaced.vector(k) for k in range(4)]).astype(np.float64)
    weights = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32)
    np.testing.assert_allclose(replaced.weighted_sum(weights), weights @ dense, rtol=1e-5)
    np.testing.assert_allclose(replaced.weighted_sum(weights, squared=True),
                               weights @ dense**2, rtol=1e-5)
    with pytest.raises(IndexError, match="outside 0..3"):
        ReplacedDirections(base, {4: line})


def test_noise_table_must_cover_the_parameters():
    with pytest.raises(ValueError, match="smaller than"):
        NoiseTable.build(1000, 0).sample(0, 0, 2, 2000)


def test_standardized_fitness_keeps_distances():
    from es.core.shaping import standardized

    shaped = standardized(np.array([1.0, 2.0, 3.0, 10.0]))
    np.testing.assert_allclose(shaped, (np.array([1, 2, 3, 10]) - 4.0) / np.std([1, 2, 3, 10]),
                               rtol=1e-6)
    np.testing.assert_array_equal(standardized(np.full(4, 7.0)), np.zeros(4))


def test_a_failure_ranks_strictly_below_every_finite_fitness_even_when_huge():
    from es.core.shaping import worst_for_failures

    shaped = worst_for_failures(np.array([1e17, np.nan, 2e17, -np.inf]))
    assert shaped[1] < 1e17 and shaped[3] < 1e17 and shaped[0] == 1e17
    np.testing.assert_array_equal(worst_for_failures(np.array([3.0, np.nan])), [3.0, 2.0])
