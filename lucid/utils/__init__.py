"""Utilities: ``lucid.utils.data`` (datasets and loaders, as ``torch.utils.data``)."""

from . import data

__all__ = ["data"]
