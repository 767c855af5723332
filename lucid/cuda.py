"""``lucid.cuda``: PyTorch's CUDA queries as a machine without CUDA answers them.

Programs pick their device with ``torch.cuda.is_available()``; here it is always False, so they
fall back to the CPU, and the GPU of a Mac is ``device="metal"``. Asking for a CUDA device
raises a ValueError that says so.
"""

from __future__ import annotations

from ._types import no_cuda


def is_available() -> bool:
    """False: lucid has no CUDA device (the GPU of a Mac is ``"metal"``, see ``lucid.metal``)."""
    return False


def device_count() -> int:
    """0: lucid has no CUDA device."""
    return 0


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: there is no CUDA device to support it."""
    return False


def is_initialized() -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Does nothing, as in PyTorch where CUDA is unavailable (``lucid.manual_seed`` seeds lucid)."""


def manual_seed_all(seed: int) -> None:
    """Does nothing, as in PyTorch where CUDA is unavailable."""


def empty_cache() -> None:
    """Does nothing: there is no CUDA memory (``lucid.empty_cache`` frees lucid's caches)."""


def _unavailable(what):
    def fn(*args, **kwargs):
        raise ValueError(no_cuda(f"lucid.cuda.{what}()"))

    fn.__name__ = fn.__qualname__ = what
    fn.__doc__ = "Raises RuntimeError: lucid has no CUDA device."
    return fn


synchronize = _unavailable("synchronize")
current_device = _unavailable("current_device")
set_device = _unavailable("set_device")
get_device_name = _unavailable("get_device_name")
get_device_properties = _unavailable("get_device_properties")
memory_allocated = _unavailable("memory_allocated")
max_memory_allocated = _unavailable("max_memory_allocated")

__all__ = [
    "is_available",
    "device_count",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "empty_cache",
    "synchronize",
    "current_device",
    "set_device",
    "get_device_name",
    "get_device_properties",
    "memory_allocated",
    "max_memory_allocated",
]
