"""``torch.utils.data.dataset``'s names, where programs import them from."""

from . import ConcatDataset, Dataset, Subset, TensorDataset, random_split

__all__ = ["Dataset", "TensorDataset", "Subset", "ConcatDataset", "random_split"]
