"""Every random draw is a pure function of (run seed, generation, index, purpose).

Nothing random depends on the rank, so any number of ranks draws the same numbers. The tags
keep streams for different purposes independent under the same seed.
"""

from __future__ import annotations

import numpy as np

TAG_TABLE = 0x7AB1E  # the noise table's contents
TAG_OFFSETS = 0x0FF5E7  # a generation's table offsets
TAG_DIRECTION = 0xD1EC  # a direction regenerated from its seed
TAG_ENV = 0xE2F  # training episodes' reset seeds
TAG_EVAL = 0xE7A1  # evaluation episodes' reset seeds
TAG_BEST = 0xBE57  # reset seeds of the episodes that confirm a new best policy
TAG_INIT = 0x1217  # initial parameters
TAG_ACTION_NOISE = 0xAC7  # Gaussian action noise of a training episode
TAG_VBN = 0xB47C  # the VBN reference batch: its episodes and random actions
TAG_CMA = 0xC3A  # pycma's samples (its randn) in the CMA adapter
TAG_MODULE = 0x70C4  # torch's generator while a user's factory builds its module

SEED_BOUND = 2**31 - 1


def generator(*key: int) -> np.random.Generator:
    """A generator that is a pure function of its integer key."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(k) for k in key])))


def episode_seeds(seed: int, generation: int, count: int, tag: int) -> list[int]:
    """Reset seeds for ``count`` episodes of one generation."""
    return [int(s) for s in generator(seed, generation, tag).integers(0, SEED_BOUND, size=count)]
