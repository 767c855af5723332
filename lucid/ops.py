"""``lucid.ops.aten``: the operators of PyTorch's ``torch.ops.aten`` that lucid has, by their aten
names, for code that calls them that way (``torch.ops.aten._safe_softmax.default(x, 1)``).

Each is an overload packet: calling it calls its default overload, and ``.default`` is that
overload (a plain function). Only the operators listed here exist; any other name raises
AttributeError naming it."""

from __future__ import annotations

from ._ops import composed as _composed
from .nn import _aten


class OpOverloadPacket:
    """An aten operator: callable, with its overloads as attributes (``.default``)."""

    def __init__(self, name: str, overloads: dict):
        self.__name__ = self._qualified_op_name = f"aten::{name}"
        self._overloads = dict(overloads)
        self.__doc__ = overloads["default"].__doc__

    def overloads(self) -> list:
        return list(self._overloads)

    def __getattr__(self, name):
        overloads = self.__dict__.get("_overloads", {})
        if name in overloads:
            return overloads[name]
        raise AttributeError(
            f"{self.__dict__.get('__name__', 'aten operator')} has no overload {name!r} (it has {', '.join(overloads)})"
        )

    def __call__(self, *args, **kwargs):
        return self._overloads["default"](*args, **kwargs)

    def __repr__(self):
        return f"<OpOverloadPacket(op='{self.__name__}')>"


class _Namespace:
    """A namespace of operators (``aten``)."""

    def __init__(self, name: str, ops: dict):
        self._name = name
        self._ops = ops

    def __getattr__(self, name):
        ops = self.__dict__.get("_ops", {})
        if name in ops:
            return ops[name]
        raise AttributeError(f"lucid.ops.{self.__dict__.get('_name')} has no operator {name!r}")

    def __dir__(self):
        return sorted(self._ops)


def _packet(name, fn, **more):
    return OpOverloadPacket(name, {"default": fn, **more})


def _legit_no_stats(input, weight, bias, training, momentum, eps):
    return _aten._native_batch_norm_legit(input, weight, bias, training, momentum, eps)


_legit_no_stats.__doc__ = _aten._native_batch_norm_legit.__doc__

aten = _Namespace(
    "aten",
    {
        **{
            name: _packet(name, getattr(_aten, name))
            for name in (
                "native_layer_norm",
                "native_group_norm",
                "native_batch_norm",
                "_batch_norm_with_update",
                "_softmax_backward_data",
                "native_dropout_backward",
                "max_pool2d_with_indices_backward",
                "grid_sampler_2d",
                "grid_sampler_3d",
                "constant_pad_nd",
                "_safe_softmax",
                "_scaled_dot_product_flash_attention_for_cpu",
            )
        },
        "_native_batch_norm_legit": _packet(
            "_native_batch_norm_legit", _aten._native_batch_norm_legit, no_stats=_legit_no_stats
        ),
        "_segment_reduce": _packet("_segment_reduce", _composed._segment_reduce),
        "hash_tensor": _packet("hash_tensor", _composed.hash_tensor),
    },
)

__all__ = ["aten", "OpOverloadPacket"]
