"""The baselines' NumPy network core against central finite differences."""

import numpy as np
import pytest
from conftest import numeric_grad

from es.baselines import nn
from es.rl.policies import PolicySpec


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("hidden", [(), (7,), (6, 5)])
def test_backward_matches_finite_differences(activation, hidden):
    rng = np.random.default_rng(0)
    spec = PolicySpec("mlp" if hidden else "linear", 4, 3, True, hidden, activation)
    assert_backward_matches(spec, rng.standard_normal(spec.num_params),
                            rng.standard_normal((9, 4)), rng, rtol=1e-6)


def assert_backward_matches(spec, params, inputs, rng, rtol):
    """backward() of ``sum(weights * forward(params))`` against central differences."""
    weights = rng.standard_normal((len(inputs), spec.act_dim))

    def loss(p):
        out, _ = nn.forward(spec, p, inputs)
        return float(np.sum(weights * out))

    _, trace = nn.forward(spec, params, inputs)
    analytic = nn.backward(spec, params, trace, weights)
    np.testing.assert_allclose(analytic, numeric_grad(loss, params), rtol=rtol, atol=1e-7)


def test_forward_equals_the_es_policy_on_one_observation():
    from es.rl.policies import ObsNorm, act_fn

    rng = np.random.default_rng(1)
    spec = PolicySpec("mlp", 5, 2, False, (8,), "tanh", (-10.0,) * 2, (10.0,) * 2)
    params = rng.standard_normal(spec.num_params).astype(np.float32)
    obs = rng.standard_normal(5)
    act = act_fn(spec, params, ObsNorm.identity(5, float("inf")))
    out, _ = nn.forward(spec, params.astype(np.float64), obs[None])
    np.testing.assert_allclose(act(obs), out[0], rtol=1e-6)


def test_huber_gradient():
    rng = np.random.default_rng(2)
    prediction, target = 3 * rng.standard_normal(11), rng.standard_normal(11)
    _, grad = nn.huber(prediction, target)
    numeric = numeric_grad(lambda p: nn.huber(p, target)[0], prediction)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_huber_is_quadratic_inside_and_linear_outside():
    loss, _ = nn.huber(np.array([0.5, 3.0]), np.zeros(2), delta=1.0)
    assert loss == pytest.approx((0.125 + 2.5) / 2)


def test_categorical_log_prob_gradient():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 4))
    actions = rng.integers(0, 4, size=6)
    weights = rng.standard_normal(6)
    value, grad = nn.categorical_log_prob(logits, actions, weights)
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert value == pytest.approx(float(np.dot(weights, np.log(probs[np.arange(6), actions]))))
    numeric = numeric_grad(
        lambda flat: nn.categorical_log_prob(flat.reshape(6, 4), actions, weights)[0],
        logits.ravel())
    np.testing.assert_allclose(grad.ravel(), numeric, rtol=1e-5, atol=1e-8)


def test_gaussian_log_prob_gradients():
    rng = np.random.default_rng(4)
    mean, actions = rng.standard_normal((5, 2)), rng.standard_normal((5, 2))
    log_std, weights = np.array([-0.3, 0.2]), rng.standard_normal(5)
    value, grad_mean, grad_log_std = nn.gaussian_log_prob(mean, log_std, actions, weights)
    std = np.exp(log_std)
    density = np.exp(-0.5 * ((actions - mean) / std) ** 2) / (std * np.sqrt(2 * np.pi))
    assert value == pytest.approx(float(np.dot(weights, np.log(density).sum(axis=1))))
    numeric_mean = numeric_grad(
        lambda flat: nn.gaussian_log_prob(flat.reshape(5, 2), log_std, actions, weights)[0],
        mean.ravel())
    numeric_std = numeric_grad(
        lambda s: nn.gaussian_log_prob(mean, s, actions, weights)[0], log_std)
    np.testing.assert_allclose(grad_mean.ravel(), numeric_mean, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(grad_log_std, numeric_std, rtol=1e-5, atol=1e-8)


def tiny_cnn():
    from es.rl.cnn import ConvNetSpec

    return ConvNetSpec(n_outputs=3, input_shape=(2, 13, 11), convs=((3, 4, 2), (4, 3, 1)),
                       dense=5, vbn=False)


def test_cnn_forward_equals_the_es_policy_network():
    from es.rl.cnn import DQN_CONVS, ConvNetSpec
    from es.rl.cnn import forward as es_forward

    rng = np.random.default_rng(5)
    for spec in (tiny_cnn(), ConvNetSpec(4, (4, 84, 84), DQN_CONVS, 512, vbn=False)):
        params = spec.initial_params(rng)
        params[:] = rng.standard_normal(params.size).astype(np.float32) * 0.05
        frames = rng.integers(0, 256, size=(3, *spec.input_shape)).astype(np.uint8)
        ours, _ = nn.forward(spec, params.astype(np.float64), frames)
        np.testing.assert_allclose(ours, es_forward(spec, params, frames), rtol=1e-4,
                                   atol=1e-5)


def test_cnn_backward_matches_finite_differences():
    spec = tiny_cnn()
    rng = np.random.default_rng(6)
    frames = rng.integers(0, 256, size=(2, *spec.input_shape)).astype(np.float64)
    assert_backward_matches(spec, rng.standard_normal(spec.num_params) * 0.3, frames, rng,
                            rtol=1e-5)


def test_cnn_with_vbn_is_refused():
    from es.rl.cnn import ConvNetSpec

    spec = ConvNetSpec(2, (1, 8, 8), ((2, 4, 2),), 3, vbn=True)
    with pytest.raises(ValueError, match="policy.vbn = false"):
        nn.forward(spec, spec.initial_params(np.random.default_rng(0)), np.zeros((1, 1, 8, 8)))
