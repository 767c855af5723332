"""Random programs against the Python API, and the interpreter that runs one in a child process.

A program is a list of steps; each step is a plain tuple (so it pickles and prints), whose
tensor operands are indices into the values made so far (taken modulo their number, so every
step of every program means something and shrinking keeps programs valid). The interpreter
runs each step, lets it raise only the documented exceptions, and compares what it returns with
numpy computed from the operands' own values.

Run a program by hand:  python tests/reliability/_api_programs.py '<the program printed by a failure>'
"""

import ast
import math
import sys
import warnings

import ml_dtypes
import numpy as np

import lucid
import lucid.nn.functional as F
from lucid import _C

# What a bad call may raise: the documented exception types (NotImplementedError is a RuntimeError).
DOCUMENTED = (ValueError, TypeError, IndexError, RuntimeError)

DTYPES = {
    "float32": lucid.float32,
    "float16": lucid.float16,
    "bfloat16": lucid.bfloat16,
    "int32": lucid.int32,
    "int64": lucid.int64,
    "bool": lucid.bool_,
}
NP_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}
# Relative tolerance and absolute floor (about the smallest normal) per result dtype.
TOLERANCE = {"float32": (3e-5, 1e-30), "float16": (2e-3, 1e-4), "bfloat16": (1.6e-2, 1e-30)}


class Mismatch(AssertionError):
    """lucid returned something other than numpy's answer."""


def _name(dtype) -> str:
    return next(k for k, v in DTYPES.items() if v == dtype)


def _np(t) -> np.ndarray:
    """The tensor's values, floats widened to float64 (exactly)."""
    a = t.numpy()
    return a.astype(np.float64) if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16 else a


def check_close(step, got, ref, scale=None):
    """got (a tensor) against ref (a numpy array or number computed in float64 from the same
    inputs). `scale`, when given, is a per-element bound on the magnitude of what was summed
    (for sums and products), so cancellation does not fail a correct result."""
    ref = np.asarray(ref)
    name = _name(got.dtype)
    if tuple(got.shape) != ref.shape:
        raise Mismatch(f"{step}: shape {tuple(got.shape)}, numpy {ref.shape}")
    g = _np(got)
    if name in ("bool", "int32", "int64"):
        if not np.array_equal(g, ref.astype(g.dtype)):
            raise Mismatch(f"{step}: {g!r} != numpy {ref!r}")
        return
    ref = ref.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(ref)):
        raise Mismatch(f"{step}: NaN at other places: {g!r} vs numpy {ref!r}")
    both = ~np.isnan(ref)
    rtol, atol = TOLERANCE[name]
    bound = np.abs(ref) if scale is None else np.maximum(np.abs(ref), np.asarray(scale, dtype=np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        bad = both & ~((g == ref) | (np.abs(g - ref) <= atol + rtol * bound))
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise Mismatch(f"{step}: {g[i]!r} at {i}, numpy {ref[i]!r} ({name})")


# ---- the interpreter ---------------------------------------------------------------------------


class Interpreter:
    def __init__(self):
        self.values = []  # tensors made so far
        self.open = []  # (device, enabled, dtype name, scope) of the live scopes, innermost last
        self.checked = 0  # results compared with numpy
        self.refused = 0  # calls that raised a documented exception

    def operand(self, i):
        if not self.values:
            self.values.append(lucid.arange(6, dtype=lucid.float32).reshape(2, 3))
        return self.values[i % len(self.values)]

    def keep(self, t):
        """Adds what lucid returned to the values; from here on the step's own checks run,
        and an exception from numpy's side is a disagreement, not a refusal."""
        self.answered = True
        if isinstance(t, lucid.Tensor):
            self.values.append(t)
        return t

    def run(self, program):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            for n, step in enumerate(program):
                self.answered = False
                try:
                    getattr(self, "op_" + step[0])(f"step {n} {step!r}", *step[1:])
                except Mismatch:
                    raise
                except DOCUMENTED as e:
                    if self.answered:
                        raise Mismatch(f"step {n} {step!r}: lucid answered, numpy refused: {e!r}") from e
                    self.refused += 1
                self.check_autocast_state(f"after step {n} {step!r}")
            while self.open:
                self.open.pop()[3].__exit__(None, None, None)
            self.check_autocast_state("after the program")
            if _C.autocast_live_guards() != 0:
                raise Mismatch("autocast guards still live after every scope was left")

    # -- autocast: the state after each step must be what the open scopes say

    def expected_autocast(self, device):
        for dev, enabled, dtype, _ in reversed(self.open):
            if dev == device:
                return (enabled, dtype if enabled else None)
        return (False, None)

    def check_autocast_state(self, when):
        for device in ("cpu", "metal"):
            enabled, dtype = self.expected_autocast(device)
            got = (lucid.amp.is_autocast_enabled(device), lucid.amp.get_autocast_dtype(device))
            want = (enabled, DTYPES[dtype] if dtype else None)
            if got != want:
                raise Mismatch(f"{when}: autocast on {device} is {got}, the open scopes say {want}")

    def op_enter(self, step, device, enabled, dtype):
        scope = lucid.amp.autocast(device, dtype=DTYPES.get(dtype, dtype), enabled=enabled)
        scope.__enter__()
        self.open.append((device, enabled, dtype or "float16", scope))  # float16 when not given

    def op_exit(self, step, k):
        # Scopes may be left in any order; each device then follows its innermost live scope.
        if self.open:
            self.open.pop(k % len(self.open))[3].__exit__(None, None, None)

    # -- creation

    def op_tensor(self, step, shape, values, dtype, device):
        ref = np.array(values, dtype=np.float64).reshape(shape)
        # Without a dtype, Python floats (the default dtype), as a program writes them: a
        # numpy float64 array would keep float64.
        t = self.keep(lucid.tensor(ref if dtype else ref.tolist(), dtype=DTYPES.get(dtype, dtype), device=device))
        name = _name(t.dtype)
        if name in ("int32", "int64") and not (np.isfinite(ref) & (np.abs(ref) < 2**31)).all():
            return  # out-of-range float -> int conversion has no one right answer
        check_close(
            step,
            t,
            ref != 0
            if name == "bool"
            else ref.astype(NP_DTYPES[name]).astype(np.float64 if name not in ("int32", "int64") else NP_DTYPES[name]),
        )
        self.checked += 1

    def check_empty(self, step, t, shape):
        """Empty shapes may have dimensions numpy cannot allocate for; compare the shape only."""
        if tuple(t.shape) != tuple(shape) or t.numel() != 0:
            raise Mismatch(f"{step}: shape {tuple(t.shape)} with {t.numel()} elements, asked for {shape}")
        self.checked += 1

    def op_full(self, step, shape, value, dtype, device):
        t = self.keep(lucid.full(shape, value, dtype=DTYPES.get(dtype, dtype), device=device))
        if 0 in shape:
            return self.check_empty(step, t, shape)
        ref = np.full(tuple(shape), value, dtype=np.float64 if isinstance(value, float) else None)
        check_close(step, t, ref.astype(NP_DTYPES[_name(t.dtype)]))
        self.checked += 1

    def op_zeros(self, step, shape, ones, dtype, device):
        make = lucid.ones if ones else lucid.zeros
        t = self.keep(make(*shape, dtype=DTYPES.get(dtype, dtype), device=device))
        if 0 in shape:
            return self.check_empty(step, t, shape)
        check_close(step, t, np.full(tuple(shape), 1.0 if ones else 0.0))
        self.checked += 1

    def op_arange(self, step, start, end, stride, dtype, device):
        t = self.keep(lucid.arange(start, end, stride, dtype=DTYPES.get(dtype, dtype), device=device))
        ref = np.arange(start, end, stride, dtype=np.float64)
        check_close(step, t, ref.astype(NP_DTYPES[_name(t.dtype)]).astype(np.float64))
        self.checked += 1

    def op_randn(self, step, shape, normal, dtype, device):
        make = lucid.randn if normal else lucid.rand
        t = self.keep(make(*shape, dtype=DTYPES.get(dtype, dtype), device=device))
        if 0 in shape:
            return self.check_empty(step, t, shape)
        v = _np(t)
        if v.shape != tuple(shape) or not np.isfinite(v).all() or (not normal and ((v < 0) | (v > 1)).any()):
            raise Mismatch(f"{step}: samples out of range or shape: {v!r}")
        self.checked += 1

    # -- elementwise

    UNARY = {
        "neg": (lambda t: -t, np.negative),
        "abs": (lambda t: t.abs(), np.abs),
        "exp": (lambda t: t.exp(), np.exp),
        "log": (lambda t: t.log(), np.log),
        "sqrt": (lambda t: t.sqrt(), np.sqrt),
        "rsqrt": (lambda t: t.rsqrt(), lambda x: 1 / np.sqrt(x)),
        "tanh": (lambda t: t.tanh(), np.tanh),
        "sigmoid": (lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
        "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0)),
        "silu": (F.silu, lambda x: x / (1 + np.exp(-x))),
        "softplus": (F.softplus, lambda x: np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))),
        "gelu": (F.gelu, lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) if x.size else x),
    }

    def op_unary(self, step, name, i):
        x = self.operand(i)
        fn, ref = self.UNARY[name]
        t = self.keep(fn(x))
        if x.dtype == lucid.bool_ and name != "neg":
            return
        r = ref(_np(x).astype(np.float64))
        if t.dtype.is_floating_point:
            r = r.astype(NP_DTYPES[_name(t.dtype)]).astype(np.float64)  # overflow to inf where the dtype does
        check_close(step, t, r)
        self.checked += 1

    BINARY = {
        "+": np.add,
        "-": np.subtract,
        "*": np.multiply,
        "/": np.true_divide,
        "**": np.power,
        "maximum": np.maximum,
        "minimum": np.minimum,
        "==": np.equal,
        "<": np.less,
        ">=": np.greater_equal,
    }

    @staticmethod
    def _apply(op, a, b):
        if op in ("maximum", "minimum"):
            return getattr(lucid, op)(a, b)
        return {
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "/": lambda: a / b,
            "**": lambda: a**b,
            "==": lambda: a == b,
            "<": lambda: a < b,
            ">=": lambda: a >= b,
        }[op]()

    def op_binary(self, step, op, i, j):
        a, b = self.operand(i), self.operand(j)
        t = self.keep(self._apply(op, a, b))
        self._check_binary(step, op, t, _np(a), _np(b))

    def op_scalar(self, step, op, i, value, first):
        a = self.operand(i)
        t = self.keep(self._apply(op, value, a) if first else self._apply(op, a, value))
        # A Python float meets a tensor as a float32 (as in PyTorch), so 1e300 is inf there.
        x = np.float64(np.float32(value)) if isinstance(value, float) else value
        self._check_binary(step, op, t, x if first else _np(a), _np(a) if first else x)

    def _check_binary(self, step, op, t, x, y):
        name = _name(t.dtype)
        if name in ("int32", "int64"):
            if op == "**" or op == "/":
                return  # integer powers wrap and C division truncates differently from numpy
            ref = self.BINARY[op](np.asarray(x).astype(NP_DTYPES[name]), np.asarray(y).astype(NP_DTYPES[name]))
        else:
            ref = self.BINARY[op](np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        if name not in ("bool", "int32", "int64"):
            ref = ref.astype(NP_DTYPES[name]).astype(np.float64)  # overflow to inf where the dtype does
        check_close(step, t, ref)
        self.checked += 1

    # -- reductions

    def op_reduce(self, step, name, i, dim, keepdim):
        x = self.operand(i)
        v = _np(x)
        dims = dict(dim=dim, keepdim=keepdim)
        if isinstance(dim, list) and not dim:
            dim = None  # an empty dim list reduces every dimension, as in PyTorch
        if v.ndim == 0 and dim is not None and all(d in (0, -1) for d in (dim if isinstance(dim, list) else [dim])):
            dim = None  # a 0-d tensor takes dim 0 or -1 as its one element, as in PyTorch; numpy has no such axis
        if name in ("sum", "mean"):
            t = self.keep(getattr(x, name)(**dims))
            ref = getattr(np, name)(v.astype(np.float64) if v.dtype.kind == "f" else v, axis=dim, keepdims=keepdim)
            scale = np.sum(np.abs(v.astype(np.float64)), axis=dim, keepdims=keepdim)
            if name == "mean":
                scale = scale / max(1, v.size // max(1, np.asarray(ref).size))
            if t.dtype in (lucid.int32, lucid.int64):
                check_close(step, t, np.asarray(ref).astype(np.int64) if name == "sum" else ref)
            else:
                check_close(step, t, ref, scale=scale * 1e-1 if _name(t.dtype) == "float32" else scale)
        elif name in ("amax", "amin"):
            t = self.keep(getattr(x, name)(**dims))
            if v.size == 0:
                raise Mismatch(f"{step}: reduced an empty tensor without an error")
            check_close(step, t, getattr(np, "nanmax" if False else name[1:])(v, axis=dim, keepdims=keepdim))
        elif name == "argmax":
            t = self.keep(x.argmax(**dims))
            ref = np.argmax(np.where(np.isnan(v), np.inf, v) if v.dtype.kind == "f" else v, axis=dim, keepdims=keepdim)
            nan_first = np.argmax(np.isnan(v), axis=dim, keepdims=keepdim) if v.dtype.kind == "f" else None
            if nan_first is not None:
                has_nan = np.isnan(v).any(axis=dim, keepdims=keepdim)
                ref = np.where(has_nan, nan_first, ref)
            check_close(step, t, ref)
        elif name in ("var", "std"):
            t = self.keep(getattr(x, name)(**dims))
            n = v.size if dim is None else v.shape[dim]
            ref = (
                getattr(np, name)(v, axis=dim, keepdims=keepdim, ddof=1)
                if n > 1
                else np.full(np.sum(v, axis=dim, keepdims=keepdim).shape, np.nan)
            )
            check_close(step, t, ref, scale=np.max(np.abs(v)) ** (2 if name == "var" else 1) * 1e-2 if v.size else None)
        elif name == "logsumexp":
            t = self.keep(x.logsumexp(dim=dim if dim is not None else tuple(range(x.ndim)), keepdim=keepdim))
            m = np.max(v, axis=dim, keepdims=True) if v.size else 0.0
            m = np.where(np.isfinite(m), m, 0.0)
            ref = np.log(np.sum(np.exp(v - m), axis=dim, keepdims=True)) + m
            ref = ref if keepdim else (np.squeeze(ref, axis=dim) if dim is not None else ref.reshape(()))
            check_close(step, t, ref, scale=np.abs(ref) + 1)
        self.checked += 1

    def op_softmax(self, step, i, dim, log):
        x = self.operand(i)
        t = self.keep((F.log_softmax if log else F.softmax)(x, dim=dim))
        v = _np(x)
        if dim is None:  # PyTorch's implicit dimension (with a deprecation warning)
            dim = 0 if v.ndim in (0, 1, 3) else 1
        m = np.max(v, axis=dim, keepdims=True) if v.size else 0.0
        e = np.exp(v - m)
        s = e / np.sum(e, axis=dim, keepdims=True)
        check_close(step, t, np.log(s) if log else s, scale=1 if not log else np.abs(np.log(s)) + 1)
        self.checked += 1

    # -- shapes and indexing

    def op_reshape(self, step, i, shape):
        x = self.operand(i)
        t = self.keep(x.reshape(*shape))
        check_close(step, t, _np(x).reshape(shape))
        self.checked += 1

    def op_transpose(self, step, i, d0, d1):
        x = self.operand(i)
        t = self.keep(x.transpose(d0, d1))
        v = _np(x)
        check_close(step, t, v if v.ndim == 0 else np.swapaxes(v, d0, d1))  # 0-d: dims 0 and -1 name itself
        self.checked += 1

    def op_permute(self, step, i, dims):
        x = self.operand(i)
        t = self.keep(x.permute(*dims))
        check_close(step, t, np.transpose(_np(x), dims))
        self.checked += 1

    def op_squeeze(self, step, i, dim, unsqueeze):
        x = self.operand(i)
        if unsqueeze:
            t = self.keep(x.unsqueeze(dim))
            ref = np.expand_dims(_np(x), dim if dim >= 0 else dim + x.ndim + 1)
        else:
            t = self.keep(x.squeeze(dim))
            v = _np(x)
            # a 0-d tensor has one dimension to name (0 or -1), as in PyTorch
            ref = (
                np.squeeze(v)
                if dim is None or (isinstance(dim, list) and not dim)
                else v
                if v.ndim == 0 or v.shape[dim] != 1
                else np.squeeze(v, dim)
            )
        check_close(step, t, ref)
        self.checked += 1

    def op_expand(self, step, i, shape):
        x = self.operand(i)
        t = self.keep(x.expand(*shape))
        target = [s if s != -1 else x.shape[k - (len(shape) - x.ndim)] for k, s in enumerate(shape)]
        check_close(step, t, np.broadcast_to(_np(x), target))
        self.checked += 1

    def op_narrow(self, step, i, dim, start, length):
        x = self.operand(i)
        t = self.keep(x.narrow(dim, start, length))
        s = start + x.shape[dim] if start < 0 else start
        check_close(step, t, np.take(_np(x), range(s, s + length), axis=dim))
        self.checked += 1

    def op_cat(self, step, i, j, dim, stack):
        a, b = self.operand(i), self.operand(j)
        t = self.keep((lucid.stack if stack else lucid.cat)([a, b], dim=dim))
        ref = (np.stack if stack else np.concatenate)([_np(a), _np(b)], axis=dim)
        check_close(step, t, ref.astype(NP_DTYPES[_name(t.dtype)]) if t.dtype != lucid.bool_ else ref)
        self.checked += 1

    def op_index(self, step, i, key):
        x = self.operand(i)
        lucid_key, np_key = [], []
        for kind, v in key:
            if kind == "int":
                lucid_key.append(v), np_key.append(v)
            elif kind == "slice":
                lucid_key.append(slice(*v)), np_key.append(slice(*v))
            elif kind == "none":
                lucid_key.append(None), np_key.append(None)
            elif kind == "ellipsis":
                lucid_key.append(Ellipsis), np_key.append(Ellipsis)
            elif kind == "ints":
                lucid_key.append(lucid.tensor(v, dtype=lucid.int64)), np_key.append(np.array(v, dtype=np.int64))
            else:  # a bool mask as long as the dimension it lands on is meant to be
                lucid_key.append(lucid.tensor(v, dtype=lucid.bool_)), np_key.append(np.array(v, dtype=bool))
        t = self.keep(x[tuple(lucid_key)])
        try:
            ref = _np(x)[tuple(np_key)]
        except (IndexError, ValueError, TypeError):
            raise Mismatch(f"{step}: lucid indexed where numpy refuses")
        check_close(step, t, ref)
        self.checked += 1

    def op_item(self, step, i, how):
        x = self.operand(i)
        if how == "item":
            got = x.item()
            ref = _np(x).reshape(-1)[0] if x.numel() == 1 else None
            if ref is None:
                raise Mismatch(f"{step}: item() of {x.numel()} elements did not fail")
            if not (got == ref or (got != got and ref != ref)):
                raise Mismatch(f"{step}: item() {got!r}, numpy {ref!r}")
        elif how == "tolist":
            got, ref = x.tolist(), _np(x).tolist()
            if not _same_lists(got, ref):
                raise Mismatch(f"{step}: tolist() gave {got!r}, numpy {ref!r}")
        else:
            got = bool(x)
            if x.numel() != 1 or got != bool(_np(x).reshape(-1)[0]):
                raise Mismatch(f"{step}: bool() gave {got} for {x.numel()} elements")
        self.checked += 1

    def op_to(self, step, i, dtype, device):
        x = self.operand(i)
        t = self.keep(x.to(DTYPES.get(dtype, dtype), device=device) if dtype else x.to(device))
        v = _np(x)
        name = _name(t.dtype)
        if name in ("int32", "int64") and v.dtype.kind == "f" and not (np.isfinite(v) & (np.abs(v) < 2**31)).all():
            return  # out-of-range float -> int conversion has no one right answer
        ref = (
            v != 0
            if name == "bool"
            else v.astype(NP_DTYPES[name]).astype(np.float64 if name not in ("int32", "int64") else NP_DTYPES[name])
        )
        check_close(step, t, ref)
        self.checked += 1

    # -- products and layers, with operands made to fit (or made not to)

    @staticmethod
    def _rand(shape, dtype, device, seed):
        rng = np.random.default_rng(seed)
        return lucid.tensor(rng.standard_normal(shape).astype(np.float32), dtype=DTYPES[dtype], device=device)

    def op_matmul(self, step, a_shape, b_shape, dtype, device, other_device, seed):
        a = self._rand(a_shape, dtype, device, seed)
        b = self._rand(b_shape, dtype, other_device, seed + 1)
        t = self.keep(a @ b)
        x, y = _np(a), _np(b)
        check_close(step, t, np.matmul(x, y), scale=np.matmul(np.abs(x), np.abs(y)))
        self.checked += 1

    def op_conv(self, step, x_shape, w_shape, stride, padding, dilation, groups, dtype, seed):
        x = self._rand(x_shape, dtype, "cpu", seed)
        w = self._rand(w_shape, dtype, "cpu", seed + 1)
        t = self.keep(F.conv2d(x, w, None, stride, padding, dilation, groups))
        check_close(step, t, *conv2d_reference(_np(x), _np(w), stride, padding, dilation, groups))
        self.checked += 1

    def op_attention(self, step, q_shape, kv_len, causal, masked, dtype, seed):
        B, H, L, E = q_shape
        q = self._rand(q_shape, dtype, "cpu", seed)
        k = self._rand((B, H, kv_len, E), dtype, "cpu", seed + 1)
        v = self._rand((B, H, kv_len, E), dtype, "cpu", seed + 2)
        mask_np = np.random.default_rng(seed + 3).random((L, kv_len)) < 0.7 if masked else None
        mask = lucid.tensor(mask_np, dtype=lucid.bool_) if masked else None
        t = self.keep(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal))
        check_close(step, t, *attention_reference(_np(q), _np(k), _np(v), mask_np, causal))
        self.checked += 1

    def op_loss(self, step, n, classes, target_offset, seed):
        logits = self._rand((n, classes), "float32", "cpu", seed)
        target = np.random.default_rng(seed).integers(0, max(classes, 1), n) + target_offset
        t = self.keep(F.cross_entropy(logits, lucid.tensor(target, dtype=lucid.int64)))
        v = _np(logits)
        if n == 0:
            check_close(step, t, np.nan)  # the mean over no samples
            self.checked += 1
            return
        if classes == 0 or not ((target >= 0) & (target < classes)).all():
            raise Mismatch(f"{step}: cross_entropy accepted targets {target} for {classes} classes")
        m = v.max(axis=1, keepdims=True)
        lse = np.log(np.exp(v - m).sum(axis=1)) + m[:, 0]
        check_close(step, t, np.mean(lse - v[np.arange(n), target]))
        self.checked += 1

    # -- autograd

    GRAD = {
        "exp": np.exp,
        "tanh": np.tanh,
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "silu": lambda x: x / (1 + np.exp(-x)),
        "softplus": lambda x: np.log1p(np.exp(x)),
        "square": np.square,
    }

    def op_grad(self, step, i, name, reduce):
        x = self.operand(i)
        v = np.clip(np.nan_to_num(_np(x).astype(np.float64)), -3, 3)
        if v.size > 32 or not np.issubdtype(v.dtype, np.floating):
            v = v.astype(np.float64).reshape(-1)[:32]
        leaf = lucid.tensor(v.astype(np.float32), requires_grad=True)
        fn = (lambda t: t * t) if name == "square" else self.UNARY[name][0]
        out = fn(leaf)
        (out.mean() if reduce == "mean" and v.size else out.sum()).backward()
        f = self.GRAD[name]
        v32 = v.astype(np.float32).astype(np.float64)
        h = 1e-6
        numeric = (f(v32 + h) - f(v32 - h)) / (2 * h) / (v.size if reduce == "mean" and v.size else 1)
        if leaf.grad is None:
            raise Mismatch(f"{step}: no gradient reached the leaf")
        check_close(step, leaf.grad, numeric, scale=np.abs(numeric) * 10 + 1e-6 / max(v.size, 1))
        self.checked += 1

    def op_backward_misuse(self, step, i, how):
        leaf = lucid.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
        out = leaf * 2
        if how == "twice":
            s = out.sum()
            s.backward()
            s.backward()  # the graph was freed: a documented error
        elif how == "nonscalar":
            out.backward()
        else:
            out.backward(lucid.ones(4))
        raise Mismatch(f"{step}: backward misuse '{how}' did not fail")


def _same_lists(a, b):
    """Nested lists equal in structure and values, NaN equal to NaN."""
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same_lists(x, y) for x, y in zip(a, b))
        )
    return a == b or (a != a and b != b)


def conv2d_reference(x, w, stride, padding, dilation, groups):
    stride, padding, dilation = (_pair(stride), _pair(padding), _pair(dilation))
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    OH = (H + 2 * padding[0] - dilation[0] * (KH - 1) - 1) // stride[0] + 1
    OW = (W + 2 * padding[1] - dilation[1] * (KW - 1) - 1) // stride[1] + 1
    out = np.zeros((N, O, OH, OW))
    scale = np.zeros_like(out)
    og = O // groups
    for o in range(O):
        g = o // og
        for kh in range(KH):
            for kw in range(KW):
                patch = xp[
                    :,
                    g * Cg : (g + 1) * Cg,
                    kh * dilation[0] : kh * dilation[0] + stride[0] * (OH - 1) + 1 : stride[0],
                    kw * dilation[1] : kw * dilation[1] + stride[1] * (OW - 1) + 1 : stride[1],
                ]
                wk = w[o, :, kh, kw][None, :, None, None]
                out[:, o] += np.sum(patch * wk, axis=1)
                scale[:, o] += np.sum(np.abs(patch * wk), axis=1)
    return out, scale


def attention_reference(q, k, v, mask, causal):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    allowed = np.ones(s.shape[-2:], dtype=bool)
    if causal:
        allowed &= np.tril(np.ones(s.shape[-2:], dtype=bool))
    if mask is not None:
        allowed &= mask
    s = np.where(allowed, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    p = e / np.sum(e, axis=-1, keepdims=True)
    return p @ v, np.abs(p) @ np.abs(v)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


# ---- the child's side ---------------------------------------------------------------------------


def run_in_child(program, conn):
    """Runs `program` and sends ("ok", checked, refused) or ("mismatch", message) or
    ("undocumented", traceback) through `conn`. A crash sends nothing: the parent sees the
    exit code."""
    import traceback

    try:
        it = Interpreter()
        it.run(program)
        conn.send(("ok", it.checked, it.refused))
    except Mismatch as e:
        conn.send(("mismatch", str(e)))
    except BaseException:  # noqa: BLE001 - anything undocumented is the finding
        conn.send(("undocumented", traceback.format_exc()))
    conn.close()


if __name__ == "__main__":
    prog = ast.literal_eval(sys.argv[1])
    it = Interpreter()
    it.run(prog)
    print(f"ran {len(prog)} steps: {it.checked} compared with numpy, {it.refused} refused as documented")
