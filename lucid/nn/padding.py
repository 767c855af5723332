"""Padding layers over ``functional.pad``: constant (zero), reflection, replication and
circular, 1-D, 2-D and 3-D."""

from __future__ import annotations

import numbers

from . import functional as F
from .module import Module
from .._types import as_index


def _padding(padding, n, cls):
    """``padding`` as ``2 * n`` ints (left, right, then top, bottom): an int pads every side."""
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        return (as_index(padding),) * (2 * n)
    if isinstance(padding, (tuple, list)) and len(padding) == 2 * n:
        return tuple(as_index(p) for p in padding)
    raise TypeError(f"{cls}: padding must be an int or a tuple of {2 * n} ints, got {padding!r}")


class _Pad(Module):
    _n = 1
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding(padding, self._n, type(self).__name__)

    def forward(self, x):
        return F.pad(x, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class ConstantPad1d(_Pad):
    """Pads the last dimension with ``value``: ``padding`` is an int or (left, right)."""

    def __init__(self, padding, value: float):
        super().__init__(padding)
        self.value = value

    def forward(self, x):
        return F.pad(x, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad2d(ConstantPad1d):
    """Pads the last two dimensions with ``value``: ``padding`` is an int or (left, right, top,
    bottom)."""

    _n = 2


class ConstantPad3d(ConstantPad1d):
    """Pads the last three dimensions with ``value``: ``padding`` is an int or (left, right,
    top, bottom, front, back)."""

    _n = 3


class ZeroPad1d(ConstantPad1d):
    """Pads the last dimension with zeros: ``padding`` is an int or (left, right)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ZeroPad2d(ConstantPad2d):
    """Pads the last two dimensions with zeros: ``padding`` is an int or (left, right, top,
    bottom)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_Pad):
    """Pads the last dimension of [N, C, L] or [C, L] input with its reflection (the edge is
    not repeated); each pad must be less than the dimension."""

    _mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Pads the last two dimensions of [N, C, H, W] or [C, H, W] input with their reflection
    (the edge is not repeated): ``padding`` is an int or (left, right, top, bottom), each less
    than its dimension."""

    _n = 2


class ReplicationPad1d(_Pad):
    """Pads the last dimension of [N, C, L] or [C, L] input by repeating its edge values."""

    _mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Pads the last two dimensions of [N, C, H, W] or [C, H, W] input by repeating its edge
    values: ``padding`` is an int or (left, right, top, bottom)."""

    _n = 2


class ZeroPad3d(ConstantPad3d):
    """Pads the last three dimensions with zeros: ``padding`` is an int or (left, right, top,
    bottom, front, back)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad3d(ReflectionPad1d):
    """Pads the last three dimensions of [N, C, D, H, W] or [C, D, H, W] input with their
    reflection: ``padding`` is an int or six ints, each less than its dimension."""

    _n = 3


class ReplicationPad3d(ReplicationPad1d):
    """Pads the last three dimensions of [N, C, D, H, W] or [C, D, H, W] input by repeating
    their edge values."""

    _n = 3


class CircularPad1d(_Pad):
    """Pads the last dimension of [N, C, L] or [C, L] input by wrapping around: the left pad
    comes from the right end and the right pad from the left end."""

    _mode = "circular"


class CircularPad2d(CircularPad1d):
    """Pads the last two dimensions of [N, C, H, W] or [C, H, W] input by wrapping around."""

    _n = 2


class CircularPad3d(CircularPad1d):
    """Pads the last three dimensions of [N, C, D, H, W] or [C, D, H, W] input by wrapping
    around."""

    _n = 3
