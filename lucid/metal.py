"""The Metal (GPU) stream."""

from . import _engine as E
from ._engine import MetalFallbackWarning


def is_available() -> bool:
    """``True`` when Metal kernels serve device ``"metal"``.

    ``False`` where Metal is unavailable (Linux, CI): there ``"metal"`` runs on a host
    fallback that keeps the GPU stream's dtype rules (float16 storage, float32
    accumulation) and warns once per process; ``LUCID_METAL_FALLBACK=0`` makes ``"metal"``
    raise ``RuntimeError`` instead.
    """
    return E.metal_is_available()


__all__ = ["is_available", "MetalFallbackWarning"]
