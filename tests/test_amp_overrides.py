"""Per-op and per-module autocast policies: ``autocast(..., overrides=...)``,
``Module.autocast_policy`` and ``lucid.amp.policies()``."""

import threading

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn.functional as F
from differential import amp_overrides as D
from lucid.amp import CastPolicy, autocast, policies

RNG = np.random.default_rng(33)
BF16 = lucid.bfloat16


def _operands():
    x = lucid.tensor(RNG.standard_normal((4, 16)).astype(np.float32))
    w1 = lucid.tensor(RNG.standard_normal((16, 16)).astype(np.float32))
    w2 = lucid.tensor(RNG.standard_normal((16, 8)).astype(np.float32))
    return x, w1, w2


def _program(x, w1, w2):
    h = x @ w1
    s = F.softmax(h, -1)
    y = F.layer_norm(s, (16,))
    return h, s, y, y @ w2


def test_overrides_change_exactly_the_named_ops_as_manual_casts_would():
    # matmul overridden to float32 and softmax to the scope's dtype; layer_norm keeps its
    # float32 policy. The same program with the casts written out (autocast off) gives equal
    # dtypes and values, bit for bit.
    x, w1, w2 = _operands()
    with autocast("cpu", dtype=BF16, overrides={"matmul": "float32", "softmax": "lower"}):
        got = _program(x, w1, w2)
    h = x @ w1
    s = F.softmax(h.to(BF16), -1)
    y = F.layer_norm(s.float(), (16,))
    want = (h, s, y, y @ w2)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.float().numpy(), w.float().numpy())
    assert [t.dtype for t in got] == [lucid.float32, BF16, lucid.float32, lucid.float32]
    # softmax in bfloat16 against numpy: float32 math on the bfloat16-rounded input, one rounding.
    hb = h.numpy().astype(ml_dtypes.bfloat16).astype(np.float64)
    e = np.exp(hb - hb.max(-1, keepdims=True))
    np.testing.assert_allclose(
        got[1].float().numpy(),
        (e / e.sum(-1, keepdims=True)).astype(ml_dtypes.bfloat16).astype(np.float32),
        rtol=0,
        atol=2**-8,
    )
    # Without overrides the declared policies hold: matmul bfloat16, softmax float32.
    with autocast("cpu", dtype=BF16):
        plain = _program(x, w1, w2)
    assert [t.dtype for t in plain] == [BF16, lucid.float32, lucid.float32, BF16]


def test_nested_scopes_compose_and_leaving_restores_the_table():
    x, w1, _ = _operands()
    declared = policies("cpu")
    with autocast("cpu", dtype=BF16, overrides={"matmul": "float32", "exp": "none"}):
        assert policies("cpu")["matmul"] == CastPolicy.FLOAT32 and policies()["exp"] == CastPolicy.NONE
        with autocast("cpu", dtype=BF16, overrides={"matmul": CastPolicy.LOWER_PRECISION}):
            assert (x @ w1).dtype == BF16  # the inner override wins
            assert policies("cpu")["exp"] == CastPolicy.NONE  # the outer one still holds
            assert lucid.exp(x.to(BF16)).dtype == BF16  # "none": kept, not cast to float32
        assert (x @ w1).dtype == lucid.float32
        changed = {k for k, v in policies("cpu").items() if v != declared[k]}
        assert changed == {"matmul", "exp"}
        assert policies("metal") == declared  # overrides belong to their scope's device
    assert policies("cpu") == declared
    assert (x @ w1).dtype == lucid.float32 and lucid.exp(x.to(BF16)).dtype == BF16


def test_overrides_are_the_calling_threads():
    x, w1, _ = _operands()
    seen = []
    with autocast("cpu", dtype=BF16, overrides={"matmul": "float32"}):

        def other():
            with autocast("cpu", dtype=BF16):
                seen.append(((x @ w1).dtype, policies("cpu")["matmul"]))

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert (x @ w1).dtype == lucid.float32
    assert seen == [(BF16, CastPolicy.LOWER_PRECISION)]


@pytest.mark.parametrize(
    "overrides,error,words",
    [
        ({"softmx": "lower"}, ValueError, ["'softmx'", "softmax", "matmul"]),
        ({"softmax": "low"}, ValueError, ["'softmax'", "'lower'", "'float32'", "'promote'", "'none'"]),
        ({"softmax": 2}, ValueError, ["'softmax'", "'lower'"]),
        ([("softmax", "lower")], TypeError, ["dict"]),
    ],
)
def test_unknown_ops_and_bad_policies_are_refused_naming_them(overrides, error, words):
    with pytest.raises(error) as info:
        autocast("cpu", dtype=BF16, overrides=overrides)
    for word in words:
        assert word in str(info.value)
    assert not lucid.amp.is_autocast_enabled()


def test_a_modules_policy_runs_its_forward_in_that_precision():
    lucid.manual_seed(0)
    head = lucid.nn.Linear(16, 8)
    model = lucid.nn.Sequential(lucid.nn.Linear(16, 16), lucid.nn.ReLU(), head)
    x = lucid.tensor(RNG.standard_normal((4, 16)).astype(np.float32))
    head.autocast_policy = "float32"
    assert head.autocast_policy == lucid.float32
    with autocast("cpu", dtype=BF16):
        hidden = model[1](model[0](x))
        out = model(x)
    assert hidden.dtype == BF16 and out.dtype == lucid.float32
    # As casting the head's input to float32 and running it with autocast off.
    want = head(hidden.float())
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    # A lower dtype: the module's ops run in a scope of that dtype, its inputs cast to it.
    head.autocast_policy = lucid.bfloat16
    with autocast("cpu", dtype=BF16, enabled=True):
        assert head(x).dtype == BF16
    # Outside autocast the policy changes nothing; None clears it.
    assert head(x).dtype == lucid.float32
    head.autocast_policy = None
    with autocast("cpu", dtype=BF16):
        assert head(x).dtype == BF16
    with pytest.raises(ValueError, match="autocast_policy must be"):
        head.autocast_policy = "fp8"
    # Gradients flow through the module's float32 forward.
    head.autocast_policy = "float32"
    with autocast("cpu", dtype=BF16):
        loss = model(x).sum()
    loss.backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in model.parameters())


def test_overrides_and_a_modules_policy_match_pytorch_with_its_casts_written_by_hand():
    # tests/differential/amp_overrides.py: matmul overridden to float32, softmax to bfloat16 and
    # a float32 head, against the PyTorch program that does the same with autocast(enabled=False)
    # and manual casts (recorded). Every intermediate has PyTorch's dtype and values (bfloat16
    # ones within an ulp, float32 ones within float32 rounding); the gradients agree to the
    # bfloat16 softmax's precision.
    ref = D.reference()["outcome"]
    got = D.outcome(lucid, D.lucid_program)
    assert {k: v["dtype"] for k, v in got["outputs"].items()} == {k: v["dtype"] for k, v in ref["outputs"].items()}
    assert [v["dtype"] for v in got["outputs"].values()] == ["float32", "bfloat16", "bfloat16", "float32"]
    for name, want in ref["outputs"].items():
        a, b = np.array(got["outputs"][name]["values"]), np.array(want["values"])
        tol = 2**-8 if want["dtype"] == "bfloat16" else 1e-6
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max(), err_msg=name)
    for name, want in ref["grads"].items():
        a, b = np.array(got["grads"][name]), np.array(want)
        np.testing.assert_allclose(a, b, rtol=0, atol=2**-6 * np.abs(b).max(), err_msg=name)
