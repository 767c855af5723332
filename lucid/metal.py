"""The Metal (GPU) stream."""

from . import _C
from ._C import MetalFallbackWarning
from ._types import dtype_from_code


def is_available() -> bool:
    """``True`` when Metal kernels serve device ``"metal"``.

    ``False`` where Metal is unavailable (Linux, CI): there ``"metal"`` runs on a host
    fallback that keeps the GPU stream's dtype rules (float16 storage, float32
    accumulation) and warns once per process; ``LUCID_METAL_FALLBACK=0`` makes ``"metal"``
    raise ``RuntimeError`` instead.
    """
    return _C.metal_is_available() != 0


def synchronize() -> None:
    """Waits until every kernel queued on ``"metal"`` has finished.

    The Metal backend queues kernels and commits them when the host needs a value
    (``.numpy()``, ``.item()``, a host kernel), so results never need this; it is for timing
    GPU work and for handing buffers to other code. Where the host fallback serves
    ``"metal"`` it returns at once.

    Raises
    ------
    RuntimeError
        When ``"metal"`` is unavailable (``LUCID_METAL_FALLBACK=0`` without Metal).
    """
    _C.metal_synchronize()


def self_test() -> list:
    """Runs the Metal backend's self-test now and returns every check.

    Each kernel the backend has runs on small fixed inputs and is compared with the CPU's
    kernels on the same inputs. The same test runs once before the backend first serves
    ``"metal"``; if any check fails there, ``"metal"`` stays on the host fallback (with a
    warning naming the kernels) and :func:`is_available` is ``False``, so wrong GPU results
    never reach a program.

    The kernels are compiled once, at first use. If they do not compile, the backend warns
    once with the compiler's message, ``"metal"`` stays on the host fallback, and the report
    is one failed check, ``"compile_library"``, whose ``detail`` is that message.

    Returns
    -------
    list of dict
        One per check: ``op`` (``"add"``, ``"exp_backward"``, ``"matmul"``, ...), ``dtype``,
        ``max_error`` (largest ``|metal - cpu| / (1 + |cpu|)``), ``tolerance``, ``passed``
        and ``detail`` (what went wrong beyond the numbers; ``""`` otherwise).

    Raises
    ------
    RuntimeError
        Where there is no Metal backend (Linux, or a Mac without a Metal device).
    """
    return [
        {
            "op": op,
            "dtype": dtype_from_code(code),
            "max_error": err,
            "tolerance": tol,
            "passed": err <= tol,
            "detail": detail,
        }
        for op, code, err, tol, detail in _C.metal_self_test_report()
    ]


def stats() -> dict:
    """What the ``"metal"`` backend has done since the process started.

    Read it before and after a piece of a program and compare: a steady-state training step
    on the Metal backend commits its work without waiting and reuses freed buffers, so its
    ``host_waits`` come only from the program's own reads (``.item()``, ``.numpy()``) and
    its ``new_buffers`` stay at zero.

    Returns
    -------
    dict
        ``command_buffers`` (committed), ``host_waits`` (times the host waited for queued GPU
        work: a read, a host kernel, :func:`synchronize`), ``dispatches`` (a dict from kernel
        name to count; a Metal Performance Shaders product is ``"mps_matmul"``),
        ``new_buffers`` (``MTLBuffer`` objects made rather than taken from the cache),
        ``cached_bytes`` (freed buffers held for reuse), ``host_fallbacks`` (ops that ran on
        the host kernels, as in :func:`host_fallback_counts`) and ``library_compiles`` (the
        kernel libraries compiled from source, one per kernel family, whether or not that
        succeeded: each once, when ``"metal"`` is first used; none for a family whose library
        compiled ahead of time was loaded, see :func:`kernel_libraries`).
        Where no Metal backend serves ``"metal"`` (Linux, CI) every count but
        ``host_fallbacks`` is zero.
    """
    return _C.metal_stats()


def kernel_libraries() -> dict:
    """Where the kernels of each of the Metal backend's kernel families came from.

    Each kernel family (``"elementwise"``, ``"matmul"``, ...) is a Metal library of its own,
    made when ``"metal"`` is first used (this call readies it if it has not been). A macOS
    wheel carries the libraries compiled ahead of time by Apple's Metal compiler, in
    ``lucid/_lib/metal/`` beside the engine (``LUCID_METALLIB_DIR`` names another folder of the
    same layout): a family's library is loaded from there when the folder's ``manifest.json``
    says it was made from the very source this engine embeds, and compiled from that source at
    run time otherwise (once per process, with one warning saying why when the folder exists).

    Returns
    -------
    dict
        Family name to a dict: ``origin`` (``"prebuilt"``: loaded from the library compiled
        ahead of time; ``"source"``: compiled at run time), ``detail`` (the prebuilt library's
        path; or why the family was compiled from source although a folder of prebuilt
        libraries exists; ``""`` when there is none) and ``error`` (why the library failed, so
        that its family runs on the host; ``""`` otherwise). Empty where there is no Metal
        backend (Linux, CI).
    """
    return {
        family: {"origin": origin, "detail": detail, "error": error}
        for family, (origin, detail, error) in _C.metal_kernel_libraries().items()
    }


def host_fallback_counts() -> dict:
    """How many times each op ran on the host kernels instead of the ``"metal"`` backend's.

    A call the Metal backend has no GPU kernel for (a dtype, a rank, an op such as
    ``nonzero``) runs on the host kernels over the same (unified) memory after the GPU's
    queued work finishes. Those runs are counted here by op name, since the process started,
    so that nobody takes a host op for a GPU op. Where the host fallback serves ``"metal"``
    (Linux, CI), every op runs on the host by design and nothing is counted.

    Returns
    -------
    dict
        Op name (``"add"``, ``"matmul"``, ``"max_pool2d_backward"``, ...) to count; only
        ops that fell back at least once appear.
    """
    return _C.metal_host_fallback_counts()


__all__ = [
    "is_available",
    "synchronize",
    "self_test",
    "stats",
    "kernel_libraries",
    "host_fallback_counts",
    "MetalFallbackWarning",
]
