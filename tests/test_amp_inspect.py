"""lucid.amp.inspect(): the engine's counts against numpy, and the report's findings."""

import threading

import ml_dtypes
import numpy as np
import pytest

import lucid
import lucid.nn as nn
from lucid.amp.inspect import KEEP_FLOAT32, SAFE_FLOAT16, USE_BFLOAT16
from lucid.nn import module as module_mod

F16_MAX, F16_NORMAL = 65504.0, 2.0**-14
BF16_MAX, BF16_NORMAL = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), 2.0**-126


def bands(values):
    """The engine's counts, from numpy: (max |x| over non-NaN, then the six bands)."""
    a = np.abs(np.asarray(values, dtype=np.float64).ravel())
    finite, nonzero = np.isfinite(a), (a != 0) & ~np.isnan(a)
    return (
        a[~np.isnan(a)].max(initial=0.0),
        {
            "overflow_float16": int((finite & (a > F16_MAX)).sum()),
            "underflow_float16": int((nonzero & (a < F16_NORMAL)).sum()),
            "overflow_bfloat16": int((finite & (a > BF16_MAX)).sum()),
            "underflow_bfloat16": int((nonzero & (a < BF16_NORMAL)).sum()),
            "nonzero": int(nonzero.sum()),
            "nonfinite": int((~finite).sum()),
        },
    )


def awkward_values(rng, n=4096):
    """float32 values in every band: ordinary, past float16, below float16's normals, past
    bfloat16, below float32's normals, zeros, infinities and NaN."""
    x = rng.standard_normal(n).astype(np.float32)
    specials = [
        1e5,
        -7e4,
        65504,
        65520,
        1e-6,
        -3e-5,
        2.0**-14,
        0.0,
        -0.0,
        3.39e38,
        -3.4e38,
        1e-39,
        -1e-40,
        np.inf,
        -np.inf,
        np.nan,
    ]
    idx = rng.choice(n, size=len(specials) * 8, replace=False)
    x[idx] = np.repeat(np.array(specials, dtype=np.float32), 8)
    return x


DEVICES = ["cpu", "metal"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("source", ["float32", "bfloat16", "float16"])
def test_the_engines_counts_match_numpy(device, source):
    rng = np.random.default_rng(3)
    x_np = awkward_values(rng).reshape(64, 64)
    w_np = rng.standard_normal((64, 8)).astype(np.float32)
    target = lucid.bfloat16 if device == "cpu" else lucid.float16
    x = lucid.tensor(x_np, device=device)
    if source != "float32":
        x = x.to(getattr(lucid, source))
    w = lucid.tensor(w_np, device=device)
    with lucid.amp.inspect() as ins:
        with lucid.autocast(device, dtype=target):
            y = lucid.matmul(x, w)
    [rec] = [r for r in ins.report.ops if r.op == "matmul"]
    assert (rec.module, rec.device, rec.dtype, rec.calls) == ("", device, target, 1)
    # The inputs as the op received them, before its cast.
    seen = np.concatenate([x.float().numpy().ravel(), w_np.ravel()])
    top, counts = bands(seen)
    assert rec.input_elements == seen.size
    assert rec.max_abs == np.float32(top)
    assert rec.input_bands == counts
    top, counts = bands(y.float().numpy())
    assert rec.result_elements == y.numel()
    assert rec.result_max_abs == np.float32(top)
    assert rec.result_bands == counts
    assert rec.nonfinite_result and not rec.introduced_nonfinite  # the inputs held inf and NaN


def test_counts_add_up_over_calls_and_past_32_bits_of_a_word():
    """Many calls of one op in one module add into one record; a count past 2^32 is not needed
    to test the carry, but a count past a threadgroup's share is: 3 calls of 100k values."""
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((1000, 100)).astype(np.float32) * 1e5
    w = lucid.ones(100, 1, device="metal")
    x = lucid.tensor(x_np, device="metal")
    with lucid.amp.inspect() as ins:
        with lucid.autocast("metal", dtype=lucid.float16):
            for _ in range(3):
                lucid.matmul(x, w)
    [rec] = ins.report.ops
    top, counts = bands(np.concatenate([x_np.ravel(), np.ones(100)]))
    assert rec.calls == 3
    assert rec.input_elements == 3 * (x_np.size + 100)
    assert rec.input_bands == {k: 3 * v for k, v in counts.items()}
    assert rec.overflow == pytest.approx(counts["overflow_float16"] / (x_np.size + 100))


class Block(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.scale = scale

    def forward(self, x):
        return lucid.relu(self.proj(x)) * self.scale


class Net(nn.Module):
    def __init__(self, scales=(1.0, 1.0)):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(s) for s in scales])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.blocks(x))


def train(model, steps, device="metal", dtype=lucid.float16, init_scale=2.0**10, seed=0):
    rng = np.random.default_rng(seed)
    opt = lucid.optim.SGD(model.parameters(), lr=1e-3)
    scaler = lucid.amp.GradScaler(device, init_scale=init_scale)
    for _ in range(steps):
        x = lucid.tensor(rng.standard_normal((32, 16)).astype(np.float32), device=device)
        with lucid.autocast(device, dtype=dtype):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


def test_an_injected_overflow_is_found_in_its_module_and_op():
    lucid.manual_seed(0)
    model = Net(scales=(1.0, 1e6)).to("metal")
    with lucid.amp.inspect() as ins:
        train(model, 2)
    report = ins.report
    top = report.ops[0]
    assert (top.module, top.op, top.dtype) == ("blocks.1", "mul", lucid.float16)
    assert top.introduced_nonfinite and top.verdict == USE_BFLOAT16
    assert report.modules["blocks.1"] == USE_BFLOAT16
    assert report.judgements["blocks.1"] == (USE_BFLOAT16, "mul: made inf/NaN in float16")
    assert report.judgements["blocks.0"] == (SAFE_FLOAT16, "")
    # The head receives the infinities but did not make them.
    [head] = [r for r in report.ops if r.module == "head"]
    assert head.nonfinite_inputs > 0 and not head.introduced_nonfinite and head.verdict == SAFE_FLOAT16
    assert report.modules["blocks.0"] == SAFE_FLOAT16
    # Every step was skipped, every parameter's gradient named.
    assert [s.skipped for s in report.scaler] == [True, True]
    assert set(report.scaler[0].nonfinite) == {name for name, _ in model.named_parameters()}
    md = report.to_markdown()
    assert "| `blocks.1` | use bfloat16 | mul: made inf/NaN in float16 |" in md and "made here" in md
    d = report.as_dict()
    assert d["ops"][0]["module"] == "blocks.1" and d["modules"]["blocks.1"] == USE_BFLOAT16


def test_an_input_past_float16s_range_is_an_overflow_of_the_op_that_casts_it():
    lin = nn.Linear(16, 4).to("metal")
    x = np.ones((8, 16), dtype=np.float32)
    x[0, :4] = 1e5
    with lucid.amp.inspect() as ins:
        with lucid.autocast("metal"):
            lin(lucid.tensor(x, device="metal"))
    [rec] = ins.report.ops
    assert (rec.module, rec.op) == ("", "linear")
    assert rec.overflow == pytest.approx(4 / (x.size + 16 * 4 + 4))
    assert rec.judgement == (USE_BFLOAT16, "linear: inputs past float16's range (max |x| 1e+05)")
    # The same values under bfloat16 are in its range, so nothing overflows; the verdict is
    # still that float16 would not hold them.
    with lucid.amp.inspect() as ins:
        with lucid.autocast("metal", dtype=lucid.bfloat16):
            lin(lucid.tensor(x, device="metal"))
    [rec] = ins.report.ops
    assert rec.overflow == 0 and not rec.nonfinite_result and rec.verdict == USE_BFLOAT16
    assert rec.judgement == (USE_BFLOAT16, "linear: inputs past float16's range (max |x| 1e+05)")


def test_values_past_bfloat16s_range_need_float32():
    x = np.ones((4, 4), dtype=np.float32)
    x[0, 0] = 3.4e38
    with lucid.amp.inspect() as ins:
        with lucid.autocast("cpu", dtype=lucid.bfloat16):
            lucid.matmul(lucid.tensor(x), lucid.tensor(np.eye(4, dtype=np.float32)))
    assert ins.report.ops[0].judgement == (KEEP_FLOAT32, "matmul: inputs past bfloat16's range (max |x| 3.4e+38)")
    d = ins.report.as_dict()
    assert (
        d["reasons"] == {"": "matmul: inputs past bfloat16's range (max |x| 3.4e+38)"}
        and d["ops"][0]["verdict"] == KEEP_FLOAT32
    )


def test_a_model_safe_in_float16_reports_nothing():
    lucid.manual_seed(1)
    model = Net().to("metal")
    with lucid.amp.inspect() as ins:
        train(model, 3)
    report = ins.report
    assert report.ops and report.findings == []
    assert set(report.modules.values()) == {SAFE_FLOAT16}
    assert {r.module for r in report.ops} == {"blocks.0", "blocks.0.proj", "blocks.1", "blocks.1.proj", "head"}
    assert [s.skipped for s in report.scaler] == [False] * 3
    assert [s.scale for s in report.scaler] == [2.0**10] * 3


def test_overriding_the_module_that_overflows_clears_the_report():
    lucid.manual_seed(0)
    model = Net(scales=(1.0, 1e6)).to("metal")
    model.blocks[1].autocast_policy = "float32"
    with lucid.amp.inspect() as ins:
        train(model, 2)
    # blocks.1 now runs in float32, so it is not counted; its large float32 outputs overflow
    # where the head casts them to float16.
    assert "blocks.1" not in ins.report.modules
    [top] = ins.report.findings
    assert (top.module, top.op, top.verdict) == ("head", "linear", USE_BFLOAT16)
    assert top.overflow > 0 and top.introduced_nonfinite
    model.get_submodule(top.module).autocast_policy = "float32"
    with lucid.amp.inspect() as ins:
        train(model, 2)
    assert ins.report.findings == []
    assert set(ins.report.modules) == {"blocks.0", "blocks.0.proj"}
    # The forward is clean now; the backward is not: the huge gradients that reach blocks.0
    # through its float16 output overflow there, and the scaler names its parameters.
    assert [(s.skipped, sorted(s.nonfinite)) for s in ins.report.scaler] == [
        (True, ["blocks.0.proj.bias", "blocks.0.proj.weight"])
    ] * 2


def test_the_scaler_history_names_the_parameter_whose_gradient_was_not_finite():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(lucid.ones(4))
            self.b = nn.Parameter(lucid.ones(4))

        def forward(self, x, y):
            return (self.a * x).sum() + (self.b * y).sum()

    m = Two()
    opt = lucid.optim.SGD(m.parameters(), lr=0.1)
    scaler = lucid.amp.GradScaler("cpu", init_scale=1e36)
    x, y = lucid.ones(4), lucid.full((4,), 1e5)
    with lucid.amp.inspect() as ins:
        for _ in range(2):
            opt.zero_grad()
            scaler.scale(m(x, y)).backward()
            scaler.step(opt)
            scaler.update()
    steps = ins.report.scaler
    assert [(s.step, s.scale, s.skipped, s.nonfinite) for s in steps] == [
        (0, np.float32(1e36), True, ["b"]),
        (1, np.float32(5e35), True, ["b"]),
    ]
    assert "step 0 skipped (scale 1e+36): non-finite gradient in b" in ins.report.to_markdown()


def test_nested_inspections_and_the_decorator():
    w = lucid.ones(4, 4)

    @lucid.amp.inspect()
    def step():
        with lucid.autocast("cpu", dtype=lucid.bfloat16):
            return lucid.matmul(lucid.ones(2, 4), w)

    with lucid.amp.inspect() as outer:
        with lucid.autocast("cpu", dtype=lucid.bfloat16):
            lucid.matmul(lucid.ones(3, 4), w)
        step()
        step()
    assert outer.report.ops[0].calls == 3  # the outer one sees the inner ones' ops too


def test_the_decorator_keeps_the_last_calls_report():
    ins = lucid.amp.inspect()

    @ins
    def step(n):
        with lucid.autocast("cpu", dtype=lucid.bfloat16):
            for _ in range(n):
                lucid.matmul(lucid.ones(2, 4), lucid.ones(4, 4))

    step(2)
    assert ins.report.ops[0].calls == 2
    step(1)
    assert ins.report.ops[0].calls == 1


def test_an_inspection_sees_only_its_own_thread():
    seen = {}

    def other():
        with lucid.autocast("cpu", dtype=lucid.bfloat16):
            lucid.matmul(lucid.ones(2, 4), lucid.ones(4, 4))
        seen["done"] = True

    with lucid.amp.inspect() as ins:
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen["done"] and ins.report.ops == []


def test_nothing_is_recorded_off_and_the_module_hook_is_removed():
    assert not module_mod._call_contexts
    with lucid.amp.inspect():
        assert len(module_mod._call_contexts) == 1
    assert not module_mod._call_contexts
    # Without an inspection, the engine keeps no records: a new one starts empty.
    with lucid.autocast("cpu", dtype=lucid.bfloat16):
        lucid.matmul(lucid.ones(2, 4), lucid.ones(4, 4))
    with lucid.amp.inspect() as ins:
        pass
    assert ins.report.ops == [] and ins.report.scaler == []


def test_float32_and_float64_ops_are_not_counted():
    with lucid.amp.inspect() as ins:
        with lucid.autocast("cpu", dtype=lucid.bfloat16):
            lucid.softmax(lucid.ones(2, 4), dim=-1)  # a float32 op
            lucid.matmul(lucid.ones(2, 4, dtype=lucid.float64), lucid.ones(4, 4, dtype=lucid.float64))
    assert ins.report.ops == []


def test_bad_handles_and_early_reports_are_refused():
    from lucid import _C

    with pytest.raises(ValueError, match="not live on this thread"):
        _C.amp_inspect_end(987654321)
    ins = lucid.amp.inspect()
    with pytest.raises(RuntimeError, match="no report until its scope ends"):
        ins.to_markdown()
    with ins:
        pass
    with pytest.raises(IndexError, match="out of range"):
        _C.amp_inspect_entry(5)


def test_get_submodule_follows_a_report_path():
    model = Net()
    assert model.get_submodule("blocks.1.proj") is model.blocks[1].proj
    assert model.get_submodule("") is model
    with pytest.raises(AttributeError, match="no submodule `nope`"):
        model.get_submodule("blocks.nope")


def test_a_scope_ends_on_its_own_thread_and_a_shared_decorator_counts_per_thread():
    ins = lucid.amp.inspect()
    ins.__enter__()
    errors = []

    def end_elsewhere():
        try:
            ins.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=end_elsewhere)
    t.start()
    t.join()
    assert errors and "must end on the thread that began it" in errors[0]
    ins.__exit__(None, None, None)  # still live here, and ends
    assert not module_mod._call_contexts

    shared = lucid.amp.inspect()
    barrier = threading.Barrier(2)
    calls = {}

    @shared
    def step(n):
        barrier.wait()
        with lucid.autocast("cpu", dtype=lucid.bfloat16):
            for _ in range(n):
                lucid.matmul(lucid.ones(2, 4), lucid.ones(4, 4))
        barrier.wait()

    def run(n):
        step(n)
        calls[n] = True

    threads = [threading.Thread(target=run, args=(n,)) for n in (2, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == {2: True, 5: True}
    assert shared.report.ops[0].calls in (2, 5)  # one thread's own count, not both


def test_many_subnormal_inputs_ask_for_bfloat16():
    x = np.full((8, 8), 1e-6, dtype=np.float32)  # below float16's normals, inside bfloat16's
    with lucid.amp.inspect() as ins:
        with lucid.autocast("metal", dtype=lucid.float16):
            lucid.matmul(lucid.tensor(x, device="metal"), lucid.ones(8, 8, device="metal"))
    [rec] = ins.report.ops
    assert rec.underflow == pytest.approx(64 / 128)
    assert rec.judgement == (USE_BFLOAT16, "matmul: 50.0% of non-zero inputs below float16's normals")


def test_a_result_past_float16s_range_under_bfloat16_asks_for_bfloat16():
    x = lucid.full((4, 8), 300.0)  # in float16's range; each product sums to 8 * 300 * 300
    with lucid.amp.inspect() as ins:
        with lucid.autocast("cpu", dtype=lucid.bfloat16):
            y = lucid.matmul(x, x.T)
    [rec] = ins.report.ops
    assert rec.overflow == 0 and not rec.nonfinite_result
    assert rec.result_max_abs == y.float().numpy().max() == 720896.0  # 720000 in bfloat16
    assert rec.judgement == (USE_BFLOAT16, "matmul: results past float16's range (max 7.21e+05)")


def test_an_error_inside_the_scope_ends_it_and_keeps_what_was_counted():
    ins = lucid.amp.inspect()
    with pytest.raises(ValueError, match="not aligned"):
        with ins:
            with lucid.autocast("cpu", dtype=lucid.bfloat16):
                lucid.matmul(lucid.ones(2, 4), lucid.ones(4, 4))
                lucid.matmul(lucid.ones(2, 4), lucid.ones(3, 4))  # refused before it runs
    assert not module_mod._call_contexts
    [rec] = ins.report.ops
    assert (rec.op, rec.calls, rec.result_elements) == ("matmul", 1, 8)
    # Ops after the scope are not counted by it, and a new scope starts from nothing.
    with lucid.amp.inspect() as again:
        pass
    assert again.report.ops == []


def test_an_op_that_keeps_dtypes_is_counted_only_when_it_ran_in_the_lower_one():
    half = lucid.ones(4, device="metal").half()
    with lucid.amp.inspect() as ins:
        with lucid.autocast("metal"):
            half * half  # float16
            half * lucid.ones(4, device="metal")  # promoted: runs in float32
            half + 2.0  # a Python scalar keeps float16
    assert [(r.op, r.calls, r.dtype) for r in ins.report.ops] == [("mul", 1, lucid.float16), ("add", 1, lucid.float16)]
