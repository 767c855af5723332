"""Signal processing, as ``torch.signal``: :mod:`lucid.signal.windows`."""

from . import windows

__all__ = ["windows"]
