"""More of lucid.nn's layers: the activation layers, Bilinear, the distance layers, the dropouts,
BatchNorm3d, InstanceNorm3d, LocalResponseNorm, the bias flag of the norms, the losses and their
weight buffers, and PyTorch's forward argument names. Each layer against its functional form or
a numpy reference; gradients of the new parameters against finite differences."""

import numpy as np
import pytest

import lucid
import lucid.nn as nn
import lucid.nn.functional as F
from _helpers import numeric_grads

rng = np.random.default_rng(31)


def arr(*shape):
    return rng.standard_normal(shape)


def f32(a):
    return lucid.tensor(np.asarray(a, np.float32))


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(
        np.asarray(got.detach().numpy(), np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol
    )


LAYERS = [
    (nn.ReLU6(), lambda x: F.relu6(x)),
    (nn.Hardtanh(-0.5, 2.0), lambda x: F.hardtanh(x, -0.5, 2.0)),
    (nn.Hardsigmoid(), F.hardsigmoid),
    (nn.Hardswish(), F.hardswish),
    (nn.Mish(), F.mish),
    (nn.SELU(), F.selu),
    (nn.CELU(0.5), lambda x: F.celu(x, 0.5)),
    (nn.Threshold(0.1, 20.0), lambda x: F.threshold(x, 0.1, 20.0)),
    (nn.GLU(1), lambda x: F.glu(x, 1)),
    (nn.LogSigmoid(), F.logsigmoid),
    (nn.Softplus(2.0, 1.0), lambda x: F.softplus(x, 2.0, 1.0)),
    (nn.Softshrink(0.3), lambda x: F.softshrink(x, 0.3)),
    (nn.Hardshrink(0.3), lambda x: F.hardshrink(x, 0.3)),
    (nn.Softsign(), F.softsign),
    (nn.Tanhshrink(), F.tanhshrink),
    (nn.Softmin(1), lambda x: F.softmin(x, 1)),
    (nn.Softmax2d(), lambda x: F.softmax(x, -3)),
    (nn.LocalResponseNorm(3, 0.1, 0.5, 1.5), lambda x: F.local_response_norm(x, 3, 0.1, 0.5, 1.5)),
]


@pytest.mark.parametrize("layer,fn", LAYERS, ids=[type(m).__name__ for m, _ in LAYERS])
def test_layer_is_its_functional_form(layer, fn):
    x = f32(arr(2, 4, 3, 3))
    close(layer(x), fn(x).numpy())
    close(layer(input=x), fn(x).numpy())  # PyTorch's forward argument name
    assert isinstance(repr(layer), str) and list(layer.parameters()) == []


def test_rrelu_layer_follows_the_mode():
    m = nn.RReLU(0.1, 0.3)
    x = f32(-np.abs(arr(500)) - 0.1)
    m.eval()
    close(m(x), x.numpy() * 0.2)
    m.train()
    slopes = m(x).numpy() / x.numpy()
    assert slopes.min() >= 0.1 - 1e-6 and slopes.max() <= 0.3 + 1e-6 and slopes.std() > 0.02


def test_inplace_activation_layers():
    x = f32([-8.0, 0.5, 9.0])
    nn.ReLU6(inplace=True)(x)
    close(x, [0.0, 0.5, 6.0])
    y = f32([-8.0, 0.5])
    nn.Threshold(0.0, -1.0, inplace=True)(y)
    close(y, [-1.0, 0.5])


def test_activation_layer_errors():
    with pytest.raises(ValueError, match="max_val"):
        nn.Hardtanh(1.0, 0.0)
    with pytest.raises(ValueError, match="3-D or 4-D"):
        nn.Softmax2d()(f32(arr(2, 3)))


def test_bilinear_layer():
    m = nn.Bilinear(3, 4, 5)
    assert tuple(m.weight.shape) == (5, 3, 4) and tuple(m.bias.shape) == (5,)
    bound = 1 / np.sqrt(3)
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    x1, x2 = arr(6, 3), arr(6, 4)
    w, b = m.weight.detach().numpy().astype(np.float64), m.bias.detach().numpy().astype(np.float64)
    close(m(f32(x1), f32(x2)), np.einsum("ni,oij,nj->no", x1, w, x2) + b, tol=1e-5)
    assert nn.Bilinear(3, 4, 5, bias=False).bias is None
    assert set(dict(nn.Bilinear(3, 4, 5, bias=False).named_parameters())) == {"weight"}
    # the weight's gradient against finite differences
    g = rng.standard_normal((6, 5))
    wt = lucid.tensor(w, dtype=lucid.float64).requires_grad_()
    fn = lambda ww: F.bilinear(lucid.tensor(x1), lucid.tensor(x2), ww)  # noqa: E731
    (fn(wt) * lucid.tensor(g)).sum().backward()
    np.testing.assert_allclose(
        wt.grad.numpy(), numeric_grads(fn, [w.copy()], g, 1e-6, lucid.float64)[0], rtol=1e-6, atol=1e-6
    )
    with pytest.raises(ValueError, match="positive"):
        nn.Bilinear(0, 4, 5)


def test_distance_layers():
    a, b = arr(4, 6), arr(4, 6)
    close(nn.CosineSimilarity(dim=1)(f32(a), f32(b)), F.cosine_similarity(f32(a), f32(b)).numpy())
    close(
        nn.PairwiseDistance(p=1.0, keepdim=True)(f32(a), f32(b)), np.abs(a - b + 1e-6).sum(1, keepdims=True), tol=1e-4
    )
    assert nn.PairwiseDistance(3.0).norm == 3.0


def test_dropout_layers():
    x = f32(np.abs(arr(4, 6, 2, 3, 3)) + 0.1)
    for m in (nn.Dropout3d(0.5), nn.AlphaDropout(0.5), nn.FeatureAlphaDropout(0.5)):
        m.eval()
        assert m(x) is x
        m.train()
        y = m(x)
        assert tuple(y.shape) == tuple(x.shape) and not np.allclose(y.numpy(), x.numpy())
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.AlphaDropout(2.0)


# ---- normalisation -------------------------------------------------------------------------------


def test_batch_norm_3d_matches_numpy_and_tracks_statistics():
    m = nn.BatchNorm3d(3, momentum=0.3)
    x = arr(2, 3, 2, 3, 4)
    y = m(f32(x))
    mean = x.mean(axis=(0, 2, 3, 4))
    var = x.var(axis=(0, 2, 3, 4))
    close(y, (x - mean[:, None, None, None]) / np.sqrt(var[:, None, None, None] + 1e-5), tol=1e-4)
    close(m.running_mean, 0.3 * mean, tol=1e-5)
    n = x.size / 3
    close(m.running_var, 0.7 + 0.3 * var * n / (n - 1), tol=1e-5)
    assert int(m.num_batches_tracked.item()) == 1
    with pytest.raises(ValueError, match="5-D"):
        m(f32(arr(2, 3, 4)))


def test_batch_norm_empty_batch_counts_but_keeps_statistics():
    m = nn.BatchNorm1d(5)
    y = m(lucid.zeros(0, 5, 9))
    assert tuple(y.shape) == (0, 5, 9)
    close(m.running_mean, np.zeros(5))
    close(m.running_var, np.ones(5))
    assert int(m.num_batches_tracked.item()) == 1


@pytest.mark.parametrize(
    "cls,shape", [(nn.BatchNorm2d, (2, 3, 4, 4)), (nn.InstanceNorm1d, (2, 3, 7)), (nn.InstanceNorm3d, (2, 3, 2, 2, 3))]
)
def test_norms_take_bias_false(cls, shape):
    kw = {"affine": True} if cls.__name__.startswith("Instance") else {}
    m = cls(3, bias=False, **kw)
    assert m.bias is None and set(dict(m.named_parameters())) == {"weight"}
    with lucid.no_grad():
        m.weight.copy_(f32([0.5, 2.0, -1.0]))
    x = f32(arr(*shape))
    ref = cls(3, **kw)
    with lucid.no_grad():
        ref.weight.copy_(f32([0.5, 2.0, -1.0]))
    close(m(x), ref(x).numpy())
    g = nn.GroupNorm(3, 6, bias=False)
    assert g.bias is None and set(dict(g.named_parameters())) == {"weight"}


def test_group_norm_without_bias_matches_numpy():
    g = nn.GroupNorm(3, 6, bias=False)
    with lucid.no_grad():
        g.weight.copy_(f32(np.arange(1, 7)))
    x = arr(2, 6, 4)
    xg = x.reshape(2, 3, 8)
    want = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(2, 6, 4)
    close(g(f32(x)), want * np.arange(1, 7)[:, None], tol=1e-4)


def test_instance_norm_3d_and_its_counter():
    m = nn.InstanceNorm3d(3, track_running_stats=True, momentum=0.5)
    x = arr(2, 3, 2, 2, 3)
    y = m(f32(x))
    mean = x.mean(axis=(2, 3, 4), keepdims=True)
    close(y, (x - mean) / np.sqrt(x.var(axis=(2, 3, 4), keepdims=True) + 1e-5), tol=1e-4)
    close(m.running_mean, 0.5 * mean.reshape(2, 3).mean(0), tol=1e-5)
    # as PyTorch's, instance norm leaves num_batches_tracked at 0
    assert int(m.num_batches_tracked.item()) == 0
    close(m(f32(x[0])), y.numpy()[0], tol=1e-5)  # unbatched
    with pytest.raises(ValueError, match="4-D .unbatched. or 5-D"):
        m(f32(arr(2, 3)))


# ---- losses --------------------------------------------------------------------------------------


def test_weighted_losses_keep_their_weights_as_buffers():
    w = f32([1.0, 2.0, 3.0])
    for loss in (
        nn.NLLLoss(w),
        nn.CrossEntropyLoss(w),
        nn.BCELoss(w),
        nn.MultiLabelSoftMarginLoss(w),
        nn.MultiMarginLoss(weight=w),
    ):
        assert list(loss.state_dict()) == ["weight"]
        assert list(loss.parameters()) == []
        loss.load_state_dict({"weight": f32([3.0, 2.0, 1.0])})
        close(loss.weight, [3.0, 2.0, 1.0])
    bce = nn.BCEWithLogitsLoss(w, pos_weight=f32([2.0, 2.0, 2.0]))
    assert list(bce.state_dict()) == ["weight", "pos_weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []


def test_loss_layers_are_their_functional_forms():
    x, y, z = arr(4, 3), arr(4, 3), arr(4, 3)
    s = np.where(arr(4) > 0, 1.0, -1.0)
    idx = rng.integers(0, 3, 4)
    cases = [
        (nn.KLDivLoss(reduction="batchmean"), (x, y), lambda a, b: F.kl_div(a, b, reduction="batchmean")),
        (
            nn.KLDivLoss(reduction="sum", log_target=True),
            (x, y),
            lambda a, b: F.kl_div(a, b, reduction="sum", log_target=True),
        ),
        (nn.MarginRankingLoss(0.5), (x[:, 0], y[:, 0], s), lambda a, b, c: F.margin_ranking_loss(a, b, c, 0.5)),
        (
            nn.HingeEmbeddingLoss(2.0, reduction="sum"),
            (x, np.sign(y)),
            lambda a, b: F.hinge_embedding_loss(a, b, 2.0, reduction="sum"),
        ),
        (nn.SoftMarginLoss(), (x, np.sign(y)), F.soft_margin_loss),
        (nn.CosineEmbeddingLoss(0.2), (x, y, s), lambda a, b, c: F.cosine_embedding_loss(a, b, c, 0.2)),
        (
            nn.PoissonNLLLoss(log_input=False, full=True),
            (np.abs(x) + 0.1, np.abs(y) * 3),
            lambda a, b: F.poisson_nll_loss(a, b, False, True),
        ),
        (
            nn.GaussianNLLLoss(full=True),
            (x, y, np.abs(z) + 0.1),
            lambda a, b, c: F.gaussian_nll_loss(a, b, c, full=True),
        ),
        (nn.MultiLabelSoftMarginLoss(), (x, (y > 0).astype(float)), F.multilabel_soft_margin_loss),
        (nn.TripletMarginLoss(swap=True), (x, y, z), lambda a, b, c: F.triplet_margin_loss(a, b, c, swap=True)),
        (
            nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(1.0), margin=0.5),
            (x, y, z),
            lambda a, b, c: F.triplet_margin_with_distance_loss(
                a, b, c, distance_function=lambda u, v: F.pairwise_distance(u, v, 1.0), margin=0.5
            ),
        ),
    ]
    for layer, args, fn in cases:
        ts = [f32(a) for a in args]
        close(layer(*ts), fn(*ts).numpy())
    close(
        nn.MultiMarginLoss(p=2, margin=0.5)(f32(x), lucid.tensor(idx)),
        F.multi_margin_loss(f32(x), lucid.tensor(idx), 2, 0.5).numpy(),
    )
    t = np.array([[2, -1, 0], [0, 1, -1], [1, 1, 1], [-1, 0, 0]])
    close(
        nn.MultiLabelMarginLoss(reduction="none")(f32(x), lucid.tensor(t)),
        F.multilabel_margin_loss(f32(x), lucid.tensor(t), reduction="none").numpy(),
    )


def test_ctc_loss_layer():
    lp = F.log_softmax(f32(arr(10, 2, 4)), 2)
    tg = lucid.tensor([[1, 2, 3], [2, 2, 0]])
    close(
        nn.CTCLoss(reduction="sum")(lp, tg, [10, 8], [3, 2]),
        F.ctc_loss(lp, tg, [10, 8], [3, 2], reduction="sum").numpy(),
    )
    tg3 = lucid.tensor([[1, 2, 0], [0, 0, 0]])
    close(
        nn.CTCLoss(blank=3, zero_infinity=True)(lp, tg3, [10, 8], [3, 0]),
        F.ctc_loss(lp, tg3, [10, 8], [3, 0], blank=3, zero_infinity=True).numpy(),
    )


def test_linear_cross_entropy_loss_layer():
    m = nn.LinearCrossEntropyLoss(5, 4, out_features=(3,), bias=True, label_smoothing=0.1)
    assert tuple(m.linear.weight.shape) == (12, 5) and tuple(m.linear.bias.shape) == (12,)
    assert set(m.state_dict()) == {"linear.weight", "linear.bias"}
    x, y = f32(arr(6, 5)), lucid.tensor(rng.integers(0, 4, (6, 3)))
    logits = (m.linear(x)).reshape(6, 4, 3)
    close(m(x, y), F.cross_entropy(logits, y, label_smoothing=0.1).numpy(), tol=1e-5)
    w = f32([1.0, 2.0, 1.0, 1.0])
    assert list(nn.LinearCrossEntropyLoss(5, 4, weight=w).state_dict()) == ["weight", "linear.weight"]
    with pytest.raises(RuntimeError, match="weight shape"):
        nn.LinearCrossEntropyLoss(5, 4, weight=f32([1.0]))
    with pytest.raises(RuntimeError, match="label_smoothing"):
        nn.LinearCrossEntropyLoss(5, 4, label_smoothing=2.0)


def test_loss_layer_reductions_and_errors():
    x, y = f32(arr(4)), f32(np.ones(4))
    with pytest.warns(UserWarning, match="deprecated"):
        m = nn.SoftMarginLoss(size_average=False)
    assert m.reduction == "sum"
    with pytest.raises(ValueError, match="reduction"):
        nn.MarginRankingLoss(reduction="avg")
    with pytest.raises(ValueError, match="batchmean"):
        nn.KLDivLoss(reduction="avg")
    with pytest.raises(ValueError, match="greater than 0"):
        nn.TripletMarginLoss(margin=0.0)
    with pytest.raises(ValueError, match="p == 1 and p == 2"):
        nn.MultiMarginLoss(p=3)
    close(nn.SoftMarginLoss(reduction="none")(x, y), np.log1p(np.exp(-x.numpy().astype(np.float64))))


def test_linear_forward_takes_input_by_keyword():
    m = nn.Linear(3, 2)
    x = f32(arr(4, 3))
    close(m(input=x), m(x).numpy())


def test_new_names_are_exported():
    names = [
        "ReLU6",
        "Hardtanh",
        "Hardsigmoid",
        "Hardswish",
        "Mish",
        "SELU",
        "CELU",
        "Threshold",
        "GLU",
        "LogSigmoid",
        "Softplus",
        "Softshrink",
        "Hardshrink",
        "Softsign",
        "Tanhshrink",
        "RReLU",
        "Softmin",
        "Softmax2d",
        "Bilinear",
        "CosineSimilarity",
        "PairwiseDistance",
        "Dropout3d",
        "AlphaDropout",
        "FeatureAlphaDropout",
        "BatchNorm3d",
        "InstanceNorm3d",
        "LocalResponseNorm",
        "KLDivLoss",
        "MarginRankingLoss",
        "HingeEmbeddingLoss",
        "SoftMarginLoss",
        "CosineEmbeddingLoss",
        "PoissonNLLLoss",
        "GaussianNLLLoss",
        "MultiLabelSoftMarginLoss",
        "MultiLabelMarginLoss",
        "MultiMarginLoss",
        "TripletMarginLoss",
        "TripletMarginWithDistanceLoss",
        "CTCLoss",
        "LinearCrossEntropyLoss",
    ]
    for n in names:
        assert n in nn.__all__ and issubclass(getattr(nn, n), nn.Module), n
    assert "LinearCrossEntropyOptions" in nn.__all__
