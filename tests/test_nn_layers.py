"""The nn modules around the layer ops: parameter shapes and default initialisation,
buffers and state dicts, train/eval behaviour, and argument errors."""

import math

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from reference import attention, conv2d

rng = np.random.default_rng(9)


def T(a, **kw):
    return lucid.tensor(np.asarray(a, np.float32), **kw)


@pytest.mark.parametrize("cls,args,wshape", [
    (nn.Conv2d, (4, 6, 3), (6, 4, 3, 3)), (nn.Conv2d, (4, 6, (3, 2), 1, 0, 1, 2), (6, 2, 3, 2)),
    (nn.Conv1d, (3, 5, 4), (5, 3, 4)), (nn.ConvTranspose2d, (4, 6, 3), (4, 6, 3, 3)),
])
def test_conv_modules_shapes_and_default_init(cls, args, wshape):
    m = cls(*args)
    assert m.weight.shape == wshape and m.bias.shape == (args[1],)
    bound = 1 / math.sqrt(wshape[1] * math.prod(wshape[2:]))
    w = m.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound
    assert "kernel_size" in repr(m)


def test_conv2d_module_forward_matches_reference():
    m = nn.Conv2d(2, 3, 3, stride=2, padding=1, bias=False)
    assert m.bias is None
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(m(T(x)).numpy(), conv2d(x, m.weight.numpy(), None, (2, 2), (1, 1)), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="divisible"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_buffers_state_dict_round_trip_and_device_moves():
    bn = nn.BatchNorm1d(3)
    bn(T(rng.standard_normal((8, 3))))
    state = bn.state_dict()
    fresh = nn.BatchNorm1d(3)
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.running_mean.numpy(), bn.running_mean.numpy())
    assert fresh.num_batches_tracked.item() == 1
    fresh.to("metal")
    assert fresh.running_var.device == "metal" and fresh.running_var.dtype == lucid.float32
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    with pytest.raises(TypeError, match="buffer"):
        bn.running_mean = 3
    nostats = nn.BatchNorm2d(2, track_running_stats=False, affine=False)
    assert list(nostats.parameters()) == [] and list(nostats.buffers()) == []
    x = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    want = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(nostats.eval()(T(x)).numpy(), want, rtol=1e-4, atol=1e-5)


def test_batch_norm_cumulative_momentum():
    bn = nn.BatchNorm1d(2, momentum=None)
    batches = [rng.standard_normal((5, 2)).astype(np.float32) for _ in range(3)]
    for b in batches:
        bn(T(b))
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([b.mean(0) for b in batches], 0), rtol=1e-5, atol=1e-6)


def test_norm_modules():
    ln = nn.LayerNorm((2, 3), elementwise_affine=False)
    assert list(ln.parameters()) == []
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    want = (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(T(x)).numpy(), want, rtol=1e-4, atol=1e-5)
    gn = nn.GroupNorm(2, 4)
    assert gn.weight.shape == (4,) and np.all(gn.weight.numpy() == 1) and np.all(gn.bias.numpy() == 0)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)


def test_pool_and_activation_modules():
    x = T(rng.standard_normal((1, 2, 4, 4)))
    np.testing.assert_array_equal(nn.MaxPool2d(2)(x).numpy(), F.max_pool2d(x, 2).numpy())
    np.testing.assert_array_equal(nn.AvgPool2d(2, 1)(x).numpy(), F.avg_pool2d(x, 2, 1).numpy())
    assert nn.AdaptiveAvgPool2d((1, 2))(x).shape == (1, 2, 1, 2)
    np.testing.assert_allclose(nn.Softmax(dim=1)(x).numpy().sum(1), 1, rtol=1e-6)
    np.testing.assert_allclose(nn.LogSoftmax(dim=-1)(x).exp().numpy().sum(-1), 1, rtol=1e-6)
    with pytest.raises(ValueError, match="needs a dim"):
        nn.Softmax()(x)
    with pytest.raises(NotImplementedError):
        nn.MaxPool2d(2, return_indices=True)


def test_loss_modules_match_functional():
    x, y = T(rng.standard_normal((4, 3))), lucid.tensor([0, 2, 1, 2])
    assert nn.CrossEntropyLoss(label_smoothing=0.1)(x, y).item() == F.cross_entropy(x, y, label_smoothing=0.1).item()
    assert nn.NLLLoss(reduction="sum")(x, y).item() == F.nll_loss(x, y, reduction="sum").item()
    assert nn.MSELoss()(x, x * 2).item() == F.mse_loss(x, x * 2).item()
    assert nn.L1Loss()(x, x * 2).item() == F.l1_loss(x, x * 2).item()
    t = (x > 0).float()
    assert nn.BCEWithLogitsLoss()(x, t).item() == F.binary_cross_entropy_with_logits(x, t).item()
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def test_multihead_attention_masks_follow_pytorch_semantics():
    mha = nn.MultiheadAttention(4, 1, batch_first=True, bias=False)
    x = rng.standard_normal((1, 3, 4)).astype(np.float32)
    blocked = np.triu(np.ones((3, 3), bool), 1)  # True = may not attend (PyTorch's MHA rule)
    _, w_bool = mha(T(x), T(x), T(x), attn_mask=lucid.tensor(blocked))
    _, w_float = mha(T(x), T(x), T(x), attn_mask=T(np.where(blocked, -np.inf, 0.0)))
    _, w_causal = mha(T(x), T(x), T(x), is_causal=True)
    wi = mha.in_proj_weight.numpy()
    q, k, v = (x @ wi[i * 4:(i + 1) * 4].T for i in range(3))
    want = attention(q, k, v, allowed=~blocked)[1]
    for w in (w_bool, w_float, w_causal):
        np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)
    out, _ = mha(T(x[0]), T(x[0]), T(x[0]))  # unbatched
    assert out.shape == (3, 4)
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="features"):
        mha(T(rng.standard_normal((1, 3, 5))), T(x), T(x))
    with pytest.raises(ValueError, match="key_padding_mask"):
        mha(T(x), T(x), T(x), key_padding_mask=lucid.tensor(np.zeros((2, 3), bool)))


def test_multihead_attention_under_autocast_and_backward():
    mha = nn.MultiheadAttention(8, 2).to("metal")
    x = T(rng.standard_normal((5, 2, 8)), device="metal")
    with lucid.amp.autocast("metal"):
        out, w = mha(x, x, x)
    assert out.dtype == lucid.float16 and out.shape == (5, 2, 8) and w.shape == (2, 5, 5)
    out.float().sum().backward()
    assert mha.in_proj_weight.grad.dtype == lucid.float32
    assert mha.out_proj.weight.grad is not None


def test_embedding_module_and_errors():
    e = nn.Embedding(5, 3)
    ids = lucid.tensor([[0, 4], [2, 2]])
    np.testing.assert_array_equal(e(ids).numpy(), e.weight.numpy()[[[0, 4], [2, 2]]])
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(5, 3, padding_idx=5)
    with pytest.raises(TypeError, match="integer"):
        e(T([0.0]))


def test_dropout_module_train_and_eval():
    d = nn.Dropout(0.5)
    x = lucid.ones(1000)
    lucid.manual_seed(1)
    kept = (d(x).numpy() != 0).mean()
    assert 0.4 < kept < 0.6
    assert d.eval()(x) is x
    with pytest.raises(ValueError):
        nn.Dropout(2.0)
