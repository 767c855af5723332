"""Automatic mixed precision: ``autocast`` scopes, ``GradScaler``, the op policy table and
``inspect``."""

from .autocast_mode import (
    CastPolicy,
    autocast,
    cpu_bfloat16_ops,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    policies,
    policy,
    set_autocast_cache_enabled,
)
from .custom import custom_bwd, custom_fwd
from .grad_scaler import GradScaler
from .inspect import inspect
from .state import autocast_state, propagate

__all__ = [
    "autocast",
    "GradScaler",
    "is_autocast_enabled",
    "is_autocast_available",
    "is_autocast_cache_enabled",
    "set_autocast_cache_enabled",
    "autocast_state",
    "propagate",
    "custom_fwd",
    "custom_bwd",
    "get_autocast_dtype",
    "policy",
    "policies",
    "cpu_bfloat16_ops",
    "CastPolicy",
    "inspect",
]
