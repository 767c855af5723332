"""PyTorch's ``torch.nn.modules`` path: ``lucid.nn.modules.module`` holds :class:`Module` and
the hooks every module runs (``register_module_forward_hook`` and its kin)."""

from . import module

__all__ = ["module"]
