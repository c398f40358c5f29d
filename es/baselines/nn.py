"""A small NumPy neural-network core with backpropagation, for the gradient baselines.

Networks are ``es.policies.PolicySpec`` MLPs over one flat parameter vector in the same layout
as the ES policies (per layer: weights ``(out, in)`` then bias), so a trained Q-network or
policy network is saved with ``es.checkpoint.save_policy`` and played by ``es-eval`` exactly
as an ES policy is. Forward passes take a batch ``(B, in)``; ``backward`` returns the gradient
of a scalar loss with respect to the flat vector. Losses return ``(loss, dloss/doutput)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from es.policies import PolicySpec


@dataclass
class Trace:
    """What ``backward`` needs from a forward pass: each layer's input and output."""

    inputs: list[np.ndarray]
    outputs: list[np.ndarray]


def forward(spec: PolicySpec, params: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, Trace]:
    """Outputs ``(B, act_dim)`` (logits, Q-values or action means) of a batch ``(B, obs_dim)``."""
    layers = spec.unpack(params)
    trace = Trace([], [])
    h = np.asarray(x, dtype=params.dtype).reshape(len(x), -1)
    for index, (weights, bias) in enumerate(layers):
        trace.inputs.append(h)
        h = h @ weights.T + bias
        if index < len(layers) - 1:
            h = np.tanh(h) if spec.activation == "tanh" else np.maximum(h, 0)
        trace.outputs.append(h)
    return h, trace


def backward(spec: PolicySpec, params: np.ndarray, trace: Trace,
             grad_output: np.ndarray) -> np.ndarray:
    """d(loss)/d(params) given d(loss)/d(outputs) of the traced forward pass."""
    layers = spec.unpack(params)
    grads: list[np.ndarray] = []
    delta = np.asarray(grad_output, dtype=params.dtype)
    for index in range(len(layers) - 1, -1, -1):
        if index < len(layers) - 1:  # through the activation
            out = trace.outputs[index]
            delta = delta * (1 - out * out) if spec.activation == "tanh" else delta * (out > 0)
        weights, _ = layers[index]
        grads.append(delta.sum(axis=0))
        grads.append((delta.T @ trace.inputs[index]).ravel())
        delta = delta @ weights
    return np.concatenate(grads[::-1])


def initial_params(spec: PolicySpec, rng: np.random.Generator) -> np.ndarray:
    """The ES policies' initialisation (normalised rows, small last layer), float32: the
    computations run in the parameters' dtype, and float32 halves the matmul time."""
    return spec.initial_params(rng)


def mse(prediction: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean of ``(prediction - target)**2 / 2``."""
    error = prediction - target
    return float(0.5 * np.mean(error * error)), error / error.size


def huber(prediction: np.ndarray, target: np.ndarray,
          delta: float = 1.0) -> tuple[float, np.ndarray]:
    """Mean Huber loss (quadratic within ``delta``, linear beyond): DQN's clipped error."""
    error = prediction - target
    small = np.abs(error) <= delta
    loss = np.where(small, 0.5 * error * error, delta * (np.abs(error) - 0.5 * delta))
    grad = np.where(small, error, delta * np.sign(error))
    return float(np.mean(loss)), grad / error.size


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def categorical_log_prob(logits: np.ndarray, actions: np.ndarray,
                         weights: np.ndarray) -> tuple[float, np.ndarray]:
    """``sum_i weights_i * log pi(actions_i)`` and its gradient with respect to the logits."""
    log_probs = log_softmax(logits)
    rows = np.arange(len(actions))
    value = float(np.dot(weights, log_probs[rows, actions]))
    grad = -np.exp(log_probs) * weights[:, None]
    grad[rows, actions] += weights
    return value, grad


def gaussian_log_prob(mean: np.ndarray, log_std: np.ndarray, actions: np.ndarray,
                      weights: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``sum_i weights_i * log N(actions_i; mean_i, exp(log_std))`` and its gradients with
    respect to the means ``(B, A)`` and the state-independent ``log_std`` ``(A,)``."""
    z = (actions - mean) * np.exp(-log_std)
    per_sample = -0.5 * (z * z).sum(axis=1) - log_std.sum() - 0.5 * mean.shape[1] * np.log(
        2 * np.pi)
    value = float(np.dot(weights, per_sample))
    grad_mean = z * np.exp(-log_std) * weights[:, None]
    grad_log_std = ((z * z - 1) * weights[:, None]).sum(axis=0)
    return value, grad_mean, grad_log_std
