"""Walks the whole autocast op table: every op runs under float16 autocast on "metal" and
bfloat16 autocast on "cpu", and its result dtype must be what its declared policy says."""

import numpy as np
import pytest

import lucid
import lucid.nn.functional as F
from lucid.amp import CastPolicy

rng = np.random.default_rng(0)
SCOPES = [("metal", lucid.float16), ("cpu", lucid.bfloat16)]


def make(device, dtype):
    """A factory of random tensors on `device` in `dtype` (float32 by default)."""

    def t(*shape, d=None, positive=False):
        a = rng.standard_normal(shape).astype(np.float32)
        return lucid.tensor(np.abs(a) + 0.1 if positive else a, device=device).to(d or dtype)

    return t


def idx(device, *values):
    return lucid.tensor(np.array(values), device=device)


# Each runner takes (t, device) and returns the op's floating result. `t` makes inputs in the
# dtype under test.
RUNNERS = {
    "add": lambda t, d: t(3) + t(3),
    "sub": lambda t, d: t(3) - t(3),
    "mul": lambda t, d: t(3) * t(3),
    "div": lambda t, d: t(3) / t(3, positive=True),
    "pow": lambda t, d: t(3, positive=True) ** t(3),
    "maximum": lambda t, d: lucid.maximum(t(3), t(3)),
    "minimum": lambda t, d: lucid.minimum(t(3), t(3)),
    "neg": lambda t, d: -t(3),
    "relu": lambda t, d: t(3).relu(),
    "exp": lambda t, d: t(3).exp(),
    "log": lambda t, d: t(3, positive=True).log(),
    "log1p": lambda t, d: t(3, positive=True).log1p(),
    "sqrt": lambda t, d: t(3, positive=True).sqrt(),
    "rsqrt": lambda t, d: t(3, positive=True).rsqrt(),
    "abs": lambda t, d: t(3).abs(),
    "tanh": lambda t, d: t(3).tanh(),
    "sigmoid": lambda t, d: t(3).sigmoid(),
    "silu": lambda t, d: F.silu(t(3)),
    "gelu": lambda t, d: F.gelu(t(3)),
    "softplus": lambda t, d: F.softplus(t(3)),
    "sin": lambda t, d: t(3).sin(),
    "cos": lambda t, d: lucid.cos(t(3)),
    "expm1": lambda t, d: t(3).expm1(),
    "tan": lambda t, d: t(3).tan(),
    "asin": lambda t, d: (t(3) * 0.1).asin(),
    "acos": lambda t, d: (t(3) * 0.1).acos(),
    "atan": lambda t, d: t(3).atan(),
    "round": lambda t, d: t(3).round(),
    "where": lambda t, d: lucid.where(t(3) > 0, t(3), t(3)),
    "clamp": lambda t, d: t(3).clamp(-1, 1),
    "matmul": lambda t, d: t(2, 3) @ t(3, 2),
    "linear": lambda t, d: F.linear(t(2, 3), t(4, 3), t(4)),
    "lstm": lambda t, d: lucid.nn.LSTM(3, 4).to(d)(t(5, 2, 3))[0],
    "lstm_cell": lambda t, d: lucid.nn.LSTMCell(3, 4).to(d)(t(2, 3))[0],
    "gru": lambda t, d: lucid.nn.GRU(3, 4).to(d)(t(5, 2, 3))[0],
    "gru_cell": lambda t, d: lucid.nn.GRUCell(3, 4).to(d)(t(2, 3)),
    "rnn_tanh": lambda t, d: lucid.nn.RNN(3, 4).to(d)(t(5, 2, 3))[0],
    "rnn_relu": lambda t, d: lucid.nn.RNN(3, 4, nonlinearity="relu").to(d)(t(5, 2, 3))[0],
    "sum": lambda t, d: t(3).sum(),
    "mean": lambda t, d: t(3).mean(),
    "max": lambda t, d: t(2, 3).max(1).values,
    "min": lambda t, d: t(2, 3).min(0).values,
    "amax": lambda t, d: t(2, 3).amax(0),
    "amin": lambda t, d: t(2, 3).amin(0),
    "var": lambda t, d: t(4).var(),
    "std": lambda t, d: t(4).std(),
    "logsumexp": lambda t, d: t(2, 3).logsumexp(1),
    "reshape": lambda t, d: t(2, 3).reshape(3, 2),
    "view": lambda t, d: t(2, 3).view(6),
    "transpose": lambda t, d: t(2, 3).transpose(0, 1),
    "permute": lambda t, d: t(2, 3).permute(1, 0),
    "contiguous": lambda t, d: t(2, 3).T.contiguous(),
    "squeeze": lambda t, d: t(1, 3).squeeze(),
    "unsqueeze": lambda t, d: t(3).unsqueeze(0),
    "expand": lambda t, d: t(1, 3).expand(2, 3),
    "flatten": lambda t, d: t(2, 3).flatten(),
    "narrow": lambda t, d: t(4).narrow(0, 1, 2),
    "as_strided": lambda t, d: t(6).as_strided((2, 2), (2, 1)),
    "split": lambda t, d: t(4).split(2)[0],
    "gather": lambda t, d: t(2, 3).gather(1, idx(d, [0], [2])),
    "index_select": lambda t, d: t(2, 3).index_select(1, idx(d, 2, 0)),
    "embedding": lambda t, d: F.embedding(idx(d, 1, 0), t(3, 2)),
    "index": lambda t, d: t(2, 3)[idx(d, 1), 1:],
    "index_put": lambda t, d: lucid.index_put(
        t(2, 3), (idx(d, 1),), t(3)
    ),  # out of place: index_put_ keeps its destination
    "softmax": lambda t, d: F.softmax(t(2, 3), 1),
    "log_softmax": lambda t, d: F.log_softmax(t(2, 3), 1),
    "dropout": lambda t, d: F.dropout(t(8), 0.5),
    "leaky_relu": lambda t, d: F.leaky_relu(t(8), 0.1),
    "layer_norm": lambda t, d: F.layer_norm(t(2, 3), (3,), t(3), t(3)),
    "group_norm": lambda t, d: F.group_norm(t(2, 4, 3), 2, t(4), t(4)),
    "batch_norm": lambda t, d: F.batch_norm(t(4, 3), training=True),
    "conv1d": lambda t, d: F.conv1d(t(1, 2, 5), t(3, 2, 2), t(3)),
    "conv2d": lambda t, d: F.conv2d(t(1, 2, 4, 4), t(3, 2, 2, 2), t(3)),
    "conv_transpose2d": lambda t, d: F.conv_transpose2d(t(1, 2, 3, 3), t(2, 3, 2, 2), t(3)),
    "max_pool2d": lambda t, d: F.max_pool2d(t(1, 1, 4, 4), 2),
    "avg_pool2d": lambda t, d: F.avg_pool2d(t(1, 1, 4, 4), 2),
    "adaptive_avg_pool2d": lambda t, d: F.adaptive_avg_pool2d(t(1, 1, 4, 4), 2),
    "scaled_dot_product_attention": lambda t, d: F.scaled_dot_product_attention(t(2, 4), t(3, 4), t(3, 4)),
    "mse_loss": lambda t, d: F.mse_loss(t(3), t(3)),
    "l1_loss": lambda t, d: F.l1_loss(t(3), t(3)),
    "nll_loss": lambda t, d: F.nll_loss(t(2, 3), idx(d, 0, 2)),
    "cross_entropy": lambda t, d: F.cross_entropy(t(2, 3), idx(d, 0, 2)),
    "binary_cross_entropy_with_logits": lambda t, d: F.binary_cross_entropy_with_logits(t(3), t(3).sigmoid()),
    "to": lambda t, d: t(3).to(d),
}
# The elementwise math ops and lucid.special's engine functions, on inputs in their domains.
S = lucid.special
RUNNERS.update(
    {
        name: (lambda f: lambda t, d: f(t(3, positive=True)))(getattr(lucid, name))
        for name in (
            "floor",
            "ceil",
            "trunc",
            "sign",
            "erf",
            "erfc",
            "lgamma",
            "digamma",
            "log2",
            "log10",
            "exp2",
            "sinh",
            "cosh",
            "asinh",
            "atanh",
            "sinc",
            "i0",
        )
    }
)
RUNNERS.update(
    {
        name: (lambda f: lambda t, d: f(t(3, positive=True)))(getattr(S, name))
        for name in (
            "i0e",
            "i1",
            "i1e",
            "ndtri",
            "log_ndtr",
            "erfcx",
            "bessel_j0",
            "bessel_j1",
            "bessel_y0",
            "bessel_y1",
            "modified_bessel_i0",
            "modified_bessel_i1",
            "modified_bessel_k0",
            "modified_bessel_k1",
            "scaled_modified_bessel_k0",
            "scaled_modified_bessel_k1",
            "spherical_bessel_j0",
            "airy_ai",
        )
    }
)
RUNNERS.update(
    {
        name: (lambda f: lambda t, d: f(t(3, positive=True), t(3, positive=True)))(getattr(lucid, name))
        for name in (
            "atan2",
            "copysign",
            "xlogy",
            "hypot",
            "nextafter",
            "logaddexp",
            "logaddexp2",
            "igamma",
            "igammac",
            "fmod",
            "remainder",
            "floor_divide",
            "fmax",
            "fmin",
            "heaviside",
        )
    }
)
RUNNERS.update(
    {
        name: (lambda f: lambda t, d: f(t(3), 3))(getattr(S, name))
        for name in (
            "chebyshev_polynomial_t",
            "chebyshev_polynomial_u",
            "chebyshev_polynomial_v",
            "chebyshev_polynomial_w",
            "shifted_chebyshev_polynomial_t",
            "shifted_chebyshev_polynomial_u",
            "shifted_chebyshev_polynomial_v",
            "shifted_chebyshev_polynomial_w",
            "hermite_polynomial_h",
            "hermite_polynomial_he",
            "laguerre_polynomial_l",
            "legendre_polynomial_p",
        )
    }
)
RUNNERS.update(
    {
        "erfinv": lambda t, d: (t(3) * 0.1).erfinv(),
        "acosh": lambda t, d: (t(3, positive=True) + 1).acosh(),
        "xlog1py": lambda t, d: S.xlog1py(t(3), t(3, positive=True)),
        "zeta": lambda t, d: S.zeta(t(3, positive=True) + 1, t(3, positive=True)),
        "trunc_divide": lambda t, d: lucid.div(t(3), t(3, positive=True), rounding_mode="trunc"),
    }
)

LA = lucid.linalg
RUNNERS.update(
    {
        "linalg_lu_factor": lambda t, d: LA.lu_factor_ex(t(3, 3)).LU,
        "linalg_solve_triangular": lambda t, d: LA.solve_triangular(t(3, 3), t(3, 2), upper=True),
        "linalg_cholesky": lambda t, d: LA.cholesky_ex(t(3, 3)).L,
        "linalg_eigh": lambda t, d: LA.eigvalsh(t(3, 3)),
        "linalg_svd": lambda t, d: LA.svdvals(t(3, 2)),
        "linalg_qr": lambda t, d: LA.qr(t(3, 2)).R,
        "geqrf": lambda t, d: lucid.geqrf(t(3, 2)).a,
        "linalg_ldl_factor": lambda t, d: LA.ldl_factor_ex(t(3, 3)).LD,
        "linalg_ldl_solve": lambda t, d: LA.ldl_solve(*LA.ldl_factor_ex(t(3, 3))[:2], t(3, 2)),
    }
)
# Ops whose result is not floating: (runner, result dtype).
NON_FLOAT = {
    "eq": (lambda t, d: t(3) == t(3), lucid.bool),
    "ne": (lambda t, d: t(3) != t(3), lucid.bool),
    "lt": (lambda t, d: t(3) < t(3), lucid.bool),
    "le": (lambda t, d: t(3) <= t(3), lucid.bool),
    "gt": (lambda t, d: t(3) > t(3), lucid.bool),
    "ge": (lambda t, d: t(3) >= t(3), lucid.bool),
    "argmax": (lambda t, d: t(2, 3).argmax(1), lucid.int64),
    "argmin": (lambda t, d: t(2, 3).argmin(), lucid.int64),
    "bitwise_and": (lambda t, d: (t(3) > 0) & (t(3) > 0), lucid.bool),
    "bitwise_or": (lambda t, d: (t(3) > 0) | idx(d, 1, 2, 3), lucid.int64),
    "bitwise_xor": (lambda t, d: idx(d, 1, 2, 3) ^ 5, lucid.int64),
    "bitwise_not": (lambda t, d: ~(t(3) > 0), lucid.bool),
    "bitwise_left_shift": (lambda t, d: idx(d, 1, 2, 3) << 2, lucid.int64),
    "bitwise_right_shift": (lambda t, d: idx(d, 8, 2, 3) >> 1, lucid.int64),
    "gcd": (lambda t, d: lucid.gcd(idx(d, 4, 6), idx(d, 6, 9)), lucid.int64),
    "lcm": (lambda t, d: lucid.lcm(idx(d, 4, 6), idx(d, 6, 9)), lucid.int64),
}
PROMOTE = {"cat": lambda t, low, d: lucid.cat([t(2), low(2)]), "stack": lambda t, low, d: lucid.stack([t(2), low(2)])}


def test_every_op_in_the_table_is_walked():
    table = set(lucid.amp.policies())
    assert table == set(RUNNERS) | set(NON_FLOAT) | set(PROMOTE)


@pytest.mark.parametrize("device,low", SCOPES, ids=["metal-float16", "cpu-bfloat16"])
@pytest.mark.parametrize("name", sorted(RUNNERS))
def test_result_dtype_follows_the_policy(name, device, low):
    policy = lucid.amp.policy(name)
    # Lower-precision ops get float32 inputs (they must come out low); the others get
    # low-precision inputs (float32 ops must widen them, the rest keep them).
    given = lucid.float32 if policy is CastPolicy.LOWER_PRECISION else low
    with lucid.amp.autocast(device, dtype=low):
        out = RUNNERS[name](make(device, given), device)
    if policy is CastPolicy.LOWER_PRECISION:
        cpu_kernel = name in lucid.amp.cpu_bfloat16_ops() or device == "metal"
        want = low if cpu_kernel else lucid.float32
    elif policy is CastPolicy.FLOAT32:
        want = lucid.float32
    else:
        want = low
    assert out.dtype == want, f"{name} ({policy.value}) gave {out.dtype} under {device} {low} autocast"
    assert out.device == device


@pytest.mark.parametrize("device,low", SCOPES, ids=["metal-float16", "cpu-bfloat16"])
@pytest.mark.parametrize("name", sorted(NON_FLOAT))
def test_non_floating_results(name, device, low):
    assert lucid.amp.policy(name) is CastPolicy.NONE
    runner, want = NON_FLOAT[name]
    with lucid.amp.autocast(device, dtype=low):
        assert runner(make(device, low), device).dtype == want


@pytest.mark.parametrize("device,low", SCOPES, ids=["metal-float16", "cpu-bfloat16"])
@pytest.mark.parametrize("name", sorted(PROMOTE))
def test_promote_ops_use_the_widest_input(name, device, low):
    assert lucid.amp.policy(name) is CastPolicy.PROMOTE
    with lucid.amp.autocast(device, dtype=low):
        assert PROMOTE[name](make(device, lucid.float32), make(device, low), device).dtype == lucid.float32
        assert PROMOTE[name](make(device, low), make(device, low), device).dtype == low


# ---- overrides and inspection, op by op -----------------------------------------------------
# Every op of the table goes through the engine's one front door: an override of its policy
# is honoured (or refused, for the ops with no precision of their own), and when it runs in a
# lower precision the inspection counts it under its own name.

# The ops of NON_FLOAT whose inputs are not floating either (nothing to run in a lower precision).
INTEGER_ONLY = {
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "gcd",
    "lcm",
}


# LAPACK's decompositions compute in float32 and float64 only.
NO_LOW_PRECISION = {
    "linalg_lu_factor",
    "linalg_solve_triangular",
    "linalg_cholesky",
    "linalg_eigh",
    "linalg_svd",
    "linalg_qr",
    "geqrf",
    "linalg_ldl_factor",
    "linalg_ldl_solve",
}


def _low_kernel(name, device):
    """Whether the op has a kernel in the scope's lower dtype on `device` (else it runs in
    float32 there, as PyTorch's CPU autocast does for ops without a bfloat16 kernel)."""
    return device == "metal" or name in lucid.amp.cpu_bfloat16_ops()


def test_the_ops_without_a_precision_of_their_own_are_marked():
    table = lucid.amp.policies()
    fixed = {name for name, p in table.items() if p is CastPolicy.VIEW}
    assert fixed == {
        "reshape",
        "view",
        "transpose",
        "permute",
        "contiguous",
        "squeeze",
        "unsqueeze",
        "expand",
        "flatten",
        "narrow",
        "as_strided",
        "split",
        "to",
    }


@pytest.mark.parametrize("device,low", SCOPES, ids=["metal-float16", "cpu-bfloat16"])
@pytest.mark.parametrize("name", sorted(set(RUNNERS) | set(NON_FLOAT)))
def test_an_override_is_honoured_or_refused(name, device, low):
    runner = RUNNERS[name] if name in RUNNERS else NON_FLOAT[name][0]
    if lucid.amp.policy(name) is CastPolicy.VIEW:
        for chosen in ("float32", "lower"):
            with pytest.raises(ValueError, match=f"{name} has no precision of its own"):
                with lucid.amp.autocast(device, dtype=low, overrides={name: chosen}):
                    pass
        return
    with lucid.amp.autocast(device, dtype=low, overrides={name: "float32"}):
        assert lucid.amp.policies(device)[name] is CastPolicy.FLOAT32
        out = runner(make(device, low), device)
    if name in RUNNERS:
        assert out.dtype == lucid.float32, f"{name} overridden to float32 gave {out.dtype}"
    if name in NO_LOW_PRECISION:
        with pytest.raises(ValueError, match=f"{name} has no float16 or bfloat16 kernel"):
            with lucid.amp.autocast(device, dtype=low, overrides={name: "lower"}):
                pass
        return
    with lucid.amp.autocast(device, dtype=low, overrides={name: "lower"}):
        out = runner(make(device, lucid.float32), device)
    if name in RUNNERS:
        want = low if _low_kernel(name, device) else lucid.float32
        assert out.dtype == want, f"{name} overridden to lower gave {out.dtype}"


@pytest.mark.parametrize("device,low", SCOPES, ids=["metal-float16", "cpu-bfloat16"])
@pytest.mark.parametrize("name", sorted(set(RUNNERS) | set(NON_FLOAT)))
def test_an_op_in_a_lower_precision_is_inspected_under_its_own_name(name, device, low):
    if (
        lucid.amp.policy(name) is CastPolicy.VIEW
        or not _low_kernel(name, device)
        or name in INTEGER_ONLY
        or name in NO_LOW_PRECISION
    ):
        return
    runner = RUNNERS[name] if name in RUNNERS else NON_FLOAT[name][0]
    with lucid.amp.inspect() as inspection:
        with lucid.amp.autocast(device, dtype=low, overrides={name: "lower"}):
            runner(make(device, lucid.float32), device)
    ops = {r.op for r in inspection.report.ops}
    assert name in ops, f"{name} ran in {low} but the inspection saw only {sorted(ops)}"
