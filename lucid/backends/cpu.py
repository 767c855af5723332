"""The host (CPU) backend."""

from .. import _C


def get_cpu_capability() -> str:
    """The vector unit the engine's own host loops run on, by PyTorch's names: ``"AVX512"``,
    ``"AVX2"`` or ``"DEFAULT"`` (the baseline the engine is compiled for, and every Apple
    CPU). The environment variable ``LUCID_HOST_ISA`` (``baseline``, ``avx2`` or ``avx512``),
    read once at the process's first host loop, can lower it."""
    return _C.cpu_capability()
