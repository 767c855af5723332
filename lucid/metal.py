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


def host_fallback_counts() -> dict:
    """How many times each op ran on the host kernels instead of the ``"metal"`` backend's.

    The Metal backend grows one kernel family at a time; an op whose family it does not
    have yet runs on the host kernels over the same (unified) memory after the GPU's queued
    work finishes. Those runs are counted here by op name, since the process started, so
    that nobody takes a host op for a GPU op. Where the host fallback serves ``"metal"``
    (Linux, CI), every op runs on the host by design and nothing is counted.

    Returns
    -------
    dict
        Op name (``"add"``, ``"matmul"``, ``"max_pool2d_backward"``, ...) to count; only
        ops that fell back at least once appear.
    """
    return E.metal_host_fallback_counts()


__all__ = ["is_available", "host_fallback_counts", "MetalFallbackWarning"]
