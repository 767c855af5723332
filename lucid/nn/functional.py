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


def _unary(name, input):
    _check(input, "input")
    return Tensor._wrap(E.unary(E.UNARY[name], input._h))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x·Φ(x) exactly (``approximate="none"``) or with the tanh approximation (``"tanh"``)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return _unary("gelu" if approximate == "none" else "gelu_tanh", input)


def silu(input: Tensor) -> Tensor:
    """x·sigmoid(x)."""
    return _unary("silu", input)


def softplus(input: Tensor) -> Tensor:
    """log(1 + exp(x)), linear above 20 as in PyTorch."""
    return _unary("softplus", input)


def sigmoid(input: Tensor) -> Tensor:
    return _unary("sigmoid", input)


def tanh(input: Tensor) -> Tensor:
    return _unary("tanh", input)
