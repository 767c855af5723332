"""lucid against PyTorch's own op database: every public op PyTorch tests itself with
(``torch.testing._internal.common_methods_invocations.op_db``), run on lucid with PyTorch's
sample inputs, forward and backward.

    python tools/opinfo_parity.py --record   # with PyTorch (and expecttest) installed: runs
                                             # op_db's and module_db's CPU samples on PyTorch
                                             # and writes inputs and outcomes to REFERENCE
                                             # (make opinfo-reference)
    python tools/opinfo_parity.py            # lucid on the recorded samples: the table by
                                             # namespace, and what raises or differs
    python tools/opinfo_parity.py --write    # also writes the tables into the guide and README

The recording needs PyTorch; the check does not, so CI runs it offline (``make test``,
tests/test_opinfo_parity.py).

Each op runs in float32 where PyTorch's CPU kernel takes float32, else in the first integer
or bool dtype it takes. A sample is the op's input, positional and keyword arguments; its
outcome is every tensor the op returns (dtype, shape, values) and, where the op has a
gradient, the gradient of ``sum(w_i * out_i)`` (``w_i`` seeded weights, recorded too) for every
input that requires one. An op **agrees** when every sample agrees forward and backward; it
**raises** when lucid raises on some sample, and **differs** when some result is wrong. Ops
whose values are random (detected by running PyTorch twice with different seeds) or
uninitialised (``empty``…) are compared by dtype and shape only.

The layers of ``torch.testing._internal.common_modules.module_db`` are checked the same way:
lucid's layer of that name is built with the sample's constructor arguments, given PyTorch's
parameters and buffers by name (``load_state_dict(strict=True)``), and compared on its results,
its buffers after the forward (running statistics), and the gradients of its inputs and
parameters.

An op is out of scope only for one of REASONS; every other op counts.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "differential" / "opinfo_reference.json.gz"
GUIDE = ROOT / "docs" / "guide" / "pytorch.rst"
README = ROOT / "README.md"
FORMAT = 1

REASONS = {
    "complex": "no complex dtype",
    "sparse": "sparse layouts other than COO",
    "quantized": "quantized tensors",
    "cuda": "CUDA-only",
    "fft": "fft",
}

# Ops that return memory as it was (their values are anything): compared by dtype and shape.
UNINITIALISED = {
    "empty",
    "empty_like",
    "new_empty",
    "new_empty_strided",
    "empty_strided",
    "empty_permuted",
    "resize_",
    "resize_as_",
}

# What the reference keeps of each op's samples (_chosen), and the most bytes of JSON an op's
# samples take before the largest go.
MAX_ELEMENTS, MAX_SAMPLES, MAX_BYTES = 2048, 16, 120_000
RTOL, ATOL = 1e-4, 1e-5  # float32 results computed two ways agree to about this

# ---- encoding: values of PyTorch's samples as JSON ----------------------------------------------


class Unrecordable(Exception):
    """A sample argument with no lucid counterpart (a callable, a generator …)."""


def _array(a: np.ndarray) -> dict:
    a = np.array(a, order="C", copy=True)  # (ascontiguousarray would make a 0-d array 1-d)
    return {
        "dtype": a.dtype.name if a.dtype.name != "bool" else "bool",
        "shape": list(a.shape),
        "data": base64.b64encode(a.tobytes()).decode("ascii"),
    }


def _from_array(d: dict) -> np.ndarray:
    if d["dtype"] == "bfloat16":
        import ml_dtypes

        dt = np.dtype(ml_dtypes.bfloat16)
    else:
        dt = np.dtype(d["dtype"])
    return np.frombuffer(base64.b64decode(d["data"]), dtype=dt).reshape(d["shape"]).copy()


def _torch_dtype_name(torch, dt) -> str:
    return str(dt).removeprefix("torch.")


def _tensor_array(torch, t) -> np.ndarray:
    t = t.detach().cpu().resolve_conj().resolve_neg()
    if t.is_complex():
        raise Unrecordable("complex tensor")
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.layout != torch.strided:
        raise Unrecordable(f"{t.layout} tensor")
    return t.numpy(force=True)


class Encoder:
    """Encodes one sample's arguments; tensors go into a table so that a tensor passed twice is
    one tensor on lucid too."""

    def __init__(self, torch):
        self.torch = torch
        self.tensors = []  # the torch tensors, in table order
        self.table = []

    def __call__(self, v):
        torch = self.torch
        if isinstance(v, torch.Tensor):
            for i, t in enumerate(self.tensors):
                if t is v:
                    return {"tensor": i}
            self.tensors.append(v)
            self.table.append({**_array(_tensor_array(torch, v)), "requires_grad": bool(v.requires_grad)})
            return {"tensor": len(self.tensors) - 1}
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            f = float(v)
            return f if math.isfinite(f) else {"float": repr(f)}
        if isinstance(v, complex):
            raise Unrecordable("complex number")
        if isinstance(v, torch.Size):
            return {"tuple": [int(x) for x in v]}
        if isinstance(v, tuple):
            return {"tuple": [self(x) for x in v]}
        if isinstance(v, list):
            return [self(x) for x in v]
        if isinstance(v, dict):
            return {"dict": [[k, self(x)] for k, x in v.items()]}
        if isinstance(v, torch.dtype):
            if v.is_complex:
                raise Unrecordable("complex dtype")
            return {"dtype": _torch_dtype_name(torch, v)}
        if isinstance(v, torch.device):
            return {"device": v.type}
        if isinstance(v, slice):
            return {"slice": [self(v.start), self(v.stop), self(v.step)]}
        if v is Ellipsis:
            return {"ellipsis": True}
        if isinstance(v, torch.memory_format):
            return {"memory_format": str(v).removeprefix("torch.")}
        if isinstance(v, torch.layout):
            return {"layout": str(v).removeprefix("torch.")}
        return self.public_object(v)

    def public_object(self, v):
        """An object of a public torch.nn class by its name and fields: a dataclass of options,
        a module without parameters built with its defaults (``PairwiseDistance()``), or a module
        built while recording (_init_recorded) by its constructor's arguments (TransformerEncoder's
        layer: the encoder's own state, recorded with it, holds the layer's parameters); or a public
        function of torch.nn.functional by its name (an activation passed to a layer)."""
        import dataclasses

        cls = type(v)
        if getattr(self.torch.nn, cls.__name__, None) is cls:
            if dataclasses.is_dataclass(v):
                return {
                    "object": f"nn.{cls.__name__}",
                    "fields": self({f.name: getattr(v, f.name) for f in dataclasses.fields(v)}),
                }
            if isinstance(v, self.torch.nn.Module) and not list(v.parameters()) and repr(v) == f"{cls.__name__}()":
                return {"object": f"nn.{cls.__name__}", "fields": {"dict": []}}
            init = v.__dict__.get(_INIT_ATTR) if isinstance(v, self.torch.nn.Module) else None
            if init is not None:
                return {"module": f"nn.{cls.__name__}", "init": self((tuple(init[0]), dict(init[1])))}
        name = getattr(v, "__name__", None)
        if callable(v) and name and getattr(self.torch.nn.functional, name, None) is v:
            return {"function": f"nn.functional.{name}"}
        raise Unrecordable(cls.__name__)


_INIT_ATTR = "_opinfo_init"


class _init_recorded:
    """While active, every torch.nn.Module made keeps its constructor's arguments (for
    Encoder.public_object), so that a module passed to another's constructor can be recorded."""

    def __init__(self, torch):
        self.classes = [
            c
            for c in vars(torch.nn).values()
            if isinstance(c, type) and issubclass(c, torch.nn.Module) and "__init__" in vars(c)
        ]
        self.saved = {}

    def __enter__(self):
        for cls in self.classes:
            self.saved[cls] = init = vars(cls)["__init__"]
            cls.__init__ = self._recording(init)
        return self

    @staticmethod
    def _recording(init):
        def recording_init(self, *args, **kwargs):
            self.__dict__.setdefault(_INIT_ATTR, (args, kwargs))  # the most derived class's, called first
            init(self, *args, **kwargs)

        return recording_init

    def __exit__(self, *exc):
        for cls, init in self.saved.items():
            cls.__init__ = init
        return False


# ---- recording (needs PyTorch) ------------------------------------------------------------------


def _resolve(root, path):
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _out_of_scope(torch, op) -> str | None:
    name = op.name
    if name.startswith("fft."):
        return "fft"
    if name.startswith("jiterator") or "cuda" in type(op.op).__module__:
        return "cuda"
    if name.startswith("sparse."):
        return "sparse"  # sampled_addmm and mm(reduce=) take CSR matrices
    dtypes = op.supported_dtypes("cpu")
    if not dtypes:
        return "cuda"
    if all(d.is_complex for d in dtypes):
        return "complex"
    return None


def _sample_dtype(torch, op):
    dtypes = op.supported_dtypes("cpu")
    for d in (torch.float32, torch.int64, torch.int32, torch.bool, torch.int16, torch.int8, torch.uint8, torch.float64):
        if d in dtypes:
            return d
    return None


def _call_name(torch, op) -> dict:
    """How lucid calls the op: the function at op.name's path when PyTorch's op is that
    function, a Tensor method for the dunder methods, else the adapter named after the op
    (ADAPTERS), which does what op_db's own lambda does."""
    f = _resolve(torch, op.name)
    if f is not None and f is op.op:
        return {"function": op.name}
    if op.name.startswith("__"):
        return {"method": op.name}
    key = op.name if not op.variant_test_name else f"{op.name}/{op.variant_test_name}"
    return {"adapter": key}


def _outputs(torch, out):
    """The tensors (and numbers) an op returned, flattened in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _outputs(torch, o)]
    return [out]


def _encode_output(torch, o):
    if isinstance(o, torch.Tensor):
        if o.is_complex():
            raise Unrecordable("complex result")
        if o.layout == torch.sparse_coo:
            return {**_encode_output(torch, o.to_dense()), "layout": "sparse_coo"}
        return {**_array(_tensor_array(torch, o)), "torch_dtype": _torch_dtype_name(torch, o.dtype)}
    if isinstance(o, (bool, int, float)) or o is None:
        return {"value": o if not isinstance(o, float) or math.isfinite(o) else repr(o)}
    if isinstance(o, torch.Size):
        return {"value": list(o)}
    raise Unrecordable(f"result of type {type(o).__name__}")


def _run_torch(torch, op, sample, seed):
    torch.manual_seed(seed)
    return op(sample.input, *sample.args, **sample.kwargs)


def _seeds_itself(op) -> bool:
    code = getattr(op.op, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


def _same(torch, a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        a, b = (t.to_dense() if t.layout != torch.strided else t for t in (a, b))
        return (
            a.shape == b.shape and bool(torch.equal(a.detach(), b.detach()))
            if not a.is_floating_point()
            else (a.shape == b.shape and bool(torch.allclose(a.detach(), b.detach(), equal_nan=True)))
        )
    return a == b


def _elements(torch, v) -> int:
    if isinstance(v, torch.Tensor):
        return v.numel()
    if isinstance(v, (tuple, list)):
        return sum(_elements(torch, x) for x in v)
    if isinstance(v, dict):
        return sum(_elements(torch, x) for x in v.values())
    return 0


def _chosen(torch, samples):
    """The samples kept in the reference (with their positions in op_db's list): those whose
    tensors hold at most MAX_ELEMENTS entries in all (the smallest one when none does), and of
    those at most MAX_SAMPLES, spread evenly over the list, so that the file stays small enough
    to commit while every kind of sample an op has keeps its place."""
    sizes = [_elements(torch, (s.input, s.args, s.kwargs)) for s in samples]
    small = [k for k, n in enumerate(sizes) if n <= MAX_ELEMENTS] or (
        [min(range(len(sizes)), key=sizes.__getitem__)] if sizes else []
    )
    if len(small) > MAX_SAMPLES:
        small = [small[round(i * (len(small) - 1) / (MAX_SAMPLES - 1))] for i in range(MAX_SAMPLES)]
    return [(k, samples[k]) for k in small]


def _record_op(torch, op):
    dtype = _sample_dtype(torch, op)
    if dtype is None:  # float8 only
        return {"error": "its only CPU dtypes are float8 ones", "grad": False, "samples": []}
    grad = bool(op.supports_autograd and dtype.is_floating_point)
    samples, unrecordable, complex_results = [], 0, 0
    try:
        sample_list = list(op.sample_inputs("cpu", dtype, requires_grad=grad))
    except Exception as e:  # noqa: BLE001 - an op_db generator that fails is reported, not hidden
        return {"error": f"sample_inputs: {type(e).__name__}: {e}", "samples": []}
    random = False
    for k, sample in _chosen(torch, sample_list):
        enc = Encoder(torch)
        try:
            args = enc((sample.input,) + tuple(sample.args))
            kwargs = enc(dict(sample.kwargs))
        except Unrecordable as e:
            complex_results += "complex" in str(e)
            unrecordable += "complex" not in str(e)
            continue
        try:
            out = _run_torch(torch, op, sample, 0)
        except Exception:  # noqa: BLE001 - PyTorch refusing its own sample: not a lucid question
            continue
        outs = _outputs(torch, out)
        try:
            encoded_outs = [_encode_output(torch, o) for o in outs]
        except Unrecordable as e:
            complex_results += "complex" in str(e)
            unrecordable += "complex" not in str(e)
            continue
        if not random:  # op_db seeds some random ops itself (wrapper_set_seed): those are known by name
            random = _seeds_itself(op)
        if not random:
            again = _outputs(torch, _run_torch(torch, op, sample, 1))
            random = len(again) != len(outs) or not all(_same(torch, a, b) for a, b in zip(outs, again))
        entry = {"args": args, "kwargs": kwargs, "outputs": encoded_outs}
        leaves = [t for t in enc.tensors if t.requires_grad]
        g = _weighted_grads(torch, outs, leaves, 1000 + k) if grad else None
        if g is not None:
            entry.update(g[0])
            entry["grads"] = {str(_index(enc.tensors, leaf)): gr for leaf, gr in zip(leaves, g[1])}
        entry["table"] = enc.table
        samples.append(entry)
    _fit(samples)
    rec = {"dtype": _torch_dtype_name(torch, dtype), "grad": grad, "samples": samples}
    if random or op.name in UNINITIALISED:
        rec["values"] = "random" if random else "uninitialised"
    if unrecordable:
        rec["unrecordable"] = unrecordable
    if not samples and complex_results:
        rec["scope"] = "complex"
    return rec


def record(path: Path = REFERENCE, only=None) -> None:
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db

    torch.set_default_dtype(torch.float32)
    ops = {}
    for op in op_db:
        key = op.name if not op.variant_test_name else f"{op.name}/{op.variant_test_name}"
        if only and not any(re.fullmatch(p, key) for p in only):
            continue
        reason = _out_of_scope(torch, op)
        if reason:
            ops[key] = {"scope": reason}
            continue
        rec = _record_op(torch, op)
        rec["call"] = _call_name(torch, op)
        ops[key] = rec
        print(f"{key}: {len(rec['samples'])} samples", file=sys.stderr)
    modules = {}
    for info in module_db:
        if only and not any(re.fullmatch(p, info.name) for p in only):
            continue
        modules[info.name] = rec = _record_module(torch, info)
        print(f"{info.name}: {len(rec['samples'])} samples", file=sys.stderr)
    with gzip.open(path, "wt") as f:
        json.dump(
            {"torch": torch.__version__, "format": FORMAT, "ops": ops, "modules": modules}, f, separators=(",", ":")
        )
    print(f"wrote {path} ({path.stat().st_size} bytes) from PyTorch {torch.__version__}")


def _index(tensors, t) -> int:
    return next(i for i, x in enumerate(tensors) if x is t)


def _fit(samples) -> None:
    """The largest samples go first until an op fits its budget (the smallest always stays)."""
    while len(samples) > 1 and sum(len(json.dumps(e)) for e in samples) > MAX_BYTES:
        samples.remove(max(samples, key=lambda e: len(json.dumps(e))))


def _weighted_grads(torch, outs, leaves, seed):
    """The recorded weighting of `outs` and the gradients it gives `leaves` (PyTorch), or None
    when nothing differentiable came out."""
    diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()]
    if not leaves or not diff:
        return None
    rng = np.random.default_rng(seed)
    w_np = [rng.standard_normal(o.shape).astype(np.float32) for o in diff]
    loss = sum((o * torch.from_numpy(w).to(o.dtype)).sum() for o, w in zip(diff, w_np))
    try:
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    except Exception:  # noqa: BLE001 - no gradient for this sample in PyTorch either
        return None
    return (
        {
            "weights": [_array(w) for w in w_np],
            "weighted": [i for i, o in enumerate(outs) if any(o is d for d in diff)],
        },
        [None if g is None else _array(_tensor_array(torch, g)) for g in grads],
    )


def _record_module(torch, info):
    """A module of module_db: per sample, its constructor's arguments, its state (parameters and
    buffers, loaded into lucid's module by name), the forward's arguments, results and state
    after, and the gradients of the inputs and of every parameter."""
    import copy

    samples, unrecordable = [], 0
    modes = (True, False) if info.train_and_eval_differ else (True,)
    random = False
    for training in modes:
        with _init_recorded(torch):
            inputs = info.module_inputs_func(
                info, device="cpu", dtype=torch.float32, requires_grad=True, training=training
            )
        for k, (_, mi) in enumerate(_chosen(torch, [_Sample(mi) for mi in inputs])):
            mi = mi.module_input
            # module_db makes some constructor tensors in float64 whatever the dtype asked for
            # (FractionalMaxPool's _random_samples), which PyTorch then refuses with float32 input:
            # they take the sample's dtype.
            mi.constructor_input.args = tuple(_as_float32(torch, a) for a in mi.constructor_input.args)
            mi.constructor_input.kwargs = {n: _as_float32(torch, a) for n, a in mi.constructor_input.kwargs.items()}
            enc = Encoder(torch)
            try:
                init = enc((tuple(mi.constructor_input.args), dict(mi.constructor_input.kwargs)))
                fwd = enc((tuple(mi.forward_input.args), dict(mi.forward_input.kwargs)))
            except Unrecordable:
                unrecordable += 1
                continue
            torch.manual_seed(k)
            m = info.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs)
            if info.is_lazy:
                with torch.no_grad():
                    m(*mi.forward_input.args, **mi.forward_input.kwargs)
            m.train(training)
            state = {n: _array(_tensor_array(torch, t)) for n, t in m.state_dict().items()}
            twin = copy.deepcopy(m)
            try:
                torch.manual_seed(0)
                out = m(*mi.forward_input.args, **mi.forward_input.kwargs)
                outs = _outputs(torch, out)
                encoded = [_encode_output(torch, o) for o in outs]
            except Unrecordable:
                unrecordable += 1
                continue
            except Exception:  # noqa: BLE001 - PyTorch refusing its own sample
                continue
            if not random:
                torch.manual_seed(1)
                again = _outputs(torch, twin(*mi.forward_input.args, **mi.forward_input.kwargs))
                random = len(again) != len(outs) or not all(_same(torch, a, b) for a, b in zip(outs, again))
            entry = {
                "init": init,
                "training": training,
                "state": state,
                "forward": fwd,
                "outputs": encoded,
                "state_after": {n: _array(_tensor_array(torch, t)) for n, t in m.state_dict().items()},
            }
            names = [n for n, p in m.named_parameters() if p.requires_grad]
            leaves = [t for t in enc.tensors if t.requires_grad] + [dict(m.named_parameters())[n] for n in names]
            g = _weighted_grads(torch, outs, leaves, 2000 + k)
            if g is not None:
                weighting, grads = g
                n_in = len(leaves) - len(names)
                entry.update(weighting)
                entry["grads"] = {str(_index(enc.tensors, leaf)): gr for leaf, gr in zip(leaves[:n_in], grads[:n_in])}
                entry["param_grads"] = dict(zip(names, grads[n_in:]))
            entry["table"] = enc.table
            samples.append(entry)
    _fit(samples)
    rec = {"samples": samples}
    if random:
        rec["values"] = "random"
    if unrecordable:
        rec["unrecordable"] = unrecordable
    return rec


def _as_float32(torch, v):
    if isinstance(v, torch.Tensor) and v.is_floating_point() and v.dtype != torch.float32:
        return v.detach().to(torch.float32).requires_grad_(v.requires_grad)
    return v


class _Sample:
    """A module input seen as an op sample, for _chosen's size rule."""

    def __init__(self, mi):
        self.module_input = mi
        self.input = mi.forward_input.args
        self.args = (mi.constructor_input.args,)
        self.kwargs = dict(mi.forward_input.kwargs)


def read_reference_file(path: Path = REFERENCE) -> dict:
    with gzip.open(path, "rt") as f:
        ref = json.load(f)
    if ref.get("format") != FORMAT:
        raise SystemExit(f"{path} is of format {ref.get('format')}, this tool reads {FORMAT}: record it again")
    return ref


# ---- the check (lucid only) ---------------------------------------------------------------------


def _adapters(lucid):
    """lucid's form of the ops that op_db calls through a lambda of its own (same arguments,
    same meaning)."""
    F = lucid.nn.functional
    method = lambda name: lambda x, *a, **k: getattr(x, name)(*a, **k)  # noqa: E731
    table = {
        name: method(name)
        for name in (
            "bfloat16",
            "bool",
            "byte",
            "char",
            "double",
            "float",
            "half",
            "int",
            "long",
            "short",
            "new_zeros",
            "new_ones",
            "new_empty",
            "new_empty_strided",
            "new_full",
            "unfold",
            "to_sparse",
            "multinomial",
            "bernoulli",
            "contiguous",
            "expand",
            "expand_as",
            "item",
            "to",
            "sum_to_size",
        )
    }
    table.update(
        {
            "polygamma/polygamma_n_0": lambda x, n, **k: lucid.polygamma(n, x, **k),
            "polygamma/polygamma_n_1": lambda x, n, **k: lucid.polygamma(n, x, **k),
            "polygamma/polygamma_n_2": lambda x, n, **k: lucid.polygamma(n, x, **k),
            "polygamma/polygamma_n_3": lambda x, n, **k: lucid.polygamma(n, x, **k),
            "polygamma/polygamma_n_4": lambda x, n, **k: lucid.polygamma(n, x, **k),
            "special.polygamma/special_polygamma_n_0": lambda x, n, **k: lucid.special.polygamma(n, x, **k),
            "einsum": lambda tensors, equation: lucid.einsum(equation, tensors),
            "svd_lowrank": lambda a, b, **k: lucid.svd_lowrank(a @ b.mT, **k),
            "pca_lowrank": lambda a, b, **k: lucid.pca_lowrank(a @ b.mT, **k),
            "reshape_as": lambda x, other: x.reshape_as(other),
            "view": lambda x, shape: x.view(shape),
            "view_as": lambda x, other: x.view_as(other),
            "repeat": lambda x, dims: x.repeat(dims),
            "resize_": lambda x, shape: x.clone().resize_(shape),
            "resize_as_": lambda x, other: lucid.resize_as_(x.clone(), other),
            "zero_": lambda x: lucid.zero_(x.clone()),
            "T": lambda x: x.T,
            "H": lambda x: x.H,
            "mT": lambda x: x.mT,
            "mH": lambda x: x.mH,
            "where": lambda self, condition, other, **k: lucid.where(condition, self, other, **k),
            "slice": lambda x, dim=0, start=None, end=None, step=1: x[
                (slice(None),) * (dim % max(x.ndim, 1)) + (slice(start, end, step),)
            ],
            "nn.functional.embedding": lambda weight, idx, **k: F.embedding(idx, weight, **k),
            "nn.functional.embedding_bag": lambda weight, idx, **k: F.embedding_bag(idx, weight, **k),
            "linalg.lstsq/grad_oriented": lambda a, b, driver: lucid.linalg.lstsq(a, b, driver=driver)[:2],
            "linalg.pinv/singular": lambda a, b: lucid.linalg.pinv(a @ b.mT),
            "randn": lambda *a, **k: lucid.randn(*a, **k),
            "randint": lambda *a, **k: lucid.randint(*a, **k),
            "randn_like": lambda inp, *a, **k: lucid.randn_like(inp, *a, **k),
            "rand_like": lambda inp, *a, **k: lucid.rand_like(inp, *a, **k),
            "randint_like": lambda inp, *a, **k: lucid.randint_like(inp, *a, **k),
            "empty_strided": lambda inp, *a, **k: lucid.empty_strided(inp, *a, **k),
            "normal": lambda inp, *a, **k: lucid.normal(inp, *a, **k),
            "normal/number_mean": lambda std, mean, *a, **k: lucid.normal(mean, std, *a, **k),
            "normal/in_place": lambda x, *a, **k: x.normal_(*a, **k),
            "uniform": lambda x, *a, **k: x.uniform_(*a, **k),
            "cauchy": lambda x, *a, **k: x.cauchy_(*a, **k),
            "exponential": lambda x, *a, **k: x.exponential_(*a, **k),
            "geometric": lambda x, *a, **k: x.geometric_(*a, **k),
            "log_normal": lambda x, *a, **k: x.log_normal_(*a, **k),
            "nn.functional.dropout": lambda x, *a, **k: F.dropout(x, *a, **k),
            "nn.functional.dropout2d": lambda x, *a, **k: F.dropout2d(x, *a, **k),
            "nn.functional.dropout3d": lambda x, *a, **k: F.dropout3d(x, *a, **k),
            "nn.functional.alpha_dropout": lambda x, *a, **k: F.alpha_dropout(x, *a, **k),
            "nn.functional.rrelu": lambda x, *a, **k: F.rrelu(x, *a, **k),
            "nn.functional.feature_alpha_dropout/with_train": lambda x, *a, **k: F.feature_alpha_dropout(x, *a, **k),
            "nn.functional.feature_alpha_dropout/without_train": lambda x, *a, **k: F.feature_alpha_dropout(x, *a, **k),
            "nn.functional.multi_head_attention_forward": lambda x, *a, **k: F.multi_head_attention_forward(x, *a, **k),
        }
    )
    aten = lucid.ops.aten
    table.update(
        {  # op_db calls these as torch.ops.aten.X (or through a lambda of its own)
            "_batch_norm_with_update": aten._batch_norm_with_update,
            "_softmax_backward_data": aten._softmax_backward_data,
            "native_dropout_backward": aten.native_dropout_backward.default,
            "max_pool2d_with_indices_backward": lambda x, kernel_size=(), stride=(), padding=(0,), dilation=(1,), **k: (
                _max_pool2d_backward(lucid, x, kernel_size, stride, padding, dilation, k.get("ceil_mode", False))
            ),
        }
    )
    table.update(
        {  # op_db seeds these itself (wrapper_set_seed); their values are compared as random
            "nn.functional.fractional_max_pool2d": lambda x, *a, **k: F.fractional_max_pool2d(x, *a, **k),
            "nn.functional.fractional_max_pool3d": lambda x, *a, **k: F.fractional_max_pool3d(x, *a, **k),
            "nn.functional.scaled_dot_product_attention": lambda *a, **k: F.scaled_dot_product_attention(*a, **k),
            "_upsample_bilinear2d_aa": lambda x, output_size, align_corners, scale_factors=None: F.interpolate(
                x,
                size=None if scale_factors else output_size,
                scale_factor=scale_factors,
                mode="bilinear",
                align_corners=align_corners,
                antialias=True,
            ),
        }
    )
    return table


def _max_pool2d_backward(lucid, x, kernel_size, stride, padding, dilation, ceil_mode):
    """What op_db's max_pool2d_backward does: the pooling's input gradient for a gradient of ones."""
    out, indices = lucid.nn.functional.max_pool2d(
        x, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True
    )
    return lucid.ops.aten.max_pool2d_with_indices_backward.default(
        lucid.ones_like(out),
        x,
        kernel_size,
        kernel_size if stride is None else stride,
        padding,
        dilation,
        ceil_mode,
        indices,
    )


class Missing(Exception):
    pass


def _lucid_callable(lucid, call, adapters):
    if "function" in call:
        # op_db's names of internal ops are PyTorch's full paths (torch.ops.aten.X.default): lucid's
        # are the same paths under lucid (lucid.ops.aten.X.default).
        f = _resolve(lucid, call["function"].removeprefix("torch."))
        if f is None:
            raise Missing(call["function"])
        return f
    if "method" in call:
        name = call["method"]
        if not hasattr(lucid.Tensor, name):
            raise Missing(f"Tensor.{name}")
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    f = adapters.get(call["adapter"])
    if f is None:
        raise Missing(call["adapter"])
    return f


def _decode(lucid, v, tensors):
    if isinstance(v, list):
        return [_decode(lucid, x, tensors) for x in v]
    if not isinstance(v, dict):
        return v
    if "tensor" in v:
        return tensors[v["tensor"]]
    if "tuple" in v:
        return tuple(_decode(lucid, x, tensors) for x in v["tuple"])
    if "dict" in v:
        return {k: _decode(lucid, x, tensors) for k, x in v["dict"]}
    if "float" in v:
        return float(v["float"])
    if "dtype" in v:
        name = v["dtype"]
        d = getattr(lucid, name, None)
        if not isinstance(d, lucid.dtype):
            raise Missing(f"lucid.{name}")
        return d
    if "device" in v:
        return v["device"]
    if "slice" in v:
        return slice(*(_decode(lucid, x, tensors) for x in v["slice"]))
    if "ellipsis" in v:
        return Ellipsis
    if "object" in v:
        cls = _resolve(lucid, v["object"])
        if cls is None:
            raise Missing(f"lucid.{v['object']}")
        return cls(**_decode(lucid, v["fields"], tensors))
    if "module" in v:
        cls = _resolve(lucid, v["module"])
        if cls is None:
            raise Missing(f"lucid.{v['module']}")
        args, kwargs = _decode(lucid, v["init"], tensors)
        return cls(*args, **kwargs)
    if "function" in v:
        f = _resolve(lucid, v["function"])
        if f is None:
            raise Missing(f"lucid.{v['function']}")
        return f
    if "memory_format" in v or "layout" in v:
        key = "memory_format" if "memory_format" in v else "layout"
        f = getattr(lucid, v[key], None)
        if f is None:
            raise Missing(f"lucid.{v[key]}")
        return f
    raise ValueError(f"unknown encoding {v!r}")


def _lucid_outputs(lucid, out):
    if isinstance(out, lucid.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _lucid_outputs(lucid, o)]
    return [out]


def _compare(lucid, got, want, values: str | None) -> str | None:
    """None when lucid's result `got` matches the recorded `want`, else what differs."""
    if "value" in want:
        w = want["value"]
        if isinstance(got, lucid.Tensor):
            if got.ndim != 0:
                return f"a tensor of shape {tuple(got.shape)} where PyTorch returns {w!r}"
            got = got.item()
        if isinstance(w, str):
            w = float(w)
        if isinstance(w, list):
            return None if list(got) == w else f"{got!r} != {w!r}"
        if isinstance(w, float) and isinstance(got, (int, float)):
            return (
                None
                if math.isclose(got, w, rel_tol=RTOL, abs_tol=ATOL) or (math.isnan(w) and math.isnan(got))
                else f"{got!r} != {w!r}"
            )
        return None if got == w and type(got) is type(w) else f"{got!r} != {w!r}"
    if want.get("layout") == "sparse_coo":
        if not getattr(got, "is_sparse", False):
            return f"a {type(got).__name__} where PyTorch returns a sparse COO tensor"
        got = got.to_dense()
    if not isinstance(got, lucid.Tensor):
        return f"a {type(got).__name__} where PyTorch returns a tensor"
    dtype = str(got.dtype).removeprefix("lucid.")
    if dtype != want["torch_dtype"]:
        return f"dtype {dtype} where PyTorch gives {want['torch_dtype']}"
    if list(got.shape) != want["shape"]:
        return f"shape {tuple(got.shape)} where PyTorch gives {tuple(want['shape'])}"
    if values:
        return None
    return _close(got.detach().numpy(), _from_array(want), "values")


def _close(g: np.ndarray, w: np.ndarray, what: str) -> str | None:
    if g.shape != w.shape:
        return f"{what}: shape {g.shape} where PyTorch gives {w.shape}"
    if w.dtype.kind in "biu":
        return None if np.array_equal(g, w) else f"{what} differ at {int((g != w).sum())} of {w.size} entries"
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    tol = (RTOL, ATOL) if w.dtype.itemsize >= 4 else (1e-2, 1e-2)  # a 16-bit result: to its precision
    # An entry that is a sum of large terms carries their rounding, whatever its own size: a
    # convolution's output near 0 among outputs near 900 differs by 4e-5 between two CPUs'
    # kernels. So the absolute tolerance is also a millionth of the result's largest entry.
    finite = np.abs(w64[np.isfinite(w64)])
    atol = max(tol[1], 1e-6 * float(finite.max())) if w.dtype.itemsize >= 4 and finite.size else tol[1]
    ok = np.isclose(g64, w64, rtol=tol[0], atol=atol, equal_nan=True)
    if ok.all():
        return None
    worst = np.nanmax(np.abs(g64 - w64)[~ok]) if (~ok).any() else float("nan")
    return f"{what} differ at {int((~ok).sum())} of {w.size} entries (largest difference {worst:.3g})"


def _lucid_tensors(lucid, table):
    tensors = []
    for t in table:
        x = lucid.tensor(_from_array(t), dtype=getattr(lucid, t["dtype"]))
        if t["requires_grad"]:
            x.requires_grad_(True)
        tensors.append(x)
    return tensors


def _check_outputs(lucid, outs, s, values):
    if len(outs) != len(s["outputs"]):
        return f"{len(outs)} results where PyTorch returns {len(s['outputs'])}"
    for i, (g, w) in enumerate(zip(outs, s["outputs"])):
        why = _compare(lucid, g, w, values)
        if why:
            return f"result {i}: {why}"
    return None


def _backward(lucid, outs, s):
    """Back-propagates the recorded weighting of the results; what differs, or None."""
    loss = None
    for i, w in zip(s["weighted"], s["weights"]):
        o = outs[i]
        if getattr(o, "is_sparse", False):  # sum(o * w) of a sparse o is that of its dense form
            o = o.to_dense()
        if not (isinstance(o, lucid.Tensor) and o.requires_grad):
            return f"result {i} has no gradient where PyTorch's has"
        term = (o * lucid.tensor(_from_array(w)).to(o.dtype)).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    return None


def _check_grads(got_by_key, wanted, values, what):
    for k, want in wanted.items():
        got = got_by_key(k)
        if want is None:
            if got is not None and bool((got != 0).any()):
                return f"a gradient for {what} {k} where PyTorch has none"
            continue
        w = _from_array(want)
        g = np.zeros_like(w) if got is None else got.detach().numpy()
        why = None if values else _close(g, w, f"gradient of {what} {k}")
        if why:
            return why
    return None


def _check_sample(lucid, fn, s, values, grad):
    tensors = _lucid_tensors(lucid, s["table"])
    args = _decode(lucid, s["args"], tensors)
    kwargs = _decode(lucid, s["kwargs"], tensors)
    outs = _lucid_outputs(lucid, fn(*args, **kwargs))
    why = _check_outputs(lucid, outs, s, values)
    if why is None and grad and "grads" in s:
        why = _backward(lucid, outs, s) or _check_grads(lambda k: tensors[int(k)].grad, s["grads"], values, "argument")
    return ("differs", why) if why else ("agrees", None)


def check(path: Path = REFERENCE, only=None) -> dict:
    """Runs lucid on every recorded sample; {op: {"status": …, "why": …, "namespace": …}}."""
    import lucid

    import warnings

    ref = read_reference_file(path)
    adapters = _adapters(lucid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lucid's advice to a user (dropout2d on 3-D …) is not a finding here
        return {**_check_ops(lucid, ref, adapters, only), **_check_modules(lucid, ref, only)}


def _check_ops(lucid, ref, adapters, only) -> dict:
    results = {}
    for key, rec in ref["ops"].items():
        if only and not any(re.fullmatch(p, key) for p in only):
            continue
        ns = namespace(key)
        if "scope" in rec:
            results[key] = {"status": "out of scope", "why": REASONS[rec["scope"]], "namespace": ns}
            continue
        try:
            fn = _lucid_callable(lucid, rec["call"], adapters)
        except Missing as e:
            results[key] = {"status": "missing", "why": f"no {e}", "namespace": ns}
            continue
        results[key] = {
            **_run_samples(rec, lambda s: _check_sample(lucid, fn, s, rec.get("values"), rec["grad"])),
            "namespace": ns,
        }
    return results


def _run_samples(rec, run) -> dict:
    """{"status", "why"} of an op or module over its recorded samples: the first that does not
    agree decides."""
    if not rec["samples"]:
        return {"status": "raises", "why": rec.get("error", "no sample could be recorded")}
    for i, s in enumerate(rec["samples"]):
        try:
            st, w = run(s)
        except Missing as e:
            st, w = "raises", f"no {e}"
        except Exception as e:  # noqa: BLE001 - what lucid raised is the finding
            st, w = "raises", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            # An adapter reaching for a name lucid lacks: the op is missing, not raising.
            if isinstance(e, AttributeError) and re.search(ABSENT, str(e)):
                return {"status": "missing", "why": str(e)}
        if st != "agrees":
            return {"status": st, "why": f"sample {i}: {w}"}
    return {"status": "agrees", "why": None}


def _check_module_sample(lucid, cls, s, values):
    tensors = _lucid_tensors(lucid, s["table"])
    init_args, init_kwargs = _decode(lucid, s["init"], tensors)
    args, kwargs = _decode(lucid, s["forward"], tensors)
    m = cls(*init_args, **init_kwargs)
    if type(m).__name__.startswith("Lazy"):
        with lucid.no_grad():
            m(*args, **kwargs)
    m.train(s["training"])
    m.load_state_dict({n: lucid.tensor(_from_array(a)) for n, a in s["state"].items()}, strict=True)
    outs = _lucid_outputs(lucid, m(*args, **kwargs))
    why = _check_outputs(lucid, outs, s, values)
    if why is None and not values:
        after = m.state_dict()
        for n, a in s["state_after"].items():
            why = why or _close(after[n].detach().numpy(), _from_array(a), f"state {n!r} after the forward")
    if why is None and "grads" in s:
        params = dict(m.named_parameters())
        why = (
            _backward(lucid, outs, s)
            or _check_grads(lambda k: tensors[int(k)].grad, s["grads"], values, "argument")
            or _check_grads(lambda n: params[n].grad, s["param_grads"], values, "parameter")
        )
    return ("differs", why) if why else ("agrees", None)


def _check_modules(lucid, ref, only) -> dict:
    results = {}
    for key, rec in ref.get("modules", {}).items():
        if only and not any(re.fullmatch(p, key) for p in only):
            continue
        cls = _resolve(lucid, key)
        if cls is None:
            results[key] = {"status": "missing", "why": f"no lucid.{key}", "namespace": MODULES}
            continue
        results[key] = {
            **_run_samples(rec, lambda s: _check_module_sample(lucid, cls, s, rec.get("values"))),
            "namespace": MODULES,
        }
    return results


def namespace(key: str) -> str:
    name = key.split("/")[0]
    for ns in ("nn.functional", "linalg", "special", "masked", "signal.windows", "fft", "sparse"):
        if name.startswith(ns + "."):
            return ns
    if name.startswith("torch."):
        return "torch (internal)"
    return "torch, Tensor"


MODULES = "nn layers (module_db)"
ABSENT = r"module 'lucid[.\w]*' has no attribute|'Tensor' object has no attribute"  # what names lucid lacks
STATUSES = ("agrees", "differs", "raises", "missing")


def totals(results: dict) -> dict:
    """Per namespace (and "total"): counts of each status and of in-scope ops."""
    table = {}
    for r in results.values():
        for ns in (r["namespace"],) if r["namespace"] == MODULES else (r["namespace"], "total"):
            row = table.setdefault(ns, {s: 0 for s in STATUSES + ("out of scope",)})
            row[r["status"]] += 1
    for row in table.values():
        row["in scope"] = sum(row[s] for s in STATUSES)
        row["present"] = row["in scope"] - row["missing"]
    return table


def summary_table(results: dict) -> str:
    t = totals(results)
    order = sorted((ns for ns in t if ns not in ("total", MODULES)), key=lambda ns: -t[ns]["in scope"]) + ["total"]
    order += [MODULES] if MODULES in t else []
    lines = [
        "| namespace | in scope | present | agree | raise | differ | agree % | out of scope |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for ns in order:
        r = t[ns]
        pct = f"{100 * r['agrees'] / r['in scope']:.1f} %" if r["in scope"] else "–"
        name = {"total": "**op_db, in all**", MODULES: f"**{MODULES}**"}.get(ns, ns)
        lines.append(
            f"| {name} | {r['in scope']} | {r['present']} | {r['agrees']} | {r['raises']} | "
            f"{r['differs']} | {pct} | {r['out of scope']} |"
        )
    return "\n".join(lines)


def detail_rst(results: dict) -> str:
    """The guide's per-op list: every op that does not agree, and every op out of scope, with why."""
    out = []
    for title, statuses in (
        ("Missing", ("missing",)),
        ("Raising on PyTorch's arguments", ("raises",)),
        ("Giving different results", ("differs",)),
        ("Out of scope", ("out of scope",)),
    ):
        keys = sorted(k for k, r in results.items() if r["status"] in statuses)
        out.append(f"{title} ({len(keys)})\n{'~' * (len(title) + len(str(len(keys))) + 3)}\n")
        if title == "Missing":
            out.append(", ".join(f"``{k}``" for k in keys) + "\n" if keys else "None.\n")
        else:
            out.extend(f"- ``{k}``: {_rst_text(results[k]['why'])}" for k in keys)
            out.append("")
    return "\n".join(out)


def _rst_text(s: str) -> str:
    """`s` as an inline literal, so that nothing in an error message reads as markup."""
    s = " ".join((s or "").replace("`", "'").split())
    s = s if len(s) < 160 else s[:157] + "..."
    return f"``{s}``" if s else ""


def _rst_grid(md: str) -> str:
    rows = [
        [c.strip().strip("*") for c in line.strip("|").split("|")]
        for line in md.splitlines()
        if not line.startswith("| ---")
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    sep = "  ".join("=" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join([sep, body[0], sep, *body[1:], sep])


def guide_section(results: dict) -> str:
    return (
        ".. opinfo-parity:begin\n\n"
        + _rst_grid(summary_table(results))
        + "\n\n"
        + detail_rst(results)
        + "\n.. opinfo-parity:end"
    )


def write_docs(results: dict) -> None:
    text = GUIDE.read_text()
    new = re.sub(
        r"\.\. opinfo-parity:begin.*?\.\. opinfo-parity:end", lambda _: guide_section(results), text, flags=re.S
    )
    if new == text and ".. opinfo-parity:begin" not in text:
        raise SystemExit(f"{GUIDE} has no '.. opinfo-parity:begin' marker")
    GUIDE.write_text(new)
    readme = README.read_text()
    block = "<!-- opinfo-parity:begin -->\n" + summary_table(results) + "\n<!-- opinfo-parity:end -->"
    new_readme = re.sub(
        r"<!-- opinfo-parity:begin -->.*?<!-- opinfo-parity:end -->", lambda _: block, readme, flags=re.S
    )
    if "<!-- opinfo-parity:begin -->" not in readme:
        raise SystemExit(f"{README} has no '<!-- opinfo-parity:begin -->' marker")
    README.write_text(new_readme)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--record", action="store_true", help="run op_db on PyTorch and write the reference")
    p.add_argument("--write", action="store_true", help="write the tables into the guide and the README")
    p.add_argument("--only", nargs="*", help="regular expressions of op names")
    p.add_argument("-v", "--verbose", action="store_true", help="list every op that does not agree")
    a = p.parse_args(argv)
    if a.record:
        record(only=a.only)
        return 0
    results = check(only=a.only)
    print(summary_table(results))
    if a.verbose:
        for k, r in sorted(results.items()):
            if r["status"] not in ("agrees", "out of scope"):
                print(f"{r['status']:8} {k}: {r['why']}")
    if a.write:
        write_docs(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
