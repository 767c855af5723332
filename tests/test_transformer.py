"""nn.Transformer and its encoder/decoder layers against a numpy implementation of PyTorch's
definitions, with the same weights."""

import copy
import pickle

import numpy as np
import pytest

import lucid
import lucid.nn as nn


def _np(t):
    return t.detach().numpy().astype(np.float64)


def _layer_norm(x, ln):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + ln.eps) * _np(ln.weight) + _np(ln.bias)


def _mha(q_in, kv_in, mha, mask=None, key_padding=None):
    """[N, L, E] batch-first inputs; a float additive or bool (True = blocked) mask."""
    e, h = mha.embed_dim, mha.num_heads
    w, b = _np(mha.in_proj_weight), _np(mha.in_proj_bias)
    q = q_in @ w[:e].T + b[:e]
    k = kv_in @ w[e : 2 * e].T + b[e : 2 * e]
    v = kv_in @ w[2 * e :].T + b[2 * e :]
    n, l, s, d = q.shape[0], q.shape[1], k.shape[1], e // h
    q = q.reshape(n, l, h, d).transpose(0, 2, 1, 3)
    k = k.reshape(n, s, h, d).transpose(0, 2, 1, 3)
    v = v.reshape(n, s, h, d).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    if mask is not None:
        scores = np.where(mask, -np.inf, scores) if mask.dtype == bool else scores + mask
    if key_padding is not None:
        scores = np.where(key_padding[:, None, None, :], -np.inf, scores)
    scores = scores - scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(-1, keepdims=True)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(n, l, e)
    return out @ _np(mha.out_proj.weight).T + _np(mha.out_proj.bias)


def _ff(x, layer, act):
    hidden = act(x @ _np(layer.linear1.weight).T + _np(layer.linear1.bias))
    return hidden @ _np(layer.linear2.weight).T + _np(layer.linear2.bias)


_RELU = lambda x: np.maximum(x, 0)  # noqa: E731


def _encoder_layer(x, layer, mask=None, key_padding=None, act=_RELU):
    if layer.norm_first:
        y = _layer_norm(x, layer.norm1)
        x = x + _mha(y, y, layer.self_attn, mask, key_padding)
        return x + _ff(_layer_norm(x, layer.norm2), layer, act)
    x = _layer_norm(x + _mha(x, x, layer.self_attn, mask, key_padding), layer.norm1)
    return _layer_norm(x + _ff(x, layer, act), layer.norm2)


def _decoder_layer(x, mem, layer, tgt_mask=None, memory_key_padding=None):
    if layer.norm_first:
        y = _layer_norm(x, layer.norm1)
        x = x + _mha(y, y, layer.self_attn, tgt_mask)
        x = x + _mha(_layer_norm(x, layer.norm2), mem, layer.multihead_attn, None, memory_key_padding)
        return x + _ff(_layer_norm(x, layer.norm3), layer, _RELU)
    x = _layer_norm(x + _mha(x, x, layer.self_attn, tgt_mask), layer.norm1)
    x = _layer_norm(x + _mha(x, mem, layer.multihead_attn, None, memory_key_padding), layer.norm2)
    return _layer_norm(x + _ff(x, layer, _RELU), layer.norm3)


def _randomise(module, seed):
    rng = np.random.default_rng(seed)
    with lucid.no_grad():
        for p in module.parameters():
            p.copy_(lucid.tensor(rng.standard_normal(p.shape).astype(np.float32) * 0.3))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_matches_reference(norm_first, batch_first):
    lucid.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0, batch_first=batch_first, norm_first=norm_first
    ).eval()
    _randomise(layer, 1)
    x = np.random.default_rng(2).standard_normal((3, 5, 8)).astype(np.float32)  # [N, L, E]
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    pad = np.zeros((3, 5), bool)
    pad[1, 3:] = True
    src = lucid.tensor(x if batch_first else x.transpose(1, 0, 2))
    out = layer(src, src_mask=mask, src_key_padding_mask=lucid.tensor(pad)).numpy()
    if not batch_first:
        out = out.transpose(1, 0, 2)
    ref = _encoder_layer(x.astype(np.float64), layer, mask.numpy().astype(np.float64), pad)
    np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-4)


def test_gelu_activation_and_callable():
    layer = nn.TransformerEncoderLayer(4, 1, dim_feedforward=8, dropout=0.0, activation="gelu", batch_first=True)
    _randomise(layer, 3)
    x = np.random.default_rng(4).standard_normal((2, 3, 4)).astype(np.float32)
    from math import erf

    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))
    np.testing.assert_allclose(
        layer(lucid.tensor(x)).numpy(), _encoder_layer(x.astype(np.float64), layer, act=gelu), rtol=2e-4, atol=2e-4
    )
    custom = nn.TransformerEncoderLayer(
        4, 1, dim_feedforward=8, dropout=0.0, activation=lambda t: t * 0.0, batch_first=True
    )
    assert custom(lucid.tensor(x)).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(4, 1, activation="swish")


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_reference(norm_first):
    lucid.manual_seed(0)
    model = nn.Transformer(
        d_model=8,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=16,
        dropout=0.0,
        batch_first=True,
        norm_first=norm_first,
    )
    _randomise(model, 5)
    rng = np.random.default_rng(6)
    src, tgt = rng.standard_normal((2, 6, 8)).astype(np.float32), rng.standard_normal((2, 4, 8)).astype(np.float32)
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(4)
    pad = np.zeros((2, 6), bool)
    pad[0, 4:] = True
    out = model(
        lucid.tensor(src),
        lucid.tensor(tgt),
        tgt_mask=tgt_mask,
        src_key_padding_mask=lucid.tensor(pad),
        memory_key_padding_mask=lucid.tensor(pad),
    )
    mem = src.astype(np.float64)
    for layer in model.encoder.layers:
        mem = _encoder_layer(mem, layer, None, pad)
    mem = _layer_norm(mem, model.encoder.norm)
    x = tgt.astype(np.float64)
    for layer in model.decoder.layers:
        x = _decoder_layer(x, mem, layer, tgt_mask.numpy().astype(np.float64), pad)
    x = _layer_norm(x, model.decoder.norm)
    np.testing.assert_allclose(out.numpy(), x, rtol=5e-4, atol=5e-4)


def test_structure_names_and_independent_layers():
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16)
    keys = set(model.state_dict())
    for key in (
        "encoder.layers.1.self_attn.in_proj_weight",
        "encoder.layers.0.linear1.weight",
        "encoder.norm.bias",
        "decoder.layers.0.multihead_attn.out_proj.weight",
        "decoder.layers.0.norm3.weight",
        "decoder.norm.weight",
    ):
        assert key in keys
    assert not any(k.startswith("decoder.layers.1") for k in keys)
    a, b = model.encoder.layers[0].linear1.weight, model.encoder.layers[1].linear1.weight
    assert a is not b and not np.array_equal(a.detach().numpy(), b.detach().numpy())  # Xavier-initialised each
    with lucid.no_grad():
        a.zero_()
    assert np.abs(b.detach().numpy()).sum() > 0
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    np.testing.assert_array_equal(mask.numpy(), np.triu(np.full((3, 3), -np.inf, np.float32), 1))


def test_gradients_reach_every_parameter_and_errors_are_clear():
    model = nn.Transformer(
        d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8, dropout=0.1
    )
    src, tgt = lucid.randn(5, 2, 8), lucid.randn(3, 2, 8)
    model(src, tgt).pow(2).mean().backward()
    assert all(p.grad is not None for p in model.parameters())
    with pytest.raises(RuntimeError, match="batch number"):
        model(lucid.randn(5, 2, 8), lucid.randn(3, 3, 8))
    with pytest.raises(RuntimeError, match="d_model"):
        model(lucid.randn(5, 2, 4), lucid.randn(3, 2, 4))
    with pytest.raises(ValueError, match="divisible"):
        nn.TransformerEncoderLayer(6, 4)
    with pytest.raises(TypeError, match="layer module"):
        nn.TransformerEncoder("layer", 2)


def test_deepcopy_and_pickle_of_tensors():
    p = nn.Parameter(lucid.tensor([1.0, 2.0]))
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad and q is not p
    with lucid.no_grad():
        q.mul_(3)
    assert p.tolist() == [1.0, 2.0] and q.tolist() == [3.0, 6.0]
    with pytest.raises(RuntimeError, match="leaves"):
        copy.deepcopy(p * 2)
    for t in (p, lucid.tensor([1, 2], dtype=lucid.int32), lucid.tensor([0.5], dtype=lucid.bfloat16)):
        u = pickle.loads(pickle.dumps(t))
        assert type(u) is type(t) and u.dtype is t.dtype and u.requires_grad == t.requires_grad
        np.testing.assert_array_equal(u.numpy(), t.detach().numpy())
