"""``torch.backends.mps``: PyTorch's name for the GPU of a Mac, which lucid calls ``"metal"``
(``device="mps"`` is accepted as that device)."""

from __future__ import annotations

from .. import metal


def is_available() -> bool:
    """Whether Metal kernels serve the ``"metal"`` device (``lucid.metal.is_available()``)."""
    return metal.is_available()


def is_built() -> bool:
    """Whether this build of lucid can run on the Mac's GPU: as :func:`is_available`."""
    return metal.is_available()


__all__ = ["is_available", "is_built"]
