"""``torch.utils.data.dataset``'s names, where programs import them from."""

from . import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "random_split"]
