"""DistributedDataParallel: one model replica per rank, gradients averaged after backward.

How the gradients are caught: lucid's autograd has no per-parameter hooks, so for the length
of a forward pass the wrapper hands the module, in place of each parameter, the output of an
identity function (:class:`_GradReady`) of that parameter and of one shared *sync token*
(made by :class:`_SyncPoint` from a one-element leaf). The engine runs a node of the backward
graph only after every node that consumes its output, and every identity consumes the
token; so ``_SyncPoint.backward`` runs once per ``backward()``, after every parameter's
gradient has been accumulated: there the gradients are averaged over the ranks, in flat
buckets. An unchanged training loop (``loss.backward(); optimizer.step()``) therefore sees
averaged gradients, as with PyTorch's DistributedDataParallel.
"""

from __future__ import annotations

import contextlib
import numbers
import weakref
from collections import OrderedDict

import numpy as np

from ... import _C
from ..._grad_mode import is_grad_enabled, no_grad
from ..._ops.creation import zeros
from ..._types import bfloat16, device, float16
from ...autograd import Function
from ...distributed import _assign, _group, _scale_, _tensor_from
from ..module import Module
from ..._core import result as _result

_WHAT = "DistributedDataParallel"
_ALIGN = 64  # bytes: each tensor in a broadcast buffer starts at an aligned offset


class _SyncPoint(Function):
    """The sync token: an identity of a one-element leaf whose backward averages the
    gradients (it runs after every parameter's identity has passed its gradient on)."""

    @staticmethod
    def forward(ctx, anchor, ddp_ref):
        ctx.ddp_ref = ddp_ref
        return anchor

    @staticmethod
    def backward(ctx, grad):
        ddp = ctx.ddp_ref()
        if ddp is not None:
            ddp._sync_gradients()
        return None, None


class _GradReady(Function):
    """The identity on a parameter that also consumes the sync token."""

    @staticmethod
    def forward(ctx, param, token, token_grad):
        (ctx.token_grad,) = token_grad  # in a tuple: not an input of the graph node
        return param

    @staticmethod
    def backward(ctx, grad):
        return grad, ctx.token_grad, None


class _Bucket:
    """Parameters whose gradients are averaged in one flat buffer of one dtype."""

    __slots__ = ("dtype", "entries", "buffer")

    def __init__(self, dtype):
        self.dtype = dtype
        self.entries = []  # (parameter index, start, numel)
        self.buffer = None


class DistributedDataParallel(Module):
    """Data-parallel training over ``lucid.distributed``: each rank runs `module` on its own
    share of every batch, and after ``backward()`` each parameter's ``.grad`` is the average
    of the ranks' gradients, so every rank's optimizer takes the same step.

    Parameters
    ----------
    module : lucid.nn.Module
        The model, the same on every rank (checked). Its parameters and buffers are broadcast
        from rank 0 when the wrapper is made, so every replica starts the same.
    device_ids : None or a one-element list
        PyTorch's choice of this rank's GPU. A lucid process has one device, the one its
        module is on, so the list can only name that one: the device (``"cpu"``,
        ``"metal"``, a ``lucid.device``) of the module's parameters, or an int that is this
        rank's local rank (its place among the ranks on its machine, 0 when run alone: what
        PyTorch programs pass as ``[local_rank]``). Anything else is a ValueError.
    output_device : None, or one device as in `device_ids`
        Where PyTorch gathers the outputs; they stay where the module makes them.
    dim : int, default 0
        Accepted and ignored: PyTorch splits inputs along it only to spread one process's
        batch over several GPUs, which a lucid process does not have.
    broadcast_buffers : bool, default True
        Broadcasts the module's buffers (e.g. BatchNorm's running statistics) from rank 0 at
        every forward, as PyTorch does.
    process_group : None
        lucid has one process group, every rank.
    bucket_cap_mb : float, optional
        PyTorch's name for `bucket_mb` (give one of the two).
    find_unused_parameters : bool, default False
        Accepted either way: parameters a rank's forward did not use always count as zero
        gradients there (see the notes), which is what PyTorch's True does.
    gradient_as_bucket_view : bool, default False
        Accepted and ignored: a PyTorch memory saving (``.grad`` as a view of the bucket);
        lucid copies the averaged bucket back into each ``.grad``.
    static_graph : bool, default False
        Accepted and ignored: PyTorch's hint that the graph is the same at every step; lucid
        averages once per backward whatever the graph.
    bucket_mb : float, default 25
        The size of the flat buffers that gradients are averaged in (one MPI all-reduce per
        buffer; a larger parameter gets a buffer of its own).
    grad_dtype : lucid.bfloat16 or lucid.float16, optional
        Compresses the gradients for the all-reduce: each is divided by the world size in
        float32, cast to `grad_dtype`, summed over the ranks (in float32, rounded once per
        pair) and cast back to the parameter's dtype, as PyTorch's ``bf16_compress_hook`` and
        ``fp16_compress_hook`` do. Half the bytes, at that dtype's precision.

    The arguments after `broadcast_buffers` are keyword-only (PyTorch's positions after it
    differ between its versions).

    Notes
    -----
    - Call :func:`lucid.distributed.init` first. With world size 1 the wrapper only calls
      the module.
    - The gradients are averaged once ``backward()`` has accumulated all of them (not
      overlapped with the backward pass). Parameters that a rank's forward did not use count
      as zero gradients there; a parameter no rank used keeps ``.grad`` None.
    - During the forward pass the module sees each parameter through an identity (not the
      Parameter object itself); code that must change a parameter in place belongs outside
      ``forward``, as in any training loop.
    - One ``backward()`` per forward; several forwards whose outputs add into one loss are
      fine (they share one averaging).
    - ``state_dict()`` has the wrapped module's keys, without PyTorch's ``module.`` prefix,
      so it loads straight into the bare model (``model.load_state_dict(ddp.state_dict())``);
      ``load_state_dict`` takes keys with or without the prefix (a checkpoint written from a
      PyTorch-style ``ddp.state_dict()`` loads too). ``named_parameters()`` names them with
      the prefix, as PyTorch does.

    Examples
    --------
    >>> dist.init()
    >>> model = DistributedDataParallel(make_model())
    >>> opt = lucid.optim.Adam(model.parameters())
    >>> loss = loss_fn(model(x_shard), y_shard)   # this rank's part of the batch
    >>> loss.backward()                           # .grad: the average over the ranks
    >>> opt.step()
    """

    def __init__(
        self,
        module,
        device_ids=None,
        output_device=None,
        dim=0,
        broadcast_buffers=True,
        *,
        process_group=None,
        bucket_cap_mb=None,
        find_unused_parameters=False,
        gradient_as_bucket_view=False,
        static_graph=False,
        bucket_mb=None,
        grad_dtype=None,
    ):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"{_WHAT} wraps a lucid.nn.Module, got {type(module).__name__}")
        if bucket_mb is not None and bucket_cap_mb is not None and bucket_mb != bucket_cap_mb:
            raise ValueError(
                f"{_WHAT}: bucket_mb={bucket_mb!r} and bucket_cap_mb={bucket_cap_mb!r} name the same "
                f"size; give one of them"
            )
        bucket_mb = next((b for b in (bucket_mb, bucket_cap_mb) if b is not None), 25)
        for name, flag in (
            ("find_unused_parameters", find_unused_parameters),
            ("gradient_as_bucket_view", gradient_as_bucket_view),
            ("static_graph", static_graph),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {flag!r}")
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
            raise TypeError(f"dim must be an int, got {dim!r}")
        if process_group is not None:
            raise ValueError(
                f"{_WHAT}: lucid.distributed has one process group, every rank; pass "
                f"process_group=None (got {process_group!r})"
            )
        if not isinstance(bucket_mb, numbers.Real) or isinstance(bucket_mb, bool) or not bucket_mb > 0:
            raise ValueError(f"bucket_mb must be a positive number of megabytes, got {bucket_mb!r}")
        if grad_dtype is not None and grad_dtype is not bfloat16 and grad_dtype is not float16:
            raise ValueError(f"grad_dtype must be None, lucid.bfloat16 or lucid.float16, got {grad_dtype!r}")
        if not isinstance(broadcast_buffers, bool):
            raise TypeError(f"broadcast_buffers must be a bool, got {broadcast_buffers!r}")
        backend = _group.require(_WHAT)
        _check_devices(module, backend, device_ids, output_device)
        self.module = module
        self.bucket_bytes = max(1, int(bucket_mb * 2**20))
        self.grad_dtype = grad_dtype
        self.broadcast_buffers = broadcast_buffers
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._require_sync = True
        self._token = None
        self._token_grad = None
        self._syncs = 0
        if backend.size > 1:
            self._check_replicas_match(backend)
            self._broadcast_from_rank_0(list(module.parameters()) + list(module.buffers()))
        self._buckets = self._plan_buckets()

    # ---- the module's interface -------------------------------------------------------------

    def forward(self, *args, **kwargs):
        backend = _group.require(f"{_WHAT}.forward")
        if backend.size == 1:
            return self.module(*args, **kwargs)
        if self.broadcast_buffers:
            buffers = list(self.module.buffers())
            if buffers:
                self._broadcast_from_rank_0(buffers)
        if not self._require_sync or not is_grad_enabled() or not self._params:
            return self.module(*args, **kwargs)
        token = self._sync_token()
        proxies = {id(p): _GradReady.apply(p, token, (self._token_grad,)) for p in self._params}
        slots = [
            (m, name, p)
            for m in self.module.modules()
            for name, p in m._parameters.items()
            if p is not None and id(p) in proxies
        ]
        for m, name, p in slots:
            m._parameters[name] = proxies[id(p)]
        try:
            return self.module(*args, **kwargs)
        finally:
            for m, name, p in slots:
                m._parameters[name] = p

    @contextlib.contextmanager
    def no_sync(self):
        """Forward passes inside skip the averaging: their gradients accumulate locally in
        ``.grad``, and the first backward of a forward made outside averages the total (for
        gradient accumulation over several micro-batches)."""
        previous = self._require_sync
        self._require_sync = False
        try:
            yield
        finally:
            self._require_sync = previous

    def state_dict(self):
        """The wrapped module's state dict: its own keys, without a ``module.`` prefix."""
        return self.module.state_dict()

    def load_state_dict(self, state_dict, strict: bool = True):
        """Loads into the wrapped module; keys may carry PyTorch's ``module.`` prefix or not
        (all of them, or none)."""
        keys = list(state_dict)
        if keys and all(isinstance(k, str) and k.startswith("module.") for k in keys):
            state_dict = OrderedDict((k[len("module.") :], v) for k, v in state_dict.items())
        return self.module.load_state_dict(state_dict, strict)

    def extra_repr(self) -> str:
        parts = [f"bucket_mb={self.bucket_bytes / 2**20:g}"]
        if self.grad_dtype is not None:
            parts.append(f"grad_dtype={self.grad_dtype}")
        return ", ".join(parts)

    # ---- construction -----------------------------------------------------------------------

    def _check_replicas_match(self, backend):
        mine = (
            [(n, p.dtype.name, tuple(p.shape), p.requires_grad) for n, p in self.module.named_parameters()],
            [(n, b.dtype.name, tuple(b.shape)) for n, b in self.module.named_buffers()],
            None if self.grad_dtype is None else self.grad_dtype.name,
            self.bucket_bytes,
        )
        everyone = backend.all_gather_object(mine, _WHAT)
        for rank, theirs in enumerate(everyone):
            if theirs == everyone[0]:
                continue
            what = ("parameters", "buffers", "grad_dtype", "bucket_mb")
            field = next(i for i in range(4) if theirs[i] != everyone[0][i])
            detail = ""
            if field < 2:
                a, b = everyone[0][field], theirs[field]
                diff = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
                detail = f": rank 0 has {_entry(a, diff)} where rank {rank} has {_entry(b, diff)}"
            raise ValueError(
                f"{_WHAT}: the ranks' modules differ in their {what[field]}{detail}; every rank must "
                f"wrap the same model with the same settings"
            )

    def _broadcast_from_rank_0(self, tensors):
        """Makes every rank's `tensors` rank 0's, in flat byte buffers of at most one bucket."""
        backend = _group.require(_WHAT)
        group, size = [], 0
        for t in tensors:
            n = _aligned(t.numel() * t.dtype.itemsize)
            if group and size + n > self.bucket_bytes:
                self._broadcast_group(backend, group, size)
                group, size = [], 0
            group.append((t, size))
            size += n
        if group:
            self._broadcast_group(backend, group, size)

    @staticmethod
    def _broadcast_group(backend, group, size):
        buf = np.empty(size, dtype=np.uint8)
        if backend.rank == 0:
            for t, start in group:
                _C.tensor_to_host(t._h, buf.ctypes.data + start, t.numel() * t.dtype.itemsize)
        backend.broadcast_(buf, 0, f"{_WHAT}: broadcasting the parameters and buffers from rank 0")
        if backend.rank == 0:
            return
        for t, start in group:
            n = t.numel() * t.dtype.itemsize
            value = _result(
                _C.tensor_from_host(buf.ctypes.data + start, n, tuple(t.shape), t.dtype.code, t.device.code)
            )
            _assign(t, value, f"{_WHAT}: broadcast from rank 0")

    def _plan_buckets(self):
        buckets, open_ = [], {}
        for i, p in enumerate(self._params):
            dtype = self.grad_dtype or p.dtype
            nbytes = p.numel() * dtype.itemsize
            bucket = open_.get(dtype.name)
            if bucket is None or (bucket.entries and _used_bytes(bucket) + nbytes > self.bucket_bytes):
                bucket = open_[dtype.name] = _Bucket(dtype)
                buckets.append(bucket)
            start = bucket.entries[-1][1] + bucket.entries[-1][2] if bucket.entries else 0
            bucket.entries.append((i, start, p.numel()))
        return buckets

    # ---- the gradient sync ------------------------------------------------------------------

    def _sync_token(self):
        if self._token is None:
            anchor = zeros(1, requires_grad=True)
            self._token_grad = zeros(1)
            self._token = _SyncPoint.apply(anchor, weakref.ref(self))
        return self._token

    def _sync_gradients(self):
        """Replaces every parameter's gradient by its average over the ranks (runs inside
        backward, once the gradients are all there)."""
        self._token = None
        backend = _group.require(f"{_WHAT}: averaging gradients")
        what = f"{_WHAT}: averaging gradients"
        grads = [p.grad for p in self._params]
        used = np.array([g is not None for g in grads], dtype=np.bool_)
        backend.reduce_(used, "max", what)  # a parameter some rank used is averaged on every rank
        inverse = 1.0 / backend.size
        compress = self.grad_dtype is not None
        with no_grad():
            for bucket in self._buckets:
                if not any(used[i] for i, _, _ in bucket.entries):
                    continue
                if bucket.buffer is None:
                    last = bucket.entries[-1]
                    bucket.buffer = np.empty(last[1] + last[2], dtype=bucket.dtype.numpy)
                buf = bucket.buffer
                for i, start, n in bucket.entries:
                    view = buf[start : start + n]
                    g = grads[i]
                    if g is None:
                        view[...] = 0
                        continue
                    if compress:
                        g = (g * inverse).to(bucket.dtype)
                    _C.tensor_to_host(g._h, view.ctypes.data, view.nbytes)
                backend.reduce_(buf, "sum", what)
                if not compress:
                    _scale_(buf, inverse)
                for i, start, n in bucket.entries:
                    if not used[i]:
                        continue
                    p = self._params[i]
                    g = _tensor_from(buf[start : start + n], p.shape, bucket.dtype, p.device)
                    if grads[i] is None:  # used on another rank only
                        p.grad = g.to(p.dtype)
                    else:
                        grads[i].copy_(g)  # into the tensor p.grad already is
        self._syncs += 1


def _check_devices(module, backend, device_ids, output_device):
    """`device_ids` None or one entry naming this process's device; `output_device` likewise."""
    here = {p.device for p in module.parameters()} | {b.device for b in module.buffers()}
    names = "', '".join(sorted(d.type for d in here)) if here else "cpu' or 'metal"

    def names_this_device(d):
        if isinstance(d, numbers.Integral) and not isinstance(d, bool):
            return int(d) == backend.local_rank
        try:
            d = device(d)
        except (TypeError, ValueError):
            return False
        return not here or here == {d}

    def problem(what, value):
        form = " in a one-element list" if what == "device_ids" else ""
        return (
            f"{_WHAT}: {what}={value!r} does not name this rank's device. A lucid process has one device, "
            f"the one its module is on: give None, or '{names}' or this rank's local rank "
            f"{backend.local_rank} (its place among the ranks on this machine){form}. "
            f"(bucket_mb and grad_dtype are keyword arguments.)"
        )

    if device_ids is not None:
        if not isinstance(device_ids, (list, tuple)) or len(device_ids) != 1 or not names_this_device(device_ids[0]):
            raise ValueError(problem("device_ids", device_ids))
    if output_device is not None and not names_this_device(output_device):
        raise ValueError(problem("output_device", output_device))


def _entry(entries, i):
    if i >= len(entries):
        return "nothing more"
    name, dtype, shape = entries[i][:3]
    return f"{name!r} ({dtype}, shape {shape})"


def _aligned(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _used_bytes(bucket):
    last = bucket.entries[-1]
    return (last[1] + last[2]) * bucket.dtype.itemsize
