"""Automatic mixed precision: ``autocast`` scopes and the op policy table."""

from .autocast_mode import (CastPolicy, autocast, cpu_bfloat16_ops, get_autocast_dtype, is_autocast_enabled, policies,
                            policy)

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "policy", "policies", "cpu_bfloat16_ops",
           "CastPolicy"]
