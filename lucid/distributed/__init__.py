"""Several processes training one model: ``lucid.distributed``, over MPI.

Start a program on N processes with ``mpiexec -n N python train.py``; each calls :func:`init`
and then learns its rank (0 … N-1) and the world size. Run alone (``python train.py``), the
same program is world size 1. MPI comes from mpi4py (``pip install 'lucid[distributed]'``,
which brings MPICH too); ``import lucid`` never imports it, and without it :func:`init` works
in a single process only.

>>> import lucid, lucid.distributed as dist
>>> dist.init()
>>> t = lucid.tensor([float(dist.get_rank())])
>>> dist.all_reduce(t, op="sum")       # 0 + 1 + … + (N-1) on every rank, in t too

The collectives move each tensor's bytes from engine memory into one host buffer, hand that
buffer to MPI and make the result from it: float32, float16, bfloat16, int32, int64 and bool
tensors, on either device. They are not recorded by autograd. Every rank must call the same
collectives in the same order (from one thread); what they pass is checked against the other
ranks first, and a mismatch or a bad argument raises the same error on every rank. A rank that
stops on an uncaught exception aborts the whole job (see ``init``); a collective that waits
longer than the timeout aborts it too, with a message saying what it waited for.

:class:`lucid.nn.parallel.DistributedDataParallel` builds data-parallel training on these.
"""

from __future__ import annotations

import numpy as np

from .. import _C
from .._ops import writes
from .._grad_mode import no_grad
from .._tensor import Tensor
from . import _group
from ._group import is_available

__all__ = ["init", "init_process_group", "destroy_process_group", "is_available", "is_initialized", "get_rank",
           "get_world_size", "barrier", "all_reduce", "broadcast", "all_gather", "ReduceOp"]


class ReduceOp:
    """The reductions of :func:`all_reduce`, as names torch.distributed programs use; the
    plain strings work the same."""

    SUM = "sum"
    AVG = "mean"
    MAX = "max"


_OPS = ("sum", "mean", "max")


def init(backend=None, *, timeout=None) -> None:
    """Joins this process to the others that mpiexec started (world size 1 when it was started
    alone). Calling it again does nothing.

    With more than one rank, ``init`` also installs a ``sys.excepthook`` that prints an
    uncaught exception's traceback under this rank's number and then calls ``MPI_Abort``, so
    that mpiexec ends the other ranks at once instead of leaving them waiting for this one.
    Ranks that share a machine split its cores: each one's ``lucid.set_num_threads`` becomes
    cores // ranks there, unless the program has set it before ``init``.

    Parameters
    ----------
    backend : None or 'mpi'
        The only backend is MPI; the argument is there for programs written for
        ``torch.distributed.init_process_group``.
    timeout : float or datetime.timedelta, optional
        Seconds a collective may wait for the other ranks before the job is aborted with a
        message (default ``LUCID_DISTRIBUTED_TIMEOUT`` from the environment, else 1800;
        ``math.inf`` for no limit).

    Raises
    ------
    ImportError
        Started by mpiexec (or another MPI launcher) without mpi4py installed; the message
        names ``pip install 'lucid[distributed]'``.
    ValueError
        A backend other than MPI, or a timeout that is not a positive number of seconds.
    """
    _group.init(backend, timeout=timeout)


init_process_group = init


def destroy_process_group() -> None:
    """Leaves the process group and removes ``init``'s exception hook; ``init`` may be called
    again. Nothing happens if it is not initialised."""
    _group.destroy()


def is_initialized() -> bool:
    return _group.current() is not None


def get_rank() -> int:
    """This process's rank, 0 … world size - 1. Raises RuntimeError before ``init``."""
    return _group.require("get_rank").rank


def get_world_size() -> int:
    """The number of processes. Raises RuntimeError before ``init``."""
    return _group.require("get_world_size").size


def barrier() -> None:
    """Returns once every rank has called it."""
    _group.require("barrier").barrier("barrier")


# ---- collectives -------------------------------------------------------------------------------

def all_reduce(tensor, op="sum"):
    """Reduces `tensor` over the ranks: its elementwise sum, mean or maximum.

    Parameters
    ----------
    tensor : lucid.Tensor
        float32, float16, bfloat16, int32, int64 or bool, on any device; the same shape and
        dtype on every rank. float16 and bfloat16 are combined in float32 and rounded once per
        pair of ranks. For bool, "sum" and "max" are a logical or.
    op : {"sum", "mean", "max"}
        "mean" needs a floating-point tensor.

    Returns
    -------
    lucid.Tensor
        `tensor` itself, updated in place (as torch.distributed does): it and its views take
        the result, as with ``tensor.copy_(result)`` under ``lucid.no_grad()``; a leaf keeps
        its ``requires_grad`` and ``.grad``.

    Raises
    ------
    TypeError, ValueError, RuntimeError
        Not a tensor, an unknown op, "mean" of an integer or bool tensor, a tensor with
        autograd history (pass ``t.detach()``), ranks that disagree on op, dtype or shape, or
        called before :func:`init`.
    """
    backend = _group.require("all_reduce")
    problem = None
    try:
        _check_tensor("all_reduce", tensor)
        op = _check_op(op)
        if op == "mean" and not tensor.dtype.is_floating_point:
            raise TypeError(f"all_reduce: op='mean' needs a floating-point tensor, got {tensor.dtype} "
                            f"(use op='sum' and divide)")
        _check_no_history("all_reduce", tensor)
    except (TypeError, ValueError, RuntimeError) as e:
        problem = e
    _agree(backend, "all_reduce", problem, lambda: (op, tensor.dtype.name, tuple(tensor.shape)))
    buf = _to_buffer(tensor)
    backend.reduce_(buf, "max" if op == "max" else "sum", "all_reduce")
    if op == "mean":
        _scale_(buf, 1.0 / backend.size)
    return _assign(tensor, _from_buffer(buf, tensor), "all_reduce")


def broadcast(tensor, src: int = 0):
    """Gives every rank rank `src`'s values of `tensor`.

    Parameters
    ----------
    tensor : lucid.Tensor
        Any dtype and device; the same shape and dtype on every rank.
    src : int
        The rank whose values are sent, 0 … world size - 1, the same on every rank.

    Returns
    -------
    lucid.Tensor
        `tensor` itself, updated in place on every rank but `src` (as torch.distributed does;
        see :func:`all_reduce` for what in place means here).

    Raises
    ------
    TypeError, ValueError, RuntimeError
        As :func:`all_reduce`, and for a `src` that is not a rank or differs between ranks.
    """
    backend = _group.require("broadcast")
    problem = None
    try:
        _check_tensor("broadcast", tensor)
        if isinstance(src, bool) or not isinstance(src, (int, np.integer)):
            raise TypeError(f"broadcast: src must be an int rank, got {src!r}")
        if not 0 <= src < backend.size:
            raise ValueError(f"broadcast: src={src} is not a rank; ranks are 0 … {backend.size - 1}")
        _check_no_history("broadcast", tensor)
    except (TypeError, ValueError, RuntimeError) as e:
        problem = e
    _agree(backend, "broadcast", problem, lambda: (int(src), tensor.dtype.name, tuple(tensor.shape)))
    buf = _to_buffer(tensor)
    backend.broadcast_(buf, int(src), "broadcast")
    if backend.rank == src:
        return tensor
    return _assign(tensor, _from_buffer(buf, tensor), "broadcast")


def all_gather(tensor):
    """Every rank's `tensor`, stacked in rank order.

    Parameters
    ----------
    tensor : lucid.Tensor
        Any dtype and device; the same shape and dtype on every rank.

    Returns
    -------
    lucid.Tensor
        A new tensor of shape ``(world_size, *tensor.shape)`` on `tensor`'s device, whose
        ``[r]`` is rank r's tensor (``list(result)`` gives torch.distributed.all_gather's list;
        ``result.reshape(-1, *tensor.shape[1:])`` its concatenation along dim 0). `tensor` is
        not changed. Gradients do not flow through it.

    Raises
    ------
    TypeError, RuntimeError, ValueError
        Not a tensor, ranks that disagree on dtype or shape, or called before :func:`init`.
    """
    backend = _group.require("all_gather")
    problem = None
    try:
        _check_tensor("all_gather", tensor)
    except TypeError as e:
        problem = e
    _agree(backend, "all_gather", problem, lambda: (None, tensor.dtype.name, tuple(tensor.shape)))
    gathered = backend.all_gather(_to_buffer(tensor), "all_gather")
    return _tensor_from(gathered, (backend.size, *tensor.shape), tensor.dtype, tensor.device)


# ---- helpers (DistributedDataParallel and GradScaler use these too) ----------------------------

def _check_tensor(what, tensor):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what}: expected a lucid.Tensor, got {type(tensor).__name__}")


def _check_op(op):
    if not isinstance(op, str) or op.lower() not in _OPS:
        raise ValueError(f"all_reduce: op must be 'sum', 'mean' or 'max' (or ReduceOp.SUM, .AVG, .MAX), got {op!r}")
    return op.lower()


def _check_no_history(what, tensor):
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(f"{what}: the tensor has autograd history, and collectives are not differentiable; "
                           f"pass tensor.detach() (a leaf, such as a parameter, is fine)")


def _agree(backend, what, problem, signature):
    """Raises on every rank if any rank's arguments are wrong or differ from rank 0's.

    `problem` is this rank's argument error (or None); `signature()` what must match across
    the ranks. With one rank, only this rank's problem is raised."""
    if backend.size == 1:
        if problem is not None:
            raise problem
        return
    mine = (what, None if problem is None else f"{type(problem).__name__}: {problem}",
            None if problem is not None else signature())
    entries = backend.all_gather_object(mine, what)
    if problem is not None:
        raise problem
    bad = [(r, e[1]) for r, e in enumerate(entries) if e[1] is not None]
    if bad:
        rank, message = bad[0]
        raise RuntimeError(f"{what}: rank {rank} passed invalid arguments ({message}), so no rank ran it")
    if any((e[0], e[2]) != (entries[0][0], entries[0][2]) for e in entries):
        described = "; ".join(f"rank {r}: {_describe(e)}" for r, e in enumerate(entries))
        raise ValueError(f"{what}: the ranks called different collectives or passed tensors that do not match "
                         f"({described})")


def _describe(entry):
    what, _, (arg, dtype, shape) = entry
    head = {"all_reduce": f"op={arg!r}, ", "broadcast": f"src={arg}, "}.get(what, "")
    return f"{what}({head}{dtype}, shape {shape})"


def _to_buffer(tensor):
    """`tensor`'s elements (row-major) in a new flat numpy buffer, copied by the engine."""
    buf = np.empty(tensor.numel(), dtype=tensor.dtype.numpy)
    _C.tensor_to_host(tensor._h, buf.ctypes.data, buf.nbytes)
    return buf


def _tensor_from(buf, shape, dtype, device):
    """A new engine tensor holding `buf`'s bytes (buf: contiguous, of `dtype`'s numpy type)."""
    return Tensor._wrap(_C.tensor_from_host(buf.ctypes.data, buf.nbytes, tuple(shape), dtype.code, device.code))


def _from_buffer(buf, like):
    return _tensor_from(buf, like.shape, like.dtype, like.device)


def _scale_(buf, factor):
    """`buf` *= factor in place, in float32 for the 16-bit types (rounded once)."""
    if buf.dtype == np.float32:
        np.multiply(buf, np.float32(factor), out=buf)
    else:
        buf[...] = buf.astype(np.float32) * np.float32(factor)


def _assign(tensor, value, what):
    with no_grad():
        writes.assign(tensor, value, what)
    return tensor


def _any(flag: bool, what: str) -> bool:
    """Whether `flag` is true on any rank (every rank must call it)."""
    backend = _group.require(what)
    if backend.size == 1:
        return bool(flag)
    buf = np.array([bool(flag)], dtype=np.bool_)
    backend.reduce_(buf, "max", what)
    return bool(buf[0])
