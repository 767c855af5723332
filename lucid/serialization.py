"""lucid.save / lucid.load: checkpoints in the safetensors format.

The file is laid out, written, read and checked by the engine (``Core/Safetensors.swift``,
through the C ABI), the same reader and writer as Swift's ``saveSafetensors`` and
``loadSafetensors``, so a checkpoint opens in other tools and both front ends refuse the same
bad files: a state dict's tensors keep their names (``"0.weight"``), nested dicts join keys
with ``"."`` (an optimizer's ``"state.0.exp_avg"``). Everything that is not a tensor — the
nesting, ints, floats, strings, bools, None, lists and tuples, non-string dict keys — is kept
as JSON in the file's ``__metadata__`` under ``"lucid.structure"``, so ``load`` rebuilds the
object that was saved.
"""

from __future__ import annotations

import io
import json
import numbers
import os
import secrets
import stat

try:
    import fcntl
except ImportError:  # (not on Windows: there a killed save's temporary file stays)
    fcntl = None

import numpy as np

from . import _C
from ._ops.creation import tensor
from ._tensor import Tensor
from ._types import as_device, bfloat16, is_numpy_bfloat16

_STRUCTURE_KEY = "lucid.structure"
# safetensors dtype names <-> the numpy dtypes of the arrays lucid writes and reads (BF16's,
# ml_dtypes.bfloat16, is looked up when met; U16 and U32 arrays become int32 and int64 tensors,
# as lucid.tensor converts them).
_DTYPES = {
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "BOOL": np.dtype(np.bool_),
    "F64": np.dtype(np.float64),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "U16": np.dtype(np.uint16),
    "U32": np.dtype(np.uint32),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


def _numpy_dtype(name):
    return bfloat16.numpy if name == "BF16" else _DTYPES[name]


def _type_name(dtype):
    """The safetensors name of a numpy dtype, or None when the file cannot store it."""
    return "BF16" if is_numpy_bfloat16(dtype) else _NAMES.get(dtype.newbyteorder("="))


def _stored(arr):
    """`arr` as the file stores it: C-contiguous and little-endian."""
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def _encode(obj, path, tensors):
    """The JSON form of `obj`, with each tensor replaced by a reference to its entry in `tensors`."""
    if isinstance(obj, Tensor):
        key = path or "tensor"
        if key in tensors:
            raise ValueError(f"lucid.save: two tensors would be stored under the name {key!r}")
        tensors[key] = _stored(obj.detach().numpy())
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        key = path or "array"
        if key in tensors:
            raise ValueError(f"lucid.save: two arrays would be stored under the name {key!r}")
        if _type_name(obj.dtype) is None:
            raise TypeError(
                f"lucid.save: cannot store a numpy array of dtype {obj.dtype}; arrays of bools, floats "
                "(16, 32 and 64 bits, bfloat16), ints (8 to 64 bits) and uint8, uint16 and uint32 can be stored"
            )
        tensors[key] = _stored(obj)
        return {"__ndarray__": key}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, (bool, np.bool_)) or not isinstance(k, (str, numbers.Integral)):
                raise TypeError(f"lucid.save: dict keys must be str or int, got {k!r}")
            k = k if isinstance(k, str) else int(k)  # (numpy integers are not JSON)
            items.append([k, _encode(v, f"{path}.{k}" if path else str(k), tensors)])
        return {"__dict__": items}
    if isinstance(obj, (list, tuple)):
        encoded = [_encode(v, f"{path}.{i}" if path else str(i), tensors) for i, v in enumerate(obj)]
        return {"__tuple__": encoded} if isinstance(obj, tuple) else encoded
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, np.bool_):  # (not a numbers.Integral, unlike bool)
        return bool(obj)
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        return float(obj)
    hint = ""
    if hasattr(obj, "state_dict"):
        hint = (
            f"; save its state dict instead (lucid.save(obj.state_dict(), f)) and load it into a new "
            f"{type(obj).__name__} with load_state_dict: safetensors files hold no code"
        )
    raise TypeError(
        f"lucid.save: cannot store a {type(obj).__name__}; checkpoints hold tensors, numpy arrays, "
        f"numbers, strings, None and dicts/lists/tuples of them{hint}"
    )


def save(obj, f) -> None:
    """Saves a tensor, or a (nested) dict of tensors and plain values, in the safetensors format.

    Parameters
    ----------
    obj : Tensor, numpy array or dict
        A tensor, a numpy array, or a dict (e.g. ``Module.state_dict()`` or
        ``Optimizer.state_dict()``) whose values are tensors, numpy arrays of numbers or bools
        (the dtypes lucid holds, and uint16 and uint32: they load as the same numpy arrays), ints,
        floats, bools, strings, None, or lists, tuples and dicts of them. Dict keys must be
        str or int.
    f : str, os.PathLike or binary file
        Where to write. A path is written to a temporary file beside it and renamed over
        it, so an interrupted save leaves any previous checkpoint at ``f`` intact. An
        exception removes the temporary file; one left by a process killed mid-save is
        removed by the next save to ``f`` (on platforms with ``fcntl.flock``).

    Raises
    ------
    TypeError
        For a value or dict key that a checkpoint cannot hold.
    ValueError
        When two tensors would be stored under the same flattened name.
    FileNotFoundError
        When the directory of ``f`` does not exist.

    Notes
    -----
    Tensors are stored under their flattened names (``"0.weight"``,
    ``"state.0.exp_avg"``) as values: detached, with dtype and shape, bfloat16 bit-exact.
    """
    tensors = {}
    structure = _encode(obj, "", tensors)
    if any("\0" in name for name in tensors):
        raise ValueError("lucid.save: a tensor's name would hold a NUL character")
    entries = [(name, _type_name(arr.dtype), arr.shape, arr) for name, arr in tensors.items()]
    try:
        data = _C.safetensors_write(entries, {_STRUCTURE_KEY: json.dumps(structure)})
    except ValueError as e:
        raise ValueError(f"lucid.save: {e}") from None
    if hasattr(f, "write"):
        f.write(data)
        return
    path = os.fspath(f)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"lucid.save: the directory of {path!r} does not exist")
    name = os.path.basename(path)
    fd, tmp = _create_temporary(directory, name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
            # Renamed while still open, so its lock is held until it is the checkpoint.
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _sync_directory(directory)
    _remove_orphans(directory, name)


def _temporary_name(name, token):
    return f".{name}.{token}.tmp"


def _create_temporary(directory, name):
    """A new file beside the target, locked for as long as it is open. Created with mode
    0o666 so the umask applies, as for any file the user writes (``tempfile.mkstemp`` would
    make the checkpoint owner-only)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, _temporary_name(name, secrets.token_hex(6)))
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        if fcntl is None:
            return fd, tmp
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Another save's sweep may have taken the file for an orphan before it was
            # locked; then it is gone and a new one is made.
            if os.path.samestat(os.fstat(fd), os.stat(tmp, follow_symlinks=False)):
                return fd, tmp
        except FileNotFoundError:
            pass
        except OSError:  # (a file system without locks: orphans are then never swept)
            return fd, tmp
        os.close(fd)
    raise FileExistsError(f"lucid.save: could not create a temporary file in {directory!r}")


def _remove_orphans(directory, name):
    """Deletes the temporary files of saves of `name` whose process died mid-save (a
    SIGKILL, a power cut): their lock went with the process. A save still writing holds its
    lock, and one whose file is taken before it locks it makes another."""
    if fcntl is None:
        return
    prefix, width = f".{name}.", len(_temporary_name(name, "0" * 12))
    try:
        entries = [
            e
            for e in os.scandir(directory)
            if e.name.startswith(prefix)
            and len(e.name) == width
            and e.name.endswith(".tmp")
            and _is_hex(e.name[len(prefix) : -4])
        ]
    except OSError:
        return
    for entry in entries:
        try:
            fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Still under that name (not renamed into place meanwhile): unlinked while locked.
            if os.path.samestat(os.fstat(fd), os.stat(entry.path, follow_symlinks=False)):
                os.unlink(entry.path)
        except OSError:
            pass
        finally:
            os.close(fd)


def _is_hex(text):
    return all(c in "0123456789abcdef" for c in text)


def _sync_directory(directory):
    # Makes the rename itself durable; not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _malformed():
    return ValueError("lucid.load: malformed structure in the checkpoint metadata")


def _is_pytorch_pickle(data: bytes) -> bool:
    """Whether `data` is what torch.save writes: a zip archive, or (before PyTorch 1.6) a
    pickle. A safetensors file starts with its header's length and then "{"."""
    if data[8:9] == b"{":
        return False
    return data[:4] == b"PK\x03\x04" or (data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"))


def _array_names(node):
    """The names of the numpy arrays (not tensors) a structure refers to."""
    if isinstance(node, list):
        for v in node:
            yield from _array_names(v)
    elif isinstance(node, dict):
        if "__ndarray__" in node:
            yield node["__ndarray__"]
        for v in node.get("__tuple__", ()):
            yield from _array_names(v)
        for entry in node.get("__dict__", ()):
            yield from _array_names(entry[1])


def _decode(node, tensors, arrays):
    """The object `node` describes, its tensors taken from `tensors` and its numpy arrays from
    `arrays` (both by name)."""
    if isinstance(node, list):
        return [_decode(v, tensors, arrays) for v in node]
    if isinstance(node, dict):
        if "__tensor__" in node:
            try:
                return tensors[node["__tensor__"]]
            except (KeyError, TypeError):
                raise ValueError(
                    f"lucid.load: the checkpoint refers to a missing tensor {node['__tensor__']!r}"
                ) from None
        if "__ndarray__" in node:
            try:
                return arrays[node["__ndarray__"]]
            except (KeyError, TypeError):
                raise ValueError(
                    f"lucid.load: the checkpoint refers to a missing array {node['__ndarray__']!r}"
                ) from None
        if "__tuple__" in node:
            if not isinstance(node["__tuple__"], list):
                raise _malformed()
            return tuple(_decode(v, tensors, arrays) for v in node["__tuple__"])
        if "__dict__" in node:
            if not isinstance(node["__dict__"], list):
                raise _malformed()
            out = {}
            for entry in node["__dict__"]:
                if (
                    not isinstance(entry, list)
                    or len(entry) != 2
                    or isinstance(entry[0], bool)
                    or not isinstance(entry[0], (str, int))
                    or entry[0] in out
                ):
                    raise _malformed()
                out[entry[0]] = _decode(entry[1], tensors, arrays)
            return out
        raise _malformed()
    return node


def _unique_object(pairs):
    # json.loads keeps the last of repeated keys; a file that names one thing twice is refused.
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise ValueError(f"the key {k!r} appears twice")
            seen.add(k)
    return out


_MAX_HEADER = 100_000_000  # the longest header the engine reads (Safetensors.maxHeader)
_CHUNK = 1 << 20


def default_max_bytes() -> int:
    """What a stream handed to :func:`load` may declare at most: the machine's physical
    memory, or the process's address-space limit when that is lower."""
    limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            limit = min(limit, soft)
    except (ImportError, OSError, ValueError):
        pass
    return limit


def _read(f, max_bytes):
    """The bytes of a checkpoint. A regular file is read whole (its size bounds the memory);
    anything else (a pipe, a device, a file object) no further than its header declares, and
    not at all when that is more than `max_bytes`."""
    if hasattr(f, "read"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("lucid.load: the file must be opened in binary mode ('rb')")
        return _read_declared(f, max_bytes)
    with open(os.fspath(f), "rb") as fh:
        if stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return fh.read()
        return _read_declared(fh, max_bytes)


def _read_up_to(f, n):
    parts, left = [], n
    while left > 0:
        part = f.read(min(left, _CHUNK))  # (in chunks: read(n) would allocate n at once)
        if not isinstance(part, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"lucid.load: reading the file gave {type(part).__name__}, not bytes; open it in binary mode ('rb')"
            )
        if not part:
            break
        parts.append(bytes(part))
        left -= len(part)
    return b"".join(parts)


def _read_declared(f, max_bytes):
    # The 8-byte header length, the header, then the data it declares and one byte more
    # (so that deserialize sees, and names, what does not belong), in chunks.
    head = _read_up_to(f, 8)
    n = int.from_bytes(head, "little")
    if len(head) < 8 or n > _MAX_HEADER:
        return head
    text = _read_up_to(f, n)
    if len(text) < n:
        return head + text
    declared = _C.safetensors_declared_size(text, len(text))
    if 8 + n + declared > max_bytes:
        raise ValueError(
            f"lucid.load: the stream's header declares {declared} bytes of tensor data "
            f"({8 + n + declared} in all), more than max_bytes={max_bytes}"
        )
    return head + text + _read_up_to(f, declared + 1)


class safe_globals:
    """``torch.serialization.safe_globals``: a scope that allows named classes in a pickle.
    lucid reads safetensors files, which hold no code and unpickle nothing, so there is nothing
    to allow: the scope changes nothing."""

    def __init__(self, safe_globals):
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def add_safe_globals(safe_globals) -> None:
    """``torch.serialization.add_safe_globals``: nothing to allow (see :class:`safe_globals`)."""


def load(f, map_location=None, *, max_bytes=None, weights_only=None, mmap=None):
    """Loads what :func:`save` wrote, or the tensors of any safetensors file.

    Parameters
    ----------
    f : str, os.PathLike or binary file
        The checkpoint.
    map_location : str or lucid.device, optional
        The device of the loaded tensors: ``"cpu"`` (the default) or ``"metal"``.
    weights_only, mmap : optional
        Accepted as PyTorch's ``torch.load`` takes them: a safetensors file only ever holds
        data (what ``weights_only=True`` asks for), and it is read whole (``mmap`` changes
        nothing).
    max_bytes : int, optional
        The most a stream (anything but a regular file) may declare, header included: a
        larger declaration is refused before its data is read. Defaults to
        :func:`default_max_bytes`, the machine's physical memory (or the process's
        address-space limit when lower).

    Returns
    -------
    Tensor or dict
        The saved object, rebuilt (int dict keys stay ints, tuples stay tuples); for a
        safetensors file written by another tool, a dict from tensor names to tensors.

    Raises
    ------
    OSError
        When ``f`` cannot be read: ``FileNotFoundError`` when it does not exist,
        ``IsADirectoryError`` for a directory, ``PermissionError``.
    ValueError
        When ``f`` is not a valid safetensors file (truncated, corrupted, inconsistent
        offsets or sizes, a key named twice, boolean bytes other than 0 and 1), its lucid
        metadata is malformed, or it holds a dtype lucid cannot hold; when it is a PyTorch
        pickle (``torch.save``'s format; the message says how to convert it); when a stream declares
        more than ``max_bytes``. Also for an unknown ``map_location``.
    TypeError
        When ``f`` is a file opened in text mode, or ``map_location`` is not a device.

    Notes
    -----
    The file is read, then checked, before any tensor is made: a bad file raises without
    allocating tensors. A regular file is read whole, so memory use is bounded by its size;
    a stream (a pipe, a device, a file object) is read in chunks no further than its header
    declares, and a declaration beyond ``max_bytes`` is refused before any data is read.
    """
    device = as_device("cpu" if map_location is None else map_location)
    if max_bytes is None:
        max_bytes = default_max_bytes()
    elif isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"lucid.load: max_bytes must be a non-negative int, got {max_bytes!r}")
    data = _read(f, max_bytes)
    if _is_pytorch_pickle(data):
        raise ValueError(
            "lucid.load: this is a PyTorch pickle (torch.save), not a safetensors file; lucid reads "
            "safetensors only, which hold no code. Convert it once where PyTorch is installed: "
            "safetensors.torch.save_file(torch.load(path), 'model.safetensors') for a dict of tensors "
            "(a state dict), then lucid.load('model.safetensors') and load_state_dict"
        )
    try:
        count, meta_count = _C.safetensors_read(data, len(data))
    except ValueError as e:
        raise ValueError(f"lucid.load: {e}") from None
    entries = sorted(_C.safetensors_tensor(i) for i in range(count))
    meta = dict(_C.safetensors_metadata(i) for i in range(meta_count))
    arrays = {}
    for name, dtype, shape, offset, nbytes in entries:
        np_dtype = _numpy_dtype(dtype)
        arrays[name] = np.frombuffer(data, dtype=np_dtype, count=nbytes // np_dtype.itemsize, offset=offset).reshape(
            shape
        )
    structure = None
    if _STRUCTURE_KEY in meta:
        try:
            structure = json.loads(meta[_STRUCTURE_KEY], object_pairs_hook=_unique_object)
        except RecursionError:
            raise ValueError("lucid.load: the checkpoint's structure metadata is nested too deeply") from None
        except (TypeError, ValueError):
            raise ValueError("lucid.load: the checkpoint's structure metadata is not valid JSON") from None
        try:
            _decode(structure, arrays, arrays)  # checked before any tensor is made
        except RecursionError:
            raise ValueError("lucid.load: the checkpoint's structure metadata is nested too deeply") from None
    stored_as_arrays = set(_array_names(structure))
    tensors = {name: tensor(arr, device=device) for name, arr in arrays.items() if name not in stored_as_arrays}
    if structure is None:
        return tensors
    try:
        return _decode(structure, tensors, {name: arrays[name].copy() for name in stored_as_arrays})
    except RecursionError:  # (the check above ran at the same depth; kept for a smaller stack)
        raise ValueError("lucid.load: the checkpoint's structure metadata is nested too deeply") from None
