"""The device-agnostic accelerator API, as ``torch.accelerator``: the accelerator is
``"metal"`` where the Metal backend serves it (a Mac, or the emulated check build), and there
is none on the host fallback, so a program written against ``torch.accelerator`` picks the
GPU on a Mac and the CPU elsewhere."""

from __future__ import annotations

from . import metal
from ._types import device


def is_available() -> bool:
    """Whether an accelerator (the Metal GPU) serves ``"metal"``."""
    return metal.is_available()


def current_accelerator(check_available: bool = False):
    """``lucid.device("metal")`` where Metal serves it, else ``None``."""
    return device("metal") if is_available() else None


def device_count() -> int:
    """1 where Metal serves ``"metal"``, else 0."""
    return 1 if is_available() else 0


def current_device_index() -> int:
    """0 where there is an accelerator, else -1."""
    return 0 if is_available() else -1


def set_device_index(device) -> None:
    """Selects the accelerator: there is one, index 0 (or a device naming it)."""
    index = device.index if hasattr(device, "index") else device
    if not is_available() or index not in (0, None):
        raise ValueError(f"set_device_index: lucid has {device_count()} accelerator(s); got {device!r}")


class device_index:
    """``with device_index(0):`` selects the one accelerator for the block (nothing to switch)."""

    def __init__(self, device):
        if device is not None:
            set_device_index(device)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def synchronize(device_index=None) -> None:
    """Waits for the accelerator's queued work (:func:`lucid.metal.synchronize`)."""
    if is_available():
        metal.synchronize()


__all__ = [
    "is_available",
    "current_accelerator",
    "device_count",
    "current_device_index",
    "set_device_index",
    "device_index",
    "synchronize",
]
