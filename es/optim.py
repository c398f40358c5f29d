"""First-order optimizers over a flat parameter vector, as in Salimans et al. 2017.

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


def make_optimizer(name: str, dim: int, lr: float, momentum: float = 0.9) -> Optimizer:
    if name == "adam":
        return Adam(dim, lr)
    if name == "sgd":
        return SGD(dim, lr, momentum)
    raise ValueError(f"optimizer {name!r}: allowed are 'adam', 'sgd'")
