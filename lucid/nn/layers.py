"""Linear, ReLU and Sequential."""

from __future__ import annotations

import math
import operator
from collections import OrderedDict

from .. import _creation
from .._types import check_dtype, float32
from . import functional as F
from .module import Module
from .parameter import Parameter


class Linear(Module):
    """``y = x @ weight.T + bias``, weights drawn uniformly from ±1/sqrt(in_features)
    (PyTorch's default initialisation)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device="cpu", dtype=None):
        super().__init__()
        self.in_features = operator.index(in_features)
        self.out_features = operator.index(out_features)
        if self.in_features < 0 or self.out_features < 0:
            raise ValueError(f"Linear features must be non-negative, got {in_features} and {out_features}")
        d = float32 if dtype is None else check_dtype(dtype)
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0

        def uniform(*shape):
            return Parameter(((_creation.rand(*shape) * 2.0 - 1.0) * bound).to(d).to(device))

        self.weight = uniform(self.out_features, self.in_features)
        if bias:
            self.bias = uniform(self.out_features)
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class SiLU(Module):
    def forward(self, x):
        return F.silu(x)


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


class Sequential(Module):
    """Runs its modules in order."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                setattr(self, name, self._checked(m))
        else:
            for i, m in enumerate(modules):
                setattr(self, str(i), self._checked(m))

    @staticmethod
    def _checked(m):
        if not isinstance(m, Module):
            raise TypeError(f"Sequential takes Modules, got {type(m).__name__}")
        return m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(*mods[i])
        return mods[operator.index(i)]

    def append(self, m):
        setattr(self, str(len(self)), self._checked(m))
        return self

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x
