"""Optimizers over ``lucid.distributed``: :class:`ZeroRedundancyOptimizer` (ZeRO stage 1).

>>> from lucid.distributed.optim import ZeroRedundancyOptimizer
>>> opt = ZeroRedundancyOptimizer(model.parameters(), lucid.optim.Adam, lr=1e-3)
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import _C
from .._tensor import Tensor
from .._types import dtype_by_name
from ..optim.optimizer import Optimizer
from . import _broadcast_tensors, _group, _tensor_from

__all__ = ["ZeroRedundancyOptimizer"]

_WHAT = "ZeroRedundancyOptimizer"
_BROADCAST_BYTES = 25 * 2**20  # the updated shards go out in buffers of at most this


class ZeroRedundancyOptimizer(Optimizer):
    """Shards an optimizer's state over the ranks (ZeRO stage 1), as PyTorch's
    ``torch.distributed.optim.ZeroRedundancyOptimizer``.

    Every rank holds every parameter and its (averaged) gradient, but each parameter belongs
    to one rank: only that rank keeps its optimizer state (Adam's two moments, SGD's momentum)
    and updates it. A step updates this rank's parameters with a local `optimizer_class` over
    them, then each rank broadcasts its updated parameters, so that after ``step()`` every
    rank holds the same parameters, as with an unsharded optimizer; the state takes 1/N of
    the memory on each of N ranks.

    Parameters
    ----------
    params : iterable of tensors or of dicts
        The parameters (or parameter groups), the same on every rank, in the same order.
    optimizer_class : a subclass of lucid.optim.Optimizer
        The optimizer each rank runs on its own parameters (``lucid.optim.Adam``, ...).
    process_group : None
        lucid has one process group, every rank.
    parameters_as_bucket_view : bool, default False
        Accepted and ignored: a PyTorch memory layout (parameters as views of flat buckets).
    overlap_with_ddp : bool, default False
        PyTorch's stepping inside DistributedDataParallel's communication hook; only False.
    **defaults
        The optimizer's arguments (``lr=...``, ``betas=...``), as `optimizer_class` takes them.

    Notes
    -----
    - Each parameter group's parameters are dealt out largest first, each to the rank that has
      the fewest elements so far (the lowest such rank), so that every rank steps about as many.
      ``self.optim`` is this rank's optimizer; ``param_groups`` holds every parameter, and its
      hyperparameters (``lr``, as a scheduler sets it) are passed to ``self.optim`` at each step.
    - ``step()`` is collective: every rank must call it. With ``lucid.amp.GradScaler`` the
      found-inf flag is agreed over the ranks first, so a step is skipped on every rank or on
      none (``scaler.step(opt)`` as with any optimizer).
    - ``state`` is this rank's shard of the state. ``consolidate_state_dict(to)`` (collective)
      gathers the shards on rank `to`, where ``state_dict()`` then returns the whole state, in
      the layout of ``optimizer_class``'s own state dict (it loads into an unsharded
      optimizer over the same parameters, and into this one on any number of ranks).
    """

    def __init__(
        self,
        params,
        optimizer_class,
        process_group=None,
        parameters_as_bucket_view=False,
        overlap_with_ddp=False,
        **defaults,
    ):
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(
                f"{_WHAT}: optimizer_class must be a lucid.optim.Optimizer subclass, got {optimizer_class!r}"
            )
        if optimizer_class is ZeroRedundancyOptimizer:
            raise TypeError(f"{_WHAT}: optimizer_class cannot be ZeroRedundancyOptimizer itself")
        if process_group is not None:
            raise ValueError(
                f"{_WHAT}: lucid.distributed has one process group, every rank; pass process_group=None "
                f"(got {process_group!r})"
            )
        for name, flag in (
            ("parameters_as_bucket_view", parameters_as_bucket_view),
            ("overlap_with_ddp", overlap_with_ddp),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"{_WHAT}: {name} must be a bool, got {flag!r}")
        if overlap_with_ddp:
            raise ValueError(
                f"{_WHAT}: overlap_with_ddp=True (stepping inside DistributedDataParallel's communication) is "
                f"not supported; step after backward (DistributedDataParallel already overlaps the averaging)"
            )
        backend = _group.require(_WHAT)
        self.optim = None
        super().__init__(params, defaults)
        self._check_ranks_match(backend)
        self._owner = self._partition(backend.size)
        rank = backend.rank
        local_groups = [
            {
                **{k: v for k, v in g.items() if k != "params"},
                "params": [p for p in g["params"] if self._owner[id(p)] == rank],
            }
            for g in self.param_groups
        ]
        self.optim = optimizer_class(local_groups, **defaults)
        # The local optimizer's defaults fill what the caller did not give (Adam's betas, ...).
        for mine, local in zip(self.param_groups, self.optim.param_groups):
            for k, v in local.items():
                if k != "params":
                    mine.setdefault(k, v)
        self.defaults = {**self.optim.defaults, **self.defaults}
        self._consolidated = None

    # ---- the shards ---------------------------------------------------------------------------

    def _check_ranks_match(self, backend):
        mine = [[(p.dtype.name, tuple(p.shape)) for p in g["params"]] for g in self.param_groups]
        everyone = backend.all_gather_object(mine, _WHAT)
        for r, theirs in enumerate(everyone):
            if theirs != everyone[0]:
                raise ValueError(
                    f"{_WHAT}: the ranks' parameters differ (rank 0 has {_describe(everyone[0])}, rank {r} has "
                    f"{_describe(theirs)}); every rank must pass the same parameters in the same order"
                )

    def _partition(self, ranks):
        """id(parameter) -> the rank that owns it: per group, largest first (ties in order),
        each to the rank with the fewest elements so far."""
        owner, load = {}, [0] * ranks
        for g in self.param_groups:
            for p in sorted(g["params"], key=lambda t: -t.numel()):  # sorted() is stable
                r = min(range(ranks), key=lambda k: load[k])
                owner[id(p)] = r
                load[r] += p.numel()
        return owner

    def _params_of(self, rank):
        return [p for g in self.param_groups for p in g["params"] if self._owner[id(p)] == rank]

    # ---- stepping -----------------------------------------------------------------------------

    @property
    def _skips_on_device(self):
        return self.optim is not None and self.optim._skips_on_device

    @property
    def state(self):
        """This rank's shard of the optimizer state (its local optimizer's)."""
        return self.optim.state if self.optim is not None else {}

    @state.setter
    def state(self, value):  # Optimizer.__init__ sets one before the local optimizer exists
        if self.optim is not None:
            self.optim.state = value

    def _step(self, closure=None, found_inf=None):
        """Steps this rank's parameters (taking GradScaler's found-inf flag on the device when
        the local optimizer does), then gives every rank each rank's updated parameters."""
        backend = _group.require(f"{_WHAT}.step")
        for mine, local in zip(self.param_groups, self.optim.param_groups):
            local.update({k: v for k, v in mine.items() if k != "params"})
        if found_inf is not None:
            loss = self.optim._step(closure, found_inf=found_inf)
        else:
            loss = self.optim.step(closure) if closure is not None else self.optim.step()
        for r in range(backend.size):
            params = self._params_of(r)
            if params:
                _broadcast_tensors(params, r, _BROADCAST_BYTES, f"{_WHAT}.step: rank {r}'s updated parameters")
        self._consolidated = None
        return loss

    # ---- state dicts --------------------------------------------------------------------------

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gathers every rank's shard of the state on rank `to` (collective: every rank calls
        it with the same `to`); ``state_dict()`` on rank `to` then returns the whole state."""
        backend = _group.require(f"{_WHAT}.consolidate_state_dict")
        if isinstance(to, bool) or not isinstance(to, numbers.Integral) or not 0 <= to < backend.size:
            raise ValueError(f"{_WHAT}.consolidate_state_dict: to={to!r} is not a rank (0 … {backend.size - 1})")
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        mine = {index[id(p)]: {k: _portable(v) for k, v in s.items()} for p, s in self.optim.state.items()}
        shards = backend.gather_object(mine, int(to), f"{_WHAT}.consolidate_state_dict")
        if backend.rank != to:
            self._consolidated = None
            return
        params = [p for g in self.param_groups for p in g["params"]]
        state = {}
        for shard in shards:
            for i, s in shard.items():
                state[i] = {k: _restored(v, params[i].device) for k, v in s.items()}
        groups, start = [], 0
        for g in self.param_groups:
            entry = {k: v for k, v in g.items() if k != "params"}
            entry["params"] = list(range(start, start + len(g["params"])))
            start += len(g["params"])
            groups.append(entry)
        self._consolidated = {"state": dict(sorted(state.items())), "param_groups": groups}

    def state_dict(self) -> dict:
        """The whole optimizer state, on the rank that ``consolidate_state_dict(to=...)``
        gathered it on, since the last step. Raises RuntimeError elsewhere, or before."""
        if self._consolidated is None:
            raise RuntimeError(
                f"{_WHAT}.state_dict: the state is sharded over the ranks; call consolidate_state_dict(to=rank) "
                f"on every rank first (after the last step), then state_dict() on that rank"
            )
        return self._consolidated

    def load_state_dict(self, state_dict: dict) -> None:
        """Loads a whole state dict (from ``state_dict()`` here, or from an unsharded
        optimizer over the same parameters): every rank keeps its own shard of it."""
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        if not isinstance(groups, list) or len(groups) != len(self.param_groups):
            raise ValueError(f"{_WHAT}.load_state_dict: the state dict has a different number of parameter groups")
        rank = _group.require(f"{_WHAT}.load_state_dict").rank
        local_groups, local_state, n = [], {}, 0
        for mine, theirs in zip(self.param_groups, groups):
            if len(theirs.get("params", [])) != len(mine["params"]):
                raise ValueError(
                    f"{_WHAT}.load_state_dict: a parameter group of the state dict has {len(theirs.get('params', []))} "
                    f"parameters where this optimizer's has {len(mine['params'])}"
                )
            entry = {k: v for k, v in theirs.items() if k != "params"}
            entry["params"] = []
            for p, i in zip(mine["params"], theirs["params"]):
                if self._owner[id(p)] != rank:
                    continue
                entry["params"].append(n)
                if i in state_dict.get("state", {}):
                    local_state[n] = state_dict["state"][i]
                n += 1
            local_groups.append(entry)
            mine.update({k: v for k, v in theirs.items() if k != "params"})
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})
        self._consolidated = None


def _describe(groups):
    return f"{sum(len(g) for g in groups)} parameters in {len(groups)} group(s)"


def _portable(value):
    """A state value as it crosses between processes: a tensor as (bytes, shape, dtype name)."""
    if not isinstance(value, Tensor):
        return value
    buf = np.empty(value.numel(), dtype=value.dtype.numpy)
    _C.tensor_to_host(value._h, buf.ctypes.data, buf.nbytes)
    return ("lucid.Tensor", buf.tobytes(), tuple(value.shape), value.dtype.name)


def _restored(value, device):
    if not (isinstance(value, tuple) and len(value) == 4 and value[0] == "lucid.Tensor"):
        return value
    _, data, shape, name = value
    dtype = dtype_by_name(name)
    buf = np.frombuffer(data, dtype=dtype.numpy).copy()
    return _tensor_from(buf, shape, dtype, device)
