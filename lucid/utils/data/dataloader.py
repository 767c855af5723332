"""``torch.utils.data.dataloader``'s names, where programs import them from."""

from . import DataLoader, default_collate

__all__ = ["DataLoader", "default_collate"]
