"""Learning-rate schedules: StepLR and CosineAnnealingLR, with PyTorch's semantics."""

from __future__ import annotations

import math
import numbers
import operator

from .optimizer import Optimizer


class LRScheduler:
    """Sets each parameter group's ``lr`` from its ``initial_lr`` and the epoch count.

    Constructing a scheduler performs its first step (epoch 0), so the optimizer starts at
    the base learning rates; call ``step()`` once per epoch after ``optimizer.step()``.
    """

    def __init__(self, optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        last_epoch = operator.index(last_epoch)
        if last_epoch < -1:
            raise ValueError(
                f"last_epoch must be -1 (a new schedule) or the index of the last finished epoch, got {last_epoch}"
            )
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(
                    f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a scheduler "
                    f"(last_epoch={last_epoch})"
                )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, base_lr: float, epoch: int) -> float:
        """The learning rate of a group with base rate ``base_lr`` at ``epoch``."""
        raise NotImplementedError

    def step(self):
        """Advances one epoch and sets every group's ``lr``."""
        self.last_epoch += 1
        self._last_lr = [self.lr_at(base, self.last_epoch) for base in self.base_lrs]
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def get_last_lr(self) -> list:
        """The learning rates set by the last ``step()``, one per group."""
        return list(self._last_lr)

    def state_dict(self) -> dict:
        """Everything but the optimizer (lists copied, so later steps do not change it)."""
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict):
        """Restores what :meth:`state_dict` returned. As in PyTorch, the groups' ``lr`` change
        at the next ``step()``; load the optimizer's own state dict to restore them now."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"load_state_dict expects a dict, got {type(state_dict).__name__}")
        if "optimizer" in state_dict:
            raise ValueError("a scheduler state dict does not hold the optimizer")
        self.__dict__.update({k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in state_dict.items()})


def _real(v, what, minimum=None):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{what} must be a number, got {v!r}")
    if minimum is not None and not v >= minimum:  # (NaN fails too)
        raise ValueError(f"{what} must be at least {minimum}, got {v!r}")
    return float(v)


def _positive_int(v, what):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0:
        raise ValueError(f"{what} must be a positive integer, got {v!r}")
    return int(v)


class StepLR(LRScheduler):
    """Multiplies the learning rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size = _positive_int(step_size, "step_size")
        self.gamma = _real(gamma, "gamma", 0.0)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, epoch):
        return base_lr * self.gamma ** (epoch // self.step_size)


class CosineAnnealingLR(LRScheduler):
    """Anneals from the base rate to ``eta_min`` along half a cosine over ``T_max`` epochs:
    ``eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max = _positive_int(T_max, "T_max")
        # Optimizers refuse negative learning rates, so the schedule may not reach one.
        self.eta_min = _real(eta_min, "eta_min", 0.0)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr, epoch):
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2
