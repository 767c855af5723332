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
import tempfile

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
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"lucid.save: dict keys must be str or int, got {k!r}")
            items.append([k, _encode(v, f"{path}.{k}" if path else str(k), tensors)])
        return {"__dict__": items}
    if isinstance(obj, (list, tuple)):
        encoded = [_encode(v, f"{path}.{i}" if path else str(i), tensors) for i, v in enumerate(obj)]
        return {"__tuple__": encoded} if isinstance(obj, tuple) else encoded
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        return float(obj)
    raise TypeError(f"lucid.save: cannot store a {type(obj).__name__}; checkpoints hold tensors, numbers, strings, "
                    "None and dicts/lists/tuples of them")


def save(obj, f) -> None:
    """Saves a tensor, or a (nested) dict of tensors and plain values such as a
    ``state_dict()``, to the path ``f`` in the safetensors format.

    The file is written to a temporary file beside ``f`` and renamed over it, so an
    interrupted save leaves any previous checkpoint at ``f`` intact. Tensors are saved as
    values (detached, with their dtype and shape; bfloat16 bit-exact).
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
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".lucid-", suffix=".tmp")
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
            return tuple(_decode(v, tensors) for v in node["__tuple__"])
        if "__dict__" in node:
            out = {}
            for entry in node["__dict__"]:
                if not isinstance(entry, list) or len(entry) != 2:
                    raise ValueError("lucid.load: malformed structure in the checkpoint metadata")
                out[entry[0]] = _decode(entry[1], tensors)
            return out
        raise ValueError("lucid.load: malformed structure in the checkpoint metadata")
    return node


def _metadata(data: bytes) -> dict:
    # The header was validated by deserialize: 8 bytes of length, then that much JSON.
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.get("__metadata__") or {}
    return meta if isinstance(meta, dict) else {}


def load(f, map_location=None):
    """Loads what :func:`save` wrote (or any safetensors file: then a dict of its tensors)
    onto ``map_location`` (``"cpu"`` by default, or ``"metal"``).

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for one that is not a
    valid safetensors file (truncated, corrupted, or holding dtypes lucid cannot hold).
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
    except ValueError:
        raise ValueError("lucid.load: the checkpoint's structure metadata is not valid JSON") from None
    return _decode(structure, tensors)
