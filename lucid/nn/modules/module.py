"""``torch.nn.modules.module``'s names: :class:`Module` and the global module hooks (defined in
``lucid.nn.module``)."""

from ..module import (
    Module,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)

__all__ = [
    "Module",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
]
