"""The optimizer base: parameter groups, per-parameter state, zero_grad and state dicts."""

from __future__ import annotations

import collections
import copy
import numbers

from .. import _grad_mode
from .._ops import writes
from .._tensor import Tensor
from .._types import float32 as _STEP_DTYPE  # a step count held as a tensor, as PyTorch's


def check_implementation_flags(foreach, fused):
    """PyTorch's ``foreach=`` and ``fused=``: None or a bool, and nothing to choose, since each
    parameter's update is already one engine kernel."""
    for name, value in (("foreach", foreach), ("fused", fused)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be None or a bool, got {value!r}")


class Optimizer:
    """Updates parameters from their ``.grad``. Subclasses implement ``_update`` for one
    parameter as one engine call."""

    def __init__(self, params, defaults: dict):
        if isinstance(params, Tensor):
            raise TypeError("params must be an iterable of tensors or of dicts, got a single tensor")
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        self.state: collections.defaultdict = collections.defaultdict(dict)  # per parameter, as PyTorch's
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict):
        if not isinstance(group, dict):
            raise TypeError(f"a parameter group must be a dict, got {type(group).__name__}")
        group = dict(group)
        params = group.get("params")
        params = [params] if isinstance(params, Tensor) else list(params or [])
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer parameters must be lucid tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf tensor")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params) or len({id(p) for p in params}) != len(params):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = params
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group):
        for k in ("lr", "weight_decay"):
            v = group.get(k, 0.0)
            if not isinstance(v, numbers.Real) or isinstance(v, bool) or v < 0:
                raise ValueError(f"invalid {k}: {v!r} (expected a non-negative number)")

    def zero_grad(self, set_to_none: bool = True):
        """Clears gradients: to None (default), or to zeros in place (each gradient stays the
        same tensor)."""
        writes.zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    # Whether `_update` takes GradScaler's found-inf flag (a float32 tensor of the gradients'
    # device) and skips the update on the device when it is set, so that a scaled step never
    # waits for the host to read it (PyTorch's fused optimizers take it so).
    _skips_on_device = False

    def step(self, closure=None):
        """Updates every parameter that has a gradient; returns ``closure()`` if given."""
        return self._step(closure)

    def _step(self, closure=None, found_inf=None):
        loss = None
        if closure is not None:
            with _grad_mode.enable_grad():
                loss = closure()
        flag = {} if found_inf is None else {"found_inf": found_inf}
        with _grad_mode.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    self._update(p, grad, group, self.state.setdefault(p, {}), **flag)
        return loss

    def _update(self, p, grad, group, state) -> None:
        """Updates `p` and its `state` in place (the step runs under no_grad)."""
        raise NotImplementedError

    # ---- state ---------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``."""
        index, groups = {}, []
        for g in self.param_groups:
            entry = {k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
            entry["params"] = [index.setdefault(id(p), len(index)) for p in g["params"]]
            groups.append(entry)
        state = {
            index[id(p)]: {k: (v.detach() if isinstance(v, Tensor) else v) for k, v in s.items()}
            for p, s in self.state.items()
            if id(p) in index
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict):
        groups = state_dict.get("param_groups")
        if not isinstance(groups, list) or len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        params = []
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs.get("params", [])):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't match the size of the optimizer's group"
                )
            params.extend(zip(theirs["params"], mine["params"]))
        self.state = collections.defaultdict(dict)
        for idx, p in params:
            saved = state_dict.get("state", {}).get(idx)
            if saved is not None:
                self.state[p] = {
                    k: (
                        v.to(dtype=_STEP_DTYPE if k == "step" else p.dtype, device=p.device, copy=True)
                        if isinstance(v, Tensor)
                        else v
                    )
                    for k, v in saved.items()
                }
        for mine, theirs in zip(self.param_groups, groups):
            mine.update({k: v for k, v in theirs.items() if k != "params"})
