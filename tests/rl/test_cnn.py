"""The convolutional policy against references written independently: explicit loops on a small
network, einsum over strided windows at the full DQN size."""

import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from es.rl.cnn import ConvNetSpec, VBNStats, act_fn, bind, forward, vbn_statistics

SMALL_CONVS = ((8, 8, 4), (16, 4, 2), (16, 3, 1))
EPS = 1e-5


def small_spec(vbn: bool, input_shape: tuple[int, int, int] = (4, 36, 36)) -> ConvNetSpec:
    return ConvNetSpec(5, input_shape, SMALL_CONVS, dense=32, vbn=vbn, vbn_eps=EPS)


def random_params(spec: ConvNetSpec, rng: np.random.Generator) -> np.ndarray:
    """Every tensor random (not the initialisation's zeros and ones), so all of them matter."""
    params = np.empty(spec.num_params, np.float32)
    for weight, bias, gamma, beta in spec.unpack(params):
        fan_in = math.prod(weight.shape[1:])
        weight[...] = rng.standard_normal(weight.shape) * np.sqrt(2 / fan_in)
        for shift in (bias, beta):
            if shift is not None:
                shift[...] = 0.2 * rng.standard_normal(shift.shape)
        if gamma is not None:
            gamma[...] = 1 + 0.2 * rng.standard_normal(gamma.shape)
    return params


def frames(rng: np.random.Generator, count: int, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 256, (count, *shape), dtype=np.uint8)


def naive_conv(image: np.ndarray, kernel: np.ndarray, stride: int) -> np.ndarray:
    """image (C, H, W), kernel (O, k, k, C) -> (O, h, w), one dot product per output value."""
    filters, size = kernel.shape[0], kernel.shape[1]
    height = (image.shape[1] - size) // stride + 1
    width = (image.shape[2] - size) // stride + 1
    out = np.zeros((filters, height, width))
    for o in range(filters):
        for i in range(height):
            for j in range(width):
                for c in range(image.shape[0]):
                    patch = image[c, i * stride : i * stride + size, j * stride : j * stride + size]
                    out[o, i, j] += np.sum(patch * kernel[o, :, :, c])
    return out


def einsum_conv(image: np.ndarray, kernel: np.ndarray, stride: int) -> np.ndarray:
    size = kernel.shape[1]
    windows = sliding_window_view(image, (size, size), axis=(1, 2))[:, ::stride, ::stride]
    return np.einsum("chwij,oijc->ohw", windows, kernel)


def reference_forward(spec, params, batch, stats=None, conv=naive_conv):
    """Float64 forward of a batch (B, C, H, W), channels first: every layer's pre-activations, the
    logits and the VBN statistics used. With VBN and no ``stats`` the batch is its own reference
    batch: each hidden layer is normalised with the moments of its own pre-activations."""
    layers = spec.unpack(params.astype(np.float64))
    x = batch.astype(np.float64) / 255
    preactivations, means, variances = [], [], []
    for index, (weight, bias, gamma, beta) in enumerate(layers):
        if index < len(spec.convs):
            z = np.stack([conv(image, weight, spec.convs[index][2]) for image in x])
        else:
            if x.ndim == 4:  # flatten in (row, column, channel) order, as the layout says
                x = x.transpose(0, 2, 3, 1).reshape(len(x), -1)
            z = x @ weight.T
        preactivations.append(z)
        if index == len(layers) - 1:
            return preactivations, z + bias, VBNStats(tuple(means), tuple(variances))
        channel = (None, slice(None)) + (None,) * (z.ndim - 2)
        if gamma is None:
            x = z + bias[channel]
        else:
            axes = (0, 2, 3) if z.ndim == 4 else (0,)
            if stats is None:
                mean, variance = z.mean(axis=axes), z.var(axis=axes)
            else:
                mean, variance = stats.means[index], stats.variances[index]
            means.append(mean)
            variances.append(variance)
            x = (z - mean[channel]) / np.sqrt(variance + EPS)[channel] * gamma[channel]
            x += beta[channel]
        x = np.maximum(x, 0)


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def test_dqn_parameter_count_and_layout_shapes():
    spec = ConvNetSpec(6)
    assert spec.feature_maps == [(20, 20, 32), (9, 9, 64), (7, 7, 64)]
    assert spec.weight_shapes == [(32, 8, 8, 4), (64, 4, 4, 32), (64, 3, 3, 64), (512, 3136),
                                  (6, 512)]
    weights = 32 * 256 + 64 * 512 + 64 * 576 + 512 * 3136 + 6 * 512
    assert ConvNetSpec(6, vbn=False).num_params == weights + 32 + 64 + 64 + 512 + 6
    assert spec.num_params == weights + 2 * (32 + 64 + 64 + 512) + 6


@pytest.mark.parametrize("vbn", [True, False])
def test_unpack_returns_views_covering_the_vector_in_order(vbn):
    spec = small_spec(vbn)
    params = np.arange(spec.num_params, dtype=np.float32)
    tensors = [t for layer in spec.unpack(params) for t in layer if t is not None]
    assert sum(t.size for t in tensors) == spec.num_params
    assert all(np.shares_memory(t, params) for t in tensors)
    starts = np.cumsum([0] + [t.size for t in tensors[:-1]])
    assert [int(t.ravel()[0]) for t in tensors] == starts.tolist()  # laid out in order
    layers = spec.unpack(params)
    assert (layers[0].bias is None) == vbn and (layers[0].gamma is None) != vbn
    assert layers[-1].bias is not None and layers[-1].gamma is None
    layers[1].weight[0, 0, 0, 0] = -1.0
    assert params[sum(t.size for t in layers[0] if t is not None)] == -1.0


def test_bad_parameter_count_or_spec_raises_clearly():
    spec = small_spec(vbn=True)
    with pytest.raises(ValueError, match=f"has {spec.num_params} parameters"):
        spec.unpack(np.zeros(spec.num_params - 1, np.float32))
    with pytest.raises(ValueError, match="parameters"):
        bind(small_spec(vbn=False), np.zeros(spec.num_params, np.float32))
    with pytest.raises(ValueError, match="too small"):
        ConvNetSpec(3, (4, 20, 20))
    with pytest.raises(ValueError, match="multiple of the stride"):
        ConvNetSpec(3, convs=((32, 6, 4),))


def test_vbn_needs_statistics_and_observations_need_the_right_shape():
    rng = np.random.default_rng(0)
    spec = small_spec(vbn=True)
    params = random_params(spec, rng)
    with pytest.raises(ValueError, match="needs vbn_stats"):
        bind(spec, params)
    with pytest.raises(ValueError, match="vbn=True"):
        vbn_statistics(small_spec(vbn=False), params, frames(rng, 2, spec.input_shape))
    logits = bind(spec, params, vbn_statistics(spec, params, frames(rng, 4, spec.input_shape)))
    with pytest.raises(ValueError, match="expected"):
        logits(frames(rng, 1, (36, 36, 4))[0])


def test_initial_params_are_he_scaled_rows_with_a_small_output_layer():
    spec = small_spec(vbn=True)
    layers = spec.unpack(spec.initial_params(np.random.default_rng(0)))
    for layer in layers[:-1]:
        norms = np.linalg.norm(layer.weight.reshape(len(layer.weight), -1), axis=1)
        np.testing.assert_allclose(norms, np.sqrt(2), rtol=1e-6)
        assert np.all(layer.gamma == 1) and np.all(layer.beta == 0)
    np.testing.assert_allclose(np.linalg.norm(layers[-1].weight, axis=1), 0.01, rtol=1e-6)
    assert np.all(layers[-1].bias == 0)


@pytest.mark.parametrize("input_shape", [(4, 36, 36), (3, 38, 45)])  # 38, 45: cropped, not square
@pytest.mark.parametrize("vbn", [True, False])
def test_forward_matches_naive_loops_and_batch_matches_single(vbn, input_shape):
    rng = np.random.default_rng(1)
    spec = small_spec(vbn, input_shape)
    params = random_params(spec, rng)
    stats = vbn_statistics(spec, params, frames(rng, 8, input_shape)) if vbn else None
    observations = frames(rng, 3, input_shape)
    logits = bind(spec, params, stats)
    single = np.stack([logits(obs) for obs in observations])
    assert single.dtype == np.float32 and single.shape == (3, spec.n_outputs)
    want = reference_forward(spec, params, observations, stats)[1]
    assert_close(single, want)
    assert_close(forward(spec, params, observations, stats), single)
    assert act_fn(spec, params, stats)(observations[0]) == int(np.argmax(single[0]))


def test_vbn_statistics_match_naive_loops_and_are_deterministic():
    rng = np.random.default_rng(2)
    spec = small_spec(vbn=True, input_shape=(3, 38, 45))
    params = random_params(spec, rng)
    batch = frames(rng, 8, spec.input_shape)
    stats = vbn_statistics(spec, params, batch)
    again = vbn_statistics(spec, params.copy(), batch.copy())
    for got, same in zip(stats.means + stats.variances, again.means + again.variances,
                         strict=True):
        assert got.tobytes() == same.tobytes()
    want = reference_forward(spec, params, batch)[2]
    for got, expected in zip(stats.means + stats.variances, want.means + want.variances,
                             strict=True):
        assert_close(got, expected)


def test_vbn_normalises_the_reference_batch_to_zero_mean_unit_variance():
    rng = np.random.default_rng(3)
    spec = small_spec(vbn=True)
    params = random_params(spec, rng)
    for layer in spec.unpack(params)[:-1]:
        layer.gamma[...], layer.beta[...] = 1, 0
    batch = frames(rng, 12, spec.input_shape)
    stats = vbn_statistics(spec, params, batch)
    preactivations = reference_forward(spec, params, batch, stats)[0]
    for z, mean, variance in zip(preactivations, *stats, strict=False):
        axes = (0, 2, 3) if z.ndim == 4 else (0,)
        channel = (None, slice(None)) + (None,) * (z.ndim - 2)
        normalised = (z - mean[channel]) / np.sqrt(variance + EPS)[channel]
        np.testing.assert_allclose(normalised.mean(axis=axes), 0, atol=1e-4)
        np.testing.assert_allclose(normalised.var(axis=axes), 1, atol=1e-3)


def test_full_dqn_size_matches_an_einsum_reference():
    rng = np.random.default_rng(4)
    spec = ConvNetSpec(6)
    params = random_params(spec, rng)
    batch = frames(rng, 4, spec.input_shape)
    stats = vbn_statistics(spec, params, batch)
    want = reference_forward(spec, params, batch, conv=einsum_conv)[2]
    for got, expected in zip(stats.means + stats.variances, want.means + want.variances,
                             strict=True):
        assert_close(got, expected)
    observations = frames(rng, 2, spec.input_shape)
    want_logits = reference_forward(spec, params, observations, stats, einsum_conv)[1]
    logits = bind(spec, params, stats)
    assert_close(np.stack([logits(obs) for obs in observations]), want_logits)


def test_bound_function_keeps_the_parameters_it_was_given():
    rng = np.random.default_rng(5)
    spec = small_spec(vbn=False)
    params = random_params(spec, rng)
    observation = frames(rng, 1, spec.input_shape)[0]
    logits = bind(spec, params)
    before = logits(observation)
    params *= 2  # a trainer may reuse one buffer for every perturbed vector
    assert np.array_equal(logits(observation), before)
