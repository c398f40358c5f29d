"""The DQN-Nature convolutional policy over one flat float32 parameter vector, with virtual BN.

Architecture (Mnih et al. 2015), on a stack of uint8 frames scaled by 1/255: conv 32 8x8 /4 → ReLU
→ conv 64 4x4 /2 → ReLU → conv 64 3x3 /1 → ReLU → dense 512 → ReLU → dense ``n_outputs`` (logits).
With ``vbn`` each hidden layer's pre-activations are normalised by virtual batch normalisation
(Salimans et al. 2016; used for Atari by Salimans et al. 2017): per channel (convolutions) or unit
(dense), ``(x - mean) / sqrt(var + eps) * gamma + beta``, the mean and variance taken over a fixed
reference batch pushed through the network with the *current* parameters (``vbn_statistics``).

Flat parameter layout, layer by layer in forward order (``ConvNetSpec.unpack`` returns views):

* each convolution: kernel ``(filters, kernel, kernel, in_channels)`` — one row per filter, its
  fan-in in (row, column, channel) order — then ``bias (filters,)``; with VBN, ``gamma (filters,)``
  and ``beta (filters,)`` instead of the bias (the mean subtraction would cancel it);
* the dense hidden layer: weight ``(dense, h * w * c)``, its inputs in (row, column, channel)
  order of the last convolution's output, then bias, or gamma and beta with VBN;
* the output layer: weight ``(n_outputs, dense)``, then bias ``(n_outputs,)``.

Speed: the network runs once per environment step with a batch of one, so ``bind`` does all the
per-parameter-vector work once (reordering kernels, folding the 1/255 pixel scale and the VBN affine
map into weights and biases, allocating buffers and strided window views), leaving per step one
gather and one BLAS matmul per layer. Activations are channels-last, so that a patch is a few
contiguous runs of channels; the first layer reads the frames through a space-to-depth gather
(each stride x stride pixel block becomes channels), which turns its 8x8 /4 convolution into a
2x2 /1 one over 64-float runs instead of 4-float ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Conv = tuple[int, int, int]  # (filters, kernel size, stride)
DQN_CONVS: tuple[Conv, ...] = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
#: Torsos by name: (convolutions, dense units). "nature": Mnih et al. 2015 (DQN); "small":
#: Mnih et al. 2013, the network A3C (Mnih et al. 2016) used, about a third of the compute.
TORSOS: dict[str, tuple[tuple[Conv, ...], int]] = {
    "nature": (DQN_CONVS, 512),
    "small": (((16, 8, 4), (32, 4, 2)), 256),
}
PIXEL_SCALE = 1 / 255


class LayerParams(NamedTuple):
    """One layer's views into the flat vector: ``bias`` on plain layers, ``gamma``/``beta`` on
    normalised ones (the others are None)."""

    weight: np.ndarray
    bias: np.ndarray | None
    gamma: np.ndarray | None
    beta: np.ndarray | None


class VBNStats(NamedTuple):
    """Reference-batch mean and variance (float64) of each hidden layer's pre-activations."""

    means: tuple[np.ndarray, ...]
    variances: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class ConvNetSpec:
    """Architecture of the convolutional policy; defaults are DQN-Nature with VBN on 4x84x84."""

    n_outputs: int  # number of discrete actions (logits)
    input_shape: tuple[int, int, int] = (4, 84, 84)  # (channels, height, width): a frame stack
    convs: tuple[Conv, ...] = DQN_CONVS  # (filters, kernel, stride) per layer; valid padding
    dense: int = 512  # units of the hidden dense layer
    vbn: bool = True  # virtual batch normalisation of every hidden layer
    vbn_eps: float = 1e-5  # added to the variance before the square root
    #: VBN's reference batch of observations, once collected (the trainer's, es-eval's).
    reference: np.ndarray | None = field(default=None, compare=False, repr=False)
    discrete = True  # the interface es.rl.policies.PolicySpec shares: logits of discrete actions

    def __post_init__(self) -> None:
        if self.n_outputs < 1 or self.dense < 1:
            raise ValueError(f"n_outputs {self.n_outputs} and dense {self.dense} must be >= 1")
        if not self.convs or any(min(conv) < 1 for conv in self.convs):
            raise ValueError(f"convs {self.convs}: need at least one, all sizes >= 1")
        _, kernel, stride = self.convs[0]
        if kernel % stride:
            raise ValueError(f"first convolution: kernel {kernel} must be a multiple of the "
                             f"stride {stride} (its input is read as stride x stride blocks)")
        if any(min(height, width) < 1 for height, width, _ in self.feature_maps):
            raise ValueError(f"input {self.input_shape} is too small for convs {self.convs}")

    @property
    def obs_dim(self) -> int:
        return math.prod(self.input_shape)

    def bind(self, params: np.ndarray, norm: object = None) -> Callable[[np.ndarray], int]:
        """The episode's greedy ``observation -> action`` (the policy protocol's fast path,
        ``es.rl.policy``): VBN statistics of ``params`` from the reference batch, once. Pixels
        are scaled by 1/255 inside; ``norm`` is not used."""
        if self.vbn and self.reference is None:
            raise ValueError("a CNN with VBN needs its reference batch")
        stats = vbn_statistics(self, params, self.reference) if self.vbn else None
        return act_fn(self, params, stats)

    def act(self, params: np.ndarray, observation: np.ndarray, state: None = None
            ) -> tuple[int, None]:
        """The policy protocol's ``act``: one greedy action (no state)."""
        return self.bind(params)(observation), None

    @property
    def act_dim(self) -> int:
        return self.n_outputs

    @property
    def feature_maps(self) -> list[tuple[int, int, int]]:
        """(height, width, channels) of each convolution's output."""
        _, height, width = self.input_shape
        maps = []
        for filters, kernel, stride in self.convs:
            height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
            maps.append((height, width, filters))
        return maps

    @property
    def weight_shapes(self) -> list[tuple[int, ...]]:
        """(out, *fan_in) of each layer's weight, in forward order."""
        channels = self.input_shape[0]
        shapes: list[tuple[int, ...]] = []
        for filters, kernel, _ in self.convs:
            shapes.append((filters, kernel, kernel, channels))
            channels = filters
        height, width, channels = self.feature_maps[-1]
        return [*shapes, (self.dense, height * width * channels), (self.n_outputs, self.dense)]

    @property
    def num_params(self) -> int:
        shapes = self.weight_shapes
        return sum(math.prod(shape) + shape[0] * (2 if self._normalised(i, len(shapes)) else 1)
                   for i, shape in enumerate(shapes))

    def _normalised(self, layer: int, num_layers: int) -> bool:
        return self.vbn and layer < num_layers - 1

    def initial_params(self, rng: np.random.Generator) -> np.ndarray:
        """Gaussian rows normalised to norm sqrt(2) (He-like for ReLU), 0.01 on the output layer
        so the first policies are near-uniform; biases and beta 0, gamma 1."""
        shapes = self.weight_shapes
        chunks = []
        for index, shape in enumerate(shapes):
            out = shape[0]
            gain = 0.01 if index == len(shapes) - 1 else math.sqrt(2)
            weights = rng.standard_normal((out, math.prod(shape[1:])))
            weights *= gain / np.linalg.norm(weights, axis=1, keepdims=True)
            chunks.append(weights.ravel())
            normalised = self._normalised(index, len(shapes))
            chunks += [np.ones(out), np.zeros(out)] if normalised else [np.zeros(out)]
        return np.concatenate(chunks).astype(np.float32)

    def unpack(self, params: np.ndarray) -> list[LayerParams]:
        """Views (no copies, for a contiguous vector) of each layer's tensors, in layout order."""
        if params.ndim != 1 or params.size != self.num_params:
            raise ValueError(f"parameter vector of shape {params.shape} given, the network "
                             f"{self} has {self.num_params} parameters")
        shapes = self.weight_shapes
        layers, start = [], 0

        def take(shape: tuple[int, ...]) -> np.ndarray:
            nonlocal start
            start += math.prod(shape)
            return params[start - math.prod(shape) : start].reshape(shape)

        for index, shape in enumerate(shapes):
            weight, out = take(shape), (shape[0],)
            if self._normalised(index, len(shapes)):
                layers.append(LayerParams(weight, None, take(out), take(out)))
            else:
                layers.append(LayerParams(weight, take(out), None, None))
        return layers


def vbn_statistics(spec: ConvNetSpec, params: np.ndarray, reference_batch: np.ndarray) -> VBNStats:
    """Mean and variance of each hidden layer's pre-activations over the reference batch.

    Layer by layer: each layer's statistics are taken on its pre-activations computed from the
    previous layer's *normalised* outputs, as virtual batch norm does. Deterministic: the same
    (params, batch) give the same bits (one BLAS library and CPU kind assumed), so every rank
    evaluating a member normalises it identically. Costs about one batched forward pass.
    """
    if not spec.vbn:
        raise ValueError("vbn_statistics needs a spec with vbn=True")
    layers = spec.unpack(np.asarray(params, dtype=np.float32))
    plan = _Plan(spec, _matrices(spec, layers), batch=len(reference_batch))
    plan.load(reference_batch)
    means, variances = [], []
    for stage, layer in zip(plan.stages[:-1], layers[:-1], strict=True):
        z = stage.preactivation()
        mean = z.mean(axis=0, dtype=np.float64)
        variance = np.square(z - mean).mean(axis=0)
        scale, shift = _vbn_affine(layer, mean, variance, spec.vbn_eps)
        z *= scale
        z += shift
        np.maximum(z, 0, out=z)
        means.append(mean)
        variances.append(variance)
    return VBNStats(tuple(means), tuple(variances))


def bind(spec: ConvNetSpec, params: np.ndarray,
         vbn_stats: VBNStats | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """The network as a fast function of one observation ``(C, H, W)`` to its logits.

    Call once per parameter vector (per episode); later changes to ``params`` do not reach the
    function. It owns its buffers, so it is not thread-safe; its result is a fresh array.
    """
    matrices, biases = _folded_layers(spec, params, vbn_stats)
    plan = _Plan(spec, matrices, batch=1)
    return lambda observation: plan.run(observation[np.newaxis], biases)[0].copy()


def forward(spec: ConvNetSpec, params: np.ndarray, observations: np.ndarray,
            vbn_stats: VBNStats | None = None) -> np.ndarray:
    """Logits ``(B, n_outputs)`` of a batch of observations ``(B, C, H, W)``."""
    matrices, biases = _folded_layers(spec, params, vbn_stats)
    return _Plan(spec, matrices, batch=len(observations)).run(observations, biases)


def act_fn(spec: ConvNetSpec, params: np.ndarray,
           vbn_stats: VBNStats | None = None) -> Callable[[np.ndarray], int]:
    """Greedy discrete action (argmax of the logits) of one observation, as ``policies.act_fn``."""
    logits = bind(spec, params, vbn_stats)
    return lambda observation: int(np.argmax(logits(observation)))


def _vbn_affine(layer: LayerParams, mean: np.ndarray, variance: np.ndarray,
                eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``scale, shift`` with ``normalised = z * scale + shift``, in float32."""
    scale = layer.gamma / np.sqrt(variance + eps)
    return scale.astype(np.float32), (layer.beta - mean * scale).astype(np.float32)


def _matrices(spec: ConvNetSpec, layers: list[LayerParams]) -> list[np.ndarray]:
    """Each layer's weight as a (fan_in, out) matrix in the order ``_Plan`` gathers patches.

    The first kernel is reordered to the space-to-depth patch order (block row, block column,
    row in block, column in block, channel) and takes the 1/255 pixel scale.
    """
    filters, kernel, stride = spec.convs[0]
    blocks = kernel // stride
    first = layers[0].weight.reshape(filters, blocks, stride, blocks, stride, -1)
    first = first.transpose(0, 1, 3, 2, 4, 5) * np.float32(PIXEL_SCALE)
    rows = [first.reshape(filters, -1)]
    rows += [layer.weight.reshape(len(layer.weight), -1) for layer in layers[1:]]
    return [matrix.T for matrix in rows]


def _folded_layers(spec: ConvNetSpec, params: np.ndarray,
                   vbn_stats: VBNStats | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Matrices and biases with VBN folded in: ``(x @ W - m) * s + b == x @ (W * s) + (b - m s)``,
    so a normalised layer costs nothing extra per step."""
    if spec.vbn != (vbn_stats is not None):
        raise ValueError("a spec with vbn=True needs vbn_stats (see vbn_statistics), "
                         "one with vbn=False takes none")
    layers = spec.unpack(np.array(params, dtype=np.float32))  # a snapshot: callers reuse buffers
    matrices = _matrices(spec, layers)
    if vbn_stats is None:
        return matrices, [layer.bias for layer in layers]
    biases = []
    for index, (mean, variance) in enumerate(zip(*vbn_stats, strict=True)):
        scale, shift = _vbn_affine(layers[index], mean, variance, spec.vbn_eps)
        matrices[index] = matrices[index] * scale
        biases.append(shift)
    return matrices, [*biases, layers[-1].bias]


class _Stage:
    """One layer's matmul on preallocated buffers; a convolution first copies its input's patches
    (read through a strided window view made once) into a contiguous patch matrix."""

    def __init__(self, inputs: np.ndarray, matrix: np.ndarray, window: tuple[int, int] | None):
        self.matrix = matrix
        if window is None:  # dense: inputs are (batch, fan_in) already
            self.windows, self.patches, rows = None, inputs, inputs.shape[0]
        else:
            kernel, stride = window
            view = sliding_window_view(inputs, (kernel, kernel), axis=(1, 2))[:, ::stride, ::stride]
            self.windows = view.transpose(0, 1, 2, 4, 5, 3)  # patch order (row, column, channel)
            self.patches = np.empty(self.windows.shape, np.float32)
            rows = math.prod(self.windows.shape[:3])
        self.patch_matrix = self.patches.reshape(rows, matrix.shape[0])
        self.output = np.empty((rows, matrix.shape[1]), np.float32)

    def preactivation(self) -> np.ndarray:
        if self.windows is not None:
            np.copyto(self.patches, self.windows)
        return np.matmul(self.patch_matrix, self.matrix, out=self.output)


class _Plan:
    """The network for one batch size: buffers, window views and the input gather, made once."""

    def __init__(self, spec: ConvNetSpec, matrices: list[np.ndarray], batch: int):
        self.input_shape = (batch, *spec.input_shape)
        self.gather = _space_to_depth_index(spec)
        self.blocks = np.empty((batch, *self.gather.shape), np.float32)
        _, kernel, stride = spec.convs[0]
        windows = [(kernel // stride, 1)] + [(k, s) for _, k, s in spec.convs[1:]]
        inputs, self.stages = self.blocks, []
        for window, matrix, (height, width, filters) in zip(
                windows, matrices[: len(windows)], spec.feature_maps, strict=True):
            self.stages.append(_Stage(inputs, matrix, window))
            inputs = self.stages[-1].output.reshape(batch, height, width, filters)
        inputs = inputs.reshape(batch, -1)
        for matrix in matrices[len(windows):]:
            self.stages.append(_Stage(inputs, matrix, None))
            inputs = self.stages[-1].output

    def load(self, observations: np.ndarray) -> None:
        """Gather the frames into channels-last space-to-depth blocks, as float32."""
        if observations.shape != self.input_shape:
            raise ValueError(f"observations of shape {observations.shape}, "
                             f"expected {self.input_shape}")
        flat = observations.reshape(len(observations), -1)
        np.copyto(self.blocks, flat.take(self.gather, axis=1))

    def run(self, observations: np.ndarray, biases: list[np.ndarray]) -> np.ndarray:
        """Logits (batch, n_outputs), in the plan's own output buffer."""
        self.load(observations)
        for stage, bias in zip(self.stages[:-1], biases[:-1], strict=True):
            z = stage.preactivation()
            z += bias
            np.maximum(z, 0, out=z)
        z = self.stages[-1].preactivation()
        z += biases[-1]
        return z


def _space_to_depth_index(spec: ConvNetSpec) -> np.ndarray:
    """Flat indices into one observation giving ``(H / s, W / s, s * s * C)`` blocks, pixels
    outside every window of the first convolution left out."""
    channels, height, width = spec.input_shape
    _, kernel, stride = spec.convs[0]
    rows, cols, _ = spec.feature_maps[0]
    used_h, used_w = (rows - 1) * stride + kernel, (cols - 1) * stride + kernel
    index = np.arange(channels * height * width).reshape(channels, height, width)
    index = index[:, :used_h, :used_w].reshape(
        channels, used_h // stride, stride, used_w // stride, stride)
    return index.transpose(1, 3, 2, 4, 0).reshape(used_h // stride, used_w // stride, -1)
