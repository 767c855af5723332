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
buffer to MPI and make the result from it: float32, float16, bfloat16, the integers (uint8
to int64) and bool tensors, on either device. They are not recorded by autograd. Every rank must call the same
collectives in the same order (from one thread); what they pass is checked against the other
ranks first, and a mismatch or a bad argument raises the same error on every rank. A rank that
stops on an uncaught exception aborts the whole job (see ``init``); a collective that waits
longer than the timeout aborts it too, with a message saying what it waited for.

:class:`lucid.nn.parallel.DistributedDataParallel` builds data-parallel training on these,
``lucid.distributed.optim.ZeroRedundancyOptimizer`` shards an optimizer's state over the ranks
(``from lucid.distributed.optim import ZeroRedundancyOptimizer``), and
:class:`lucid.utils.data.DistributedSampler` gives each rank its share of a dataset. A program
written for ``torch.distributed`` keeps its set-up: :func:`init_process_group` takes PyTorch's
arguments, :func:`get_backend` is ``'mpi'``, and the collectives take ``group=None`` and
``async_op`` (they finish before they return; see :class:`Work`).
"""

from __future__ import annotations

import numpy as np

from .. import _C
from .._ops import writes
from .._grad_mode import no_grad
from .._tensor import Tensor
from . import _group
from ._group import is_available
from .._core import result as _result

__all__ = [
    "init",
    "init_process_group",
    "destroy_process_group",
    "is_available",
    "is_initialized",
    "get_rank",
    "get_world_size",
    "get_backend",
    "get_default_backend_for_device",
    "barrier",
    "all_reduce",
    "broadcast",
    "all_gather",
    "ReduceOp",
    "Work",
]


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


def init_process_group(
    backend=None,
    init_method=None,
    timeout=None,
    world_size=-1,
    rank=-1,
    store=None,
    group_name="",
    pg_options=None,
    device_id=None,
) -> None:
    """:func:`init` under ``torch.distributed``'s name and with its arguments, so a PyTorch
    program's call runs unchanged.

    lucid's ranks come from ``mpiexec`` (MPI tells each process its rank and the world
    size), not from a rendezvous the program sets up; the arguments that describe one are
    therefore accepted and checked, not used:

    Parameters
    ----------
    backend : None or 'mpi'
        As :func:`init` (``get_default_backend_for_device`` gives ``'mpi'``).
    init_method : str, optional
        Ignored: where PyTorch's ranks meet ("env://", "tcp://host:port", "file://…");
        mpiexec has already connected lucid's.
    timeout : float or datetime.timedelta, optional
        As :func:`init`.
    world_size, rank : int, default -1 (not given)
        When given, must be what MPI says this process is (``-1`` or None leaves them to
        MPI). A program that computes them from ``WORLD_SIZE``/``RANK`` or from its own
        spawning gets a ValueError if they disagree with mpiexec's.
    store, group_name, pg_options : optional
        Ignored: a rendezvous store, the group's name and backend options (lucid has one
        process group, all the ranks, over MPI).
    device_id : optional
        Ignored: PyTorch binds the group to one accelerator; a lucid process has one, and
        the collectives take tensors on any device.

    Raises
    ------
    ValueError
        As :func:`init`; a `rank` outside ``0 … world_size - 1``; a `world_size` or `rank`
        that is not MPI's. Run alone, the group is then left as it was before the call;
        under mpiexec it stays initialised, so that the error, if not caught, ends every
        rank at once (see :func:`init`) instead of leaving the others waiting.
    TypeError
        A `world_size`, `rank` or `init_method` of the wrong type.
    """
    given = {}
    for name, value in (("world_size", world_size), ("rank", rank)):
        if value is None or (isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value == -1):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"init_process_group: {name} must be an int, got {value!r}")
        given[name] = int(value)
    if given.get("world_size", 1) < 1:
        raise ValueError(f"init_process_group: world_size must be positive (or -1), got {given['world_size']}")
    if "rank" in given and not 0 <= given["rank"] < given.get("world_size", given["rank"] + 1):
        raise ValueError(
            f"init_process_group: rank={given['rank']} is not a rank of a world of {given.get('world_size')}"
        )
    if init_method is not None and not isinstance(init_method, str):
        raise TypeError(f"init_process_group: init_method must be a URL string or None, got {init_method!r}")
    was_initialized = is_initialized()
    init(backend, timeout=timeout)
    group = _group.current()
    actual = {"world_size": group.size, "rank": group.rank}
    wrong = [f"{name}={value} (MPI's is {actual[name]})" for name, value in given.items() if value != actual[name]]
    if wrong:
        if not was_initialized and group.size == 1:
            destroy_process_group()
        raise ValueError(
            f"init_process_group: {' and '.join(wrong)}: lucid's ranks and world size come from "
            f"mpiexec (`mpiexec -n N python ...`), not from the program; pass world_size and rank "
            f"as MPI has them, or leave them out"
        )


def get_backend(group=None) -> str:
    """``'mpi'``, the backend of lucid's one process group. Raises RuntimeError before
    ``init``, as PyTorch does."""
    _check_group("get_backend", group)
    _group.require("get_backend")
    return "mpi"


def get_default_backend_for_device(device=None) -> str:
    """``'mpi'`` for every device: lucid's collectives take tensors on any device (through
    host memory), so a program's ``init_process_group(get_default_backend_for_device(d))``
    gets MPI."""
    return "mpi"


class Work:
    """What a collective called with ``async_op=True`` returns, as PyTorch's ``Work``.

    lucid's collectives finish before they return, so the work is already done: ``wait()``
    returns True at once and ``is_completed()`` is True. ``result()`` is a list holding what
    the call returns with ``async_op=False`` (the tensor, or all_gather's stacked tensor)."""

    def __init__(self, result=None):
        self._result = [] if result is None else [result]

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def exception(self):
        return None

    def result(self):
        return list(self._result)

    def __repr__(self):
        return "Work(completed)"


def _check_group(what, group):
    if group is not None:
        raise ValueError(
            f"{what}: lucid.distributed has one process group, every rank; pass group=None (got {group!r})"
        )


def _check_async(what, async_op):
    if not isinstance(async_op, bool):
        raise TypeError(f"{what}: async_op must be a bool, got {async_op!r}")


def destroy_process_group(group=None) -> None:
    """Leaves the process group and removes ``init``'s exception hook; ``init`` may be called
    again. Nothing happens if it is not initialised. `group` must be None (the one group)."""
    _check_group("destroy_process_group", group)
    _group.destroy()


def is_initialized() -> bool:
    return _group.current() is not None


def get_rank(group=None) -> int:
    """This process's rank, 0 … world size - 1. Raises RuntimeError before ``init``.
    `group` must be None (the one group, every rank)."""
    _check_group("get_rank", group)
    return _group.require("get_rank").rank


def get_world_size(group=None) -> int:
    """The number of processes. Raises RuntimeError before ``init``. `group` must be None
    (the one group, every rank)."""
    _check_group("get_world_size", group)
    return _group.require("get_world_size").size


def barrier(group=None, async_op=False, device_ids=None):
    """Returns once every rank has called it.

    `group` must be None (lucid has one group); `device_ids`, with which PyTorch picks the
    GPUs NCCL synchronises, is accepted and ignored (None or a list of device indices).
    Returns None, or with ``async_op=True`` a completed :class:`Work` (the barrier has
    already been passed when it returns)."""
    _check_group("barrier", group)
    _check_async("barrier", async_op)
    if device_ids is not None and (
        not isinstance(device_ids, (list, tuple))
        or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in device_ids)
    ):
        raise TypeError(f"barrier: device_ids must be None or a list of device indices, got {device_ids!r}")
    _group.require("barrier").barrier("barrier")
    return Work() if async_op else None


# ---- collectives -------------------------------------------------------------------------------


def all_reduce(tensor, op="sum", group=None, async_op=False):
    """Reduces `tensor` over the ranks: its elementwise sum, mean or maximum.

    Parameters
    ----------
    tensor : lucid.Tensor
        float32, float16, bfloat16, an integer dtype or bool, on any device; the same shape and
        dtype on every rank. float16 and bfloat16 are combined in float32 and rounded once per
        pair of ranks. For bool, "sum" and "max" are a logical or.
    op : {"sum", "mean", "max"}
        "mean" needs a floating-point tensor.
    group : None
        lucid has one process group, every rank.
    async_op : bool, default False
        PyTorch's flag for an operation that runs in the background. lucid's collectives
        finish before they return, so with True the call returns a completed :class:`Work`
        (``wait()`` returns True at once) in place of the tensor.

    Returns
    -------
    lucid.Tensor or Work
        `tensor` itself, updated in place (as torch.distributed does): it and its views take
        the result, as with ``tensor.copy_(result)`` under ``lucid.no_grad()``; a leaf keeps
        its ``requires_grad`` and ``.grad``. (PyTorch returns None; a program that ignores
        the value runs the same.) With ``async_op=True``, a :class:`Work` whose ``result()``
        is ``[tensor]``.

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
        _check_group("all_reduce", group)
        _check_async("all_reduce", async_op)
        _check_tensor("all_reduce", tensor)
        op = _check_op(op)
        if op == "mean" and not tensor.dtype.is_floating_point:
            raise TypeError(
                f"all_reduce: op='mean' needs a floating-point tensor, got {tensor.dtype} (use op='sum' and divide)"
            )
        _check_no_history("all_reduce", tensor)
    except (TypeError, ValueError, RuntimeError) as e:
        problem = e
    _agree(backend, "all_reduce", problem, lambda: (op, tensor.dtype.name, tuple(tensor.shape)))
    buf = _to_buffer(tensor)
    backend.reduce_(buf, "max" if op == "max" else "sum", "all_reduce")
    if op == "mean":
        _scale_(buf, 1.0 / backend.size)
    _assign(tensor, _from_buffer(buf, tensor), "all_reduce")
    return Work(tensor) if async_op else tensor


def broadcast(tensor, src: int = 0, group=None, async_op=False):
    """Gives every rank rank `src`'s values of `tensor`.

    Parameters
    ----------
    tensor : lucid.Tensor
        Any dtype and device; the same shape and dtype on every rank.
    src : int
        The rank whose values are sent, 0 … world size - 1, the same on every rank.
    group, async_op
        As :func:`all_reduce`.

    Returns
    -------
    lucid.Tensor or Work
        `tensor` itself, updated in place on every rank but `src` (as torch.distributed does;
        see :func:`all_reduce` for what in place means here); with ``async_op=True``, a
        completed :class:`Work` whose ``result()`` is ``[tensor]``.

    Raises
    ------
    TypeError, ValueError, RuntimeError
        As :func:`all_reduce`, and for a `src` that is not a rank or differs between ranks.
    """
    backend = _group.require("broadcast")
    problem = None
    try:
        _check_group("broadcast", group)
        _check_async("broadcast", async_op)
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
    if backend.rank != src:
        _assign(tensor, _from_buffer(buf, tensor), "broadcast")
    return Work(tensor) if async_op else tensor


def all_gather(tensor, group=None, async_op=False):
    """Every rank's `tensor`, stacked in rank order.

    Parameters
    ----------
    tensor : lucid.Tensor
        Any dtype and device; the same shape and dtype on every rank.
    group, async_op
        As :func:`all_reduce`.

    Returns
    -------
    lucid.Tensor or Work
        A new tensor of shape ``(world_size, *tensor.shape)`` on `tensor`'s device, whose
        ``[r]`` is rank r's tensor (``list(result)`` gives torch.distributed.all_gather's list;
        ``result.reshape(-1, *tensor.shape[1:])`` its concatenation along dim 0). `tensor` is
        not changed. Gradients do not flow through it. With ``async_op=True``, a completed
        :class:`Work` whose ``result()`` is ``[that tensor]``.

    Raises
    ------
    TypeError, RuntimeError, ValueError
        Not a tensor, ranks that disagree on dtype or shape, or called before :func:`init`.
    """
    backend = _group.require("all_gather")
    problem = None
    try:
        _check_group("all_gather", group)
        _check_async("all_gather", async_op)
        _check_tensor("all_gather", tensor)
    except (TypeError, ValueError) as e:
        problem = e
    _agree(backend, "all_gather", problem, lambda: (None, tensor.dtype.name, tuple(tensor.shape)))
    gathered = backend.all_gather(_to_buffer(tensor), "all_gather")
    result = _tensor_from(gathered, (backend.size, *tensor.shape), tensor.dtype, tensor.device)
    return Work(result) if async_op else result


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
        raise RuntimeError(
            f"{what}: the tensor has autograd history, and collectives are not differentiable; "
            f"pass tensor.detach() (a leaf, such as a parameter, is fine)"
        )


def _agree(backend, what, problem, signature):
    """Raises on every rank if any rank's arguments are wrong or differ from rank 0's.

    `problem` is this rank's argument error (or None); `signature()` what must match across
    the ranks. With one rank, only this rank's problem is raised."""
    if backend.size == 1:
        if problem is not None:
            raise problem
        return
    mine = (
        what,
        None if problem is None else f"{type(problem).__name__}: {problem}",
        None if problem is not None else signature(),
    )
    entries = backend.all_gather_object(mine, what)
    if problem is not None:
        raise problem
    bad = [(r, e[1]) for r, e in enumerate(entries) if e[1] is not None]
    if bad:
        rank, message = bad[0]
        raise RuntimeError(f"{what}: rank {rank} passed invalid arguments ({message}), so no rank ran it")
    if any((e[0], e[2]) != (entries[0][0], entries[0][2]) for e in entries):
        described = "; ".join(f"rank {r}: {_describe(e)}" for r, e in enumerate(entries))
        raise ValueError(
            f"{what}: the ranks called different collectives or passed tensors that do not match ({described})"
        )


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
    return _result(_C.tensor_from_host(buf.ctypes.data, buf.nbytes, tuple(shape), dtype.code, device.code))


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


_ALIGN = 64  # bytes: each tensor in a broadcast buffer starts at an aligned offset


def _broadcast_tensors(tensors, src, bucket_bytes, what):
    """Gives every rank rank `src`'s values of `tensors` (the same shapes and dtypes on every
    rank), in place, through flat byte buffers of at most `bucket_bytes` (a larger tensor
    gets one of its own). Every rank must call it with the same tensors and `src`."""
    backend = _group.require(what)
    if backend.size == 1:
        return
    group, size = [], 0
    for t in tensors:
        n = -(-t.numel() * t.dtype.itemsize // _ALIGN) * _ALIGN
        if group and size + n > bucket_bytes:
            _broadcast_group(backend, group, size, src, what)
            group, size = [], 0
        group.append((t, size))
        size += n
    if group:
        _broadcast_group(backend, group, size, src, what)


def _broadcast_group(backend, group, size, src, what):
    buf = np.empty(size, dtype=np.uint8)
    if backend.rank == src:
        for t, start in group:
            _C.tensor_to_host(t._h, buf.ctypes.data + start, t.numel() * t.dtype.itemsize)
    backend.broadcast_(buf, src, what)
    if backend.rank == src:
        return
    for t, start in group:
        n = t.numel() * t.dtype.itemsize
        value = _result(_C.tensor_from_host(buf.ctypes.data + start, n, tuple(t.shape), t.dtype.code, t.device.code))
        _assign(t, value, what)
