"""ModuleList and ModuleDict: containers whose modules' parameters belong to the parent."""

from __future__ import annotations

import operator
from collections import OrderedDict

from .module import Module


def _module(m, where):
    if not isinstance(m, Module):
        raise TypeError(f"{where} takes Modules, got {type(m).__name__}")
    return m


class ModuleList(Module):
    """A list of modules, registered under their indices (``layers.0.weight``)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, i):
        n = len(self)
        i = operator.index(i)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for a ModuleList of length {n}")
        return i % n

    def _reset(self, modules):
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ModuleList(list(self._modules.values())[i])
        return self._modules[str(self._index(i))]

    def __setitem__(self, i, m):
        self._modules[str(self._index(i))] = _module(m, "ModuleList")

    def __delitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            del mods[i]
        else:
            del mods[self._index(i)]
        self._reset(mods)

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, m):
        self._modules[str(len(self))] = _module(m, "ModuleList")
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, m):
        mods = list(self._modules.values())
        mods.insert(operator.index(index), _module(m, "ModuleList"))
        self._reset(mods)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over its modules")


class ModuleDict(Module):
    """An ordered mapping of names to modules, registered under those names."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def _key(self, key):
        if not isinstance(key, str):
            raise TypeError(f"ModuleDict keys must be strings, got {type(key).__name__}")
        return key

    def __getitem__(self, key):
        return self._modules[self._key(key)]

    def __setitem__(self, key, m):
        key = self._key(key)
        if not key or "." in key:
            raise KeyError(f"module name must be a non-empty string without '.', got {key!r}")
        self._modules[key] = _module(m, "ModuleDict")

    def __delitem__(self, key):
        del self._modules[self._key(key)]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key):
        return self._modules.pop(self._key(key))

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        items = modules.items() if isinstance(modules, (dict, OrderedDict, ModuleDict)) else modules
        for key, m in items:
            self[key] = m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it by name")
