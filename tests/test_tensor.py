"""Tensor creation, factories, metadata, conversion and representation."""

import operator
import sys

import ml_dtypes

import numpy as np
import pytest

import lucid
from _helpers import DEVICES, assert_bits_equal as assert_same

pytestmark = pytest.mark.filterwarnings("ignore::lucid.metal.MetalFallbackWarning")

FLOATS = [lucid.float32, lucid.float16, lucid.bfloat16]
FLOAT_IDS = ["float32", "float16", "bfloat16"]
NP_OF = {
    lucid.float32: np.float32,
    lucid.float16: np.float16,
    lucid.bfloat16: ml_dtypes.bfloat16,
    lucid.int32: np.int32,
    lucid.int64: np.int64,
    lucid.bool_: np.bool_,
    lucid.uint8: np.uint8,
    lucid.int8: np.int8,
    lucid.int16: np.int16,
}


# ---- lucid.tensor -----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "np_type,want",
    [
        (np.float32, lucid.float32),
        (np.float16, lucid.float16),
        (ml_dtypes.bfloat16, lucid.bfloat16),
        (np.int32, lucid.int32),
        (np.int64, lucid.int64),
        (np.bool_, lucid.bool_),
        (np.int8, lucid.int8),
        (np.int16, lucid.int16),
        (np.uint8, lucid.uint8),
        (np.uint16, lucid.int32),
        (np.uint32, lucid.int64),
    ],
)
def test_tensor_from_numpy(device, np_type, want):
    src = np.clip(np.random.default_rng(0).standard_normal((3, 4)) * 100, -120, 120)
    if np.dtype(np_type).kind == "u":
        src = np.abs(src)
    arr = src.astype(np_type)
    t = lucid.tensor(arr, device=device)
    assert t.dtype is want
    assert t.device == device
    assert t.shape == (3, 4)
    if want is lucid.bfloat16:
        expected = arr
    else:
        expected = arr.astype(NP_OF[want])
    assert_same(t.numpy(), expected)


def test_float64_array_keeps_float64_and_python_floats_become_float32():
    x = np.array([0.1, 1 / 3, 1e-300, 1e39, -1e39, 5e-324, np.pi], dtype=np.float64)
    for t in (lucid.tensor(x), lucid.from_numpy(x), lucid.as_tensor(x), lucid.tensor(x[2])):
        assert t.dtype is lucid.float64
    assert_same(lucid.tensor(x).numpy(), x)
    assert lucid.tensor(x.tolist()).dtype is lucid.float32 and lucid.tensor(0.1).dtype is lucid.float32
    with pytest.raises(TypeError, match="'metal' does not support float64.*float32"):
        lucid.tensor(x, device="metal")


def test_float64_array_rounds_once_to_float32():
    x = np.array([0.1, 1 / 3, 1e-40, 1e39, -1e39, 2.0**-149 * 0.75, np.pi], dtype=np.float64)
    with np.errstate(over="ignore"):
        assert_same(lucid.tensor(x, dtype=lucid.float32).numpy(), x.astype(np.float32))
        assert_same(lucid.tensor(x).float().numpy(), x.astype(np.float32))


def test_unsupported_numpy_dtypes():
    for arr in (
        np.zeros(2, np.uint64),
        np.zeros(2, np.complex64),
        np.array(["a", "b"]),
        np.zeros(2, "datetime64[s]"),
        np.array([b"x"]),
        np.array([object(), 1], dtype=object),
    ):
        with pytest.raises(TypeError):
            lucid.tensor(arr)


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_from_non_contiguous_arrays(device):
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for view in (base[:, ::2, 1:], base.transpose(2, 0, 1), base[::-1], base[..., 3], np.asfortranarray(base)):
        assert_same(lucid.tensor(view, device=device).numpy(), np.ascontiguousarray(view))
    ints = np.arange(20, dtype=np.int64).reshape(4, 5)[:, ::-2]
    assert_same(lucid.tensor(ints).numpy(), np.ascontiguousarray(ints))


def test_tensor_from_nested_lists():
    t = lucid.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.dtype is lucid.int64 and t.shape == (2, 3)
    assert_same(t.numpy(), np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64))
    t = lucid.tensor([[1.5, 2], [3, 4]])
    assert t.dtype is lucid.float32
    assert_same(t.numpy(), np.array([[1.5, 2], [3, 4]], dtype=np.float32))
    t = lucid.tensor([[True, False]])
    assert t.dtype is lucid.bool_
    assert_same(t.numpy(), np.array([[True, False]]))
    t = lucid.tensor([[[0.1]], [[0.2]]])
    assert t.shape == (2, 1, 1)
    assert_same(t.numpy(), np.array([[[0.1]], [[0.2]]], dtype=np.float32))
    assert lucid.tensor([]).shape == (0,)
    assert lucid.tensor([[], []]).shape == (2, 0)


@pytest.mark.parametrize(
    "value,want,py",
    [
        (2.5, lucid.float32, float),
        (-3, lucid.int64, int),
        (True, lucid.bool_, bool),
        (np.float32(1.25), lucid.float32, float),
        (np.int32(7), lucid.int32, int),
        (2**40, lucid.int64, int),
    ],
)
def test_tensor_from_scalar_is_zero_dim(value, want, py):
    t = lucid.tensor(value)
    assert t.dtype is want
    assert t.shape == ()
    assert t.ndim == 0
    assert t.numel() == 1
    assert t.numpy().shape == ()
    v = t.item()
    assert type(v) is py
    assert v == value


def test_python_float_becomes_float32():
    t = lucid.tensor([0.1, 1e-8, 3.4e38])
    assert t.dtype is lucid.float32
    assert_same(t.numpy(), np.array([0.1, 1e-8, 3.4e38], dtype=np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_argument(device):
    t = lucid.tensor([1.7, -2.7, 0.2], dtype=lucid.int32, device=device)
    assert t.dtype is lucid.int32
    assert_same(t.numpy(), np.array([1, -2, 0], dtype=np.int32))
    x = np.array([0.1, 1 / 3, 65519.0, 1e-7], dtype=np.float64)
    with np.errstate(over="ignore"):
        assert_same(lucid.tensor(x, dtype=lucid.float16, device=device).numpy(), x.astype(np.float16))
    assert_same(lucid.tensor(x, dtype=lucid.bfloat16, device=device).numpy(), x.astype(ml_dtypes.bfloat16))
    t = lucid.tensor([1, 0, 3], dtype=lucid.bool_, device=device)
    assert_same(t.numpy(), np.array([True, False, True]))
    t = lucid.tensor([True, False], dtype=lucid.float16, device=device)
    assert_same(t.numpy(), np.array([1, 0], dtype=np.float16))
    for bad in ("float32", np.float32, float, 0):
        with pytest.raises(TypeError):
            lucid.tensor([1.0], dtype=bad)


def test_device_argument():
    assert lucid.tensor([1.0], device="metal").device == "metal"
    assert lucid.tensor([1.0], device=lucid.device("metal")).device == "metal"
    assert lucid.tensor([1.0]).device == "cpu"
    with pytest.raises(ValueError):
        lucid.tensor([1.0], device="cuda")
    with pytest.raises(TypeError):
        lucid.tensor([1.0], device=0)


def test_requires_grad_flag():
    assert lucid.tensor([1.0]).requires_grad is False
    t = lucid.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad is True
    assert_same(t.numpy(), np.array([1, 2], np.float32))
    assert lucid.tensor([1.0], dtype=lucid.float16, requires_grad=True).requires_grad
    with pytest.raises(TypeError):
        lucid.tensor([1, 2], requires_grad=True)
    t = lucid.tensor([3.0])
    assert t.requires_grad_() is t
    assert t.requires_grad
    t.requires_grad_(False)
    assert not t.requires_grad


@pytest.mark.parametrize("data", ["abc", ["a", "b"], [1 + 2j], object(), [object()], {1: 2}, [None], None])
def test_unsupported_data_raises_type_error(data):
    with pytest.raises(TypeError):
        lucid.tensor(data)


@pytest.mark.parametrize("data", [[[1, 2], [3]], [1, [2, 3]], [[1.0], [2.0, 3.0]]])
def test_ragged_lists_raise(data):
    with pytest.raises((TypeError, ValueError)):
        lucid.tensor(data)


def test_python_ints_outside_int64_raise():
    for v in (2**63, -(2**63) - 1, 2**70):
        with pytest.raises((TypeError, ValueError, OverflowError)):
            lucid.tensor([v])


def test_tensor_from_tensor_copies():
    a = lucid.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = lucid.tensor(a)
    assert b is not a
    assert_same(b.numpy(), a.numpy())
    c = lucid.tensor(a.T, dtype=lucid.int64, device="metal")
    assert c.device == "metal" and c.dtype is lucid.int64
    assert_same(c.numpy(), np.arange(6).reshape(2, 3).T.astype(np.int64))
    assert_same(lucid.from_numpy(np.arange(4, dtype=np.int32)).numpy(), np.arange(4, dtype=np.int32))


def test_the_tensor_constructor_makes_float32_tensors_as_torch_tensor():
    t = lucid.Tensor([[3]])
    assert t.dtype == lucid.float32 and t.shape == (1, 1) and t.item() == 3.0
    assert lucid.Tensor(2, 3).shape == (2, 3) and (lucid.Tensor(2, 3).numpy() == 0).all()
    assert lucid.Tensor().shape == (0,)
    assert lucid.Tensor(np.arange(3), device="metal").device.type == "metal"
    assert isinstance(lucid.zeros(1), lucid.Tensor)
    with pytest.raises(TypeError, match="takes data or a size of ints"):
        lucid.Tensor([1.0], [2.0])


# ---- factories --------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("factory,value", [(lucid.zeros, 0), (lucid.ones, 1)])
def test_zeros_ones(device, factory, value):
    for args in ((2, 3), ((2, 3),), ([2, 3],)):
        t = factory(*args, device=device)
        assert t.shape == (2, 3) and t.dtype is lucid.float32 and t.device == device
        assert_same(t.numpy(), np.full((2, 3), value, np.float32))
    for d, npt in NP_OF.items():
        t = factory(4, dtype=d, device=device)
        assert t.dtype is d
        assert_same(t.numpy(), np.full(4, value).astype(npt))
    assert factory(device=device).shape == ()
    assert factory((), device=device).shape == ()
    assert factory(0, 5, device=device).shape == (0, 5)
    assert factory(np.int64(3), device=device).shape == (3,)


def test_zeros_like_ones_like():
    a = lucid.ones(2, 3, dtype=lucid.float16, device="metal")
    z = lucid.zeros_like(a)
    assert z.shape == (2, 3) and z.dtype is lucid.float16 and z.device == "metal"
    assert_same(z.numpy(), np.zeros((2, 3), np.float16))
    o = lucid.ones_like(a, dtype=lucid.int32, device="cpu")
    assert o.dtype is lucid.int32 and o.device == "cpu"
    assert_same(o.numpy(), np.ones((2, 3), np.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_full(device):
    t = lucid.full((2, 3), 2.5, device=device)
    assert t.dtype is lucid.float32 and t.device == device
    assert_same(t.numpy(), np.full((2, 3), 2.5, np.float32))
    t = lucid.full((2,), 7, device=device)
    assert t.dtype is lucid.int64
    assert_same(t.numpy(), np.full(2, 7, np.int64))
    t = lucid.full(3, True, device=device)
    assert t.dtype is lucid.bool_
    assert_same(t.numpy(), np.ones(3, bool))
    t = lucid.full([2, 2], 0.1, dtype=lucid.float16, device=device)
    assert_same(t.numpy(), np.full((2, 2), 0.1, np.float16))
    t = lucid.full((3,), 0.1, dtype=lucid.bfloat16, device=device)
    assert_same(t.numpy(), np.full(3, 0.1).astype(ml_dtypes.bfloat16))
    t = lucid.full((2,), -2.7, dtype=lucid.int32, device=device)
    assert_same(t.numpy(), np.full(2, -2, np.int32))
    t = lucid.full((2,), 2**40 + 3, device=device)
    assert_same(t.numpy(), np.full(2, 2**40 + 3, np.int64))
    t = lucid.full((), float("nan"), device=device)
    assert t.shape == () and np.isnan(t.item())
    t = lucid.full((2,), 1.5, device=device, requires_grad=True)
    assert t.requires_grad and t.is_leaf and not lucid.full((2,), 1.5, device=device).requires_grad
    (t * t).sum().backward()
    assert_same(t.grad.numpy(), np.full(2, 3.0, np.float32))
    with pytest.raises(TypeError):
        lucid.full((2,), "a")
    with pytest.raises(TypeError):
        lucid.full((2,), None)


@pytest.mark.parametrize("device", DEVICES)
def test_full_integer_fill_that_does_not_fit_is_refused(device):
    for dtype, value in (
        (lucid.int64, float("nan")),
        (lucid.int64, float("inf")),
        (lucid.int32, -float("inf")),
        (lucid.int32, 3e9),
        (lucid.int32, 2**31),
        (lucid.int64, 1e19),
    ):
        with pytest.raises(ValueError, match="without overflow"):
            lucid.full((2,), value, dtype=dtype, device=device)
    assert_same(lucid.full((1,), 2**31 - 1, dtype=lucid.int32, device=device).numpy(), np.full(1, 2**31 - 1, np.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_bool_fill_is_whether_the_value_is_nonzero(device):
    # As numpy's astype(bool): 0.5 and NaN are true, only zero is false.
    for value in (0.5, -0.25, float("nan"), float("inf"), 3, 0.0, -0.0, 0):
        t = lucid.full((3,), value, dtype=lucid.bool_, device=device)
        assert_same(t.numpy(), np.full(3, value).astype(bool))
    for value in (np.float32(0.0), np.float32(0.5), np.float16(-0.0)):
        assert_same(lucid.tensor(value, dtype=lucid.bool_, device=device).numpy(), np.asarray(value).astype(bool))


def test_bool_is_not_a_size_or_a_dim():
    with pytest.raises(TypeError, match="bool"):
        lucid.zeros(True)
    with pytest.raises(TypeError, match="bool"):
        lucid.ones(2, np.bool_(True))
    t = lucid.ones(2, 3)
    for call in (
        lambda: t.sum(dim=True),
        lambda: t.reshape(True, 6),
        lambda: t.transpose(0, False),
        lambda: t.narrow(0, 0, True),
        lambda: t.unsqueeze(True),
    ):
        with pytest.raises(TypeError, match="bool"):
            call()


def test_staging_larger_than_the_machine_is_a_runtime_error():
    # Sizes within the shape limit whose host staging would exceed physical memory: refused
    # up front rather than trapping in the allocation.
    import os

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for call in (
        lambda: lucid.arange(0, physical // 8 + 1),
        lambda: lucid.arange(0.0, float(physical // 12 + 1)),
        lambda: lucid.randn(physical // 8 + 1),  # the draws (float32) and the tensor they fill
        lambda: lucid.rand(physical // 8 + 1),
        lambda: lucid.rand(physical // 16 + 1, dtype=lucid.float64),
    ):
        with pytest.raises(RuntimeError, match="out of memory"):
            call()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("args", [(5,), (0,), (1, 10, 3), (-5, 5), (10, 0, -3), (3, 4), (-2, -10, -1)])
def test_arange_integers(device, args):
    t = lucid.arange(*args, device=device)
    assert t.dtype is lucid.int64
    assert t.device == device
    assert_same(t.numpy(), np.arange(*args, dtype=np.int64))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "args", [(5.0,), (0, 1, 0.1), (0.5, 3), (1, 2.5, 0.25), (3, -1, -0.5), (0, 1e-3, 1e-4), (-1.5, 1.5, 0.7)]
)
def test_arange_floats(device, args):
    t = lucid.arange(*args, device=device)
    assert t.dtype is lucid.float32
    want = np.arange(*args, dtype=np.float64).astype(np.float32)
    assert t.shape == want.shape
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, atol=1e-7)


def test_arange_dtype_argument():
    t = lucid.arange(0, 5, dtype=lucid.float16)
    assert t.dtype is lucid.float16
    assert_same(t.numpy(), np.arange(5, dtype=np.float16))
    t = lucid.arange(4, dtype=lucid.int32, device="metal")
    assert t.dtype is lucid.int32 and t.device == "metal"
    assert_same(t.numpy(), np.arange(4, dtype=np.int32))
    t = lucid.arange(0.0, 3.0, dtype=lucid.int64)
    assert_same(t.numpy(), np.arange(3, dtype=np.int64))


def test_arange_large_integers_are_exact():
    for start, end in ((2**53, 2**53 + 5), (2**60, 2**60 + 4), (-(2**62), -(2**62) + 3)):
        assert_same(lucid.arange(start, end).numpy(), np.arange(start, end, dtype=np.int64))


def test_arange_errors():
    with pytest.raises(ValueError):
        lucid.arange(0, 10, 0)
    with pytest.raises(ValueError):
        lucid.arange(0.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        lucid.arange(10, 0)
    with pytest.raises(ValueError):
        lucid.arange(0, 10, -1)
    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValueError):
            lucid.arange(bad)
    with pytest.raises(ValueError):
        lucid.arange(0, 1e30, 1e-30)
    for bad in (True, "3", None, 1 + 1j):
        with pytest.raises(TypeError):
            lucid.arange(bad)
    with pytest.raises(TypeError):
        lucid.arange(5, dtype="int64")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_rand_is_in_unit_interval(device, dtype):
    lucid.manual_seed(1234)
    t = lucid.rand(100_000, dtype=dtype, device=device)
    assert t.dtype is dtype and t.shape == (100_000,) and t.device == device
    a = t.numpy().astype(np.float64)
    assert a.min() >= 0.0
    assert a.max() < 1.0, f"{int((a >= 1).sum())} samples equal 1"
    assert abs(a.mean() - 0.5) < 0.01
    assert abs(a.std() - np.sqrt(1 / 12)) < 0.01
    hist, _ = np.histogram(a, bins=10, range=(0, 1))
    assert hist.min() > 9000


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_randn_moments(device, dtype):
    lucid.manual_seed(99)
    a = lucid.randn(100_000, dtype=dtype, device=device).numpy().astype(np.float64)
    assert np.isfinite(a).all()
    assert abs(a.mean()) < 0.02
    assert abs(a.std() - 1.0) < 0.02
    assert abs((np.abs(a) < 1).mean() - 0.6827) < 0.01
    assert abs((np.abs(a) < 2).mean() - 0.9545) < 0.005


def test_random_shapes_and_dtype_errors():
    assert lucid.rand(2, 3).shape == (2, 3)
    assert lucid.rand((2, 3)).shape == (2, 3)
    assert lucid.randn([4]).shape == (4,)
    assert lucid.rand().shape == ()
    assert lucid.randn(0, 3).shape == (0, 3)
    assert lucid.rand(2).dtype is lucid.float32
    for d in (lucid.int32, lucid.int64, lucid.bool_):
        with pytest.raises(TypeError):
            lucid.rand(3, dtype=d)
        with pytest.raises(TypeError):
            lucid.randn(3, dtype=d)


def test_manual_seed_reproducibility():
    lucid.manual_seed(42)
    a, b = lucid.rand(1000).numpy(), lucid.randn(1000).numpy()
    c = lucid.rand(1000).numpy()
    lucid.manual_seed(42)
    a2, b2 = lucid.rand(1000).numpy(), lucid.randn(1000).numpy()
    assert_same(a2, a)
    assert_same(b2, b)
    assert not np.array_equal(a, c)
    lucid.manual_seed(43)
    assert not np.array_equal(lucid.rand(1000).numpy(), a)
    lucid.manual_seed(42)
    m = lucid.rand(1000, device="metal").numpy()
    assert_same(m, a)
    lucid.manual_seed(42)
    h = lucid.rand(1000, dtype=lucid.float16).numpy()
    # a float16 draw takes the top 11 of the same random bits: exact, and never rounded up to 1
    assert_same(h, (np.floor(a.astype(np.float64) * 2048) / 2048).astype(np.float16))
    lucid.manual_seed(-1)
    x = lucid.rand(10).numpy()
    lucid.manual_seed(2**64 - 1)
    assert_same(lucid.rand(10).numpy(), x)
    with pytest.raises(TypeError):
        lucid.manual_seed(1.5)


FACTORIES = [
    lambda *s: lucid.zeros(*s),
    lambda *s: lucid.ones(*s),
    lambda *s: lucid.rand(*s),
    lambda *s: lucid.randn(*s),
    lambda *s: lucid.full(s, 1.0),
]


@pytest.mark.parametrize("factory", FACTORIES, ids=["zeros", "ones", "rand", "randn", "full"])
def test_bad_sizes(factory):
    for shape in ((-1,), (2, -3), (-(2**63),)):
        with pytest.raises(ValueError):
            factory(*shape)
    for shape in ((2**40, 2**40), (2**62, 4), (2**63,), (2**64,), (2**64 + 5,), (2**70, 1)):
        with pytest.raises((ValueError, OverflowError)):
            factory(*shape)
    for shape in ((2.0,), ("3",), (2, None), (1.5, 2)):
        with pytest.raises(TypeError):
            factory(*shape)


def test_unknown_device_in_factories():
    for f in (
        lambda: lucid.zeros(2, device="gpu"),
        lambda: lucid.ones(2, device="cuda"),
        lambda: lucid.rand(2, device="mps:1"),
        lambda: lucid.randn(2, device="Metal"),
        lambda: lucid.full((2,), 1.0, device="cuda:0"),
        lambda: lucid.arange(3, device="tpu"),
        lambda: lucid.tensor([1.0], device=""),
    ):
        with pytest.raises(ValueError):
            f()


# ---- metadata and values -----------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_metadata(device):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = lucid.tensor(a, device=device)
    assert t.shape == (2, 3, 4) and type(t.shape) is tuple
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3
    assert t.numel() == 24
    assert len(t) == 2
    assert t.dtype is lucid.float32
    assert t.device == device
    assert t.is_floating_point()
    assert not lucid.zeros(2, dtype=lucid.int32).is_floating_point()
    assert t.stride() == (12, 4, 1)
    with pytest.raises(IndexError):
        t.size(3)
    with pytest.raises(TypeError):
        len(lucid.zeros(()))
    assert lucid.zeros(0, 4).numel() == 0


def test_shapes_of_fresh_results_at_the_shape_keys_limits():
    # A result's shape comes from a table of shapes by the key its record gives (ndim <= 4,
    # each size under 2**(60 // ndim)) or from its sizes; either way it is the same tuple.
    # Views of one element make large sizes possible without memory.
    from lucid import _core

    cases = [
        (),
        (1,),
        (0,),
        (7,),
        (2, 1),
        (1, 2),
        (1, 2, 1),
        (2, 1, 1, 1),
        (3, 4, 5, 6),
        (1,) * 5,
        (2, 3, 1, 1, 2, 1, 1, 1, 2),
        (2**36,),
        (2**30 - 1, 2),
        (2**30, 2),
        (1, 2**20 - 1, 3),
        (1, 2**20, 3),
        (2**15 - 1, 2**15 - 1, 3, 1),
        (2**15 - 1, 2**15, 1, 1),
    ]
    one = lucid.ones(1)
    for want in cases * 2:  # the second round reads the shapes the first one put in the table
        base = one.reshape((1,) * len(want))
        t = base.expand(*want)
        fresh = [t, t.detach(), t.unsqueeze(0).squeeze(0)]
        if np.prod(want) <= 1000:
            fresh += [t + 0, lucid.zeros(want, dtype=lucid.int32)]
        for f in fresh:
            assert f.shape == want and type(f.shape) is tuple, (want, f.shape)
            assert f.size() == want and f.ndim == len(want)
        assert all(st == 0 for st, n in zip(t.stride(), want) if n != 1)
        assert t.numel() == int(np.prod(want, dtype=object))
    # The same sizes built other ways agree, and the table stays bounded.
    assert (lucid.zeros(2, 1) + lucid.zeros(1, 2)).shape == (2, 2)
    assert lucid.zeros(3, 1, 2).transpose(0, 2).shape == (2, 1, 3)
    assert 0 < len(_core._shapes) <= _core._SHAPES_MAX


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_returns_an_independent_copy(device):
    a = np.arange(6, dtype=np.float32)
    t = lucid.tensor(a, device=device)
    a[0] = 100  # the tensor copied its data
    out = t.numpy()
    assert out[0] == 0
    out[1] = 50
    assert t.numpy()[1] == 1
    assert np.asarray(t).dtype == np.float32
    assert_same(np.asarray(t), np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_of_bfloat16(device):
    x = np.array([1.0, 0.1, -3.5, 1e30], dtype=np.float32)
    t = lucid.tensor(x, device=device).bfloat16()
    out = t.numpy()
    assert out.dtype == np.dtype(ml_dtypes.bfloat16)
    assert_same(out, x.astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("device", DEVICES)
def test_item_and_scalar_conversions(device):
    v = lucid.full((), 2.5, device=device).item()
    assert type(v) is float and v == 2.5
    v = lucid.full((1, 1), 7, device=device).item()
    assert type(v) is int and v == 7
    v = lucid.full((1,), True, device=device).item()
    assert type(v) is bool and v is True
    v = lucid.full((1,), 0.1, dtype=lucid.bfloat16, device=device).item()
    assert type(v) is float and v == float(np.float32(0.1).astype(ml_dtypes.bfloat16))
    v = lucid.full((1,), 0.1, dtype=lucid.float16, device=device).item()
    assert v == float(np.float16(0.1))
    t = lucid.full((1,), 3.75, device=device)
    assert float(t) == 3.75 and int(t) == 3
    assert operator.index(lucid.full((1,), 4, device=device)) == 4
    with pytest.raises(TypeError):
        operator.index(t)
    with pytest.raises(ValueError):
        lucid.ones(3, device=device).item()
    with pytest.raises(ValueError):
        lucid.ones(0, device=device).item()


def test_bool_of_tensor():
    assert bool(lucid.full((1,), 2.0)) is True
    assert bool(lucid.full((), 0.0)) is False
    assert bool(lucid.full((1, 1), True))
    with pytest.raises(RuntimeError):
        bool(lucid.ones(3))
    with pytest.raises(RuntimeError):
        bool(lucid.ones(0))
    with pytest.raises(RuntimeError):
        if lucid.ones(2, 2):
            pass


@pytest.mark.parametrize("device", DEVICES)
def test_tolist(device):
    for arr in (
        np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
        np.arange(4, dtype=np.int64) - 2,
        np.array([[True], [False]]),
        np.float32(1.5).reshape(()),
    ):
        t = lucid.tensor(arr, device=device) if arr.ndim else lucid.full((), float(arr), device=device)
        assert t.tolist() == arr.tolist()
    t = lucid.tensor(np.array([0.1, 2.0], np.float32), device=device).bfloat16()
    assert t.tolist() == np.array([0.1, 2.0], np.float32).astype(ml_dtypes.bfloat16).astype(np.float32).tolist()


# ---- to() and the shortcuts ---------------------------------------------------------------------


def test_to_device_and_dtype():
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    t = lucid.tensor(x)
    m = t.to("metal")
    assert m.device == "metal" and m.dtype is lucid.float32
    assert_same(m.numpy(), x)
    assert t.to(lucid.device("metal")).device == "metal"
    h = t.to(lucid.float16)
    assert h.device == "cpu" and h.dtype is lucid.float16
    assert_same(h.numpy(), x.astype(np.float16))
    mh = t.to("metal", lucid.float16)
    assert mh.device == "metal" and mh.dtype is lucid.float16
    assert_same(mh.numpy(), x.astype(np.float16))
    mh2 = t.to(lucid.bfloat16, "metal")
    assert mh2.device == "metal" and mh2.dtype is lucid.bfloat16
    kw = t.to(device="metal", dtype=lucid.int32)
    assert kw.device == "metal" and kw.dtype is lucid.int32
    assert_same(kw.numpy(), np.trunc(x).astype(np.int32))
    like = t.to(lucid.zeros(1, dtype=lucid.float16, device="metal"))
    assert like.device == "metal" and like.dtype is lucid.float16
    back = mh.to("cpu", lucid.float32)
    assert back.device == "cpu"
    assert_same(back.numpy(), x.astype(np.float16).astype(np.float32))
    assert t.to("cpu") is t
    assert t.to(lucid.float32) is t
    assert t.to("cpu", lucid.float32) is t
    c = t.to("cpu", copy=True)
    assert c is not t
    assert_same(c.numpy(), x)
    assert m.cpu().device == "cpu" and t.metal().device == "metal"


def test_to_keeps_non_contiguous_values():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = lucid.tensor(x).T
    for r in (t.to("metal"), t.to(lucid.float16), t.to("metal", lucid.int64)):
        assert r.shape == (4, 3)
        np.testing.assert_array_equal(r.numpy().astype(np.float64), x.T)


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_shortcuts(device):
    x = np.array([1.7, -2.5, 0.1, 70000.0], dtype=np.float32)
    t = lucid.tensor(x, device=device)
    with np.errstate(over="ignore"):
        assert_same(t.half().numpy(), x.astype(np.float16))
    assert_same(t.bfloat16().numpy(), x.astype(ml_dtypes.bfloat16))
    with np.errstate(over="ignore"):
        assert_same(t.half().float().numpy(), x.astype(np.float16).astype(np.float32))
    assert t.half().dtype is lucid.float16
    assert t.bfloat16().dtype is lucid.bfloat16
    assert t.float() is t
    assert_same(t.int().numpy(), np.array([1, -2, 0, 70000], np.int32))
    assert_same(t.long().numpy(), np.array([1, -2, 0, 70000], np.int64))
    assert_same(t.bool().numpy(), x.astype(bool))
    assert t.half().device == device


def test_to_errors():
    t = lucid.ones(2)
    with pytest.raises(ValueError):
        t.to("cuda")
    with pytest.raises(ValueError):
        t.to(device="gpu")
    with pytest.raises(TypeError):
        t.to(5)
    with pytest.raises(TypeError):
        t.to(np.float16)
    with pytest.raises(TypeError):
        t.to(dtype="float16")
    assert t.to(None) is t  # no device given, as in PyTorch


def test_detach_drops_requires_grad_and_keeps_values():
    t = lucid.tensor([1.0, 2.0], requires_grad=True)
    d = t.detach()
    assert not d.requires_grad
    assert_same(d.numpy(), t.numpy())


# ---- repr ---------------------------------------------------------------------------------------


def test_repr_shows_values_and_non_default_metadata():
    r = repr(lucid.tensor([1.5, -2.25, 3.0]))
    assert r.startswith("tensor(")
    for v in ("1.5", "-2.25", "3."):
        assert v in r
    assert "dtype" not in r and "device" not in r
    r = repr(lucid.tensor([1, 2, 3]))
    assert "1" in r and "3" in r and "dtype" not in r
    r = repr(lucid.tensor([True, False]))
    assert "True" in r and "False" in r and "dtype" not in r
    r = repr(lucid.tensor([0.5, 4.0], dtype=lucid.float16))
    assert "0.5" in r and "4." in r and "dtype=lucid.float16" in r
    r = repr(lucid.tensor([0.5], dtype=lucid.bfloat16))
    assert "0.5" in r and "dtype=lucid.bfloat16" in r
    r = repr(lucid.tensor([7], dtype=lucid.int32))
    assert "7" in r and "dtype=lucid.int32" in r
    r = repr(lucid.tensor([[1.0, 2.0], [3.0, 4.0]], device="metal"))
    assert "device='metal'" in r and "4." in r and "dtype" not in r
    r = repr(lucid.tensor([1.0], requires_grad=True))
    assert "requires_grad=True" in r
    r = repr(lucid.full((), 2.5))
    assert "2.5" in r and "[" not in r
    big = repr(lucid.arange(5000))
    assert "..." in big and "4999" in big


# ---- metal behaves like cpu ----------------------------------------------------------------------


def test_metal_is_available_only_where_the_metal_backend_serves_it():
    # The product built on Linux has no Metal backend; the check build (`make metal-emulated`,
    # loaded through LUCID_ENGINE_LIBRARY) has it, over the emulated Metal API.
    from lucid import _C

    emulated = "metal-emulated" in str(_C._library._find_library())
    if sys.platform == "darwin" and not lucid.metal.is_available():
        # A Mac build without its Metal backend (LUCID_NO_METAL=1, as on GitHub's hosted Macs)
        # has none to serve "metal"; one with the backend serves it.
        with pytest.raises(RuntimeError, match="has no Metal backend"):
            lucid.metal.self_test()
        return
    assert lucid.metal.is_available() is (sys.platform == "darwin" or emulated)


def test_metal_and_cpu_give_identical_results():
    rng = np.random.default_rng(17)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    results = {}
    for device in DEVICES:
        tx, tw = lucid.tensor(x, device=device), lucid.tensor(w, device=device)
        outs = [
            tx + 1.5,
            tx * tx,
            2 / (tx + 10),
            -tx,
            tx.relu(),
            tx @ tw.T,
            tx.sum(0),
            tx.mean(1, keepdim=True),
            tx.T.contiguous(),
            tx.reshape(-1),
            lucid.nn.functional.linear(tx, tw),
            tx.half() * 3,
            tx.bfloat16() - 1,
            (tx.half() @ tw.half().T),
            tx.to(lucid.int32) + 2,
            lucid.zeros(3, device=device),
            lucid.arange(0, 1, 0.25, device=device),
        ]
        for o in outs:
            assert o.device == device
        results[device] = [o.numpy() for o in outs]
    # Products and sums: the host fallback runs the CPU's own kernels, so they agree bit for
    # bit; a GPU adds in another order, so there they agree to float32 rounding.
    summed = {5, 6, 7, 10, 13}
    for i, (a, b) in enumerate(zip(results["cpu"], results["metal"])):
        if i in summed and lucid.metal.is_available():
            assert b.dtype == a.dtype and b.shape == a.shape
            np.testing.assert_allclose(
                b.astype(np.float32), a.astype(np.float32), rtol=1e-6 if a.dtype == np.float32 else 1e-3
            )
        else:
            assert_same(b, a)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "bfloat16", "int16"])
@pytest.mark.parametrize(
    "shape, view, np_view",
    [
        ((512, 512), lambda t: t.t(), lambda a: a.T),  # rows a power of two apart: the tiled copy
        ((37, 70), lambda t: t.t(), lambda a: a.T),  # partial tiles at the edges
        ((16, 16), lambda t: t.t(), lambda a: a.T),
        ((3, 40, 33), lambda t: t.transpose(1, 2), lambda a: a.transpose(0, 2, 1)),  # a batch of them
        ((40, 80), lambda t: t[:, 5:60].t(), lambda a: a[:, 5:60].T),  # the source's rows are longer
        ((2, 20, 50), lambda t: t.transpose(0, 2), lambda a: a.transpose(2, 1, 0)),  # another layout
    ],
)
def test_copies_of_transposed_matrices_against_numpy(dtype, shape, view, np_view):
    values = np.random.default_rng(5).standard_normal(shape) * 50
    t = lucid.tensor(values).to(getattr(lucid, dtype))
    exact = t.float().numpy().astype(np.float64) if dtype == "bfloat16" else t.numpy()  # the stored values
    got = view(t).contiguous()
    assert got.is_contiguous() and tuple(got.shape) == np_view(exact).shape
    # the copy's bytes, read back through a contiguous-to-contiguous conversion
    got = got.float().numpy() if dtype == "bfloat16" else got.numpy()
    np.testing.assert_array_equal(got, np_view(exact))
