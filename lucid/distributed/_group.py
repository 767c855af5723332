"""The process group: this process's rank among the ranks, and the buffers it exchanges.

MPI comes from mpi4py, imported by :func:`init` and never by ``import lucid``. Every exchange
here is on flat, contiguous numpy buffers that lucid fills from engine memory and turns back
into engine tensors; nothing is done element by element in Python.

Three guards keep a failing job from hanging:

- ``init`` installs a ``sys.excepthook`` that prints the traceback under the rank's name and
  calls ``MPI_Abort``, so mpiexec ends every rank when one stops on an uncaught exception (a
  rank that is killed or exits with an error is ended by mpiexec itself);
- every collective runs under a watchdog: one that waits longer than the timeout (a rank
  that left early, or one calling another collective) prints what it waited for and aborts;
- the collectives first agree on what each rank passed (op, dtype, shape, source rank, or a
  problem with the arguments), so a mismatch raises the same clear error on every rank
  instead of leaving MPI to pair buffers that do not match.
"""

from __future__ import annotations

import datetime
import importlib.util
import math
import numbers
import os
import queue
import sys
import threading
import time
import traceback

import numpy as np

from .._types import is_numpy_bfloat16

INSTALL_HINT = "pip install 'lucid[distributed]'"
DEFAULT_TIMEOUT = 1800.0  # seconds, as torch.distributed's default
# Set by the launchers of MPICH (hydra), Open MPI and PMIx: this process is one of several.
_LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def is_available() -> bool:
    """Whether mpi4py is installed (``pip install 'lucid[distributed]'``). Without it,
    :func:`init` still works in a single process, as world size 1."""
    try:
        return importlib.util.find_spec("mpi4py") is not None
    except (ImportError, ValueError):  # an import hook that refuses it, a broken install
        return False


def _launched_by_mpiexec() -> bool:
    return any(v in os.environ for v in _LAUNCHER_VARIABLES)


def _load_mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(
            f"lucid.distributed needs mpi4py and an MPI library for a run of several processes: "
            f"{INSTALL_HINT} (mpi4py with MPICH from PyPI). ({e})"
        ) from e
    except RuntimeError as e:  # mpi4py is there but found no MPI library to load
        raise ImportError(
            f"lucid.distributed: mpi4py could not load an MPI library ({e}); {INSTALL_HINT} installs MPICH beside it"
        ) from e
    return MPI


def _timeout_seconds(timeout) -> float:
    if timeout is None:
        text = os.environ.get("LUCID_DISTRIBUTED_TIMEOUT")
        if text is None:
            return DEFAULT_TIMEOUT
        try:
            timeout = float(text)
        except ValueError:
            raise ValueError(f"LUCID_DISTRIBUTED_TIMEOUT must be a number of seconds, got {text!r}") from None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if not isinstance(timeout, numbers.Real) or isinstance(timeout, bool) or not timeout > 0:
        raise ValueError(
            f"timeout must be a positive number of seconds (or a datetime.timedelta; math.inf "
            f"for none), got {timeout!r}"
        )
    return float(timeout)


_ABORT_GRACE_SECONDS = 0.5
# Between two looks at a reduction in flight: MPI moves it on at each look, and the core is
# left to the program's computation in between (a blocking wait would spin on it).
_POLL_SECONDS = 0.0002


class _Watchdog:
    """Aborts the job when a collective has waited longer than `timeout` seconds."""

    def __init__(self, abort, rank, size, timeout):
        self._abort, self._rank, self._size, self._timeout = abort, rank, size, timeout
        self._what, self._since = None, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lucid-distributed-watchdog", daemon=True)
        self._thread.start()

    def begin(self, what):
        self._since = time.monotonic()
        self._what = what

    def end(self):
        self._what = None

    def stop(self):
        self._stop.set()

    def _run(self):
        period = min(1.0, self._timeout / 4)
        while not self._stop.wait(period):
            what = self._what
            if what is None:
                continue
            waited = time.monotonic() - self._since
            if waited > self._timeout and self._what is what:
                _say(
                    f"lucid.distributed: rank {self._rank} of {self._size} has waited {waited:.0f} s in {what} "
                    f"for the other ranks (timeout {self._timeout:g} s): a rank has stopped, left early or is "
                    f"calling another collective. Aborting every rank. (The timeout is init(timeout=...) or "
                    f"LUCID_DISTRIBUTED_TIMEOUT.)"
                )
                self._abort(1)
                return


def _say(message):
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - a closed stdout must not stop the message
        pass
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


class _Progress:
    """A thread that waits for the started nonblocking reductions, one after the other.

    MPICH moves a nonblocking collective on only inside MPI calls; waiting for it here (the
    wait releases the GIL) moves it on while the program computes, so that a reduction
    started during backward goes over the network during backward. Errors are kept and
    raised by :meth:`wait`, in the program's thread."""

    def __init__(self, MPI):
        self._MPI = MPI
        self._queue = queue.SimpleQueue()
        self._done = threading.Condition()
        self._started = self._finished = 0
        self._error = None
        self._thread = threading.Thread(target=self._run, name="lucid-distributed-progress", daemon=True)
        self._thread.start()

    def add(self, request):
        with self._done:
            self._started += 1
        self._queue.put(request)

    def _run(self):
        while (request := self._queue.get()) is not None:
            error = None
            try:
                while not request.Test():
                    time.sleep(_POLL_SECONDS)
            except self._MPI.Exception as e:
                error = e
            with self._done:
                self._finished += 1
                if error is not None and self._error is None:
                    self._error = error
                self._done.notify_all()

    def wait(self):
        with self._done:
            while self._finished < self._started:
                self._done.wait()
            error, self._error = self._error, None
        if error is not None:
            raise error

    def stop(self):
        self._queue.put(None)


# ---- backends ----------------------------------------------------------------------------------


class _Local:
    """One process without MPI: every collective of one rank leaves its buffer as it is."""

    name = "local"
    rank, size, local_rank = 0, 1, 0

    def reduce_(self, buf, op, what):
        pass

    def broadcast_(self, buf, src, what):
        pass

    def all_gather(self, buf, what):
        return buf[None].copy()

    def all_gather_object(self, obj, what):
        return [obj]

    def gather_object(self, obj, dst, what):
        return [obj]

    def barrier(self, what="barrier"):
        pass

    def abort(self, code):
        os._exit(code)

    def close(self):
        pass


class _MPI:
    """MPI_COMM_WORLD (a duplicate of it, so that a program's own use of COMM_WORLD cannot
    interleave with lucid's messages)."""

    name = "mpi"

    def __init__(self, MPI, timeout):
        self.MPI = MPI
        self.world = MPI.COMM_WORLD
        self.comm = self.world.Dup()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.local_rank = 0  # this rank's place among the ranks on its machine (set by local_size)
        self._types = {
            np.dtype(np.float32): MPI.FLOAT,
            np.dtype(np.int32): MPI.INT32_T,
            np.dtype(np.int64): MPI.INT64_T,
            np.dtype(np.bool_): MPI.C_BOOL,
            np.dtype(np.uint8): MPI.UINT8_T,
            np.dtype(np.int8): MPI.INT8_T,
            np.dtype(np.int16): MPI.INT16_T,
        }
        self._half_ops = {}
        self._progress = None
        self.watchdog = None
        if self.size > 1 and math.isfinite(timeout):
            self.watchdog = _Watchdog(self.abort, self.rank, self.size, timeout)

    def _call(self, what, fn, *args, **kwargs):
        if self.watchdog is not None:
            self.watchdog.begin(what)
        try:
            return fn(*args, **kwargs)
        except self.MPI.Exception as e:
            raise RuntimeError(f"{what}: MPI failed on rank {self.rank} of {self.size}: {e.Get_error_string()}") from e
        finally:
            if self.watchdog is not None:
                self.watchdog.end()

    def _half_op(self, dtype, op):
        """A commutative MPI op on float16 or bfloat16 elements (MPI has no bfloat16, and its
        float16 is not standard): each pair of buffers is combined in float32 with numpy and
        rounded once, as a float32 accumulator would."""
        key = (dtype, op)
        if key not in self._half_ops:
            combine = np.add if op == "sum" else np.maximum

            def reduce(inbuf, inoutbuf, datatype):
                a = np.frombuffer(inbuf, dtype=dtype)
                b = np.frombuffer(inoutbuf, dtype=dtype)
                b[...] = combine(a.astype(np.float32), b.astype(np.float32))

            self._half_ops[key] = self.MPI.Op.Create(reduce, commute=True)
        return self._half_ops[key]

    def _reduction(self, buf, op):
        """MPI's description of `buf` (1-D, contiguous) and the op that sums or maximises it."""
        MPI = self.MPI
        if buf.dtype == np.float16 or is_numpy_bfloat16(buf.dtype):
            return [buf.view(np.uint16), MPI.UINT16_T], self._half_op(buf.dtype, op)
        if buf.dtype == np.bool_:
            return [buf, MPI.C_BOOL], MPI.LOR  # a sum or maximum of bools is their "or"
        return [buf, self._types[buf.dtype]], (MPI.SUM if op == "sum" else MPI.MAX)

    def reduce_(self, buf, op, what):
        """`buf` (1-D, contiguous) replaced by the sum or the maximum over the ranks."""
        spec, mpi_op = self._reduction(buf, op)
        self._call(what, self.comm.Allreduce, self.MPI.IN_PLACE, spec, op=mpi_op)

    def start_reduce_(self, buf, op, what):
        """Starts replacing `buf` by its sum or maximum over the ranks (MPI_Iallreduce) and
        returns at once; `buf` must stay untouched until :meth:`wait_reductions`. Every rank
        must start the same reductions in the same order."""
        spec, mpi_op = self._reduction(buf, op)
        request = self._call(what, self.comm.Iallreduce, self.MPI.IN_PLACE, spec, op=mpi_op)
        if self._progress is None:
            self._progress = _Progress(self.MPI)
        self._progress.add(request)

    def wait_reductions(self, what):
        """Waits, under the watchdog, until every reduction started so far has finished."""
        if self._progress is not None:
            self._call(what, self._progress.wait)

    def broadcast_(self, buf, src, what):
        self._call(what, self.comm.Bcast, [buf.view(np.uint8), self.MPI.BYTE], root=src)

    def all_gather(self, buf, what):
        out = np.empty((self.size, buf.size), dtype=buf.dtype)
        self._call(
            what,
            self.comm.Allgather,
            [buf.view(np.uint8), self.MPI.BYTE],
            [out.reshape(-1).view(np.uint8), self.MPI.BYTE],
        )
        return out

    def all_gather_object(self, obj, what):
        return self._call(what, self.comm.allgather, obj)

    def gather_object(self, obj, dst, what):
        """Every rank's picklable `obj`, in rank order, on rank `dst` (None elsewhere)."""
        return self._call(what, self.comm.gather, obj, root=dst)

    def local_size(self):
        """How many ranks run on this machine (this one included); it also sets
        ``local_rank``, this rank's place among them."""
        local = self._call("init", self.comm.Split_type, self.MPI.COMM_TYPE_SHARED)
        try:
            self.local_rank = local.Get_rank()
            return local.Get_size()
        finally:
            local.Free()

    def barrier(self, what="barrier"):
        self._call(what, self.comm.Barrier)

    def abort(self, code):
        # What this rank wrote last sits in a pipe to mpiexec, which forwards it; MPI_Abort at
        # once could end the job before it is read, and the message saying why would be lost.
        time.sleep(_ABORT_GRACE_SECONDS)
        self.world.Abort(code)

    def close(self):
        if self.watchdog is not None:
            self.watchdog.stop()
        if self._progress is not None:
            self._progress.stop()
        for op in self._half_ops.values():
            op.Free()
        self._half_ops = {}
        self.comm.Free()


# ---- the process group ------------------------------------------------------------------------

_backend = None
_previous_excepthook = None


def current():
    return _backend


def require(what):
    """The backend, or a RuntimeError naming `what` when init() has not run."""
    if _backend is None:
        raise RuntimeError(
            f"{what}: lucid.distributed is not initialised; call lucid.distributed.init() first "
            f"(start the program with `mpiexec -n N python ...`, or run it alone as world size 1)"
        )
    return _backend


def init(backend=None, *, timeout=None):
    global _backend, _previous_excepthook
    if backend not in (None, "mpi"):
        raise ValueError(f"lucid.distributed supports the 'mpi' backend only, got {backend!r}")
    seconds = _timeout_seconds(timeout)
    if _backend is not None:
        return
    if is_available() or _launched_by_mpiexec():
        _backend = _MPI(_load_mpi(), seconds)
    else:
        _backend = _Local()
    if _backend.size > 1:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught
        _share_cores(_backend.local_size())


def _share_cores(ranks_here):
    """Ranks on one machine split its cores, unless the program chose a thread count: with
    every rank running a pool as wide as the machine, their threads would wait on each other
    (on two cores, two ranks of two threads each ran the digits example 14 times slower)."""
    from .._threads import get_num_threads, set_num_threads

    cores = os.cpu_count() or 1
    if ranks_here > 1 and get_num_threads() == cores:
        set_num_threads(max(1, cores // ranks_here))


def destroy():
    """Leaves the process group; init() may be called again (MPI itself stays initialised
    until the process ends: MPI cannot be started twice)."""
    global _backend, _previous_excepthook
    backend, _backend = _backend, None
    if backend is None:
        return
    if _previous_excepthook is not None and sys.excepthook is _abort_on_uncaught:
        sys.excepthook = _previous_excepthook
    _previous_excepthook = None
    backend.close()


def _abort_on_uncaught(exc_type, exc, tb):
    backend = _backend
    previous = _previous_excepthook or sys.__excepthook__
    if backend is None or backend.size == 1:
        previous(exc_type, exc, tb)
        return
    header = f"lucid.distributed: rank {backend.rank} of {backend.size} stopped on an uncaught exception:"
    try:
        sys.stderr.write(header + "\n")
        previous(exc_type, exc, tb)
    except Exception:  # noqa: BLE001 - a failing hook must not keep the job from aborting
        sys.stderr.write("".join(traceback.format_exception(exc_type, exc, tb)))
    _say(
        f"lucid.distributed: aborting all {backend.size} ranks because rank {backend.rank} raised "
        f"{exc_type.__name__}: {exc}"
    )
    backend.abort(1)
