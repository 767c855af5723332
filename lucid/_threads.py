"""The number of threads the CPU kernels use."""

from __future__ import annotations

import operator

from . import _C


def set_num_threads(n: int) -> None:
    """Sets how many threads the CPU kernels use: the engine's parallel loops and the
    oneDNN and OpenBLAS pools behind it. One process-wide setting (as ``torch.set_num_threads``),
    from 1 to 1024; it starts at the number of online cores. In a forked child, oneDNN runs on
    one thread whatever this says: GNU OpenMP's pool stays in the parent.
    """
    if isinstance(n, bool):
        raise TypeError(f"set_num_threads expects an int, got {n!r}")
    try:
        count = operator.index(n)
    except TypeError:
        raise TypeError(f"set_num_threads expects an int, got {type(n).__name__}") from None
    if not -(1 << 63) <= count < (1 << 63):
        raise ValueError(f"set_num_threads: expected a number of threads in 1...1024, got {count}")
    _C.set_num_threads(count)


def get_num_threads() -> int:
    """How many threads the CPU kernels use (see :func:`set_num_threads`)."""
    return _C.get_num_threads()
