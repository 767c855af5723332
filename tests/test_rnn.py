"""Recurrent layers against a float64 numpy reference, PyTorch's parameter layout, their
gradients against finite differences, and autocast."""

import numpy as np
import pytest

import lucid
import lucid.nn as nn

rng = np.random.default_rng(7)


def sig(x):
    return 1 / (1 + np.exp(-x))


def cell_ref(mode, x, state, w_ih, w_hh, b_ih, b_hh):
    """One step in float64, PyTorch's equations and gate order."""
    if mode == "LSTM":
        h, c = state
        g = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, gg, o = np.split(g, 4, axis=-1)
        c = sig(f) * c + sig(i) * np.tanh(gg)
        h = sig(o) * np.tanh(c)
        return h, (h, c)
    if mode == "GRU":
        gi, gh = x @ w_ih.T + b_ih, state @ w_hh.T + b_hh
        (ir, iz, inn), (hr, hz, hn) = np.split(gi, 3, -1), np.split(gh, 3, -1)
        r, z = sig(ir + hr), sig(iz + hz)
        n = np.tanh(inn + r * hn)
        h = (1 - z) * n + z * state
        return h, h
    pre = x @ w_ih.T + b_ih + state @ w_hh.T + b_hh
    h = np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)
    return h, h


def rnn_ref(module, x, hx=None, p=None):
    """The whole layer in float64 from the module's own parameters (or `p`, by name): x is [T, B, I]."""
    if p is None:
        p = {k: v.float().numpy().astype(np.float64) for k, v in module.state_dict().items()}
    mode, L, H = module.mode, module.num_layers, module.hidden_size
    D = 2 if module.bidirectional else 1
    T, B = x.shape[:2]
    zeros = np.zeros((L * D, B, H))
    if mode == "LSTM":
        h0, c0 = (zeros, zeros) if hx is None else hx
    else:
        h0 = zeros if hx is None else hx
    inp, hs, cs = x.astype(np.float64), [], []
    if T == 0:
        return np.zeros((0, B, D * H)), np.asarray(h0, np.float64), None
    for layer in range(L):
        outs = []
        for d in range(D):
            sfx = "_reverse" if d else ""
            w = [
                p[f"{n}_l{layer}{sfx}"] if f"{n}_l{layer}{sfx}" in p else 0.0
                for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
            ]
            k = layer * D + d
            state = (h0[k], c0[k]) if mode == "LSTM" else h0[k]
            seq = [None] * T
            for t in range(T) if d == 0 else range(T - 1, -1, -1):
                seq[t], state = cell_ref(mode, inp[t], state, *w)
            outs.append(np.stack(seq))
            hs.append(state[0] if mode == "LSTM" else state)
            if mode == "LSTM":
                cs.append(state[1])
        inp = np.concatenate(outs, -1)
    return inp, np.stack(hs), (np.stack(cs) if mode == "LSTM" else None)


CASES = [
    (nn.LSTM, dict()),
    (nn.LSTM, dict(num_layers=2, bidirectional=True)),
    (nn.LSTM, dict(bias=False, num_layers=2)),
    (nn.GRU, dict()),
    (nn.GRU, dict(num_layers=2, bidirectional=True)),
    (nn.RNN, dict()),
    (nn.RNN, dict(nonlinearity="relu", bidirectional=True)),
]


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("cls,kw", CASES)
@pytest.mark.parametrize("batch_first", [False, True])
def test_layers_match_the_float64_reference(device, cls, kw, batch_first):
    lucid.manual_seed(1)
    m = cls(3, 5, batch_first=batch_first, **kw).to(device)
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)  # [T, B, I]
    D, L = (2 if m.bidirectional else 1), m.num_layers
    h0 = rng.standard_normal((L * D, 2, 5)).astype(np.float32)
    c0 = rng.standard_normal((L * D, 2, 5)).astype(np.float32)
    given = lucid.tensor(x.transpose(1, 0, 2) if batch_first else x, device=device)
    hx = (
        (lucid.tensor(h0, device=device), lucid.tensor(c0, device=device))
        if cls is nn.LSTM
        else lucid.tensor(h0, device=device)
    )
    out, state = m(given, hx)
    want, h_n, c_n = rnn_ref(m, x, (h0, c0) if cls is nn.LSTM else h0)
    got = out.numpy().transpose(1, 0, 2) if batch_first else out.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if cls is nn.LSTM:
        np.testing.assert_allclose(state[0].numpy(), h_n, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(state[1].numpy(), c_n, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_allclose(state.numpy(), h_n, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_layers_whose_step_weights_are_packed_match_float64(cls):
    # Batch 16 by hidden 128: step products large enough for the host to pack the hidden-state
    # weights once per layer call, forward and backward; float64 takes the unpacked path.
    lucid.manual_seed(3)
    m = cls(32, 128, num_layers=2)
    x = rng.standard_normal((5, 16, 32)).astype(np.float32)
    g = rng.standard_normal((5, 16, 128)).astype(np.float32)
    want, _, _ = rnn_ref(m, x)
    runs = []
    for dtype in (lucid.float32, lucid.float64):
        m = m.to(dtype)
        tx = lucid.tensor(x, dtype=dtype, requires_grad=True)
        out, _ = m(tx)
        (out * lucid.tensor(g, dtype=dtype)).sum().backward()
        runs.append((out.detach().numpy(), tx.grad.numpy(), [p.grad.numpy() for p in m.parameters()]))
        m.zero_grad()
    np.testing.assert_allclose(runs[0][0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-3, atol=1e-4)
    for got, exact in zip(runs[0][2], runs[1][2]):
        np.testing.assert_allclose(got, exact, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_lstm_layer_runs_its_steps_in_one_kernel_or_one_by_one_alike(dtype):
    # With contiguous operands (float32, or bfloat16 with its products summed in float32 and
    # rounded once) a layer's whole recurrence runs in one kernel call, each thread taking part
    # of the batch through every step; a non-contiguous initial state takes the steps one at a
    # time (a product, then the fused cell). Both match the float64 reference (from the same
    # rounded values), and each other closely, forward and backward.
    lucid.manual_seed(5)
    dt = getattr(lucid, dtype)
    m = nn.LSTM(12, 32, num_layers=2, bidirectional=True).to(dt)
    x = rng.standard_normal((7, 5, 12)).astype(np.float32)
    h0, c0 = (rng.standard_normal((4, 5, 32)).astype(np.float32) for _ in range(2))
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        x, h0, c0 = (a.astype(ml_dtypes.bfloat16).astype(np.float32) for a in (x, h0, c0))
    g = rng.standard_normal((7, 5, 64)).astype(np.float32)
    want, h_n, c_n = rnn_ref(m, x, (h0.astype(np.float64), c0.astype(np.float64)))
    # float32 to the reference and between the paths; bfloat16 within a few of its steps
    # (each step's h and c rounded), and between the paths within a step or two.
    tol, between = ((1e-5, 1e-5), (1e-4, 1e-5)) if dtype == "float32" else ((0, 6e-2), (0, 3e-2))
    runs = []
    for contiguous in (True, False):
        hx = [
            lucid.tensor(s, dtype=dt)
            if contiguous
            else lucid.tensor(np.ascontiguousarray(s.transpose(0, 2, 1)), dtype=dt).transpose(1, 2)
            for s in (h0, c0)
        ]
        assert all(t.is_contiguous() == contiguous for t in hx)
        tx = lucid.tensor(x, dtype=dt, requires_grad=True)
        out, (h, c) = m(tx, tuple(hx))
        assert out.dtype == h.dtype == c.dtype == dt
        (out.float() * lucid.tensor(g)).sum().backward()
        runs.append([t.float().numpy() for t in (out.detach(), h.detach(), c.detach(), tx.grad, m.weight_hh_l1.grad)])
        m.zero_grad()
    for run in runs:
        for got, exact in zip(run[:3], (want, h_n, c_n)):
            np.testing.assert_allclose(got, exact, rtol=tol[0], atol=tol[1])
    for one, other in zip(*runs):
        scale = max(1.0, np.abs(one).max()) if dtype == "bfloat16" else 1.0
        np.testing.assert_allclose(one, other, rtol=between[0], atol=between[1] * scale)


def test_unbatched_input_and_default_state():
    m = nn.GRU(3, 4, num_layers=2)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    out, h = m(lucid.tensor(x))
    want, h_n, _ = rnn_ref(m, x[:, None])
    assert out.shape == (6, 4) and h.shape == (2, 4)
    np.testing.assert_allclose(out.numpy(), want[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h.numpy(), h_n[:, 0], rtol=1e-5, atol=1e-5)


def test_a_pytorch_state_dict_loads_by_name_and_layout():
    # What torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).state_dict() holds: these
    # names and shapes (gates stacked i, f, g, o along the first dimension).
    names = [
        f"{w}_l{k}{s}"
        for k in range(2)
        for s in ("", "_reverse")
        for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    ]
    shapes = {"weight_ih_l0": (16, 3), "weight_hh": (16, 4), "weight_ih_l1": (16, 8), "bias": (16,)}
    torch_like = {}
    for n in names:
        key = next(k for k in ("weight_ih_l0", "weight_ih_l1", "weight_hh", "bias") if n.startswith(k))
        torch_like[n] = lucid.tensor(rng.standard_normal(shapes[key]).astype(np.float32))
    m = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    assert list(m.state_dict()) == names
    m.load_state_dict(torch_like)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    out, _ = m(lucid.tensor(x))
    np.testing.assert_allclose(out.numpy(), rnn_ref(m, x)[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m.weight_hh_l1_reverse.numpy(), torch_like["weight_hh_l1_reverse"].numpy())


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
def test_gradients_match_finite_differences(cls):
    lucid.manual_seed(3)
    m = cls(2, 3, num_layers=2, bidirectional=True)
    x = rng.standard_normal((3, 2, 2)).astype(np.float32)
    wts = rng.standard_normal((3, 2, 6)).astype(np.float32)

    def loss(xv):
        out, _ = m(lucid.tensor(xv))
        return (out * lucid.tensor(wts)).sum()

    tx = lucid.tensor(x, requires_grad=True)
    out, _ = m(tx)
    (out * lucid.tensor(wts)).sum().backward()
    num = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        for sign in (1, -1):
            moved = x.copy()
            moved[i] += sign * 1e-2
            num[i] += sign * loss(moved).item() / 2e-2
    np.testing.assert_allclose(tx.grad.numpy(), num, rtol=2e-2, atol=2e-3)
    # A weight's gradient too: d loss / d weight_hh_l0[0, 0].
    analytic = m.weight_hh_l0.grad.numpy()[0, 0]
    base = m.weight_hh_l0.numpy().copy()
    bumped = []
    for sign in (1, -1):
        moved = base.copy()
        moved[0, 0] += sign * 1e-2
        m.load_state_dict({**m.state_dict(), "weight_hh_l0": lucid.tensor(moved)})
        bumped.append(loss(x).item())
    assert abs(analytic - (bumped[0] - bumped[1]) / 2e-2) < 2e-2 * max(1.0, abs(analytic))


@pytest.mark.parametrize("cell,mode", [(nn.LSTMCell, "LSTM"), (nn.GRUCell, "GRU"), (nn.RNNCell, "RNN_TANH")])
def test_cells_match_one_step_of_the_reference(cell, mode):
    c = cell(3, 4)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    h = rng.standard_normal((2, 4)).astype(np.float32)
    p = [getattr(c, n).numpy().astype(np.float64) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    if mode == "LSTM":
        cc = rng.standard_normal((2, 4)).astype(np.float32)
        got_h, got_c = c(lucid.tensor(x), (lucid.tensor(h), lucid.tensor(cc)))
        _, (wh, wc) = cell_ref(mode, x, (h, cc), *p)
        np.testing.assert_allclose(got_c.numpy(), wc, rtol=1e-5, atol=1e-5)
    else:
        got_h = c(lucid.tensor(x), lucid.tensor(h))
        wh, _ = cell_ref(mode, x, h, *p)
    np.testing.assert_allclose(got_h.numpy(), wh, rtol=1e-5, atol=1e-5)
    # Unbatched input.
    one = c(lucid.tensor(x[0]))
    assert (one[0] if mode == "LSTM" else one).shape == (4,)


@pytest.mark.parametrize("device,dt", [("metal", lucid.float16), ("metal", lucid.bfloat16), ("cpu", lucid.bfloat16)])
def test_under_autocast_the_gate_products_run_in_lower_precision(device, dt):
    m = nn.LSTM(3, 4, num_layers=2).to(device)
    x = lucid.tensor(rng.standard_normal((5, 2, 3)).astype(np.float32), device=device)
    with lucid.amp.autocast(device, dtype=dt):
        out, (h, c) = m(x)
    assert out.dtype == h.dtype == c.dtype == dt
    want = rnn_ref(m, x.numpy())[0]
    np.testing.assert_allclose(out.float().numpy(), want, rtol=5e-2, atol=5e-2)
    out.float().sum().backward()
    assert m.weight_ih_l0.grad.dtype == lucid.float32


def test_dropout_acts_between_layers_in_training_only():
    m = nn.GRU(3, 4, num_layers=2, dropout=1.0)
    x = lucid.tensor(rng.standard_normal((4, 2, 3)).astype(np.float32))
    m.eval()
    np.testing.assert_allclose(m(x)[0].numpy(), rnn_ref(m, x.numpy())[0], rtol=1e-5, atol=1e-5)
    m.train()
    trained = m(x)[0].numpy()
    # With p = 1 the second layer sees only zeros: its output is that of its own weights run
    # over a zero sequence; the eval output above is not.
    p = {k: v.numpy().astype(np.float64) for k, v in m.state_dict().items()}
    w = [p[f"{n}_l1"] for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    h, want = np.zeros((2, 4)), []
    for _ in range(4):
        out, h = cell_ref("GRU", np.zeros((2, 4)), h, *w)
        want.append(out)
    np.testing.assert_allclose(trained, np.stack(want), rtol=1e-5, atol=1e-5)


def test_bad_inputs_are_clear_errors():
    m = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match="input has 2 features, expected 3"):
        m(lucid.zeros(5, 1, 2))
    with pytest.raises(ValueError, match="expected hidden state of shape"):
        m(lucid.zeros(5, 1, 3), (lucid.zeros(2, 1, 4), lucid.zeros(2, 1, 4)))
    with pytest.raises(TypeError, match="hx must be a tuple"):
        m(lucid.zeros(5, 1, 3), lucid.zeros(1, 1, 4))
    with pytest.raises(ValueError, match="hidden_size must be positive"):
        nn.GRU(3, 0)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout"):
        nn.LSTM(3, 4, dropout=2)


def _numeric(loss, arr, eps=1e-6):
    """Central differences of `loss()` with respect to the numpy array `arr`, moved in place."""
    g = np.zeros_like(arr)
    for i in np.ndindex(arr.shape):
        keep = arr[i]
        arr[i] = keep + eps
        up = loss()
        arr[i] = keep - eps
        down = loss()
        arr[i] = keep
        g[i] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize("kw", [dict(), dict(num_layers=2, bidirectional=True), dict(bias=False)])
def test_the_lstm_layers_backward_through_time_matches_finite_differences_in_float64(kw):
    # Every input of the fused layer gets its gradient: the sequence, both initial states and
    # every weight, from a loss over the outputs and both final states.
    lucid.manual_seed(5)
    m = nn.LSTM(2, 3, **kw).double()
    D, L = (2 if m.bidirectional else 1), m.num_layers
    x, h0, c0 = rng.standard_normal((4, 2, 2)), rng.standard_normal((L * D, 2, 3)), rng.standard_normal((L * D, 2, 3))
    w_out, w_h, w_c = (
        rng.standard_normal((4, 2, 3 * D)),
        rng.standard_normal((L * D, 2, 3)),
        rng.standard_normal((L * D, 2, 3)),
    )
    params = {name: p.detach().numpy().copy() for name, p in m.named_parameters()}

    def loss(grad=False):
        tensors = [lucid.tensor(a, requires_grad=grad) for a in (x, h0, c0)]
        if not grad:
            m.load_state_dict({k: lucid.tensor(v) for k, v in params.items()})
        out, (h, c) = m(tensors[0], (tensors[1], tensors[2]))
        total = (out * lucid.tensor(w_out)).sum() + (h * lucid.tensor(w_h)).sum() + (c * lucid.tensor(w_c)).sum()
        return total, tensors

    m.zero_grad()
    total, tensors = loss(grad=True)
    total.backward()
    analytic = {"x": tensors[0].grad.numpy(), "h0": tensors[1].grad.numpy(), "c0": tensors[2].grad.numpy()}
    analytic.update({name: p.grad.numpy().copy() for name, p in m.named_parameters()})
    arrays = {"x": x, "h0": h0, "c0": c0, **params}
    for name, arr in arrays.items():
        numeric = _numeric(lambda: loss()[0].item(), arr)
        np.testing.assert_allclose(analytic[name], numeric, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("use", ["h", "c", "both"])
def test_the_fused_lstm_cell_passes_each_outputs_gradient(use):
    lucid.manual_seed(6)
    cell = nn.LSTMCell(3, 4).double()
    x, h0, c0 = rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    wh, wc = rng.standard_normal((2, 4)), rng.standard_normal((2, 4))

    def loss(grad=False):
        tensors = [lucid.tensor(a, requires_grad=grad) for a in (x, h0, c0)]
        h, c = cell(tensors[0], (tensors[1], tensors[2]))
        total = lucid.tensor(0.0, dtype=lucid.float64)
        if use in ("h", "both"):
            total = total + (h * lucid.tensor(wh)).sum()
        if use in ("c", "both"):
            total = total + (c * lucid.tensor(wc)).sum()
        return total, tensors

    total, tensors = loss(grad=True)
    total.backward()
    for t, arr in zip(tensors, (x, h0, c0)):
        np.testing.assert_allclose(t.grad.numpy(), _numeric(lambda: loss()[0].item(), arr), rtol=1e-6, atol=1e-8)


def test_an_lstm_layers_output_changed_in_place_is_caught_by_backward():
    m = nn.LSTM(2, 3)
    x = lucid.randn(4, 1, 2, requires_grad=True)
    out, (h, c) = m(x)
    loss = (out * 2).sum() + c.sum()
    with lucid.no_grad():
        out.mul_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("device,dt", [("cpu", lucid.bfloat16), ("cpu", lucid.float16), ("metal", lucid.float16)])
def test_lower_precision_lstm_gradients_follow_float32s(device, dt):
    # The fused layer and cell in 16 bits (computed in float32, rounded once per result) give
    # the float32 gradients to within the dtype's precision, for every parameter and the input.
    lucid.manual_seed(7)
    m = nn.LSTM(6, 8, num_layers=2).to(device)
    xs = rng.standard_normal((7, 3, 6)).astype(np.float32)
    w = lucid.tensor(rng.standard_normal((7, 3, 8)).astype(np.float32), device=device)
    grads = []
    for amp in (False, True):
        m.zero_grad()
        x = lucid.tensor(xs, device=device, requires_grad=True)
        with lucid.amp.autocast(device, dtype=dt, enabled=amp):
            out, (h, c) = m(x)
            loss = (out.float() * w).sum() + c.float().sum()
        loss.backward()
        grads.append([x.grad.numpy()] + [p.grad.numpy().copy() for p in m.parameters()])
    tol = 0.08 if dt is lucid.bfloat16 else 0.02
    for g32, g16 in zip(*grads):
        scale = np.abs(g32).max()
        assert np.abs(g16 - g32).max() <= tol * scale, (np.abs(g16 - g32).max(), scale)


def lstm_projected_ref(m, x, h0, c0):
    """An LSTM with proj_size in float64: each step's h = weight_hr (o * tanh(c))."""
    p = {k: v.numpy().astype(np.float64) for k, v in m.state_dict().items()}
    D = 2 if m.bidirectional else 1
    T = x.shape[0]
    inp, hs, cs = x.astype(np.float64), [], []
    for layer in range(m.num_layers):
        outs = []
        for d in range(D):
            sfx = "_reverse" if d else ""
            w = [p.get(f"{n}_l{layer}{sfx}", 0.0) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            w_hr = p[f"weight_hr_l{layer}{sfx}"]
            k = layer * D + d
            h, c = h0[k], c0[k]
            seq = [None] * T
            for t in range(T) if d == 0 else range(T - 1, -1, -1):
                out, (_, c) = cell_ref("LSTM", inp[t], (h, c), *w)
                h = out @ w_hr.T
                seq[t] = h
            outs.append(np.stack(seq))
            hs.append(h)
            cs.append(c)
        inp = np.concatenate(outs, -1)
    return inp, np.stack(hs), np.stack(cs)


@pytest.mark.parametrize("kw", [dict(), dict(num_layers=2, bidirectional=True), dict(num_layers=2, bias=False)])
def test_lstm_with_a_projection(kw):
    lucid.manual_seed(5)
    m = nn.LSTM(3, 5, proj_size=2, **kw)
    D, L = (2 if m.bidirectional else 1), m.num_layers
    assert m.weight_hr_l0.shape == (2, 5) and m.weight_hh_l0.shape == (20, 2)
    if L > 1:
        assert m.weight_ih_l1.shape == (20, 2 * D)
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((L * D, 2, 2)).astype(np.float32)
    c0 = rng.standard_normal((L * D, 2, 5)).astype(np.float32)
    out, (h, c) = m(lucid.tensor(x), (lucid.tensor(h0), lucid.tensor(c0)))
    want, h_n, c_n = lstm_projected_ref(m, x, h0, c0)
    assert out.shape == (4, 2, 2 * D) and h.shape == (L * D, 2, 2) and c.shape == (L * D, 2, 5)
    for got, ref in ((out, want), (h, h_n), (c, c_n)):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)
    out0, _ = m(lucid.tensor(x[:, 0]))  # unbatched, zero state
    np.testing.assert_allclose(
        out0.numpy(),
        lstm_projected_ref(m, x[:, :1], np.zeros((L * D, 1, 2)), np.zeros((L * D, 1, 5)))[0][:, 0],
        rtol=1e-5,
        atol=1e-5,
    )
    # The projection's gradient against central differences.
    wts = rng.standard_normal(out.shape).astype(np.float32)
    (m(lucid.tensor(x))[0] * lucid.tensor(wts)).sum().backward()
    analytic = m.weight_hr_l0.grad.numpy()[1, 3]
    base = m.weight_hr_l0.numpy().copy()
    bumped = []
    for sign in (1, -1):
        moved = base.copy()
        moved[1, 3] += sign * 1e-2
        m.load_state_dict({**m.state_dict(), "weight_hr_l0": lucid.tensor(moved)})
        bumped.append((m(lucid.tensor(x))[0] * lucid.tensor(wts)).sum().item())
    assert abs(analytic - (bumped[0] - bumped[1]) / 2e-2) < 2e-2 * max(1.0, abs(analytic))


def test_lstm_projection_errors():
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=-1)
    m = nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="hidden state of shape"):
        m(lucid.tensor(rng.standard_normal((2, 1, 3)).astype(np.float32)), (lucid.zeros(1, 1, 4), lucid.zeros(1, 1, 4)))


# ---- the GRU and Elman layer ops: one engine op each, whose backward through time runs in the
# engine ---------------------------------------------------------------------------------------

# (name, class, its own arguments)
LAYER_OPS = [
    ("gru", nn.GRU, dict()),
    ("rnn_tanh", nn.RNN, dict()),
    ("rnn_relu", nn.RNN, dict(nonlinearity="relu")),
]
LAYER_IDS = [name for name, _, _ in LAYER_OPS]
GRU_CASES = [
    dict(),
    dict(num_layers=2, bidirectional=True),
    dict(bias=False),
    dict(batch_first=True, bidirectional=True),
]


def _gru_problem(kw, seed, steps=4, batch=2, features=3, hidden=4, cls=nn.GRU, own=None):
    """A GRU (or `cls`), its float64 parameters, and an input, initial state and loss weights
    (all [T, B, ...])."""
    lucid.manual_seed(seed)
    m = cls(features, hidden, **kw, **(own or {}))
    D, L = (2 if m.bidirectional else 1), m.num_layers
    r = np.random.default_rng(seed)
    arrays = {
        "x": r.standard_normal((steps, batch, features)),
        "h0": r.standard_normal((L * D, batch, hidden)),
        **{k: v.numpy().astype(np.float64) for k, v in m.state_dict().items()},
    }
    w_out, w_h = r.standard_normal((steps, batch, D * hidden)), r.standard_normal((L * D, batch, hidden))
    return m, arrays, w_out, w_h


def _gru_ref_loss(m, arrays, w_out, w_h):
    """The float64 numpy reference of PyTorch's GRU: the loss over the outputs and h_n."""
    params = {k: v for k, v in arrays.items() if k not in ("x", "h0")}
    out, h_n, _ = rnn_ref(m, arrays["x"], arrays["h0"], p=params)
    return (out * w_out).sum() + (h_n * w_h).sum(), out, h_n


def _gru_run(m, arrays, w_out, w_h, dtype):
    """lucid's GRU on `arrays` in `dtype` (the module loaded with them): the loss, outputs, h_n and leaves."""
    d = m.weight_hh_l0.device
    m.load_state_dict({k: lucid.tensor(v, dtype=dtype, device=d) for k, v in arrays.items() if k not in ("x", "h0")})
    x = lucid.tensor(arrays["x"], dtype=dtype, device=d)
    x = (x.transpose(0, 1) if m.batch_first else x).detach().requires_grad_()
    h0 = lucid.tensor(arrays["h0"], dtype=dtype, device=d).requires_grad_()
    out, h_n = m(x, h0)
    seq = out.transpose(0, 1) if m.batch_first else out
    loss = (seq.float() * lucid.tensor(w_out, dtype=lucid.float32, device=d)).sum() + (
        h_n.float() * lucid.tensor(w_h, dtype=lucid.float32, device=d)
    ).sum()
    return loss, seq, h_n, x, h0


def _gru_grads(m, x, h0):
    g = {"x": x.grad.numpy().astype(np.float64), "h0": h0.grad.numpy().astype(np.float64)}
    g.update({n: p.grad.float().numpy().astype(np.float64) for n, p in m.named_parameters()})
    if m.batch_first:
        g["x"] = g["x"].transpose(1, 0, 2)
    return g


@pytest.mark.parametrize(
    "device,dtype,tol", [("cpu", lucid.float64, 1e-7), ("cpu", lucid.float32, 2e-5), ("metal", lucid.float32, 2e-5)]
)
@pytest.mark.parametrize("kw", GRU_CASES)
@pytest.mark.parametrize("name,cls,own", LAYER_OPS, ids=LAYER_IDS)
def test_the_layer_ops_and_their_gradients_match_pytorchs_equations(name, cls, own, kw, device, dtype, tol):
    # Outputs, h_n and the gradient of every input (sequence, initial state, each weight and
    # bias) against central differences of the float64 numpy reference, which knows nothing of
    # lucid: float64 runs the engine's generic loops, float32 the C kernels, "metal" (where the
    # backend has no fused cell) the composed steps.
    m, arrays, w_out, w_h = _gru_problem(kw, seed=11, cls=cls, own=own)
    m = m.to(device)
    if dtype is lucid.float64:
        m = m.double()
    loss, seq, h_n, x, h0 = _gru_run(m, arrays, w_out, w_h, dtype)
    assert seq.dtype == h_n.dtype == dtype
    _, want, want_h = _gru_ref_loss(m, arrays, w_out, w_h)
    np.testing.assert_allclose(seq.numpy(), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(h_n.numpy(), want_h, rtol=tol, atol=tol)
    loss.backward()
    got = _gru_grads(m, x, h0)
    assert set(got) == set(arrays)
    for name, arr in arrays.items():
        numeric = _numeric(lambda: _gru_ref_loss(m, arrays, w_out, w_h)[0], arr)
        np.testing.assert_allclose(got[name], numeric, rtol=10 * tol, atol=10 * tol, err_msg=name)


def test_the_gru_reset_gate_scales_the_hidden_bias_too():
    # PyTorch's n = tanh(x W_inᵀ + b_in + r·(h W_hnᵀ + b_hn)): with zero weights, r = σ(b_ir + b_hr)
    # multiplies b_hn, so moving b_hn by δ moves n's pre-activation by r·δ, not δ.
    m = nn.GRU(1, 1).double()
    with lucid.no_grad():
        for p in m.parameters():
            p.zero_()
        m.bias_ih_l0.copy_(lucid.tensor([0.3, -50.0, 0.0], dtype=lucid.float64))  # z ≈ 0: h' = n
        m.bias_hh_l0.copy_(lucid.tensor([-0.7, 0.0, 0.8], dtype=lucid.float64))
    out, _ = m(lucid.zeros(1, 1, 1, dtype=lucid.float64))
    assert abs(out.item() - np.tanh(sig(0.3 - 0.7) * 0.8)) < 1e-12


def test_the_layers_and_the_gru_cell_are_one_graph_node_each():
    # The layer's output is the op's own result (not a stack of per-step nodes), the cell's too.
    for m, node in [(nn.GRU(3, 4), "GruBackward"), (nn.RNN(3, 4), "Rnn_tanhBackward")]:
        out, _ = m(lucid.randn(5, 2, 3, requires_grad=True))
        assert out.grad_fn == node
    out, _ = nn.RNN(3, 4, nonlinearity="relu")(lucid.randn(5, 2, 3, requires_grad=True))
    assert out.grad_fn == "Rnn_reluBackward"
    cell = nn.GRUCell(3, 4)
    assert cell(lucid.randn(2, 3), lucid.randn(2, 4, requires_grad=True)).grad_fn == "Gru_cellBackward"


@pytest.mark.parametrize("name,cls,own", LAYER_OPS, ids=LAYER_IDS)
def test_a_layer_ops_output_changed_in_place_is_caught_by_backward(name, cls, own):
    m = cls(2, 3, **own)
    x = lucid.randn(4, 1, 2, requires_grad=True)
    out, h = m(x)
    loss = (out * 2).sum()
    with lucid.no_grad():
        out.mul_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("device", ["cpu", "metal"])
@pytest.mark.parametrize("name,cls,own", LAYER_OPS, ids=LAYER_IDS)
def test_layer_op_edge_cases_no_steps_no_batch_and_unbatched(name, cls, own, device):
    lucid.manual_seed(2)
    m = cls(3, 4, num_layers=2, bidirectional=True, **own).to(device)
    # No steps: an empty output, and h_n is h_0 (its gradient passes straight through).
    h0 = lucid.tensor(rng.standard_normal((4, 2, 4)).astype(np.float32), device=device, requires_grad=True)
    out, h = m(lucid.zeros(0, 2, 3, device=device), h0)
    assert out.shape == (0, 2, 8) and h.shape == (4, 2, 4)
    np.testing.assert_array_equal(h.numpy(), h0.detach().numpy())
    (h * 3).sum().backward()
    np.testing.assert_array_equal(h0.grad.numpy(), np.full((4, 2, 4), 3, np.float32))
    # No batch.
    out, h = m(lucid.zeros(5, 0, 3, device=device))
    assert out.shape == (5, 0, 8) and h.shape == (4, 0, 4)
    # Unbatched: [T, I] in, [T, D·H] and [L·D, H] out, as the batched layer's one column.
    x = rng.standard_normal((5, 3)).astype(np.float32)
    hx = rng.standard_normal((4, 4)).astype(np.float32)
    out, h = m(lucid.tensor(x, device=device), lucid.tensor(hx, device=device))
    want, want_h, _ = rnn_ref(m, x[:, None], hx[:, None])
    assert out.shape == (5, 8) and h.shape == (4, 4)
    np.testing.assert_allclose(out.numpy(), want[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h.numpy(), want_h[:, 0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(), dict(num_layers=2, bidirectional=True)])
@pytest.mark.parametrize("name,cls,own", LAYER_OPS, ids=LAYER_IDS)
def test_the_layer_ops_in_bfloat16_follow_the_rounded_reference(name, cls, own, kw):
    # The module and input in bfloat16: the reference runs in float64 from the same rounded
    # values (ml_dtypes), and lucid's results, each rounded once to bfloat16, stay within a
    # few bfloat16 steps of it, gradients included.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    m, arrays, w_out, w_h = _gru_problem(kw, seed=13, steps=6, batch=3, features=5, hidden=8, cls=cls, own=own)
    rounded = {k: v.astype(ml_dtypes.bfloat16).astype(np.float64) for k, v in arrays.items()}
    m = m.to(lucid.bfloat16)
    loss, seq, h_n, x, h0 = _gru_run(m, rounded, w_out, w_h, lucid.bfloat16)
    assert seq.dtype == h_n.dtype == lucid.bfloat16
    _, want, want_h = _gru_ref_loss(m, rounded, w_out, w_h)
    np.testing.assert_allclose(seq.float().numpy(), want, rtol=0, atol=3e-2)
    np.testing.assert_allclose(h_n.float().numpy(), want_h, rtol=0, atol=3e-2)
    loss.backward()
    got = _gru_grads(m, x, h0)
    for name, arr in rounded.items():
        numeric = _numeric(lambda: _gru_ref_loss(m, rounded, w_out, w_h)[0], arr)
        scale = max(1.0, np.abs(numeric).max())
        assert np.abs(got[name] - numeric).max() <= 0.05 * scale, (name, np.abs(got[name] - numeric).max(), scale)


@pytest.mark.parametrize("device,dt", [("cpu", lucid.bfloat16), ("cpu", lucid.float16), ("metal", lucid.float16)])
@pytest.mark.parametrize("name,cls,own", LAYER_OPS, ids=LAYER_IDS)
def test_layer_ops_under_autocast_run_in_the_lower_precision(name, cls, own, device, dt):
    # As PyTorch's autocast lists gru (and its CUDA RNNs): the output and h_n in the lower
    # precision, the parameters' gradients in float32, all within the dtype's precision of
    # float32's (the outputs only for ReLU, whose gradient jumps where a rounded
    # pre-activation crosses 0).
    m, arrays, w_out, w_h = _gru_problem(
        dict(num_layers=2), seed=17, steps=5, batch=3, features=6, hidden=8, cls=cls, own=own
    )
    m = m.to(device)
    m.load_state_dict({k: lucid.tensor(v, dtype=lucid.float32) for k, v in arrays.items() if k not in ("x", "h0")})
    grads = []
    for amp in (False, True):
        m.zero_grad()
        x = lucid.tensor(arrays["x"], dtype=lucid.float32, device=device, requires_grad=True)
        with lucid.amp.autocast(device, dtype=dt, enabled=amp):
            out, h = m(x)
        want_dtype = dt if amp else lucid.float32
        if dt is lucid.float16 and device == "cpu" and amp:
            want_dtype = lucid.float32  # the CPU runs float16 autocast in float32
        assert out.dtype == h.dtype == want_dtype
        loss = (out.float() * lucid.tensor(w_out[:, :, :8], dtype=lucid.float32, device=device)).sum()
        loss.backward()
        grads.append([out.float().detach().numpy(), h.float().numpy()])
        if name != "rnn_relu":
            grads[-1] += [x.grad.numpy()] + [p.grad.numpy().copy() for p in m.parameters()]
        assert all(p.grad.dtype == lucid.float32 for p in m.parameters())
    tol = 0.08 if dt is lucid.bfloat16 else 0.02
    for g32, g16 in zip(*grads):
        scale = np.abs(g32).max()
        assert np.abs(g16 - g32).max() <= tol * scale, (np.abs(g16 - g32).max(), scale)


@pytest.mark.parametrize("bias", [True, False])
def test_the_fused_gru_cell_and_its_gradients(bias):
    # GRUCell is one fused step: values and the gradients of x, h and every parameter against
    # central differences of the float64 reference step.
    lucid.manual_seed(8)
    cell = nn.GRUCell(3, 4, bias=bias).double()
    r = np.random.default_rng(8)
    arrays = {"x": r.standard_normal((2, 3)), "h": r.standard_normal((2, 4))}
    arrays.update({k: v.numpy().copy() for k, v in cell.state_dict().items()})
    wts = r.standard_normal((2, 4))

    def ref():
        p = [arrays.get(n, 0.0) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        return (cell_ref("GRU", arrays["x"], arrays["h"], *p)[0] * wts).sum()

    x = lucid.tensor(arrays["x"], requires_grad=True)
    h = lucid.tensor(arrays["h"], requires_grad=True)
    out = cell(x, h)
    p = [arrays.get(n, 0.0) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    np.testing.assert_allclose(out.numpy(), cell_ref("GRU", arrays["x"], arrays["h"], *p)[0], rtol=1e-12, atol=1e-12)
    (out * lucid.tensor(wts)).sum().backward()
    got = {"x": x.grad.numpy(), "h": h.grad.numpy(), **{n: q.grad.numpy() for n, q in cell.named_parameters()}}
    assert set(got) == set(arrays)
    for name, arr in arrays.items():
        np.testing.assert_allclose(got[name], _numeric(ref, arr), rtol=1e-6, atol=1e-8, err_msg=name)


def test_gru_layer_errors_name_what_is_wrong():
    from lucid import _C
    from lucid._core import result

    x, h0 = lucid.zeros(3, 2, 4), lucid.zeros(2, 5)
    w_ih, w_hh = lucid.zeros(15, 4), lucid.zeros(15, 5)
    with pytest.raises(ValueError, match=r"gru: weight_hh must have shape \[3 \* hidden, hidden\]"):
        _C.gru_layer(x._h, h0._h, w_ih._h, lucid.zeros(16, 5)._h, 0, 0, False)
    with pytest.raises(ValueError, match="gru: weight_ih must have shape"):
        _C.gru_layer(x._h, h0._h, lucid.zeros(15, 3)._h, w_hh._h, 0, 0, False)
    with pytest.raises(ValueError, match="gru: bias_hh must have shape"):
        _C.gru_layer(x._h, h0._h, w_ih._h, w_hh._h, 0, lucid.zeros(5)._h, False)
    with pytest.raises(ValueError, match="gru: the initial state h_0 must have shape"):
        _C.gru_layer(x._h, lucid.zeros(3, 5)._h, w_ih._h, w_hh._h, 0, 0, False)
    with pytest.raises(TypeError, match="gru"):
        _C.gru_layer(x.long()._h, h0.long()._h, w_ih.long()._h, w_hh.long()._h, 0, 0, False)
    with pytest.raises(ValueError, match=r"rnn_relu: weight_hh must have shape \[1 \* hidden, hidden\]"):
        _C.rnn_layer(x._h, h0._h, lucid.zeros(5, 4)._h, w_hh._h, 0, 0, True, False)
    with pytest.raises(ValueError, match="rnn_tanh: the initial state h_0 must have shape"):
        _C.rnn_layer(x._h, lucid.zeros(2, 4)._h, lucid.zeros(5, 4)._h, lucid.zeros(5, 5)._h, 0, 0, False, False)
    with pytest.raises(ValueError, match="gru_cell: expected gate inputs"):
        _C.gru_cell(lucid.zeros(2, 15)._h, lucid.zeros(2, 15)._h, lucid.zeros(2, 4)._h)
    seq, h = (result(r) for r in _C.gru_layer(x._h, h0._h, w_ih._h, w_hh._h, 0, 0, True))
    assert seq.shape == (3, 2, 5) and h.shape == (2, 5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_lstm_cells_split_over_threads_give_the_same_bits(dtype):
    # An LSTM step's cell runs in parallel parts of whole rows once the batch holds a few
    # thousand values: the same bits on one thread or two, forward and backward.
    import ml_dtypes

    rng = np.random.default_rng(13)
    x = rng.standard_normal((6, 40, 24)).astype(np.float32)
    g = rng.standard_normal((6, 40, 128)).astype(np.float32)

    def run():
        lucid.manual_seed(3)
        layer = lucid.nn.LSTM(24, 128).to(getattr(lucid, dtype))
        xs = lucid.tensor(x).to(getattr(lucid, dtype)).requires_grad_()
        seq, _ = layer(xs)
        (seq.float() * lucid.tensor(g)).sum().backward()
        return seq.float().detach().numpy(), xs.grad.float().numpy(), layer

    threads = lucid.get_num_threads()
    try:
        lucid.set_num_threads(1)
        one = run()
        lucid.set_num_threads(2)
        two = run()
    finally:
        lucid.set_num_threads(threads)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    inputs = x.astype(ml_dtypes.bfloat16).astype(np.float64) if dtype == "bfloat16" else x
    tolerance = 3e-2 if dtype == "bfloat16" else 1e-5
    np.testing.assert_allclose(two[0], rnn_ref(two[2], inputs)[0], atol=tolerance)
