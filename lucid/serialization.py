"""lucid.save / lucid.load: checkpoints in the safetensors format.

Tensors are written with the ``safetensors`` package's numpy API, so a checkpoint opens in
other tools: a state dict's tensors keep their names (``"0.weight"``), nested dicts join keys
with ``"."`` (an optimizer's ``"state.0.exp_avg"``). Everything that is not a tensor — the
nesting, ints, floats, strings, bools, None, lists and tuples, non-string dict keys — is kept
as JSON in the file's ``__metadata__`` under ``"lucid.structure"``, so ``load`` rebuilds the
object that was saved.
"""

from __future__ import annotations

import json
import numbers
import os
import secrets

import ml_dtypes
import numpy as np

_STRUCTURE_KEY = "lucid.structure"
# safetensors dtype names -> numpy dtypes lucid can hold.
_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "I64": np.int64, "I32": np.int32,
           "BOOL": np.bool_, "F64": np.float64, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16,
           "U32": np.uint32}


def _encode(obj, path, tensors):
    """The JSON form of `obj`, with each tensor replaced by a reference to its entry in `tensors`."""
    from ._tensor import Tensor

    if isinstance(obj, Tensor):
        key = path or "tensor"
        if key in tensors:
            raise ValueError(f"lucid.save: two tensors would be stored under the name {key!r}")
        arr = obj.detach().numpy()
        tensors[key] = arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
        return {"__tensor__": key}
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
    raise TypeError(f"lucid.save: cannot store a {type(obj).__name__}; checkpoints hold tensors, numbers, strings, "
                    "None and dicts/lists/tuples of them")


def save(obj, f) -> None:
    """Saves a tensor, or a (nested) dict of tensors and plain values, in the safetensors format.

    Parameters
    ----------
    obj : Tensor or dict
        A tensor, or a dict (e.g. ``Module.state_dict()`` or ``Optimizer.state_dict()``)
        whose values are tensors, ints, floats, bools, strings, None, or lists, tuples and
        dicts of them. Dict keys must be str or int.
    f : str, os.PathLike or binary file
        Where to write. A path is written to a temporary file beside it and renamed over
        it, so an interrupted save leaves any previous checkpoint at ``f`` intact.

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
    from safetensors.numpy import save as serialize

    tensors = {}
    structure = _encode(obj, "", tensors)
    data = serialize(tensors, metadata={_STRUCTURE_KEY: json.dumps(structure)})
    if hasattr(f, "write"):
        f.write(data)
        return
    path = os.fspath(f)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"lucid.save: the directory of {path!r} does not exist")
    fd, tmp = _create_temporary(directory, os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _sync_directory(directory)


def _create_temporary(directory, name):
    """A new file beside the target. Created with mode 0o666 so the umask applies, as for any
    file the user writes (``tempfile.mkstemp`` would make the checkpoint owner-only)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"lucid.save: could not create a temporary file in {directory!r}")


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


def _decode(node, tensors):
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if isinstance(node, dict):
        if "__tensor__" in node:
            try:
                return tensors[node["__tensor__"]]
            except (KeyError, TypeError):
                raise ValueError(f"lucid.load: the checkpoint refers to a missing tensor {node['__tensor__']!r}") from None
        if "__tuple__" in node:
            if not isinstance(node["__tuple__"], list):
                raise _malformed()
            return tuple(_decode(v, tensors) for v in node["__tuple__"])
        if "__dict__" in node:
            if not isinstance(node["__dict__"], list):
                raise _malformed()
            out = {}
            for entry in node["__dict__"]:
                if (not isinstance(entry, list) or len(entry) != 2 or isinstance(entry[0], bool)
                        or not isinstance(entry[0], (str, int))):
                    raise _malformed()
                out[entry[0]] = _decode(entry[1], tensors)
            return out
        raise _malformed()
    return node


def _metadata(data: bytes) -> dict:
    # The header was validated by deserialize: 8 bytes of length, then that much JSON.
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.get("__metadata__") or {}
    return meta if isinstance(meta, dict) else {}


def load(f, map_location=None):
    """Loads what :func:`save` wrote, or the tensors of any safetensors file.

    Parameters
    ----------
    f : str, os.PathLike or binary file
        The checkpoint.
    map_location : str or lucid.device, optional
        The device of the loaded tensors: ``"cpu"`` (the default) or ``"metal"``.

    Returns
    -------
    Tensor or dict
        The saved object, rebuilt (int dict keys stay ints, tuples stay tuples); for a
        safetensors file written by another tool, a dict from tensor names to tensors.

    Raises
    ------
    FileNotFoundError
        When ``f`` does not exist.
    ValueError
        When ``f`` is not a valid safetensors file (truncated, corrupted, inconsistent
        offsets), its lucid metadata is malformed, or it holds a dtype lucid cannot hold.
    """
    from safetensors import SafetensorError, deserialize

    from ._creation import tensor
    from ._types import as_device

    device = as_device("cpu" if map_location is None else map_location)
    if hasattr(f, "read"):
        data = f.read()
    else:
        with open(os.fspath(f), "rb") as fh:
            data = fh.read()
    try:
        entries = deserialize(data)
        meta = _metadata(data)
    except (SafetensorError, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"lucid.load: not a valid safetensors file: {e}") from None
    tensors = {}
    for name, view in entries:
        dtype = _DTYPES.get(view["dtype"])
        if dtype is None:
            raise ValueError(f"lucid.load: tensor {name!r} has dtype {view['dtype']}, which lucid cannot hold")
        arr = np.frombuffer(view["data"], dtype=dtype).reshape(view["shape"])
        tensors[name] = tensor(arr, device=device)
    if _STRUCTURE_KEY not in meta:
        return tensors
    try:
        structure = json.loads(meta[_STRUCTURE_KEY])
    except (TypeError, ValueError, RecursionError):
        raise ValueError("lucid.load: the checkpoint's structure metadata is not valid JSON") from None
    try:
        return _decode(structure, tensors)
    except RecursionError:
        raise ValueError("lucid.load: the checkpoint's structure metadata is nested too deeply") from None
