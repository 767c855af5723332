"""dtypes and devices."""

from __future__ import annotations

import operator
import sys

import numpy as np

from . import _C


def _ml_dtypes_bfloat16():
    # ml_dtypes is imported when a bfloat16 value first meets numpy, not with lucid: it takes
    # several times as long to import as all of lucid.
    import ml_dtypes

    return ml_dtypes.bfloat16


def is_numpy_bfloat16(nd) -> bool:
    """Whether numpy dtype `nd` is ml_dtypes' bfloat16 (an array of it means that ml_dtypes is
    imported already, so this never imports it)."""
    ml = sys.modules.get("ml_dtypes")
    return ml is not None and nd == ml.bfloat16


class dtype:
    """An element type. Compare with ``is`` or ``==``; ``repr`` is ``lucid.<name>``."""

    __slots__ = ("name", "code", "itemsize", "is_floating_point", "_numpy")

    def __init__(self, name, code, itemsize, is_floating_point, numpy_type):
        self.name = name
        self.code = code
        self.itemsize = itemsize
        self.is_floating_point = is_floating_point
        self._numpy = None if numpy_type is None else np.dtype(numpy_type)

    @property
    def numpy(self) -> np.dtype:
        """numpy's element type for this dtype (``ml_dtypes.bfloat16`` for bfloat16)."""
        nd = self._numpy
        if nd is None:
            nd = self._numpy = np.dtype(_ml_dtypes_bfloat16())
        return nd

    @property
    def is_signed(self) -> bool:
        """Whether the type holds negative values (False for bool and uint8)."""
        return self.name not in ("bool", "uint8")

    def __repr__(self):
        return f"lucid.{self.name}"

    __str__ = __repr__

    def __reduce__(self):
        return (dtype_by_name, (self.name,))


# The dtype table (codes, names, sizes, which are floating) is the engine's; numpy's element
# type for each is Python's business (bfloat16's is looked up when first needed).
_NUMPY_TYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": None,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
    "float64": np.float64,
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
}
_BY_CODE = tuple(
    dtype(name, code, size, bool(floating), _NUMPY_TYPES[name]) for code, name, size, floating in _C.dtype_table()
)
_BY_NAME = {d.name: d for d in _BY_CODE}
float32, float16, bfloat16 = _BY_NAME["float32"], _BY_NAME["float16"], _BY_NAME["bfloat16"]
int32, int64, bool_ = _BY_NAME["int32"], _BY_NAME["int64"], _BY_NAME["bool"]
float64 = _BY_NAME["float64"]
uint8, int8, int16 = _BY_NAME["uint8"], _BY_NAME["int8"], _BY_NAME["int16"]


def dtype_by_name(name: str) -> dtype:
    """The dtype named `name` ("float32", "bool" …)."""
    return _BY_NAME[name]


def dtype_from_code(code: int) -> dtype:
    return _BY_CODE[code]


def check_dtype(d, what="dtype") -> dtype:
    if isinstance(d, dtype):
        return d
    raise TypeError(f"{what} must be a lucid.dtype (e.g. lucid.float16), got {d!r}")


_NUMPY_TO_LUCID = {
    np.dtype(np.float32): float32,
    np.dtype(np.float64): float64,
    np.dtype(np.longdouble): float64,
    np.dtype(np.float16): float16,
    np.dtype(np.int32): int32,
    np.dtype(np.int64): int64,
    np.dtype(np.int8): int8,
    np.dtype(np.int16): int16,
    np.dtype(np.uint8): uint8,
    np.dtype(np.uint16): int32,  # (no uint16 dtype: the narrowest that holds it)
    np.dtype(np.uint32): int64,
    np.dtype(np.bool_): bool_,
}


def from_numpy_dtype(nd: np.dtype) -> dtype:
    try:
        return _NUMPY_TO_LUCID[np.dtype(nd)]
    except KeyError:
        if is_numpy_bfloat16(nd):
            return bfloat16
        raise TypeError(
            f"cannot make a lucid tensor from numpy dtype {np.dtype(nd)}; "
            "supported are float, int, unsigned up to 32 bits, bool and bfloat16"
        ) from None


class iinfo:
    """The limits of an integer dtype, as ``torch.iinfo``: ``bits``, ``min``, ``max`` and
    ``dtype`` (its name).

    Raises
    ------
    TypeError
        For a floating-point dtype or bool.
    """

    __slots__ = ("bits", "min", "max", "dtype")

    def __init__(self, type):
        d = check_dtype(type, "iinfo(): type")
        if d.is_floating_point or d is bool_:
            raise TypeError(
                f"lucid.iinfo() requires an integer dtype, got {d!r}"
                + ("" if d is bool_ else " (use numpy.finfo for floating-point limits)")
            )
        info = np.iinfo(d.numpy)
        self.bits, self.min, self.max, self.dtype = info.bits, int(info.min), int(info.max), d.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


class memory_format:
    """How a tensor's elements are laid out in memory: ``lucid.contiguous_format`` (row-major),
    ``lucid.channels_last`` (NHWC strides for a 4-d tensor), ``lucid.channels_last_3d``
    (NDHWC for 5-d) or ``lucid.preserve_format`` (as the source's, for conversions)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"lucid.{self.name}"

    def __reduce__(self):
        return (_memory_format_by_name, (self.name,))


contiguous_format, channels_last = memory_format("contiguous_format"), memory_format("channels_last")
channels_last_3d, preserve_format = memory_format("channels_last_3d"), memory_format("preserve_format")
_MEMORY_FORMATS = {f.name: f for f in (contiguous_format, channels_last, channels_last_3d, preserve_format)}


def _memory_format_by_name(name):
    return _MEMORY_FORMATS[name]


# PyTorch's name for the GPU of a Mac ("mps", and its index 0) is lucid's "metal".
_ALIASES = {"mps": "metal", "mps:0": "metal", "metal:0": "metal", "cpu:0": "cpu"}


class device:
    """Where a tensor lives: ``"cpu"`` or ``"metal"``. Equal to its type string."""

    __slots__ = ("type", "code")

    def __init__(self, type):
        if isinstance(type, device):
            self.type, self.code = type.type, type.code
            return
        if not isinstance(type, str):
            raise TypeError(f"device must be a string ({device_names()}) or a lucid.device, got {type!r}")
        type = _ALIASES.get(type, type)
        if type not in _DEVICE_CODES:
            if type.split(":")[0] == "cuda":
                raise ValueError(no_cuda(f"device {type!r}"))
            raise ValueError(f"unknown device {type!r}; expected {device_names()}")
        self.type = type
        self.code = _DEVICE_CODES[type]

    def __repr__(self):
        return f"device(type='{self.type}')"

    def __str__(self):
        return self.type

    def __eq__(self, other):
        if isinstance(other, device):
            return self.type == other.type
        if isinstance(other, str):
            return self.type == other
        return NotImplemented

    def __hash__(self):
        return hash(self.type)

    def __reduce__(self):
        return (device, (self.type,))


_DEVICE_CODES = {name: code for code, name in _C.device_table()}  # the engine's device table
_DEVICES = tuple(device(name) for name in sorted(_DEVICE_CODES, key=_DEVICE_CODES.get))


def device_names() -> str:
    """'cpu' or 'metal' (the engine's devices, for messages)."""
    names = [repr(n) for n in sorted(_DEVICE_CODES, key=_DEVICE_CODES.get)]
    return ", ".join(names[:-1]) + " or " + names[-1]


def no_cuda(what: str) -> str:
    """The message for anything that asks for CUDA."""
    return f"{what}: lucid has no CUDA device; on Apple Silicon use device='metal' (the GPU through Metal) or 'cpu'"


def as_device(d) -> device:
    """`d` as a lucid.device; None is the default device, the CPU (as in PyTorch's factories)."""
    if d is None:
        return _DEVICES[_DEVICE_CODES["cpu"]]
    if isinstance(d, device):
        return d
    if isinstance(d, str) and d in _DEVICE_CODES:
        return _DEVICES[_DEVICE_CODES[d]]
    if isinstance(d, str) and d in _ALIASES:
        return _DEVICES[_DEVICE_CODES[_ALIASES[d]]]
    return device(d)  # raises the right error


def device_from_code(code: int) -> device:
    return _DEVICES[code]


def as_index(v) -> int:
    """`operator.index`, refusing bools: a size or dimension given as True is a mistake, not 1
    (PyTorch refuses them too)."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expected an integer, got {v!r} (a bool)")
    return operator.index(v)
