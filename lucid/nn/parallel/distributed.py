"""DistributedDataParallel: one model replica per rank, gradients averaged during backward.

How the gradients are caught. Each parameter has a post-accumulate-grad hook
(``register_post_accumulate_grad_hook``): once backward has accumulated a parameter's gradient
it is ready, and once every gradient of a bucket is ready the bucket is copied into its flat
host buffer and its all-reduce is started (MPI_Iallreduce) while backward goes on. The buckets
are started strictly in their fixed order (the parameters' reverse order, as backward usually
reaches them), so that every rank starts the same reductions in the same order whatever order
its hooks run in. A forward made for averaging (not under ``no_sync``, with grad enabled)
arms the wrapper; the hook of the last parameter to get its gradient waits for the buckets
still in flight and writes the averages into ``.grad``, so ``backward()`` returns with them.

A parameter that gets no gradient leaves that backward's averaging unfinished: the next
forward raises an error that names it (as PyTorch does), unless ``find_unused_parameters``.
Then the end of backward is caught by a graph node instead: for the length of a forward pass
the module sees, in place of each parameter, the output of an identity (:class:`_GradReady`)
of that parameter and of one shared *sync token* (made by :class:`_SyncPoint` from a
one-element leaf). The engine runs a node of the backward graph only after every node that
consumes its output, and every identity consumes the token; so ``_SyncPoint.backward`` runs
once per ``backward()``, after every gradient has been accumulated, and averages what there
is, counting a parameter a rank did not use as a zero there. (The engine reaches those
identities late in backward, so in that mode the buckets are averaged at its end.)
"""

from __future__ import annotations

import contextlib
import numbers
import time
import weakref
from collections import OrderedDict

import numpy as np

from ... import _C
from ..._grad_mode import is_grad_enabled, no_grad
from ..._ops.creation import zeros
from ..._types import bfloat16, device, float16
from ...autograd import Function
from ...distributed import _broadcast_tensors, _group, _scale_, _tensor_from
from ..module import Module

_WHAT = "DistributedDataParallel"
_AVERAGING = f"{_WHAT}: averaging gradients"


class _SyncPoint(Function):
    """The sync token: an identity of a one-element leaf whose backward finishes the
    averaging (it runs after every parameter's identity has passed its gradient on)."""

    @staticmethod
    def forward(ctx, anchor, ddp_ref):
        ctx.ddp_ref = ddp_ref
        return anchor

    @staticmethod
    def backward(ctx, grad):
        ddp = ctx.ddp_ref()
        if ddp is not None:
            ddp._finish_averaging()
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
    """Parameters whose gradients are averaged in one flat buffer of one dtype: their
    elements one after the other, then one used-flag per parameter (1 where this rank's
    backward produced a gradient; their sum tells which parameters some rank used)."""

    __slots__ = ("dtype", "entries", "size", "buffer", "waiting")

    def __init__(self, dtype):
        self.dtype = dtype
        self.entries = []  # (parameter index, start, numel)
        self.size = 0  # elements of gradient, before the flags
        self.buffer = None
        self.waiting = 0  # gradients of this backward not ready yet


def _on_gradient_ready(ddp_ref, index):
    def hook(param):
        ddp = ddp_ref()
        if ddp is not None:
            ddp._gradient_ready(index)

    return hook


def _remove_hooks(handles):
    for h in handles:
        h.remove()


class DistributedDataParallel(Module):
    """Data-parallel training over ``lucid.distributed``: each rank runs `module` on its own
    share of every batch, and after ``backward()`` each parameter's ``.grad`` is the average
    of the ranks' gradients, so every rank's optimizer takes the same step. The averaging of
    a bucket of gradients starts during backward, as soon as they are all there.

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
        PyTorch's name for `bucket_mb` (give one of the two): the size cap of a bucket.
    find_unused_parameters : bool, default False
        False: every parameter must get a gradient in every backward (of a forward that
        averages), as PyTorch requires; one that gets none leaves the averaging unfinished,
        and the next forward raises a RuntimeError naming it. True: a parameter a rank's
        forward did not use counts as a zero gradient there, and one no rank used keeps
        ``.grad`` None; the buckets are then averaged at the end of backward, without overlap.
    gradient_as_bucket_view : bool, default False
        Accepted and ignored: a PyTorch memory saving (``.grad`` as a view of the bucket);
        lucid copies the averaged bucket back into each ``.grad``.
    static_graph : bool, default False
        Accepted and ignored: PyTorch's hint that the graph is the same at every step; lucid
        averages once per backward whatever the graph.
    bucket_mb : float, default 25
        The size cap of the buckets, the flat buffers that gradients are averaged in (one
        MPI all-reduce per bucket; a larger parameter gets a bucket of its own). The
        parameters fill them in reverse order, the order backward usually finishes them in.
    grad_dtype : lucid.bfloat16 or lucid.float16, optional
        Compresses the gradients for the all-reduce: each is divided by the world size in
        float32, cast to `grad_dtype`, summed over the ranks (in float32, rounded once per
        pair) and cast back to the parameter's dtype, as PyTorch's ``bf16_compress_hook`` and
        ``fp16_compress_hook`` do. Half the bytes, at that dtype's precision.
    overlap : bool, default True
        Starts each bucket's all-reduce during backward, as soon as its gradients are all
        accumulated, so that communication overlaps the rest of backward (the end of
        backward waits only for the buckets still in flight). False averages every bucket
        at the end of backward, one after the other (for measuring what the overlap gains;
        the result is the same).

    The arguments after `broadcast_buffers` are keyword-only (PyTorch's positions after it
    differ between its versions).

    Notes
    -----
    - Call :func:`lucid.distributed.init` first. With world size 1 the wrapper only calls
      the module.
    - A bucket's all-reduce starts once backward has accumulated all of its gradients (MPI's
      nonblocking all-reduce, moved on by a background thread), always in the buckets'
      fixed order, and ``backward()`` returns once every bucket is averaged. Under autocast
      the engine reaches the parameters' casts late in backward, so the buckets are then
      averaged near its end.
    - ``no_sync()``: the gradients of backward passes of forwards made inside it accumulate
      locally; the first backward of a forward made outside averages the accumulated sum.
    - With ``find_unused_parameters=True``, during the forward pass the module sees each
      parameter through an identity (not the Parameter object itself); code that must
      change a parameter in place belongs outside ``forward``, as in any training loop.
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
        overlap=True,
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
        if not isinstance(overlap, bool):
            raise TypeError(f"overlap must be a bool, got {overlap!r}")
        backend = _group.require(_WHAT)
        _check_devices(module, backend, device_ids, output_device)
        self.module = module
        self.bucket_bytes = max(1, int(bucket_mb * 2**20))
        self.grad_dtype = grad_dtype
        self.broadcast_buffers = broadcast_buffers
        self.overlap = overlap
        self.find_unused_parameters = find_unused_parameters
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._require_sync = True
        self._token = None
        self._token_grad = None
        self._syncs = 0
        self._buckets, self._bucket_of = self._plan_buckets()
        # This backward's averaging: whether a forward armed it, which gradients are ready
        # (and how many are not), the next bucket to start; and how many buckets started
        # before the last gradient was ready, since the wrapper was made.
        self._averaging = False
        self._ready = []
        self._next_bucket = 0
        self._waiting = 0
        self._started_early = 0
        self._waited = 0.0  # seconds backward spent waiting for reductions to finish
        self._index = {id(p): i for i, p in enumerate(self._params)}
        if backend.size > 1:
            self._check_replicas_match(backend)
            self._broadcast_from_rank_0(list(module.parameters()) + list(module.buffers()))
            ref = weakref.ref(self)
            handles = [
                p.register_post_accumulate_grad_hook(_on_gradient_ready(ref, i)) for i, p in enumerate(self._params)
            ]
            weakref.finalize(self, _remove_hooks, handles)

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
        self._arm()
        if not self.find_unused_parameters:
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
        if not self.overlap:
            parts.append("overlap=False")
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
            self.overlap,
            self.find_unused_parameters,
        )
        everyone = backend.all_gather_object(mine, _WHAT)
        for rank, theirs in enumerate(everyone):
            if theirs == everyone[0]:
                continue
            what = ("parameters", "buffers", "grad_dtype", "bucket_mb", "overlap", "find_unused_parameters")
            field = next(i for i in range(len(what)) if theirs[i] != everyone[0][i])
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
        what = f"{_WHAT}: broadcasting the parameters and buffers from rank 0"
        _broadcast_tensors(tensors, 0, self.bucket_bytes, what)

    def _plan_buckets(self):
        """The buckets in their fixed order (the same on every rank: the replicas match), and
        each parameter's bucket. Parameters go in reverse order, one bucket per dtype open at
        a time, each closed when the next gradient would take it past the cap."""
        buckets, open_, bucket_of = [], {}, [0] * len(self._params)
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            dtype = self.grad_dtype or p.dtype
            b = open_.get(dtype.name)
            if b is None or (buckets[b].size + p.numel()) * dtype.itemsize > self.bucket_bytes:
                b = open_[dtype.name] = len(buckets)
                buckets.append(_Bucket(dtype))
            bucket = buckets[b]
            bucket.entries.append((i, bucket.size, p.numel()))
            bucket.size += p.numel()
            bucket_of[i] = b
        return buckets, bucket_of

    # ---- the gradient sync ------------------------------------------------------------------

    def _sync_token(self):
        if self._token is None:
            anchor = zeros(1, requires_grad=True)
            self._token_grad = zeros(1)
            self._token = _SyncPoint.apply(anchor, weakref.ref(self))
        return self._token

    def _arm(self):
        """A forward that averages: its backward's hooks start the buckets. Raises if the
        previous averaging started and did not finish (a parameter got no gradient)."""
        if self._averaging and any(self._ready):
            missing = [
                n for n, p in self.module.named_parameters() if p.requires_grad and not self._ready[self._index[id(p)]]
            ]
            raise RuntimeError(
                f"{_WHAT}: the previous backward did not give every parameter a gradient, so its averaging "
                f"did not finish on rank {_group.require(_WHAT).rank}. Parameters without one: "
                f"{', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}. Pass find_unused_parameters=True "
                f"to count parameters a forward does not use as zero gradients, or make every parameter "
                f"take part in the loss."
            )
        if self._averaging:
            return  # several forwards, one backward
        self._averaging = True
        self._ready = [False] * len(self._params)
        self._waiting = len(self._params)
        for bucket in self._buckets:
            bucket.waiting = len(bucket.entries)
        self._next_bucket = 0

    def _gradient_ready(self, index):
        """The hook: parameter `index` has its whole gradient of this backward in ``.grad``."""
        if not self._averaging or self._ready[index]:
            return
        self._ready[index] = True
        self._waiting -= 1
        self._buckets[self._bucket_of[index]].waiting -= 1
        backend = _group.require(_AVERAGING)
        if self._waiting == 0 and not self.find_unused_parameters:
            self._finish_averaging()
            return
        if not self.overlap:
            return
        while self._next_bucket < len(self._buckets) and self._buckets[self._next_bucket].waiting == 0:
            self._start(backend, self._buckets[self._next_bucket])
            self._next_bucket += 1
            self._started_early += 1

    def _start(self, backend, bucket):
        """Copies the bucket's gradients (zeros where there is none) and its used-flags into
        its buffer and starts their sum over the ranks."""
        if bucket.buffer is None:
            bucket.buffer = np.empty(bucket.size + len(bucket.entries), dtype=bucket.dtype.numpy)
        buf, flags = bucket.buffer, bucket.buffer[bucket.size :]
        inverse = 1.0 / backend.size
        with no_grad():
            for k, (i, start, n) in enumerate(bucket.entries):
                view = buf[start : start + n]
                g = self._params[i].grad
                flags[k] = g is not None
                if g is None:
                    view[...] = 0
                    continue
                if self.grad_dtype is not None:
                    g = (g * inverse).to(bucket.dtype)
                _C.tensor_to_host(g._h, view.ctypes.data, view.nbytes)
        backend.start_reduce_(buf, "sum", _AVERAGING)

    def _finish_averaging(self):
        """The end of backward: starts the buckets not started yet (in order), waits for every
        reduction and writes each average into its parameter's ``.grad``."""
        self._token = None
        if not self._averaging:
            self._arm()  # a backward that reached no parameter
        backend = _group.require(_AVERAGING)
        for bucket in self._buckets[self._next_bucket :]:
            self._start(backend, bucket)
        self._next_bucket = len(self._buckets)
        t0 = time.perf_counter()
        backend.wait_reductions(_AVERAGING)
        self._waited += time.perf_counter() - t0
        inverse = 1.0 / backend.size
        with no_grad():
            for bucket in self._buckets:
                buf, flags = bucket.buffer, bucket.buffer[bucket.size :]
                if not flags.any():
                    continue
                if self.grad_dtype is None:
                    _scale_(buf[: bucket.size], inverse)
                for k, (i, start, n) in enumerate(bucket.entries):
                    if not flags[k]:  # no rank used it
                        continue
                    p = self._params[i]
                    g = _tensor_from(buf[start : start + n], p.shape, bucket.dtype, p.device)
                    if p.grad is None:  # used on another rank only
                        p.grad = g.to(p.dtype)
                    else:
                        p.grad.copy_(g)  # into the tensor p.grad already is
        self._averaging = False
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
