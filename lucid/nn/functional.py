"""Functional forms of the layers."""

from __future__ import annotations

from .. import _engine as E
from .._tensor import Tensor


def _check(t, what):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what} must be a lucid.Tensor, got {type(t).__name__}")


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``; lower precision under autocast (float32 accumulation)."""
    _check(input, "input")
    _check(weight, "weight")
    if bias is not None:
        _check(bias, "bias")
    return Tensor._wrap(E.linear(input._h, weight._h, 0 if bias is None else bias._h))


def relu(input: Tensor) -> Tensor:
    _check(input, "input")
    return input.relu()
