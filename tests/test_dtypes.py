"""dtype conversions, checked bit for bit against numpy (float16) and ml_dtypes (bfloat16),
plus dtype and device representations."""

import pickle

import ml_dtypes
import numpy as np
import pytest

import lucid
from _helpers import DEVICES, mismatches as _mismatches, numpy_f16_bits as _numpy_f16_bits

pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")

ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
F16_ALL = ALL16.view(np.float16)
BF16_ALL = ALL16.view(ml_dtypes.bfloat16)


# ---- float32 -> float16 / bfloat16 over a sample of bit patterns ----------------------------

# The walks over all 2**32 float32 patterns run under `make reliability`
# (tests/reliability/test_dtype_conversions.py). This sample keeps a broken conversion from
# passing `make test`: every sign and exponent with the mantissas where rounding changes (each
# bit position's halfway point, with an even and an odd kept bit, and its neighbours), the
# special values, and a fixed-seed random sample, against numpy and ml_dtypes.
_MANTISSA_EDGES = [0, 0x7FFFFF, 0x400000, 0x3FFFFF] + [
    m for j in range(23) for m in ((1 << j), (1 << j) - 1, (1 << j) + 1, (3 << j) & 0x7FFFFF)
]
_SPECIAL_BITS = [
    0x00000000,
    0x80000000,
    0x00000001,
    0x80000001,
    0x007FFFFF,
    0x807FFFFF,
    0x00800000,  # zeros, subnormals
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x7F800000,
    0xFF800000,  # extremes, infinities
    0x7FC00000,
    0xFFC00000,
    0x7F800001,
    0xFF800001,
    0x7FBFFFFF,
    0x7FFFFFFF,
    0xFFFFFFFF,
    0x7F802000,  # NaNs
    0x477FE000,
    0x477FEFFF,
    0x477FF000,
    0x477FF001,
    0xC77FF000,  # float16: largest, halfway to inf
    0x38800000,
    0x387FC000,
    0x33800000,
    0x33000000,
    0x33000001,
    0x32FFFFFF,  # float16: smallest normal, subnormals
    0x7F7F7FFF,
    0x7F7F8000,
    0xFF7F8000,
    0x7F7EFFFF,
    0x00008000,
    0x00018000,  # bfloat16: into inf, ties
]


def _sampled_float32_bits():
    sign_exponent = np.arange(1 << 9, dtype=np.uint32) << 23
    structured = (sign_exponent[:, None] | np.unique(np.array(_MANTISSA_EDGES, np.uint32))[None, :]).ravel()
    random = np.random.default_rng(20).integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([np.array(_SPECIAL_BITS, np.uint32), structured, random])


@pytest.mark.parametrize("device", DEVICES)
def test_float32_to_float16_sampled_bit_patterns(device):
    bits = _sampled_float32_bits()
    f32 = bits.view(np.float32)
    got = lucid.tensor(f32, device=device).to(lucid.float16).numpy().view(np.uint16)
    m, n = _mismatches(got, _numpy_f16_bits(f32), bits)
    assert n == 0, f"{n} float32->float16 mismatches, e.g. {m}"


@pytest.mark.parametrize("device", DEVICES)
def test_float32_to_bfloat16_sampled_bit_patterns(device):
    bits = _sampled_float32_bits()
    f32 = bits.view(np.float32)
    got = lucid.tensor(f32, device=device).to(lucid.bfloat16).numpy().view(np.uint16)
    with np.errstate(all="ignore"):
        want = f32.astype(ml_dtypes.bfloat16).view(np.uint16)
    m, n = _mismatches(got, want, bits)
    assert n == 0, f"{n} float32->bfloat16 mismatches, e.g. {m}"


@pytest.mark.parametrize("device", DEVICES)
def test_float32_narrowing_sample_on_each_device(device):
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    bits[:8] = [0x7F800001, 0xFF800001, 0x7FC00000, 0x7F802000, 0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001]
    f32 = bits.view(np.float32)
    t = lucid.tensor(f32, device=device)
    got16 = t.to(lucid.float16).numpy().view(np.uint16)
    gotbf = t.to(lucid.bfloat16).numpy().view(np.uint16)
    m, n = _mismatches(got16, _numpy_f16_bits(f32), bits)
    assert n == 0, m
    with np.errstate(all="ignore"):
        wantbf = f32.astype(ml_dtypes.bfloat16).view(np.uint16)
    m, n = _mismatches(gotbf, wantbf, bits)
    assert n == 0, m


# ---- widening: every 16-bit pattern ----------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_float16_to_float32_every_bit_pattern(device):
    got = lucid.tensor(F16_ALL, device=device).to(lucid.float32).numpy().view(np.uint32)
    want = F16_ALL.astype(np.float32).view(np.uint32)
    m, n = _mismatches(got, want, ALL16)
    assert n == 0, m


@pytest.mark.parametrize("device", DEVICES)
def test_float16_storage_round_trips_every_bit_pattern(device):
    got = lucid.tensor(F16_ALL, device=device).numpy()
    assert got.dtype == np.float16
    m, n = _mismatches(got.view(np.uint16), ALL16, ALL16)
    assert n == 0, m


@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_to_float32_every_bit_pattern(device):
    t = lucid.tensor(BF16_ALL, device=device)
    assert t.dtype is lucid.bfloat16
    got = t.to(lucid.float32).numpy().view(np.uint32)
    want = BF16_ALL.astype(np.float32).view(np.uint32)
    m, n = _mismatches(got, want, ALL16)
    assert n == 0, m


@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_to_float32_every_pattern_built_by_exact_narrowing(device):
    # Every bfloat16 pattern is a float32 with 16 zero low bits: narrowing those is exact
    # (NaNs become the canonical quiet NaN, as in ml_dtypes).
    f32 = (ALL16.astype(np.uint32) << 16).view(np.float32)
    t = lucid.tensor(f32, device=device).to(lucid.bfloat16)
    stored = t.numpy()
    assert stored.dtype == np.dtype(ml_dtypes.bfloat16)
    with np.errstate(all="ignore"):
        want = f32.astype(ml_dtypes.bfloat16).view(np.uint16)
    m, n = _mismatches(stored.view(np.uint16), want, ALL16)
    assert n == 0, m
    got = t.to(lucid.float32).numpy().view(np.uint32)
    m, n = _mismatches(got, stored.astype(np.float32).view(np.uint32), ALL16)
    assert n == 0, m


@pytest.mark.parametrize("device", DEVICES)
def test_float16_to_bfloat16_every_bit_pattern(device):
    got = lucid.tensor(F16_ALL, device=device).to(lucid.bfloat16).numpy().view(np.uint16)
    with np.errstate(all="ignore"):
        want = F16_ALL.astype(ml_dtypes.bfloat16).view(np.uint16)
    m, n = _mismatches(got, want, ALL16)
    assert n == 0, m


@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_to_float16_every_non_nan_pattern(device):
    f32 = (ALL16.astype(np.uint32) << 16).view(np.float32)
    t = lucid.tensor(f32, device=device).to(lucid.bfloat16)
    src = t.numpy()
    got = t.to(lucid.float16).numpy().view(np.uint16)
    with np.errstate(all="ignore"):
        want = src.astype(np.float16).view(np.uint16)
    m, n = _mismatches(got, want, ALL16)
    assert n == 0, m


# ---- integers <-> floats ---------------------------------------------------------------------


def _int_samples(np_int):
    info = np.iinfo(np_int)
    rng = np.random.default_rng(3)
    edges = [
        0,
        1,
        -1,
        2,
        7,
        2047,
        2049,
        65504,
        65505,
        65519,
        65520,
        65536,
        -65520,
        2**24,
        2**24 + 1,
        -(2**24 + 1),
        2**30 + 2**22 + 1,
        -(2**30 + 2**22 + 1),
        2**31 - 1,
        -(2**31),
    ]
    if np_int == np.int64:
        edges += [2**53 + 1, 2**62 + 2**38 + 1, 2**63 - 1, -(2**63), 2**31 + 2**23 + 1]
    wide = rng.integers(info.min, info.max, 200_000, dtype=np_int, endpoint=True)
    small = rng.integers(-70_000, 70_000, 100_000, dtype=np_int)
    return np.concatenate([np.array(edges, dtype=np.int64).astype(np_int), wide, small])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("dst", ["float32", "float16", "bfloat16"])
def test_int_to_float_matches_reference(device, src, dst):
    values = _int_samples(src)
    ref_type = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dst]
    view = np.uint32 if dst == "float32" else np.uint16
    with np.errstate(all="ignore"):
        want = values.astype(ref_type).view(view)
    got = lucid.tensor(values, device=device).to(getattr(lucid, dst)).numpy().view(view)
    m, n = _mismatches(got, want, values)
    assert n == 0, f"{n} mismatches: {m}"


def _truncated_saturated(x, np_int):
    """Truncation toward zero, NaN -> 0, saturation at the integer type's range."""
    x = np.asarray(x, dtype=np.float64)
    info = np.iinfo(np_int)
    out = np.zeros(x.shape, dtype=np_int)
    with np.errstate(invalid="ignore"):
        t = np.trunc(x)
        hi = t >= float(info.max)
        lo = t <= float(info.min)
        mid = ~(hi | lo | np.isnan(t))
    out[mid] = t[mid].astype(np_int)
    out[hi] = info.max
    out[lo] = info.min
    return out


def _float_inputs():
    special = np.array(
        [
            0.0,
            -0.0,
            0.5,
            -0.5,
            0.999,
            -0.999,
            1.0,
            -1.0,
            1.5,
            -1.5,
            2.7,
            -2.7,
            1e6 + 0.5,
            2147483520.0,
            2147483648.0,
            -2147483648.0,
            -2147483904.0,
            3e9,
            -3e9,
            1e18,
            9.2233715e18,
            9.223372e18,
            -9.223372e18,
            1e30,
            -1e30,
            3.4e38,
            -3.4e38,
            np.inf,
            -np.inf,
            np.nan,
            -np.nan,
            1e-30,
        ],
        dtype=np.float32,
    )
    rng = np.random.default_rng(11)
    scales = 10.0 ** rng.uniform(-3, 20, 50_000)
    rand = (rng.standard_normal(50_000) * scales).astype(np.float32)
    return np.concatenate([special, rand])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dst", ["int32", "int64"])
def test_float32_to_int_truncates_and_saturates(device, dst):
    x = _float_inputs()
    np_int = np.int32 if dst == "int32" else np.int64
    got = lucid.tensor(x, device=device).to(getattr(lucid, dst)).numpy()
    assert got.dtype == np_int
    want = _truncated_saturated(x, np_int)
    m, n = _mismatches(got, want, x.view(np.uint32))
    assert n == 0, f"{n} mismatches: {m}"


@pytest.mark.parametrize("dst", ["int32", "int64"])
def test_float16_every_pattern_to_int(dst):
    np_int = np.int32 if dst == "int32" else np.int64
    got = lucid.tensor(F16_ALL).to(getattr(lucid, dst)).numpy()
    want = _truncated_saturated(F16_ALL.astype(np.float64), np_int)
    m, n = _mismatches(got, want, ALL16)
    assert n == 0, m


@pytest.mark.parametrize("dst", ["int32", "int64"])
def test_bfloat16_every_pattern_to_int(dst):
    np_int = np.int32 if dst == "int32" else np.int64
    f32 = (ALL16.astype(np.uint32) << 16).view(np.float32)
    t = lucid.tensor(f32).to(lucid.bfloat16)
    got = t.to(getattr(lucid, dst)).numpy()
    with np.errstate(all="ignore"):
        want = _truncated_saturated(f32.astype(np.float64), np_int)
    m, n = _mismatches(got, want, ALL16)
    assert n == 0, m


@pytest.mark.parametrize("device", DEVICES)
def test_engine_cast_agrees_with_tensor_dtype_argument(device):
    x = _float_inputs()
    for d in (lucid.int32, lucid.int64, lucid.bool_):
        via_engine = lucid.tensor(x, device=device).to(d).numpy()
        via_factory = lucid.tensor(x, dtype=d, device=device).numpy()
        np.testing.assert_array_equal(via_engine, via_factory, err_msg=str(d))


@pytest.mark.parametrize("device", DEVICES)
def test_int64_to_int32_wraps_like_numpy(device):
    values = _int_samples(np.int64)
    got = lucid.tensor(values, device=device).to(lucid.int32).numpy()
    np.testing.assert_array_equal(got, values.astype(np.int32))
    back = lucid.tensor(values.astype(np.int32), device=device).to(lucid.int64).numpy()
    np.testing.assert_array_equal(back, values.astype(np.int32).astype(np.int64))


# ---- bool ------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dst", ["float32", "float16", "bfloat16", "int32", "int64"])
def test_bool_to_numbers(device, dst):
    b = np.array([True, False, True, True, False])
    got = lucid.tensor(b, device=device).to(getattr(lucid, dst)).numpy()
    ref = {
        "float32": np.float32,
        "float16": np.float16,
        "bfloat16": ml_dtypes.bfloat16,
        "int32": np.int32,
        "int64": np.int64,
    }[dst]
    assert got.dtype == np.dtype(ref)
    np.testing.assert_array_equal(got.astype(np.float64), b.astype(ref).astype(np.float64))


@pytest.mark.parametrize("device", DEVICES)
def test_numbers_to_bool(device):
    x = _float_inputs()
    np.testing.assert_array_equal(lucid.tensor(x, device=device).to(lucid.bool_).numpy(), x.astype(bool))
    np.testing.assert_array_equal(lucid.tensor(F16_ALL, device=device).to(lucid.bool_).numpy(), F16_ALL.astype(bool))
    ints = _int_samples(np.int64)
    np.testing.assert_array_equal(lucid.tensor(ints, device=device).to(lucid.bool_).numpy(), ints.astype(bool))
    i32 = np.array([0, 1, -1, 2**31 - 1, -(2**31), 256], dtype=np.int32)
    np.testing.assert_array_equal(lucid.tensor(i32, device=device).to(lucid.bool_).numpy(), i32.astype(bool))


def test_bool_round_trip_keeps_values():
    b = np.array([[True, False], [False, True]])
    t = lucid.tensor(b)
    assert t.dtype is lucid.bool_
    np.testing.assert_array_equal(t.to(lucid.float32).to(lucid.bool_).numpy(), b)


# ---- dtype objects ---------------------------------------------------------------------------

DTYPES = [
    ("float32", np.float32),
    ("float16", np.float16),
    ("bfloat16", ml_dtypes.bfloat16),
    ("int32", np.int32),
    ("int64", np.int64),
    ("bool", np.bool_),
]


@pytest.mark.parametrize("name,np_type", DTYPES)
def test_dtype_repr_str_and_itemsize(name, np_type):
    d = lucid.bool_ if name == "bool" else getattr(lucid, name)
    assert repr(d) == f"lucid.{name}"
    assert str(d) == f"lucid.{name}"
    assert d.itemsize == np.dtype(np_type).itemsize
    assert d.is_floating_point == (name in ("float32", "float16", "bfloat16"))
    assert pickle.loads(pickle.dumps(d)) is d


def test_bool_dtype_names():
    assert repr(lucid.bool_) == "lucid.bool"
    assert lucid.bool is lucid.bool_
    assert lucid.half is lucid.float16
    assert lucid.long is lucid.int64
    assert lucid.float is lucid.float32
    assert lucid.int is lucid.int32


@pytest.mark.parametrize("name,np_type", DTYPES)
def test_tensor_dtype_matches_numpy_dtype(name, np_type):
    d = lucid.bool_ if name == "bool" else getattr(lucid, name)
    t = lucid.zeros(2, 3, dtype=d)
    assert t.dtype is d
    assert t.numpy().dtype == np.dtype(np_type)


def test_dtypes_are_distinct():
    ds = [lucid.float32, lucid.float16, lucid.bfloat16, lucid.int32, lucid.int64, lucid.bool_]
    for i, a in enumerate(ds):
        for j, b in enumerate(ds):
            assert (a == b) == (i == j)


# ---- devices ---------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_device_repr_str_and_equality(device):
    t = lucid.ones(2, device=device)
    other = "cpu" if device == "metal" else "metal"
    assert t.device.type == device
    assert str(t.device) == device
    assert repr(t.device) == f"device(type='{device}')"
    assert t.device == device
    assert t.device != other
    assert not (t.device == other)
    assert t.device == lucid.device(device)
    assert t.device != lucid.device(other)
    assert hash(t.device) == hash(lucid.device(device))
    assert lucid.device(lucid.device(device)) == device
    assert pickle.loads(pickle.dumps(t.device)) == device


def test_metal_tensor_device():
    t = lucid.zeros(3, device="metal")
    assert t.device.type == "metal"
    assert str(t.device) == "metal"
    assert t.device == "metal"
    assert t.to("cpu").device == "cpu"
    assert t.to("cpu").to("metal").device == "metal"


def test_device_constructor_errors():
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        lucid.device("tpu")
    with pytest.raises(ValueError, match="no CUDA device"):  # (tests/test_torch_api.py)
        lucid.device("cuda")
    with pytest.raises(TypeError):
        lucid.device(3)


def test_device_equality_with_unrelated_objects():
    d = lucid.device("cpu")
    assert d != 0
    assert d != None  # noqa: E711
    assert {d: 1}[lucid.device("cpu")] == 1


@pytest.mark.parametrize("src", DEVICES)
@pytest.mark.parametrize("dst", DEVICES)
def test_device_transfer_preserves_bits(src, dst):
    f32 = np.random.default_rng(5).integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for d in (lucid.float32, lucid.float16):
        t = lucid.tensor(f32, device=src).to(d)
        before = t.numpy()
        moved = t.to(dst)
        assert moved.device == dst
        assert moved.dtype is d
        np.testing.assert_array_equal(moved.numpy().view(np.uint8), before.view(np.uint8))


def _in_a_fresh_process(code):
    """Runs `code` in a new interpreter, which must print ok."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", code + "print('ok')\n"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_ml_dtypes_is_imported_when_bfloat16_first_meets_numpy():
    # ml_dtypes takes longer to import than all of lucid, so `import lucid` leaves it; the
    # first bfloat16 value converted to or from numpy brings it in.
    _in_a_fresh_process(
        "import sys, numpy as np, lucid, lucid.nn, lucid.optim, lucid.amp, lucid.distributed\n"
        "assert 'ml_dtypes' not in sys.modules\n"
        "t = lucid.tensor([1.5, -2.25, 3.0]).to(lucid.bfloat16) * 2\n"
        "assert 'ml_dtypes' not in sys.modules  # bfloat16 in the engine only, so far\n"
        "a = t.numpy()\n"
        "import ml_dtypes\n"
        "assert a.dtype == ml_dtypes.bfloat16 and a.astype(np.float32).tolist() == [3.0, -4.5, 6.0]\n"
        "b = lucid.tensor(np.array([0.5, 7.0], dtype=ml_dtypes.bfloat16))\n"
        "assert b.dtype is lucid.bfloat16 and b.float().tolist() == [0.5, 7.0]\n"
    )


def test_bfloat16_numpy_arrays_made_in_a_fresh_process_are_read_as_bfloat16():
    # A fresh process whose first bfloat16 value is an ml_dtypes array the program made itself.
    _in_a_fresh_process(
        "import numpy as np, lucid, ml_dtypes\n"
        "x = np.array([[1.0, 2.5], [-0.125, 4.0]], dtype=ml_dtypes.bfloat16)\n"
        "t = lucid.tensor(x)\n"
        "assert t.dtype is lucid.bfloat16, t.dtype\n"
        "assert (t.numpy() == x).all() and t.numpy().dtype == x.dtype\n"
        "assert lucid.from_numpy(x).dtype is lucid.bfloat16\n"
    )


def test_a_value_broadcast_everywhere_converts_as_each_element_would():
    # One value at stride 0 (a sum's gradient, cast to a lower precision) converts once and
    # spreads: the same as converting the materialised tensor, for every target dtype.
    for value in (3.7, -2.5e-3, 1e30, float("nan"), float("inf")):
        spread = lucid.tensor(np.float32(value)).expand(5, 7)
        assert spread.stride() == (0, 0)
        want = np.full((5, 7), value, np.float32)
        np.testing.assert_array_equal(
            spread.to(lucid.bfloat16).float().numpy(), want.astype(ml_dtypes.bfloat16).astype(np.float32)
        )
        with np.errstate(over="ignore"):  # 1e30 is past float16's range: inf, as lucid gives
            half = want.astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(spread.to(lucid.float16).float().numpy(), half)
        np.testing.assert_array_equal(spread.double().numpy(), want.astype(np.float64))
        if np.isfinite(value) and abs(value) < 1e9:
            np.testing.assert_array_equal(spread.to(lucid.int32).numpy(), want.astype(np.int32))
    # A 0-d source broadcast to one element, and a row broadcast along a dimension, take the
    # ordinary paths.
    np.testing.assert_array_equal(lucid.tensor(np.float32(1.5)).expand(1).to(lucid.bfloat16).float().numpy(), [1.5])
    row = np.arange(4, dtype=np.float32) / 3
    np.testing.assert_array_equal(
        lucid.tensor(row).expand(3, 4).to(lucid.bfloat16).float().numpy(),
        np.broadcast_to(row, (3, 4)).astype(ml_dtypes.bfloat16).astype(np.float32),
    )
