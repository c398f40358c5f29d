"""A small NumPy neural-network core with backpropagation, for the gradient baselines.

Networks are ``es.rl.policies.PolicySpec`` MLPs, or ``es.rl.cnn.ConvNetSpec`` CNNs without VBN,
over one flat parameter vector in the same layout as the ES policies (per layer: weights then
bias), so a trained Q-network or policy network is saved with ``es.rl.checkpoint.save_policy``
and played by ``es-eval`` exactly as an ES policy is. Forward passes take a batch;
``backward`` returns the gradient of a scalar loss with respect to the flat vector (a
convolution is an im2col matmul, its input gradient a col2im scatter-add). Losses return
``(loss, dloss/doutput)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from es.rl.cnn import PIXEL_SCALE, ConvNetSpec
from es.rl.policies import PolicySpec


@dataclass
class Trace:
    """What ``backward`` needs from a forward pass: the matrix each layer multiplied (its input,
    or for a convolution its patch matrix), each layer's output after the activation, and the
    convolutions' input shapes ``(B, H, W, C)``."""

    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    conv_inputs: list[tuple[int, ...]] = field(default_factory=list)


Network = PolicySpec | ConvNetSpec


def _layers(spec: Network, params: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each layer as ``(weight matrix (out, fan_in), bias)``, views into ``params``."""
    if isinstance(spec, ConvNetSpec):
        if spec.vbn:
            raise ValueError("backprop through virtual batch norm is not supported: the "
                             "baselines train CNNs with policy.vbn = false")
        return [(layer.weight.reshape(len(layer.weight), -1), layer.bias)
                for layer in spec.unpack(params)]
    return spec.unpack(params)


def _activate(spec: Network, z: np.ndarray) -> np.ndarray:
    if isinstance(spec, PolicySpec) and spec.activation == "tanh":
        return np.tanh(z)
    return np.maximum(z, 0)  # ReLU: the MLP's option, and the CNN's torso


def _activation_grad(spec: Network, out: np.ndarray, delta: np.ndarray) -> np.ndarray:
    if isinstance(spec, PolicySpec) and spec.activation == "tanh":
        return delta * (1 - out * out)
    return delta * (out > 0)


def _patches(h: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """im2col: ``(B, Ho, Wo, k, k, C)`` windows of a channels-last batch, one row per output
    position, fan-in in (row, column, channel) order as ``es.rl.cnn`` lays kernels out."""
    view = sliding_window_view(h, (kernel, kernel), axis=(1, 2))[:, ::stride, ::stride]
    return np.ascontiguousarray(view.transpose(0, 1, 2, 4, 5, 3))


def forward(spec: Network, params: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, Trace]:
    """Outputs ``(B, act_dim)`` (logits, Q-values or action means) of a batch: ``(B, obs_dim)``
    for an MLP, frame stacks ``(B, C, H, W)`` of raw pixels for a CNN (scaled by 1/255, as
    ``es.rl.cnn`` does)."""
    layers = _layers(spec, params)
    trace = Trace([], [])
    h = np.asarray(x, dtype=params.dtype)
    convs: tuple = ()
    if isinstance(spec, ConvNetSpec):
        convs = spec.convs
        h = np.moveaxis(h.reshape(len(h), *spec.input_shape), 1, -1) * PIXEL_SCALE
    else:
        h = h.reshape(len(h), -1)
    for index, (weights, bias) in enumerate(layers):
        if index < len(convs):
            _, kernel, stride = convs[index]
            trace.conv_inputs.append(h.shape)
            patches = _patches(h, kernel, stride)
            positions = patches.shape[:3]  # (B, Ho, Wo)
            matrix = patches.reshape(-1, weights.shape[1])
        else:
            matrix = h.reshape(len(h), -1)
        trace.inputs.append(matrix)
        z = matrix @ weights.T + bias
        if index < len(layers) - 1:
            z = _activate(spec, z)
        trace.outputs.append(z)
        h = z.reshape(*positions, -1) if index < len(convs) else z
    return h, trace


def trace_bytes_per_row(spec: Network, params: np.ndarray) -> int:
    """What one observation's forward pass keeps for ``backward`` (a convolution's patch
    matrix dwarfs its input): the bound on how many rows one pass may take."""
    _, trace = forward(spec, params, np.zeros((1, spec.obs_dim), dtype=np.uint8))
    return sum(array.nbytes for array in (*trace.inputs, *trace.outputs))


def backward(spec: Network, params: np.ndarray, trace: Trace,
             grad_output: np.ndarray) -> np.ndarray:
    """d(loss)/d(params) given d(loss)/d(outputs) of the traced forward pass."""
    layers = _layers(spec, params)
    convs = spec.convs if isinstance(spec, ConvNetSpec) else ()
    grads: list[np.ndarray] = []
    delta = np.asarray(grad_output, dtype=params.dtype)
    for index in range(len(layers) - 1, -1, -1):
        out = trace.outputs[index]
        delta = delta.reshape(out.shape)
        if index < len(layers) - 1:  # through the activation
            delta = _activation_grad(spec, out, delta)
        weights, _ = layers[index]
        grads.append(delta.sum(axis=0))
        grads.append((delta.T @ trace.inputs[index]).ravel())
        if index == 0:
            break
        delta = delta @ weights  # d(loss)/d(this layer's input matrix)
        if index < len(convs):  # col2im: add each patch's gradient back onto its pixels
            _, kernel, stride = convs[index]
            shape = trace.conv_inputs[index]  # (B, H, W, C)
            image = np.zeros(shape, dtype=delta.dtype)
            height = (shape[1] - kernel) // stride + 1
            width = (shape[2] - kernel) // stride + 1
            rows = delta.reshape(shape[0], height, width, kernel, kernel, shape[3])
            for i in range(kernel):
                for j in range(kernel):
                    image[:, i: i + stride * (height - 1) + 1: stride,
                          j: j + stride * (width - 1) + 1: stride] += rows[:, :, :, i, j]
            delta = image
    return np.concatenate(grads[::-1])


def initial_params(spec: PolicySpec, rng: np.random.Generator) -> np.ndarray:
    """The ES policies' initialisation (normalised rows, small last layer), float32: the
    computations run in the parameters' dtype, and float32 halves the matmul time."""
    return spec.initial_params(rng)


def orthogonal_params(spec: PolicySpec, rng: np.random.Generator,
                      output_gain: float) -> np.ndarray:
    """PPO's initialisation (Saxe et al. 2014; as OpenAI baselines and cleanrl): each weight
    matrix a random (semi-)orthogonal one scaled by sqrt(2) (tanh/ReLU layers) or
    ``output_gain`` (the last), zero biases, float64."""
    chunks = []
    for index, (out, inp) in enumerate(spec.layer_shapes):
        gain = output_gain if index == len(spec.layer_shapes) - 1 else np.sqrt(2.0)
        q, r = np.linalg.qr(rng.standard_normal((max(out, inp), min(out, inp))))
        q *= np.sign(np.diag(r))  # a uniformly distributed orthogonal matrix (Mezzadri 2007)
        weights = q if out >= inp else q.T
        chunks += [gain * weights.ravel(), np.zeros(out)]
    return np.concatenate(chunks)


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
