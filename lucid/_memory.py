"""Memory held by tensor buffers, as the engine counts it."""

from __future__ import annotations

from . import _C
from ._types import as_device


def _code(device) -> int:
    return -1 if device is None else as_device(device).code


def live_tensors() -> int:
    """Engine tensors alive now (releases Python has batched are made first)."""
    _C.flush_releases()
    return _C.live_tensors()


def _stats(device):
    _C.flush_releases()
    return _C.memory_stats(_code(device))


def memory_allocated(device=None) -> int:
    """Bytes held by tensor buffers now, on ``device`` (``"cpu"``/``"metal"``) or on both."""
    return _stats(device)[0]


def max_memory_allocated(device=None) -> int:
    """The most bytes held at once since the last :func:`reset_peak_memory_stats`."""
    return _stats(device)[1]


def empty_cache() -> int:
    """Returns the tensor buffers the engine keeps for reuse to the system; the bytes freed.

    Freed buffers are cached (up to ``LUCID_CACHE_LIMIT_MB``, 2 GiB by default, for host
    memory and again for Metal buffers; 0 turns the caches off) so that same-shaped tensors
    reuse memory that is already mapped. A Metal buffer is reused only after the GPU has
    finished every kernel that used it. Cached bytes do not count in
    :func:`memory_allocated`.
    """
    _C.flush_releases()
    return _C.empty_cache()


def reset_peak_memory_stats(device=None) -> None:
    """Restarts peak tracking from what is allocated now."""
    _C.reset_peak_memory_stats(_code(device))
