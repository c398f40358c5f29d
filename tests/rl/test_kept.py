"""The nomination pool's rules (es.rl.kept), one decision at a time."""

import numpy as np
import pytest

from es.config import from_dict
from es.parallel.comm import LocalComm
from es.rl.kept import CONFIRM_ROUND, Nomination, NominationPool, policy_score
from es.rl.policies import ObsNorm
from es.rl.trainer import POOL_BYTES, Trainer


def nomination(generation: int, score: float) -> Nomination:
    return Nomination(generation, score, np.full(3, float(generation)), ObsNorm.identity(2))


def test_the_measures_of_a_policy_over_episodes():
    returns = np.array([5.0, -1.0, 4.0, 3.0, 9.0, 0.0, 7.0, 8.0])
    assert policy_score(returns, "mean") == pytest.approx(4.375)
    assert policy_score(returns, "worst") == -1.0
    for by in ("mean", "worst"):  # a failed episode fails the policy
        assert np.isnan(policy_score(np.array([1.0, np.nan, 2.0]), by))


def test_the_best_evaluation_goes_first_and_a_full_pool_drops_its_worst():
    pool = NominationPool(size=2, episodes=20, by="mean", seed=0)
    assert pool.nominate(nomination(3, 10.0), kept=None)
    assert not pool.nominate(nomination(4, 5.0), kept=8.0)  # no better than the kept one
    assert pool.nominate(nomination(5, 30.0), kept=None)
    assert pool.nominate(nomination(6, 20.0), kept=None)  # drops generation 3's
    assert [n.generation for n in pool.waiting] == [5, 6]
    assert not pool.nominate(nomination(7, 15.0), kept=None)  # worse than all who wait
    assert pool.nominate(nomination(8, 30.0), kept=None)  # among equals the later first
    assert [n.generation for n in pool.waiting] == [8, 5]
    head, seeds = pool.next_round()
    assert head.generation == 8 and len(seeds) == CONFIRM_ROUND


def test_a_full_pool_answers_for_the_nomination_itself_not_its_twin():
    """A pool that drops a nomination says so even beside one with the same generation,
    score and parameters (compared by identity: equal fields hold arrays, whose == has no
    single truth value)."""
    pool = NominationPool(size=1, episodes=20, by="mean", seed=0)
    first = nomination(4, 10.0)
    assert pool.nominate(first, kept=None)
    assert not pool.nominate(nomination(4, 10.0), kept=None)  # the first stays: sorted stable
    assert pool.waiting == [first]


def test_rounds_continue_where_the_last_ended_and_all_episodes_decide():
    pool = NominationPool(size=3, episodes=20, by="mean", seed=0)
    pool.nominate(nomination(2, 10.0), kept=None)
    head, first = pool.next_round()
    verdict = pool.record(head, np.full(CONFIRM_ROUND, 9.0), kept=None)
    assert not verdict.ended and verdict.confirmed is None
    _, second = pool.next_round()
    assert not set(first) & set(second)  # fresh episodes
    verdict = pool.record(head, np.full(CONFIRM_ROUND, 11.0), kept=None)
    assert verdict.ended and verdict.confirmed == pytest.approx(10.0)
    assert not pool


def test_judged_by_the_worst_a_round_at_or_below_the_kept_score_ends_it():
    pool = NominationPool(size=3, episodes=40, by="worst", seed=0)
    pool.nominate(nomination(4, 9.0), kept=5.0)
    head, _ = pool.next_round()
    verdict = pool.record(head, np.array([8.0] * 9 + [5.0]), kept=5.0)
    assert verdict.ended and verdict.confirmed is None and verdict.returns.size == 10
    assert not pool


def test_a_failed_episode_ends_the_confirmation():
    pool = NominationPool(size=3, episodes=20, by="mean", seed=0)
    pool.nominate(nomination(4, 9.0), kept=None)
    head, _ = pool.next_round()
    verdict = pool.record(head, np.array([1.0] * 9 + [np.nan]), kept=None)
    assert verdict.ended and verdict.confirmed is None


def test_a_new_kept_score_drops_the_nominations_it_leaves_behind():
    pool = NominationPool(size=3, episodes=10, by="mean", seed=0)
    for generation, score in ((1, 50.0), (2, 30.0), (3, 20.0)):
        pool.nominate(nomination(generation, score), kept=None)
    head, _ = pool.next_round()
    verdict = pool.record(head, np.full(10, 25.0), kept=None)
    assert verdict.confirmed == 25.0
    assert [n.generation for n in pool.waiting] == [2]  # 20 < 25 cannot win any more


def test_a_better_nomination_goes_ahead_of_a_begun_confirmation():
    pool = NominationPool(size=3, episodes=20, by="mean", seed=0)
    pool.nominate(nomination(2, 10.0), kept=None)
    head, _ = pool.next_round()
    pool.record(head, np.full(CONFIRM_ROUND, 10.0), kept=None)
    pool.nominate(nomination(5, 40.0), kept=None)
    better, _ = pool.next_round()
    assert better.generation == 5
    assert pool.record(better, np.full(CONFIRM_ROUND, 1.0), kept=None).ended is False
    verdict = pool.record(better, np.full(CONFIRM_ROUND, 39.0), kept=None)
    assert verdict.confirmed == 20.0
    assert not pool  # generation 2's (10.0) cannot beat the new kept score


def test_with_a_target_the_furthest_confirmed_of_those_that_may_reach_it_goes_next():
    """run.target_score: a begun confirmation that may still reach the target is finished
    before a better one begins (the first to hold ends the run; the stop races the rest);
    one that can no longer reach it waits behind the others, as without a target."""
    pool = NominationPool(size=4, episodes=30, by="worst", seed=0)
    pool.nominate(nomination(2, 70.0), kept=None)
    head, _ = pool.next_round(target=60.0)
    pool.record(head, np.full(CONFIRM_ROUND, 65.0), kept=None)  # worst so far 65: may reach 60
    pool.nominate(nomination(5, 90.0), kept=None)
    pool.nominate(nomination(6, 50.0), kept=None)
    assert pool.next_round(target=60.0)[0].generation == 2
    assert pool.next_round()[0].generation == 5  # without a target the better goes first
    pool.record(head, np.full(CONFIRM_ROUND, 55.0), kept=None)  # worst 55: it cannot reach 60
    assert pool.next_round(target=60.0)[0].generation == 5
    assert pool.next_round(target=100.0)[0].generation == 5  # none can: the usual order


def test_judged_by_the_worst_the_one_that_may_still_score_highest_goes_next():
    pool = NominationPool(size=3, episodes=20, by="worst", seed=0)
    pool.nominate(nomination(6, 50.0), kept=None)
    pool.nominate(nomination(3, 40.0), kept=None)
    head, _ = pool.next_round()
    assert head.generation == 6
    pool.record(head, np.array([48.0] * 9 + [-5.0]), kept=None)  # it fell once: at most -5
    assert pool.next_round()[0].generation == 3
    other, _ = pool.next_round()
    pool.record(other, np.full(CONFIRM_ROUND, 39.0), kept=None)
    verdict = pool.record(other, np.full(CONFIRM_ROUND, 38.0), kept=None)
    assert verdict.confirmed == 38.0
    assert not pool  # generation 6's worst so far, -5, cannot beat 38 any more


def trainer_with(hidden: tuple, best_pool: int) -> Trainer:
    return Trainer(from_dict({"run": {"generations": 1, "best_pool": best_pool},
                              "env": {"id": "Pendulum-v1"},
                              "policy": {"kind": "mlp", "hidden": hidden},
                              "es": {"population": 4, "noise": "seed"}}), LocalComm(), None)


def test_the_pool_holds_run_best_pool_nominations_unless_their_parameters_pass_64_mib():
    small = trainer_with((16,), best_pool=16)
    assert small.nominations.size == 16
    large = trainer_with((3000, 3000), best_pool=16)  # ~9M float32 parameters: 36 MiB each
    per_nomination = large.strategy.mean.nbytes + 2 * large.norm.mean.nbytes
    assert large.nominations.size == 1 == POOL_BYTES // per_nomination
    assert trainer_with((1000, 1000), best_pool=16).nominations.size == 16  # 4 MiB each
