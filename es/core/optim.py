"""First-order optimizers over a flat parameter vector: Adam and SGD as in Salimans et al.
2017, ClipUp as in Toklu et al. 2020 (PGPE's default).

They *minimise*: ``step(grad)`` returns the increment to add to the parameters. Their whole
state is a few arrays and a counter (``state`` / ``load_state``) so a checkpoint can hold it.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Optimizer(Protocol):
    lr: float  # the strategy may change it between steps (step-size decay)

    def step(self, grad: np.ndarray) -> np.ndarray: ...
    def state(self) -> dict[str, np.ndarray]: ...
    def load_state(self, state: dict[str, np.ndarray]) -> None: ...


class Adam:
    """Adam (Kingma & Ba 2015) with the bias correction folded into the step size."""

    def __init__(
        self, dim: int, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ) -> None:
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m = np.zeros(dim, dtype=np.float32)
        self.v = np.zeros(dim, dtype=np.float32)
        self.t = 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        self.t += 1
        a = self.lr * np.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * (grad * grad)
        return (-a * self.m / (np.sqrt(self.v) + self.eps)).astype(np.float32)

    def state(self) -> dict[str, np.ndarray]:
        return {"m": self.m.copy(), "v": self.v.copy(), "t": np.array(self.t)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.m = np.asarray(state["m"], dtype=np.float32).copy()
        self.v = np.asarray(state["v"], dtype=np.float32).copy()
        self.t = int(state["t"])


class SGD:
    """SGD with momentum in the form the OpenAI ES starter used: v <- mu v + (1 - mu) g."""

    def __init__(self, dim: int, lr: float, momentum: float = 0.9) -> None:
        self.lr, self.momentum = lr, momentum
        self.velocity = np.zeros(dim, dtype=np.float32)
        self.t = 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        self.t += 1
        self.velocity = self.momentum * self.velocity + (1 - self.momentum) * grad
        return (-self.lr * self.velocity).astype(np.float32)

    def state(self) -> dict[str, np.ndarray]:
        return {"velocity": self.velocity.copy(), "t": np.array(self.t)}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.velocity = np.asarray(state["velocity"], dtype=np.float32).copy()
        self.t = int(state["t"])


class ClipUp:
    """ClipUp (Toklu, Liskowski, Srivastava 2020, "ClipUp: A Simple and Powerful
    Optimizer for Distribution-based Policy Evolution", PPSN XVI): heavy-ball momentum on the
    *normalised* gradient, with the velocity's norm clipped to ``max_speed``::

        v <- clip(momentum * v - lr * g / |g|, max_speed),    step = v

    The step length never depends on the gradient's scale (fitness shaping, sigma, population
    size), only on ``lr`` and ``max_speed``, which is what makes its hyper-parameters portable
    between problems. The paper suggests ``max_speed = 2 * lr``, the default here.
    Same interface as ``Adam``/``SGD``: it minimises, ``step(grad)`` returns the increment.
    """

    def __init__(
        self,
        dim: int,
        lr: float,
        momentum: float = 0.9,
        max_speed: float | None = None,
        dtype: type | np.dtype = np.float32,
    ) -> None:
        if not lr > 0:
            raise ValueError(f"lr {lr}: must be > 0")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum {momentum}: must be in [0, 1)")
        max_speed = 2.0 * lr if max_speed is None else float(max_speed)
        if not max_speed > 0:
            raise ValueError(f"max_speed {max_speed}: must be > 0")
        self.lr, self.momentum, self.max_speed = float(lr), float(momentum), max_speed
        self.velocity = np.zeros(dim, dtype=dtype)

    def step(self, grad: np.ndarray) -> np.ndarray:
        dtype = self.velocity.dtype
        grad = np.asarray(grad, dtype=dtype)
        norm = float(np.linalg.norm(grad))
        unit = grad / dtype.type(norm) if norm > 0 else np.zeros_like(grad)
        velocity = dtype.type(self.momentum) * self.velocity - dtype.type(self.lr) * unit
        speed = float(np.linalg.norm(velocity))
        if speed > self.max_speed:
            velocity = velocity * dtype.type(self.max_speed / speed)
        self.velocity = velocity
        return velocity.copy()

    def state(self) -> dict[str, np.ndarray]:
        return {"velocity": self.velocity.copy()}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        velocity = np.asarray(state["velocity"])
        if velocity.shape != self.velocity.shape:
            raise ValueError(f"the state holds a velocity of {velocity.size} values, the "
                             f"optimizer has {self.velocity.size}")
        self.velocity = velocity.astype(self.velocity.dtype)


def make_optimizer(
    name: str, dim: int, lr: float, momentum: float = 0.9, max_speed: float | None = None
) -> Optimizer:
    """``max_speed`` is ClipUp's (default ``2 * lr``); Adam and SGD ignore it."""
    if name == "adam":
        return Adam(dim, lr)
    if name == "sgd":
        return SGD(dim, lr, momentum)
    if name == "clipup":
        return ClipUp(dim, lr, momentum, max_speed)
    raise ValueError(f"optimizer {name!r}: allowed are 'adam', 'sgd', 'clipup'")
