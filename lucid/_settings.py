"""Process-wide settings PyTorch programs set or read: the default dtype and the float32
matrix-product precision."""

from __future__ import annotations

from ._types import check_dtype, float32

_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = "highest"


def get_default_dtype():
    """The dtype of tensors made from Python floats: lucid.float32."""
    return float32


def set_default_dtype(d) -> None:
    """Accepts lucid.float32, the only default lucid has; anything else raises (float64
    tensors are made with ``dtype=lucid.float64``, ``.double()`` or from float64 numpy arrays)."""
    if check_dtype(d) is not float32:
        raise TypeError(
            f"set_default_dtype: lucid's default dtype is always lucid.float32, got {d!r}; make float64 "
            "tensors with dtype=lucid.float64, .double() or from a float64 numpy array"
        )


def set_float32_matmul_precision(precision: str) -> None:
    """Records PyTorch's float32 matmul precision setting ("highest", "high" or "medium"). lucid's
    float32 products always accumulate in float32 ("highest"); use autocast for lower precision."""
    global _matmul_precision
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {_PRECISIONS}, got {precision!r}")
    _matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """The value last given to :func:`set_float32_matmul_precision` ("highest" until then)."""
    return _matmul_precision
