"""What the ranks send each other per generation, kept to the minimum the update needs.

Under the static schedule every rank can compute which members every other rank evaluates, so
a member costs exactly one float32 return on the wire: no member id, no length, no row count.
The episode lengths only matter as a total, which rides in the one int64 all-reduce that also
merges the observation statistics. Under the dynamic schedule nobody knows in advance who
evaluated what, so each member travels as an (id, return) pair.

Returns are rounded to float32 on every schedule and rank count alike (as the original
OpenAI implementation stored them), so the rounding never breaks bit-identity; centred ranks
only need the order, which float32 keeps for any two returns that differ in their 7th digit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from es.parallel.comm import Comm


def static_share(rank: int, size: int, population: int, mirrored: bool) -> np.ndarray:
    """The members ``rank`` evaluates under the static schedule: a round-robin share of the
    directions, a mirrored pair kept together (one noise slice read for both) where the pairs
    divide evenly among the ranks; otherwise a round-robin share of the members, so that no
    rank plays more than one member more than another (ARS on Swimmer, one pair on two
    ranks, had one rank play both while the other waited)."""
    per_direction = 2 if mirrored and (population // 2) % size == 0 else 1
    directions = np.arange(rank, population // per_direction, size)
    return (directions[:, None] * per_direction + np.arange(per_direction)).ravel()


def round_robin(count: int, size: int) -> list[range]:
    """Items ``0..count-1`` dealt to ``size`` ranks in turn: rank r gets r, r + size, ..."""
    return [range(rank, count, size) for rank in range(size)]


def spread(comm: Comm, count: int, value_of: Callable[[int], float]) -> np.ndarray:
    """``value_of(i)`` for every item ``i < count``, each rank computing its round-robin
    share; every rank gets all the values, in item order, from one gather."""
    shares = round_robin(count, comm.size)
    mine = np.array([float(value_of(i)) for i in shares[comm.rank]], dtype=np.float64)
    return gather_in_order(comm, shares, mine)


def gather_in_order(comm: Comm, shares: Sequence[Sequence[int]], mine: np.ndarray) -> np.ndarray:
    """Each rank computed the items of its share (``shares[rank]``, known to all ranks);
    gather everyone's values and put them back in item order."""
    gathered = comm.allgather_rows(mine, counts=[len(share) for share in shares])
    ordered = np.empty_like(gathered)
    ordered[np.concatenate([np.asarray(share, dtype=np.int64) for share in shares])] = gathered
    return ordered


def share_side_results(comm: Comm, count: int, played: dict[int, float], steps: int,
                       seconds: tuple[float, float]) -> tuple[np.ndarray, int, np.ndarray]:
    """Returns of the ``count`` extra episodes a generation played beside its members (each
    played by one rank, ``played`` this rank's), in order on every rank, with the total of
    their steps: one float64 all-reduce where the other ranks add zeros, so every value
    arrives exactly. Beside them the ranks' mean of ``seconds`` (this rank's in evaluation and
    in confirmation episodes): what they cost the machine, where one rank may have played
    most of them (the dynamic schedule serves them first, to whoever asks)."""
    values = np.zeros(count + 3, dtype=np.float64)
    for unit, value in played.items():
        values[unit] = value
    values[count] = steps
    values[count + 1:] = seconds
    totals = comm.allreduce_sum(values)
    return totals[:count], int(totals[count]), totals[count + 1:] / comm.size


@dataclass
class GenerationResults:
    """Every member's return in member order (float32-rounded), and the merged totals."""

    returns: np.ndarray
    steps: int
    obs_increment: np.ndarray
    # The extra episodes played beside the members (a confirmation round), in order.
    side_returns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    side_steps: int = 0
    # The ranks' mean seconds in its evaluation and in its confirmation episodes.
    side_seconds: tuple[float, float] = (0.0, 0.0)


def share_results(
    comm: Comm,
    population: int,
    mirrored: bool,
    members: Sequence[int],
    returns: Sequence[float],
    steps: int,
    obs_increment: np.ndarray,
    dynamic: bool,
) -> GenerationResults:
    """Gather all members' returns on every rank and sum the steps and observation sums."""
    mine = np.asarray(returns, dtype=np.float32)
    if dynamic:
        rows = np.column_stack((np.asarray(members, dtype=np.float64), mine.astype(np.float64)))
        gathered = comm.allgather_rows(rows.reshape(-1, 2))
        order, values = gathered[:, 0], gathered[:, 1]
    else:
        shares = [static_share(rank, comm.size, population, mirrored) for rank in range(comm.size)]
        values = comm.allgather_rows(mine, counts=[len(share) for share in shares])
        order = np.concatenate(shares)
    if not np.array_equal(np.sort(order), np.arange(population)):
        raise RuntimeError("members missing after the gather: ranks disagree on the schedule")
    all_returns = np.empty(population, dtype=np.float64)
    all_returns[order.astype(np.int64)] = values
    totals = comm.allreduce_sum(np.concatenate(([steps], obs_increment)).astype(np.int64))
    return GenerationResults(all_returns, int(totals[0]), totals[1:])
