"""A task that needs memory: CartPole-v1 with its two velocities hidden. The observation is
the cart's position and the pole's angle only; a policy must infer how fast they change from
what it saw before (a recurrent policy can, a feed-forward one cannot).

    env.id = "examples.memory:MaskedCartPole-v1"
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

VISIBLE = [0, 2]  # cart position, pole angle; hidden: cart velocity, pole angular velocity


class HideVelocities(gym.ObservationWrapper):
    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low[VISIBLE], space.high[VISIBLE],
                                                dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[VISIBLE]


def masked_cartpole(**kwargs: object) -> gym.Env:
    return HideVelocities(gym.make("CartPole-v1", **kwargs))


if "MaskedCartPole-v1" not in gym.registry:
    gym.register("MaskedCartPole-v1", entry_point=masked_cartpole, max_episode_steps=500,
                 reward_threshold=475.0)
