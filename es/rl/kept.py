"""The kept policy (``policy_best.npz``): which evaluated mean policy a run keeps, and how
its confirmation is scheduled.

An evaluation that beats the kept score *nominates* the mean policy: its parameters and
observation normalisation wait in a small pool (``run.best_pool``), best evaluation first.
Confirmation plays ``run.best_episodes`` fresh episodes (reset seeds of their own) in
rounds of ``CONFIRM_ROUND``; the trainer plays a round beside a generation's members while
the confirmations have cost at most ``run.best_share`` of the trained env steps, and
confirms the rest at every stop. A later, better nomination goes ahead of earlier ones, so
the share delays nominations but never starves the best of them. Every decision is a
function of the seeded episodes' returns and of step counts that do not depend on the rank
count, so the kept policy is the same on any number of ranks and after a resume.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from es.core.seeding import TAG_BEST, episode_seeds
from es.rl.policies import ObsNorm

#: Confirmation episodes per round: the unit of work a generation plays beside its members,
#: and, judged by the worst episode, how often a hopeless confirmation can end early.
CONFIRM_ROUND = 10


def policy_score(returns: np.ndarray, by: str) -> float:
    """A policy's score over episodes, as ``run.best_by`` names it: their mean, or the worst
    of them, which a policy that fails on a few starts loses. NaN if any episode failed."""
    if not np.isfinite(returns).all():
        return float("nan")
    return float(returns.mean() if by == "mean" else returns.min())


@dataclass(eq=False)
class Nomination:
    """A mean policy whose evaluation beat the kept score, waiting for its confirmation.
    Compared by identity: the pool asks whether this very nomination kept its place."""

    generation: int
    score: float  # its evaluation's score (run.best_by)
    params: np.ndarray
    norm: ObsNorm
    returns: list[float] = field(default_factory=list)  # confirmation episodes played so far


@dataclass
class Verdict:
    """What a round decided: ``confirmed`` is the nomination's confirmed score, if it is now
    the kept policy; ``ended`` says whether its confirmation is over either way."""

    nomination: Nomination
    confirmed: float | None
    ended: bool
    returns: np.ndarray  # all its confirmation episodes so far


class NominationPool:
    """The nominations waiting for confirmation, best evaluation first (the later, longer
    trained, generation first among equals), at most ``size`` of them."""

    def __init__(self, size: int, episodes: int, by: str, seed: int) -> None:
        self.size, self.episodes, self.by, self.seed = size, episodes, by, seed
        self.waiting: list[Nomination] = []

    def __bool__(self) -> bool:
        return bool(self.waiting)

    def copy(self) -> NominationPool:
        return copy.deepcopy(self)

    def nominate(self, nomination: Nomination, kept: float | None) -> bool:
        """Take ``nomination`` if its score beats the kept one and the pool has room for it
        (a full pool drops its worst for a better one)."""
        if not self.episodes or not np.isfinite(nomination.score):
            return False
        if kept is not None and nomination.score <= kept:
            return False
        self.waiting.append(nomination)
        self.waiting.sort(key=lambda n: (-n.score, -n.generation))
        del self.waiting[self.size:]
        return nomination in self.waiting

    def next_round(self, target: float = 0.0) -> tuple[Nomination, list[int]] | None:
        """The nomination to confirm next and the reset seeds of its next round: the one
        that may still score highest (``bound``). A begun confirmation waits while a better
        one goes: finishing the first one begun spent a 180-s HalfCheetah run's rounds on an
        early, poor policy, and the stop kept it. With a ``target`` (``run.target_score``),
        the nominations that may still reach it go first, the furthest confirmed of them
        first: the first to hold ends the run, whose stop then races the others, so
        finishing a begun one costs nothing in what is kept, and a run whose evaluations
        improve at every one is not kept from stopping by each overtaking the last."""
        if not self.waiting:
            return None
        reaching = [n for n in self.waiting if self.may_reach(n, target)]
        head = max(reaching, key=lambda n: (len(n.returns), self.bound(n), n.generation)) \
            if reaching else max(self.waiting, key=lambda n: (self.bound(n), n.generation))
        seeds = self.confirmation_seeds(head.generation)
        played = len(head.returns)
        return head, seeds[played:played + CONFIRM_ROUND]

    def confirmation_seeds(self, generation: int) -> list[int]:
        """The reset seeds of a generation's policy's confirmation episodes, in order."""
        return episode_seeds(self.seed, generation, self.episodes, TAG_BEST)

    def may_reach(self, nomination: Nomination, target: float) -> bool:
        """Whether a nomination may still score ``target`` (``run.target_score``; 0: none)."""
        return bool(target) and self.bound(nomination) >= target

    def bound(self, nomination: Nomination) -> float:
        """The most a nomination may still score: its evaluation's score before any
        confirmation episode; judged by the worst episode, its worst so far once begun (more
        episodes can only lower it); judged by the mean, its mean so far."""
        if not nomination.returns:
            return nomination.score
        return policy_score(np.array(nomination.returns), self.by)

    def record(self, nomination: Nomination, returns: np.ndarray,
               kept: float | None) -> Verdict:
        """Add a round's returns. A failed episode ends the confirmation, and so does,
        judged by the worst episode, one at or below the kept score (the policy cannot win);
        after ``episodes`` episodes the policy is kept if its score beats ``kept``. A new kept
        score drops the nominations it leaves behind."""
        nomination.returns.extend(float(r) for r in returns)
        played = np.array(nomination.returns)
        in_round = policy_score(np.asarray(returns, dtype=np.float64), self.by)
        hopeless = not np.isfinite(in_round) or (self.by == "worst" and kept is not None
                                                 and in_round <= kept)
        if not hopeless and played.size < self.episodes:
            return Verdict(nomination, None, False, played)
        self.waiting.remove(nomination)
        score = policy_score(played, self.by)
        if hopeless or (kept is not None and score <= kept):
            return Verdict(nomination, None, True, played)
        self.waiting = [n for n in self.waiting
                        if n.score > score and (self.by == "mean" or self.bound(n) > score)]
        return Verdict(nomination, score, True, played)
