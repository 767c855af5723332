"""The 8- and 16-bit integer dtypes (uint8, int8, int16): their codes and limits, PyTorch's
promotion among every integer dtype and bool, wrapping (two's complement) arithmetic checked
against numpy, conversions, reductions, indexing with uint8 masks, creation, checkpoints, and
the errors; on "cpu" and "metal" (where the Metal backend runs their kernels on the host)."""

import json
import struct

import ml_dtypes
import numpy as np
import pytest

import lucid
from _helpers import DEVICES

pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")

SMALL = ["uint8", "int8", "int16"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
NP = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float32": np.float32,
}


def L(name):
    return getattr(lucid, "bool_" if name == "bool" else name)


def values(name, n=64, seed=0):
    """`n` values spread over the whole range of integer dtype `name`, its extremes included."""
    info = np.iinfo(NP[name])
    rng = np.random.default_rng(seed)
    drawn = rng.integers(info.min, info.max, n, dtype=np.int64, endpoint=True)
    drawn[:4] = [info.min, info.max, 0, -1 if info.min < 0 else 1]
    return drawn.astype(NP[name])


# ---- the dtypes themselves ---------------------------------------------------------------------


def test_dtypes_have_pytorch_names_codes_sizes_and_aliases():
    table = {name: (code, size, floating) for code, name, size, floating in lucid._C.dtype_table()}
    assert table["uint8"] == (7, 1, 0) and table["int8"] == (8, 1, 0) and table["int16"] == (9, 2, 0)
    # The codes before them never change.
    assert [table[n][0] for n in ("float32", "float16", "bfloat16", "int32", "int64", "bool", "float64")] == list(
        range(7)
    )
    assert lucid.short is lucid.int16
    for name in SMALL:
        d = L(name)
        assert repr(d) == f"lucid.{name}" and not d.is_floating_point and d.itemsize == np.dtype(NP[name]).itemsize
        assert d.is_signed == (name != "uint8")
        assert lucid.zeros(2, dtype=d).numpy().dtype == NP[name]
    assert not lucid.bool_.is_signed and lucid.int64.is_signed and lucid.float32.is_signed


@pytest.mark.parametrize("name", INTS)
def test_iinfo_gives_the_limits_of_each_integer_dtype(name):
    info, want = lucid.iinfo(L(name)), np.iinfo(NP[name])
    assert (info.bits, info.min, info.max, info.dtype) == (want.bits, int(want.min), int(want.max), name)
    assert repr(info) == f"iinfo(min={want.min}, max={want.max}, dtype={name})"


def test_iinfo_refuses_floats_bool_and_non_dtypes():
    with pytest.raises(TypeError, match="integer dtype.*float32"):
        lucid.iinfo(lucid.float32)
    with pytest.raises(TypeError, match="integer dtype.*bool"):
        lucid.iinfo(lucid.bool_)
    with pytest.raises(TypeError, match="lucid.dtype"):
        lucid.iinfo("int8")


# ---- promotion -----------------------------------------------------------------------------------

ORDER = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"]
_RANGE = {"bool": (0, 1), **{n: (int(np.iinfo(NP[n]).min), int(np.iinfo(NP[n]).max)) for n in INTS}}


def documented_promotion(a, b):
    """`torch.promote_types` from PyTorch's documented rules: categories bool < integer <
    floating, the higher category wins; two integers give the narrowest signed-or-unsigned
    integer dtype whose range holds both ranges (uint8 with int8: int16); float16 with
    bfloat16 gives float32; anything with itself is itself."""
    if a == b:
        return a
    cat = {n: 0 if n == "bool" else (2 if n.startswith(("float", "bfloat")) else 1) for n in ORDER}
    if cat[a] != cat[b]:
        return a if cat[a] > cat[b] else b
    if cat[a] == 2:
        return "float32"  # float16 with bfloat16, or either with float32
    lo, hi = min(_RANGE[a][0], _RANGE[b][0]), max(_RANGE[a][1], _RANGE[b][1])
    return next(n for n in INTS if _RANGE[n][0] <= lo and hi <= _RANGE[n][1])


def test_documented_rules_give_the_table_pytorch_prints():
    # Spot checks of the derived table against entries PyTorch's documentation states.
    assert documented_promotion("uint8", "int8") == "int16"
    assert documented_promotion("int16", "uint8") == "int16"
    assert documented_promotion("int8", "int32") == "int32"
    assert documented_promotion("bool", "uint8") == "uint8"
    assert documented_promotion("int64", "float16") == "float16"
    # Among the integers, numpy's rule is the same one.
    for a in INTS:
        for b in INTS:
            assert documented_promotion(a, b) == np.promote_types(NP[a], NP[b]).name, (a, b)


@pytest.mark.parametrize("a", ORDER)
@pytest.mark.parametrize("b", ORDER)
def test_tensor_tensor_promotion_entry_by_entry(a, b):
    x, y = lucid.ones(3, dtype=L(a)), lucid.ones(3, dtype=L(b))
    want = documented_promotion(a, b)
    if "bool" == a == b:
        assert (x | y).dtype is lucid.bool_
        return
    assert (x + y).dtype is L(want), (a, b)
    assert lucid.where(lucid.tensor([True, False, True]), x, y).dtype is L(want)
    assert lucid.cat([x, y]).dtype is L(want)


@pytest.mark.parametrize("name", SMALL)
def test_python_scalars_and_zero_dim_tensors_only_raise_the_category(name):
    x = lucid.tensor(values(name, 8))
    assert (x + 300).dtype is L(name)
    assert (x * True).dtype is L(name)
    assert (x + 1.5).dtype is lucid.float32
    assert (x + lucid.tensor(5)).dtype is L(name)  # a 0-d int64 tensor does not widen a dimensioned one
    assert (x + lucid.tensor(5.0, dtype=lucid.float64)).dtype is lucid.float64  # a 0-d float of a higher category wins
    assert (lucid.tensor(5, dtype=L(name)) + lucid.ones(2, dtype=lucid.int32)).dtype is lucid.int32
    assert (x / 2).dtype is lucid.float32 and (x / x).dtype is lucid.float32


# ---- wrapping arithmetic against numpy ---------------------------------------------------------

BINARY = {
    "add": (lambda x, y: x + y, np.add),
    "sub": (lambda x, y: x - y, np.subtract),
    "mul": (lambda x, y: x * y, np.multiply),
    "maximum": (lucid.maximum, np.maximum),
    "minimum": (lucid.minimum, np.minimum),
    "and": (lambda x, y: x & y, np.bitwise_and),
    "or": (lambda x, y: x | y, np.bitwise_or),
    "xor": (lambda x, y: x ^ y, np.bitwise_xor),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_ops_wrap_as_numpy(device, name, op):
    a, b = values(name, seed=1), values(name, seed=2)
    f, ref = BINARY[op]
    with np.errstate(over="ignore"):
        want = ref(a, b)
    got = f(lucid.tensor(a, device=device), lucid.tensor(b, device=device))
    assert got.dtype is L(name) and got.device == device
    np.testing.assert_array_equal(got.numpy(), want)
    # Broadcast against a column, and the same op with a Python int (wrapped to the width).
    col = lucid.tensor(b[:4].reshape(4, 1), device=device)
    np.testing.assert_array_equal(f(lucid.tensor(a, device=device), col).numpy(), ref(a, b[:4].reshape(4, 1)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_scalar_arithmetic_wraps(device, name):
    a = values(name, seed=3)
    x = lucid.tensor(a, device=device)
    wide = a.astype(np.int64)
    for got, want in [
        (x + 300, wide + 300),
        (x - 1000, wide - 1000),
        (x * 3, wide * 3),
        (-x, -wide),
        (x.abs(), np.abs(wide)),
        (2 - x, 2 - wide),
    ]:
        assert got.dtype is L(name)
        np.testing.assert_array_equal(got.numpy(), want.astype(NP[name]))  # the int64 result wrapped


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_division_power_and_bitwise_not(device, name):
    a = values(name, seed=4)
    b = values(name, seed=5)
    b[b == 0] = 3
    x, y = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    q = x / y
    assert q.dtype is lucid.float32
    np.testing.assert_allclose(q.numpy(), (a.astype(np.float64) / b).astype(np.float32), rtol=1e-6)
    e = np.arange(len(a), dtype=NP[name]) % 5
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal((x ** lucid.tensor(e, device=device)).numpy(), np.power(a, e))
        np.testing.assert_array_equal((x**3).numpy(), np.power(a, 3).astype(NP[name]))
    np.testing.assert_array_equal((~x).numpy(), np.invert(a))
    np.testing.assert_array_equal(lucid.bitwise_not(x).numpy(), np.invert(a))


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_small_ints_compute_in_the_promoted_dtype(device):
    u = np.array([0, 1, 200, 255], np.uint8)
    i = np.array([-128, -1, 100, 127], np.int8)
    got = lucid.tensor(u, device=device) - lucid.tensor(i, device=device)
    assert got.dtype is lucid.int16
    np.testing.assert_array_equal(got.numpy(), u.astype(np.int16) - i.astype(np.int16))
    got = lucid.tensor(i, device=device) * lucid.tensor(i.astype(np.int16) * 200, device=device)
    assert got.dtype is lucid.int16
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got.numpy(), i.astype(np.int16) * (i.astype(np.int16) * 200))


# ---- comparisons, where, clamp -------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_comparisons(device, name):
    a, b = values(name, seed=6), values(name, seed=7)
    b[:8] = a[:8]
    x, y = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    for got, want in [
        (x == y, a == b),
        (x != y, a != b),
        (x < y, a < b),
        (x <= y, a <= b),
        (x > y, a > b),
        (x >= y, a >= b),
        (x > 5, a > 5),
        (x <= 2.5, a <= 2.5),
    ]:
        assert got.dtype is lucid.bool_
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("device", DEVICES)
def test_an_int_scalar_compared_with_an_integer_tensor_wraps_to_its_width(device):
    # PyTorch converts the scalar to the tensor's dtype: 456 is 200 as uint8, -1 is 255.
    u = lucid.tensor(np.array([200, 1, 255], np.uint8), device=device)
    np.testing.assert_array_equal((u == 456).numpy(), [True, False, False])
    np.testing.assert_array_equal((u > -1).numpy(), [False, False, False])
    np.testing.assert_array_equal((u < 256.5).numpy(), [True, True, True])  # a float compares as float32
    i = lucid.tensor(np.array([1, 2], np.int32), device=device)
    np.testing.assert_array_equal((i == 2**32 + 1).numpy(), [True, False])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_where_clamp_and_masked_fill(device, name):
    a, b = values(name, seed=8), values(name, seed=9)
    cond = np.arange(len(a)) % 3 == 0
    x, y = lucid.tensor(a, device=device), lucid.tensor(b, device=device)
    c = lucid.tensor(cond, device=device)
    got = lucid.where(c, x, y)
    assert got.dtype is L(name)
    np.testing.assert_array_equal(got.numpy(), np.where(cond, a, b))
    np.testing.assert_array_equal(lucid.where(c, x, 7).numpy(), np.where(cond, a, 7).astype(NP[name]))
    lo, hi = (0, 100) if name == "uint8" else (-50, 100)
    np.testing.assert_array_equal(x.clamp(lo, hi).numpy(), np.clip(a, lo, hi))
    np.testing.assert_array_equal(x.masked_fill(c, 9).numpy(), np.where(cond, 9, a).astype(NP[name]))
    with pytest.raises(ValueError, match=f"cannot be converted to lucid.{name} without overflow"):
        lucid.where(c, x, 70000)


# ---- conversions ---------------------------------------------------------------------------------


def wrapped_from_float(f, name):
    """PyTorch's float -> small integer conversion: truncate toward zero, then wrap (NaN is 0).
    Beyond int64's range (where C++ leaves the conversion undefined and PyTorch's result
    depends on the CPU) lucid saturates at int64's limits first."""
    t = np.nan_to_num(np.trunc(f.astype(np.float64)), nan=0.0)
    inside = np.abs(t) < 2.0**63
    with np.errstate(invalid="ignore"):
        wide = np.where(inside, t, 0).astype(np.int64)
    wide[~inside & (t > 0)] = np.iinfo(np.int64).max
    wide[~inside & (t < 0)] = np.iinfo(np.int64).min
    return wide.astype(NP[name])


FLOATS = np.array(
    [
        -1.5,
        2.7,
        300.2,
        -300.7,
        255.9,
        256.0,
        -128.9,
        127.5,
        70000.2,
        -40000.5,
        np.nan,
        0.0,
        -0.0,
        1e6,
        -1e6,
        65535.0,
        32767.9,
    ],
    np.float32,
)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16"])
def test_byte_char_short_convert_floats_by_truncating_then_wrapping(device, src):
    with np.errstate(over="ignore"):
        f = FLOATS.astype(NP[src])  # (70000 is an infinity in float16)
    x = lucid.tensor(f, device=device)
    for method, name in [("byte", "uint8"), ("char", "int8"), ("short", "int16")]:
        got = getattr(x, method)()
        assert got.dtype is L(name) and got.device == device
        np.testing.assert_array_equal(got.numpy(), wrapped_from_float(f.astype(np.float32), name), err_msg=method)
        np.testing.assert_array_equal(x.to(L(name)).numpy(), got.numpy())


# Every pair with an 8- or 16-bit integer on one side (test_dtypes.py has the others).
PAIRS = [
    (s, d)
    for s in INTS + ["bool"]
    for d in INTS + ["bool", "float32", "float16", "bfloat16"]
    if s in SMALL or d in SMALL
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src,dst", PAIRS)
def test_conversions_between_integer_dtypes_wrap_as_numpy(device, src, dst):
    a = values(src) if src != "bool" else np.arange(10) % 2 == 0
    got = lucid.tensor(a, device=device).to(L(dst))
    assert got.dtype is L(dst)
    if dst == "bool":
        want = a != 0
    else:
        want = (
            a.astype(np.int64).astype(np.float32).astype(NP[dst])
            if dst.startswith(("float", "bfloat"))
            else a.astype(NP[dst])
        )
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name", SMALL)
def test_numpy_arrays_keep_their_dtype_and_python_numbers_are_checked(name):
    a = values(name)
    t = lucid.tensor(a)
    assert t.dtype is L(name) and t.numpy().dtype == NP[name]
    np.testing.assert_array_equal(t.numpy(), a)
    assert lucid.from_numpy(a).dtype is L(name)
    assert t.tolist() == a.tolist() and isinstance(t[0].item(), int)
    # A numpy array converts by wrapping; Python numbers out of range are refused (as PyTorch).
    np.testing.assert_array_equal(
        lucid.tensor(np.array([300, -1, 70000]), dtype=L(name)).numpy(), np.array([300, -1, 70000]).astype(NP[name])
    )
    info = np.iinfo(NP[name])
    assert lucid.tensor([int(info.min), int(info.max)], dtype=L(name)).tolist() == [info.min, info.max]
    with pytest.raises(ValueError, match=f"value {info.max + 1} cannot be converted to lucid.{name}"):
        lucid.tensor([1, int(info.max) + 1], dtype=L(name))
    with pytest.raises(ValueError, match="cannot be converted"):
        lucid.tensor([float("nan")], dtype=L(name))
    assert lucid.tensor([1.5, float(info.max) + 0.5], dtype=L(name)).tolist() == [1, info.max]


def test_uint8_takes_python_ints_down_to_minus_255_wrapped():
    assert lucid.tensor([-1, -255], dtype=lucid.uint8).tolist() == [255, 1]
    with pytest.raises(ValueError, match="-256"):
        lucid.tensor([-256], dtype=lucid.uint8)
    with pytest.raises(ValueError, match="-1.5"):
        lucid.tensor([-1.5], dtype=lucid.uint8)


def test_legacy_tensor_types_and_type_names():
    assert lucid.ByteTensor([1, 2]).dtype is lucid.uint8
    assert lucid.CharTensor(2, 3).dtype is lucid.int8 and lucid.ShortTensor([3]).dtype is lucid.int16
    assert lucid.zeros(1, dtype=lucid.uint8).type() == "lucid.ByteTensor"
    assert lucid.zeros(1).type("torch.ShortTensor").dtype is lucid.int16


def test_memory_format_of_the_conversions():
    x = lucid.tensor(np.arange(36, dtype=np.float32).reshape(1, 2, 3, 6) - 10)
    for fmt in (lucid.preserve_format, lucid.contiguous_format):
        y = x.byte(memory_format=fmt)
        assert y.is_contiguous() and y.dtype is lucid.uint8
    y = x.char(memory_format=lucid.channels_last)
    assert y.stride() == (36, 1, 12, 2) and y.dtype is lucid.int8  # channels innermost in memory
    np.testing.assert_array_equal(y.numpy(), wrapped_from_float(x.numpy(), "int8"))
    z = lucid.zeros(1, 2, 2, 2, 2).short(memory_format=lucid.channels_last_3d)
    assert z.stride() == (16, 1, 8, 4, 2)
    with pytest.raises(RuntimeError, match="rank 4"):
        lucid.zeros(2, 3).byte(memory_format=lucid.channels_last)
    with pytest.raises(TypeError, match="memory_format"):
        x.short(memory_format="channels_last")


# ---- creation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_creation_with_dtype(device, name):
    d = L(name)
    for t, want in [
        (lucid.zeros(2, 3, dtype=d, device=device), np.zeros((2, 3), NP[name])),
        (lucid.ones(4, dtype=d, device=device), np.ones(4, NP[name])),
        (
            lucid.full((2,), -5 if name != "uint8" else 5, dtype=d, device=device),
            np.full(2, -5 if name != "uint8" else 5, NP[name]),
        ),
        (lucid.arange(10, dtype=d, device=device), np.arange(10, dtype=NP[name])),
        (lucid.arange(0, 9, 2.5, dtype=d, device=device), np.array([0, 2, 5, 7], NP[name])),
        (lucid.empty(3, dtype=d, device=device), np.zeros(3, NP[name])),
        (lucid.zeros_like(lucid.ones(2, dtype=d, device=device)), np.zeros(2, NP[name])),
    ]:
        assert t.dtype is d and t.device == device
        np.testing.assert_array_equal(t.numpy(), want)
    # arange past the type's range wraps, as PyTorch's does.
    np.testing.assert_array_equal(
        lucid.arange(250, 260, dtype=lucid.uint8, device=device).numpy(), np.arange(250, 260).astype(np.uint8)
    )


@pytest.mark.parametrize("device", DEVICES)
def test_fill_values_out_of_range_are_refused_as_pytorch_does(device):
    assert lucid.full((1,), 255.5, dtype=lucid.uint8, device=device).tolist() == [255]
    assert lucid.full((1,), -255, dtype=lucid.uint8, device=device).tolist() == [1]
    assert lucid.full((1,), 32767.9, dtype=lucid.int16, device=device).tolist() == [32767]
    for value, d in [
        (300, lucid.uint8),
        (-256, lucid.uint8),
        (256.5, lucid.uint8),
        (-1.5, lucid.uint8),
        (-129, lucid.int8),
        (-128.9, lucid.int8),
        (128, lucid.int8),
        (32768, lucid.int16),
        (float("nan"), lucid.int16),
        (float("inf"), lucid.int8),
    ]:
        with pytest.raises(ValueError, match=f"cannot be converted to {d!r} without overflow"):
            lucid.full((1,), value, dtype=d, device=device)
    x = lucid.zeros(2, dtype=lucid.int8, device=device)
    with pytest.raises(ValueError, match="cannot be converted to lucid.int8"):
        x.fill_(200)
    x[0] = -128
    assert x.tolist() == [-128, 0]


# ---- reductions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_reductions_have_pytorch_result_dtypes(device, name):
    a = values(name, 24, seed=10).reshape(4, 6)
    x = lucid.tensor(a, device=device)
    wide = a.astype(np.int64)
    s = x.sum()
    assert s.dtype is lucid.int64 and s.item() == wide.sum()
    np.testing.assert_array_equal(x.sum(1).numpy(), wide.sum(1))
    np.testing.assert_array_equal(x.sum(0, keepdim=True).numpy(), wide.sum(0, keepdims=True))
    c = x.cumsum(1)
    assert c.dtype is lucid.int64
    np.testing.assert_array_equal(c.numpy(), np.cumsum(wide, 1))
    for got, want in [(x.max(), a.max()), (x.min(), a.min()), (x.amax(1), a.max(1)), (x.amin(0), a.min(0))]:
        assert got.dtype is L(name)
        np.testing.assert_array_equal(got.numpy(), want)
    v, i = x.max(1)
    assert v.dtype is L(name) and i.dtype is lucid.int64
    np.testing.assert_array_equal(i.numpy(), a.argmax(1))
    np.testing.assert_array_equal(x.argmin(0).numpy(), a.argmin(0))
    with pytest.raises(TypeError, match=f"mean: input dtype must be floating point, got lucid.{name}"):
        x.mean()


# ---- indexing, cat, matmul -----------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_indexing_gather_and_cat(device, name):
    a = values(name, 12, seed=11).reshape(3, 4)
    x = lucid.tensor(a, device=device)
    np.testing.assert_array_equal(x[1].numpy(), a[1])
    np.testing.assert_array_equal(x[:, 1:3].numpy(), a[:, 1:3])
    idx = np.array([2, 0, 2])
    np.testing.assert_array_equal(x[lucid.tensor(idx, device=device)].numpy(), a[idx])
    np.testing.assert_array_equal(x.index_select(1, lucid.tensor([3, 0], device=device)).numpy(), a[:, [3, 0]])
    g = np.array([[0, 1], [3, 3], [2, 0]])
    np.testing.assert_array_equal(x.gather(1, lucid.tensor(g, device=device)).numpy(), np.take_along_axis(a, g, 1))
    mask = a > 0
    np.testing.assert_array_equal(x[lucid.tensor(mask, device=device)].numpy(), a[mask])
    both = lucid.cat([x, x[:1]], 0)
    assert both.dtype is L(name)
    np.testing.assert_array_equal(both.numpy(), np.concatenate([a, a[:1]], 0))
    np.testing.assert_array_equal(lucid.stack([x, x]).numpy(), np.stack([a, a]))
    np.testing.assert_array_equal(x.t().contiguous().numpy(), a.T)


@pytest.mark.parametrize("device", DEVICES)
def test_a_uint8_index_is_a_mask_as_in_pytorch(device):
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    x = lucid.tensor(a, device=device)
    m = np.array([1, 0, 7], np.uint8)  # any nonzero byte selects
    got = x[lucid.tensor(m, device=device)]
    np.testing.assert_array_equal(got.numpy(), a[m != 0])
    full = np.array([[0, 2, 0, 1]] * 3, np.uint8)
    np.testing.assert_array_equal(x[lucid.tensor(full, device=device)].numpy(), a[full != 0])
    y = lucid.tensor(a, device=device)
    y[lucid.tensor(m, device=device)] = -1
    want = a.copy()
    want[m != 0] = -1
    np.testing.assert_array_equal(y.numpy(), want)
    with pytest.raises(IndexError, match="shape of the mask"):
        x[lucid.tensor(np.array([1, 0], np.uint8), device=device)]
    # int8 and int16 indices are positions, as int32 and int64 ones.
    np.testing.assert_array_equal(x[lucid.tensor(np.array([2, -1], np.int8), device=device)].numpy(), a[[2, -1]])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_matmul_wraps_in_the_integer_dtype(device, name):
    a, b = values(name, 12, seed=12).reshape(3, 4), values(name, 8, seed=13).reshape(4, 2)
    got = lucid.tensor(a, device=device) @ lucid.tensor(b, device=device)
    assert got.dtype is L(name)
    np.testing.assert_array_equal(got.numpy(), (a.astype(np.int64) @ b.astype(np.int64)).astype(NP[name]))


# ---- float-only ops, gradients -------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", SMALL)
def test_float_math_on_small_ints_gives_float32(device, name):
    a = (values(name, 16, seed=14).astype(np.int64) % 50).astype(NP[name])
    x = lucid.tensor(a, device=device)
    for f, ref in [(lucid.sqrt, np.sqrt), (lucid.exp, np.exp), (lucid.sin, np.sin), (lucid.sigmoid, None)]:
        got = f(x)
        assert got.dtype is lucid.float32
        if ref is not None:
            np.testing.assert_allclose(got.numpy(), ref(a.astype(np.float64)).astype(np.float32), rtol=1e-5)
    assert (x**0.5).dtype is lucid.float32


@pytest.mark.parametrize("name", SMALL)
def test_errors_name_the_dtype(name):
    x = lucid.ones(3, dtype=L(name))
    with pytest.raises(TypeError, match=f"only floating-point tensors can require gradients, got lucid.{name}"):
        x.requires_grad_(True)
    with pytest.raises(TypeError, match="float"):
        x & lucid.ones(3)
    with pytest.raises(TypeError, match=f"lucid.{name}"):
        lucid.softmax(x, 0)
    with pytest.raises(TypeError):
        lucid.randn(3, dtype=L(name))


# ---- checkpoints ---------------------------------------------------------------------------------


def test_safetensors_stores_u8_i8_i16(tmp_path):
    state = {name: lucid.tensor(values(name, 10).reshape(2, 5)) for name in SMALL}
    lucid.save(state, tmp_path / "small.safetensors")
    raw = (tmp_path / "small.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    assert {k: header[k]["dtype"] for k in SMALL} == {"uint8": "U8", "int8": "I8", "int16": "I16"}
    back = lucid.load(tmp_path / "small.safetensors")
    for name in SMALL:
        assert back[name].dtype is L(name)
        np.testing.assert_array_equal(back[name].numpy(), state[name].numpy())


# ---- the Metal backend ---------------------------------------------------------------------------


def test_metal_runs_the_small_int_kernels_on_the_host_and_counts_them():
    a = values("int8", 16)
    x = lucid.tensor(a, device="metal")
    before = sum(lucid.metal.host_fallback_counts().values())
    doubled = (a.astype(np.int64) * 2).astype(np.int8)
    np.testing.assert_array_equal((x + x).numpy(), doubled)
    assert (x + x).sum().item() == int(doubled.astype(np.int64).sum())
    if lucid.metal.is_available():
        assert sum(lucid.metal.host_fallback_counts().values()) > before


@pytest.mark.skipif(not lucid.metal.is_available(), reason="the self-test runs on the Metal backend")
def test_the_metal_self_test_checks_the_small_int_fills_and_casts():
    report = [c for c in lucid.metal.self_test() if c["dtype"] in (lucid.uint8, lucid.int8, lucid.int16)]
    checked = {(c["op"], c["dtype"].name) for c in report}
    for name in SMALL:
        for op in (
            "fill",
            "cast_from_float32",
            "cast_from_float16",
            "cast_from_bfloat16",
            "cast_from_int64",
            "cast_from_bool",
            "cast_to_float32",
            "cast_to_bfloat16",
            "cast_to_int32",
            "cast_to_bool",
        ):
            assert (op, name) in checked, (op, name)
    assert all(c["passed"] and c["max_error"] == 0 for c in report), [c for c in report if not c["passed"]]
