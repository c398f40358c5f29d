"""What ranks exchange per generation: who evaluates which member, and how few bytes it takes."""

import numpy as np
import pytest

from es.parallel.comm import LocalComm
from es.parallel.exchange import share_results, static_share


@pytest.mark.parametrize("mirrored", [True, False])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 23, 64])
@pytest.mark.parametrize("population", [2, 16, 46])
def test_static_shares_cover_every_member_once_and_evenly(size, mirrored, population):
    shares = [static_share(rank, size, population, mirrored) for rank in range(size)]
    assert np.array_equal(np.sort(np.concatenate(shares)), np.arange(population))
    counts = [len(share) for share in shares]
    assert max(counts) - min(counts) <= 1  # one pair on two ranks: one member each
    if mirrored and (population // 2) % size == 0:
        for share in shares:  # pairs divide evenly: one noise slice serves both of a pair
            assert np.array_equal(share[1::2], share[::2] + 1)


def test_one_float32_return_per_member_is_all_the_static_schedule_sends():
    comm = LocalComm()
    population = 1024
    members = static_share(0, 1, population, mirrored=True)
    returns = np.linspace(-5.0, 5.0, population) + 1e-9  # float32 rounds the 1e-9 away
    increment = np.array([1, 2, 3], dtype=np.int64)
    result = share_results(comm, population, True, members, returns, 777, increment,
                           dynamic=False)
    assert comm.world_bytes_sent == 4 * population + 8 * (1 + increment.size)
    np.testing.assert_array_equal(result.returns, returns.astype(np.float32))
    assert result.steps == 777
    np.testing.assert_array_equal(result.obs_increment, increment)


def test_dynamic_rows_put_members_back_in_order_with_the_same_rounding():
    comm = LocalComm()
    members = np.array([3, 0, 2, 1])
    returns = np.array([3.3, 0.1, 2.2, 1.1])
    result = share_results(comm, 4, True, members, returns, 0, np.zeros(0, np.int64),
                           dynamic=True)
    np.testing.assert_array_equal(result.returns, np.float32([0.1, 1.1, 2.2, 3.3]))


def test_a_missing_member_is_an_error_not_a_silent_zero():
    with pytest.raises(RuntimeError, match="members missing"):
        share_results(LocalComm(), 4, True, [0, 1, 2, 2], [0.0] * 4, 0,
                      np.zeros(0, np.int64), dynamic=True)
