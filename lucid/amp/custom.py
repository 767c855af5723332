"""``custom_fwd`` / ``custom_bwd``: autocast for the forward and backward of a
``lucid.autograd.Function``, with PyTorch's semantics."""

from __future__ import annotations

import functools

from .._types import dtype as _dtype
from .autocast_mode import _device_code, autocast, cast_floating_args, is_autocast_enabled
from .state import autocast_state


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorates a Function's ``forward``. Its ``backward`` (decorated with
    :func:`custom_bwd`) then runs under the autocast state that ``forward`` saw.

    With ``cast_inputs`` (a floating dtype) and autocast on for `device_type`, the floating
    tensor arguments are cast to it and ``forward`` (and so ``backward``) runs with autocast
    off on that device; elsewhere ``forward`` runs as called.
    """
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    _device_code(device_type, allow_none=False)
    if cast_inputs is not None and (not isinstance(cast_inputs, _dtype) or not cast_inputs.is_floating_point):
        raise TypeError(f"cast_inputs must be a floating lucid.dtype or None, got {cast_inputs!r}")

    @functools.wraps(fwd)
    def decorate_fwd(ctx, *args, **kwargs):
        if cast_inputs is None or not is_autocast_enabled(device_type):
            ctx._autocast_state = autocast_state()
            return fwd(ctx, *args, **kwargs)

        args, kwargs = cast_floating_args(args, kwargs, cast_inputs)
        with autocast(device_type, enabled=False):
            ctx._autocast_state = autocast_state()
            return fwd(ctx, *args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorates a Function's ``backward`` so that it runs under the autocast state its
    :func:`custom_fwd` forward ran under, whatever the state where ``backward()`` is called."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    _device_code(device_type, allow_none=False)

    @functools.wraps(bwd)
    def decorate_bwd(ctx, *grads):
        state = getattr(ctx, "_autocast_state", None)
        if state is None:
            return bwd(ctx, *grads)
        with state:
            return bwd(ctx, *grads)

    return decorate_bwd
