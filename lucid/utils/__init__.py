"""Utilities: ``lucid.utils.data`` (datasets and loaders, as ``torch.utils.data``) and
``lucid.utils.hooks`` (the handles hook registrations return)."""

import importlib

from . import hooks

__all__ = ["data", "hooks"]


def __getattr__(name):
    # `data` is imported when first used: it needs lucid.amp, and lucid.nn (which amp imports)
    # needs `hooks` while lucid is still being imported.
    if name == "data":
        return importlib.import_module(".data", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
