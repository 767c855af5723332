"""Handles for registered hooks, as ``torch.utils.hooks``."""

from __future__ import annotations

import itertools

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """What registering a hook returns: ``remove()`` unregisters the hook (a second call does
    nothing), and so does leaving a ``with`` block over the handle.

    Parameters
    ----------
    hooks_dict : mapping
        The table the hook is registered in, under this handle's ``id``.
    extra_dict : mapping or list of mappings, optional
        Further tables keyed by ``id`` (e.g. per-hook flags), cleared with it.
    """

    _ids = itertools.count()

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.id = next(RemovableHandle._ids)
        self._tables = [hooks_dict]
        if extra_dict is not None:
            self._tables += list(extra_dict) if isinstance(extra_dict, (list, tuple)) else [extra_dict]

    def remove(self) -> None:
        for table in self._tables:
            table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    def __repr__(self):
        return f"<RemovableHandle id={self.id}>"
