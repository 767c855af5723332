"""The host loops built for several vector units (Sources/CHostKernels): each variant this CPU
can run gives the same bits, and those bits are right (bfloat16 rounding and widening against
ml_dtypes, the four arithmetic ops against numpy float32, softmax and log-softmax rows (with
NaN, +inf and all -inf rows), the log-softmax gradient and SiLU both ways against float64
numpy; the LSTM (with its float32 recurrence's products), GRU and Elman cells both ways through
a layer, whose values tests/test_rnn.py checks; attention's rounded weights through bfloat16 attention);
and a bfloat16 convolution with few input channels, in float32 or in bfloat16 kernels."""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np

import lucid

LEVELS = ["DEFAULT", "AVX2", "AVX512"]  # narrowest first
ASK = {"DEFAULT": "baseline", "AVX2": "avx2", "AVX512": "avx512"}
ROW_LENGTHS = [1024, 1031, 3000]

# Run in a child with LUCID_HOST_ISA set: prints the capability, saves the results to argv[1].
WORK = """
import sys
import numpy as np
import lucid
import lucid.nn.functional as F

rng = np.random.default_rng(3)
bits = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32)
bits[:10] = [0x7F800001, 0xFF800001, 0x7FC00000, 0x7F802000, 0x3F808000, 0x3F818000, 0x00000001, 0x807FFFFF,
             0x7F7FFFFF, 0xFF800000]
narrowed = lucid.tensor(bits.view(np.float32)).to(lucid.bfloat16).numpy().view(np.uint16)
out = {"bits": bits, "narrowed": narrowed}
for n in %(rows)r:
    x = rng.standard_normal((6, n)).astype(np.float32) * 3
    x[1] *= 40            # log-probabilities far below -104: exp underflows to 0
    x[2, : n // 2] = -np.inf
    x[3] = 0              # a flat row
    g = rng.standard_normal((6, n)).astype(np.float32)
    t = lucid.tensor(x).requires_grad_()
    (F.log_softmax(t, -1) * lucid.tensor(g)).sum().backward()
    out[f"x{n}"], out[f"g{n}"], out[f"dx{n}"] = x, g, t.grad.numpy()
    x = x.copy()  # a NaN at the last entry, a +inf, only -inf
    x[0, -1], x[4, 3], x[5] = np.nan, np.inf, -np.inf
    out[f"xs{n}"], out[f"softmax_rows{n}"] = x, F.softmax(lucid.tensor(x), -1).numpy()
    out[f"log_softmax_rows{n}"] = F.log_softmax(lucid.tensor(x), -1).numpy()
v = rng.standard_normal(1 << 16 | 3).astype(np.float32) * 8
v[:12] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40, -1e-40, -88.5, -104.5, 104.5]
g = rng.standard_normal(v.size).astype(np.float32)
t = lucid.tensor(v).requires_grad_()
y = F.silu(t)
(y * lucid.tensor(g)).sum().backward()
out["silu_x"], out["silu_g"], out["silu_y"], out["silu_dx"] = v, g, y.detach().numpy(), t.grad.numpy()
t.grad = None
y = F.gelu(t, approximate="tanh")
(y * lucid.tensor(g)).sum().backward()
out["gelu_tanh_y"], out["gelu_tanh_dx"] = y.detach().numpy(), t.grad.numpy()
# The scan that keeps non-finite values away from oneDNN's exp (which makes NaN inf) and
# softmax (which skips NaN): one value at the tail, past the last whole vector, or none.
e = rng.standard_normal(1 << 16 | 5).astype(np.float32)
for where, value in [(None, 0), (-1, np.nan), (-2, np.inf), (1 << 15, np.nan)]:
    ev = e.copy()
    if where is not None:
        ev[where] = value
    out[f"exp{where}"] = lucid.tensor(ev).exp().numpy()
    rows = lucid.tensor(ev[-64 * 1024:].reshape(64, 1024)).to(lucid.bfloat16)
    out[f"softmax{where}"] = F.softmax(rows, -1).float().numpy()
out["scan_e"] = e
# The fused LSTM, GRU and Elman cells both ways, float32 and bfloat16, through a layer's forward
# and backward (float32 LSTM: its whole recurrence, products included, in one host call).
for dt in (lucid.float32, lucid.bfloat16):
    for kind, make in [("lstm", lambda: lucid.nn.LSTM(16, 24)), ("gru", lambda: lucid.nn.GRU(16, 24)),
                       ("rnn", lambda: lucid.nn.RNN(16, 24)),
                       ("relu", lambda: lucid.nn.RNN(16, 24, nonlinearity="relu"))]:
        lucid.manual_seed(4)
        layer = make().to(dt)
        xs = lucid.tensor(rng.standard_normal((5, 3, 16)).astype(np.float32)).to(dt).requires_grad_()
        seq, _ = layer(xs)
        (seq.float() * lucid.tensor(rng.standard_normal((5, 3, 24)).astype(np.float32))).sum().backward()
        name = kind + "_" + str(dt).split(".")[-1]
        out[f"{name}_y"] = seq.float().detach().numpy()
        out[f"{name}_dx"] = xs.grad.float().numpy()
        out[f"{name}_dw"] = layer.weight_hh_l0.grad.float().numpy()
# bfloat16 widened back to float32; the four arithmetic ops on float32 runs, out of place, in
# place and with a number; add_ with alpha; attention's weights rounded to bfloat16.
out["widened"] = lucid.tensor(bits.view(np.float32)).to(lucid.bfloat16).float().numpy()
a = rng.standard_normal(1 << 16 | 3).astype(np.float32) * 4
b = rng.standard_normal(a.size).astype(np.float32)
a[:6], b[:6] = [np.nan, np.inf, 0.0, -0.0, 1e-40, 3.0], [1.0, np.inf, 0.0, 0.0, 1e30, -0.0]
la, lb = lucid.tensor(a), lucid.tensor(b)
for name, fn in [("add", lambda x, y: x + y), ("sub", lambda x, y: x - y), ("mul", lambda x, y: x * y),
                 ("div", lambda x, y: x / y)]:
    with np.errstate(all="ignore"):
        out[f"{name}"] = fn(la, lb).numpy()
        out[f"{name}_number"], out[f"{name}_number_first"] = fn(la, 2.5).numpy(), fn(2.5, la).numpy()
        c = la.clone()
        getattr(c, name + "_")(lb)
        out[f"{name}_in_place"] = c.numpy()
        c = la.clone()
        getattr(c, name + "_")(-1.5)
        out[f"{name}_in_place_number"] = c.numpy()
c = la.clone()
c.add_(lb, alpha=-0.1)
out["add_alpha"], out["arith_a"], out["arith_b"] = c.numpy(), a, b
q, k, v = (lucid.tensor(rng.standard_normal((2, 3, 40, 8)).astype(np.float32)) for _ in range(3))
with lucid.amp.autocast("cpu", dtype=lucid.bfloat16):
    out["attention_bf16"] = F.scaled_dot_product_attention(q, k, v).float().numpy()
np.savez(sys.argv[1], **out)
print(lucid.backends.cpu.get_cpu_capability())
""" % {"rows": ROW_LENGTHS}


def _run(tmp_path, ask):
    path = tmp_path / f"{ask}.npz"
    env = {**os.environ, "LUCID_HOST_ISA": ask}
    done = subprocess.run([sys.executable, "-c", WORK, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()[-1], dict(np.load(path))


def test_the_capability_is_a_level_the_environment_can_only_lower(tmp_path):
    best = lucid.backends.cpu.get_cpu_capability()
    assert best in LEVELS
    for ask, want in [
        ("baseline", "DEFAULT"),
        ("avx2", LEVELS[min(1, LEVELS.index(best))]),
        ("avx512", best),
        ("neon", best),
    ]:
        env = {**os.environ, "LUCID_HOST_ISA": ask}
        code = "import lucid; print(lucid.backends.cpu.get_cpu_capability())"
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == want, (ask, done.stdout)


def test_every_variant_gives_the_same_right_bits(tmp_path):
    levels = LEVELS[: LEVELS.index(lucid.backends.cpu.get_cpu_capability()) + 1]
    runs = {}
    for level in levels:
        got, runs[level] = _run(tmp_path, ASK[level])
        assert got == level
    first = runs[levels[0]]
    with np.errstate(all="ignore"):
        want = first["bits"].view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(first["narrowed"], want)
    np.testing.assert_array_equal(first["widened"], want.view(ml_dtypes.bfloat16).astype(np.float32))
    a, b = first["arith_a"], first["arith_b"]
    with np.errstate(all="ignore"):
        for name, fn in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)]:
            for key, want in [
                (name, fn(a, b)),
                (f"{name}_number", fn(a, np.float32(2.5))),
                (f"{name}_number_first", fn(np.float32(2.5), a)),
                (f"{name}_in_place", fn(a, b)),
                (f"{name}_in_place_number", fn(a, np.float32(-1.5))),
            ]:
                np.testing.assert_array_equal(first[key], want, err_msg=key)
        np.testing.assert_array_equal(first["add_alpha"], a + np.float32(-0.1) * b)
    for n in ROW_LENGTHS:
        x, g = first[f"x{n}"].astype(np.float64), first[f"g{n}"].astype(np.float64)
        with np.errstate(all="ignore"):
            z = x - x.max(-1, keepdims=True)
            p = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
        total = g.sum(-1, keepdims=True)
        ref = g - p * total
        np.testing.assert_allclose(first[f"dx{n}"], ref, rtol=1e-5, atol=1e-6 * np.abs(total).max())
        x = first[f"xs{n}"].astype(np.float64)
        for key in ("softmax_rows", "log_softmax_rows"):
            got = first[f"{key}{n}"]
            assert np.isnan(got[[0, 5]]).all() and np.isnan(got[4, 3]), key
            np.testing.assert_array_equal(np.delete(got[4], 3), -np.inf if key.startswith("log") else 0, err_msg=key)
            z = x[1:4] - x[1:4].max(-1, keepdims=True)
            with np.errstate(invalid="ignore"):
                total = np.exp(z).sum(-1, keepdims=True)
                want = z - np.log(total) if key.startswith("log") else np.exp(z) / total
            np.testing.assert_allclose(got[1:4], want, rtol=2e-5, atol=1e-6, err_msg=f"{key}{n}")
    x, g = first["silu_x"].astype(np.float64), first["silu_g"].astype(np.float64)
    with np.errstate(all="ignore"):
        s = 1 / (1 + np.exp(-x))
        y, dx = x * s, g * (s * (1 + x * (1 - s)))
    np.testing.assert_allclose(first["silu_y"], y, rtol=1e-6, atol=1e-37)
    np.testing.assert_allclose(first["silu_dx"], dx, rtol=2e-6, atol=1e-6)
    with np.errstate(all="ignore"):  # GELU's tanh form in float64, (1 + tanh u)/2 as σ(2u) (no cancellation)
        c = np.sqrt(2 / np.pi)
        s = 1 / (1 + np.exp(-2 * c * (x + 0.044715 * x**3)))
        y = x * s
        dx = g * (s + 2 * x * s * (1 - s) * c * (1 + 3 * 0.044715 * x * x))
    dx[np.abs(x) ** 3 > np.finfo(np.float32).max] = np.nan  # x³ overflows: NaN, as PyTorch's formula gives
    # (the tails' relative error grows with |u|: e^-2u carries u's rounding)
    np.testing.assert_allclose(first["gelu_tanh_y"], y, rtol=2e-5, atol=1e-37)
    np.testing.assert_allclose(first["gelu_tanh_dx"], dx, rtol=2e-5, atol=1e-6)
    e = first["scan_e"]
    for where in (None, -1, -2, 1 << 15):
        got, rows = first[f"exp{where}"], first[f"softmax{where}"]
        want = e.copy()
        if where is not None:
            want[where] = np.nan if where != -2 else np.inf
        with np.errstate(over="ignore", invalid="ignore"):
            np.testing.assert_allclose(got, np.exp(want.astype(np.float64)), rtol=1e-6, equal_nan=True)
        nan_rows = np.isnan(rows).any(-1)  # (+inf makes its row's max inf, and inf - inf NaN)
        assert nan_rows.sum() == (0 if where is None else 1)
        assert where == -2 or np.isnan(rows[nan_rows]).all()
    for level in levels[1:]:
        for key, value in first.items():
            np.testing.assert_array_equal(
                runs[level][key].view(np.uint8), value.view(np.uint8), err_msg=f"{level} {key}"
            )


def test_the_c_loops_and_the_swift_loops_agree_to_the_bit():
    # Contiguous runs of sigmoid, tanh and SiLU run the C loops (built for each vector unit);
    # strided elements run the engine's Swift FastMath. Both must give the same bits.
    x = np.random.default_rng(11).standard_normal(4094).astype(np.float32) * 10
    x[:14] = [
        np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        1e-40,
        -88.7,
        -103.9,
        -104.1,
        87.0,
        0.55,
        -0.55,
        np.nextafter(np.float32(0.55), np.float32(0)),
        9.0,
    ]
    t = lucid.tensor(x)
    via_sigmoid = (t * lucid.sigmoid(t)).numpy()
    silu = lucid.nn.functional.silu(t).numpy()
    np.testing.assert_array_equal(silu.view(np.uint32), via_sigmoid.view(np.uint32))
    every_other = lucid.tensor(np.repeat(x, 2))[::2]  # x again, at stride 2: no unit-stride run
    assert every_other.stride() == (2,)
    for fn in (lucid.sigmoid, lucid.tanh):
        contiguous = fn(t).numpy()
        strided = fn(every_other).numpy()
        np.testing.assert_array_equal(contiguous.view(np.uint32), strided.view(np.uint32), err_msg=fn.__name__)
    # GELU's tanh form, forward and backward (the strided input's gradient takes the generic kernel).
    g = lucid.tensor(np.random.default_rng(12).standard_normal(x.size).astype(np.float32))
    leaf, spread = lucid.tensor(x).requires_grad_(), lucid.tensor(np.repeat(x, 2)).requires_grad_()
    results = []
    for source, view in ((leaf, leaf), (spread, spread[::2])):
        y = lucid.nn.functional.gelu(view, approximate="tanh")
        (y * g).sum().backward()
        results.append((y.detach().numpy(), source.grad.numpy()[:: 1 if source is leaf else 2]))
    for got, want in zip(results[0], results[1]):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


# A bfloat16 convolution with few input channels: in float32 (the operands widened, the result
# rounded) where the CPU has no bfloat16 arithmetic, in oneDNN's bfloat16 kernels where it has
# (AVX512_BF16, at the AVX-512 level). LUCID_HOST_ISA=avx2 asks for the first on any CPU.
CONV = """
import sys
import numpy as np
import lucid
import lucid.nn.functional as F

rng = np.random.default_rng(9)
out = {}
for c in (1, 3):
    x = rng.standard_normal((4, c, 12, 12)).astype(np.float32)
    w = rng.standard_normal((8, c, 3, 3)).astype(np.float32)
    g = rng.standard_normal((4, 8, 12, 12)).astype(np.float32)
    tx = lucid.tensor(x, dtype=lucid.bfloat16, requires_grad=True)
    tw = lucid.tensor(w, dtype=lucid.bfloat16, requires_grad=True)
    y = F.conv2d(tx, tw, padding=1)
    (y.float() * lucid.tensor(g)).sum().backward()
    out[f"x{c}"], out[f"w{c}"], out[f"g{c}"] = x, w, g
    out[f"y{c}"], out[f"dx{c}"], out[f"dw{c}"] = (t.float().numpy() for t in (y.detach(), tx.grad, tw.grad))
np.savez(sys.argv[1], **out)
"""


def _conv_reference(x, w, g):
    """conv2d (padding 1) of float64 x [N, C, H, W] and w [O, C, 3, 3], and the gradients of
    sum(y * g) with respect to x and w."""
    _, c, h, wd = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.stack([padded[:, :, i : i + h, j : j + wd] for i in range(3) for j in range(3)], axis=2)
    y = np.einsum("bckij,ock->boij", windows, w.reshape(w.shape[0], c, 9))
    dw = np.einsum("bckij,boij->ock", windows, g).reshape(w.shape)
    dpadded = np.zeros_like(padded)
    for i, j in ((i, j) for i in range(3) for j in range(3)):
        dpadded[:, :, i : i + h, j : j + wd] += np.einsum("boij,oc->bcij", g, w[:, :, i, j])
    return y, dpadded[:, :, 1:-1, 1:-1], dw


def test_a_bfloat16_convolution_with_few_channels_is_right_natively_or_widened(tmp_path):
    runs = []
    for ask in ("avx2", "avx512"):
        path = tmp_path / f"conv-{ask}.npz"
        env = {**os.environ, "LUCID_HOST_ISA": ask}
        done = subprocess.run(
            [sys.executable, "-c", CONV, str(path)], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(dict(np.load(path)))
    for c in (1, 3):
        # y's gradient reaches the convolution rounded to bfloat16, as x and w are.
        want = _conv_reference(*(runs[0][f"{k}{c}"].astype(ml_dtypes.bfloat16).astype(np.float64) for k in "xwg"))
        for run in runs:
            for key, exact in zip(("y", "dx", "dw"), want):
                # Each result is rounded once to bfloat16.
                scale = np.abs(exact).max()
                np.testing.assert_allclose(run[f"{key}{c}"], exact, rtol=0, atol=0.008 * scale, err_msg=f"{key}{c}")
        for key in ("y", "dx", "dw"):
            scale = np.abs(runs[0][f"{key}{c}"]).max()
            np.testing.assert_allclose(runs[0][f"{key}{c}"], runs[1][f"{key}{c}"], rtol=0, atol=0.008 * scale)
