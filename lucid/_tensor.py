"""lucid.Tensor: the tensor core with the methods of every op family (lucid/_ops), autograd
and conversions."""

from __future__ import annotations

import weakref

from . import _C, _core
from ._core import TensorBase, result
from ._ops import writes
from ._ops.composed import ComposedMethods
from ._ops.creation import empty_strided, full, leaf, ones, tensor, zeros
from ._ops.elementwise import ElementwiseMethods
from ._ops.indexing import IndexingMethods
from ._ops.inplace import InPlaceMethods
from ._ops.linalg import LinalgMethods
from ._ops.reduce import ReduceMethods
from ._ops.shape import ShapeMethods, clone as _clone, laid_out
from ._ops.sparse import SparseMethods
from .utils.hooks import RemovableHandle
from ._types import (
    as_device,
    bfloat16,
    bool_,
    check_dtype,
    device as _Device,
    dtype as _DType,
    dtype_by_name,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    memory_format as _MemoryFormat,
    no_cuda,
    uint8,
)


class Tensor(
    TensorBase,
    ElementwiseMethods,
    ReduceMethods,
    ShapeMethods,
    IndexingMethods,
    InPlaceMethods,
    ComposedMethods,
    SparseMethods,
    LinalgMethods,
):
    """A multi-dimensional array on the CPU or the Metal stream.

    Make tensors with :func:`lucid.tensor`, :func:`lucid.zeros`, :func:`lucid.randn` and the
    other factories. Every op runs in the engine; a tensor here holds one engine handle.
    """

    __slots__ = ()

    def __new__(cls, *args, device="cpu", requires_grad=False):
        """``lucid.Tensor(data)`` is a float32 tensor of `data`, ``lucid.Tensor(2, 3)`` a float32
        tensor of that size (zeros) and ``lucid.Tensor()`` an empty one, as ``torch.Tensor``."""
        if cls is not Tensor:
            raise TypeError(f"{cls.__name__} cannot be constructed; make a lucid.Tensor")
        if not args:
            return zeros(0, device=device, requires_grad=requires_grad)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return zeros(*args, device=device, requires_grad=requires_grad)
        if len(args) == 1:
            return tensor(args[0], dtype=float32, device=device, requires_grad=requires_grad)
        raise TypeError(f"lucid.Tensor() takes data or a size of ints, got {args!r}")

    # ---- autograd ----------------------------------------------------------------------------

    @property
    def grad_fn(self):
        """The name of the op that produced this tensor in the backward graph, or None."""
        return _C.tensor_grad_fn(self._h)

    @property
    def grad(self):
        """The gradient accumulated into this leaf by ``backward``, or None."""
        h = _C.tensor_grad(self._h)
        return result(h) if h else None

    @grad.setter
    def grad(self, value):
        if value is not None and not isinstance(value, TensorBase):
            raise TypeError(f"grad must be a lucid.Tensor or None, got {type(value).__name__}")
        _C.tensor_set_grad(self._h, 0 if value is None else value._h)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulates d(self)/d(leaf) into every leaf's ``.grad``; `gradient` defaults to 1
        for a one-element tensor. The graph is freed afterwards unless `retain_graph`. With
        `inputs` (a tensor or a sequence of them), only those accumulate, an op result among
        them into its own ``.grad``. Hooks registered on the tensors run as their gradients
        are computed; an exception a hook raises is raised here."""
        if gradient is not None and not isinstance(gradient, TensorBase):
            raise TypeError(f"gradient must be a lucid.Tensor, got {type(gradient).__name__}")
        if create_graph:
            raise NotImplementedError(
                "backward(create_graph=True): lucid does not record the backward pass (no higher-order gradients)"
            )
        g = 0 if gradient is None else gradient._h
        if inputs is None:
            _C.backward(self._h, g, bool(retain_graph))
            return
        inputs = differentiated(inputs, "backward", "inputs")
        _C.autograd_backward([self._h], [g], [t._h for t in inputs], bool(retain_graph))

    def register_hook(self, hook):
        """Calls ``hook(grad)`` with this tensor's gradient each time a backward pass computes
        it (for a leaf, before it is accumulated into ``.grad``); a tensor it returns replaces
        the gradient (same shape, dtype and device). Hooks run in the order they were
        registered, each given the previous one's result. The tensor must require grad.

        Returns a handle whose ``remove()`` unregisters the hook.
        """
        return _register_hook(self, hook, _C.HOOK_GRAD, "register_hook")

    def register_post_accumulate_grad_hook(self, hook):
        """Calls ``hook(tensor)`` on this leaf once a backward pass has accumulated its gradient
        into ``.grad`` (so that, e.g., an optimizer step or an all-reduce of it can start
        while backward goes on). The hook returns None. Returns a handle whose ``remove()``
        unregisters it."""
        return _register_hook(self, hook, _C.HOOK_POST_ACCUMULATE, "register_post_accumulate_grad_hook")

    def retain_grad(self):
        """Makes this op result keep its gradient in ``.grad`` during backward passes, as a leaf
        does (a leaf is left as it is)."""
        _C.tensor_retain_grad(self._h)

    @property
    def retains_grad(self) -> bool:
        """Whether this op result keeps its gradient in ``.grad`` (see :meth:`retain_grad`)."""
        return _C.tensor_retains_grad(self._h) != 0

    def detach(self):
        """This tensor cut from the autograd graph. As in PyTorch it shares this tensor's
        values: an in-place write to either is seen by both."""
        return result(_C.detach(self._h))

    def detach_(self):
        self._replace(_C.detach(self._h))
        return self

    def clone(self, *, memory_format=None):
        """A copy of this tensor in storage of its own (gradients flow back), laid out as
        `memory_format` asks."""
        return _clone(self, memory_format=memory_format)

    @property
    def data(self):
        """This tensor's values without autograd: ``p.data.add_(...)`` updates ``p``. Unlike
        ``detach()``, as in PyTorch, writes through it are hidden from autograd's version
        checks: a tensor saved for backward and changed through ``.data`` is used as it is."""
        return result(_C.data(self._h))

    @data.setter
    def data(self, value):
        if not isinstance(value, TensorBase):
            raise TypeError(f"data must be a lucid.Tensor, got {type(value).__name__}")
        writes.set_data(self, value)

    # ---- conversion --------------------------------------------------------------------------

    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(other_tensor)``, each
        optionally followed by `non_blocking` and `copy` (as PyTorch's positional form takes them).

        Returns `self` when nothing changes; with `copy`, always a tensor in storage of its own.
        `non_blocking` is accepted and has nothing to do: a copy to "metal" is queued anyway.
        `memory_format` lays the result out as ``contiguous`` does (None: as it is).
        """
        flags = [a for a in args if isinstance(a, bool)]
        if len(flags) > 2 or any(not isinstance(a, bool) for a in args[len(args) - len(flags) :]):
            raise TypeError(f"to(): expected a device, a dtype or a tensor, then non_blocking and copy, got {args!r}")
        if len(flags) == 2:
            copy = flags[1]
        args = args[: len(args) - len(flags)]
        for a in args:
            if a is None:  # to(None): no device given, as in PyTorch
                continue
            if isinstance(a, TensorBase):
                dtype, device = a.dtype, a.device
            elif isinstance(a, _DType):
                dtype = a
            elif isinstance(a, (str, _Device)):
                device = a
            else:
                raise TypeError(f"to(): expected a device, a dtype or a tensor, got {a!r}")
        if memory_format is not None and not isinstance(memory_format, _MemoryFormat):
            raise TypeError(f"to(): memory_format must be a lucid.memory_format, got {memory_format!r}")
        d = -1 if dtype is None else check_dtype(dtype).code
        dev = -1 if device is None else as_device(device).code
        info = self._info()
        if d in (-1, info[0]) and dev in (-1, info[1]):
            return laid_out(self.clone() if copy else self, memory_format, "to")
        return laid_out(result(_C.tensor_to(self._h, d, dev)), memory_format, "to")

    # The conversions to one dtype (PyTorch's Tensor.float() … Tensor.short()): wrapping for
    # the integers, truncating floats toward zero first (300.7 -> 44 in uint8).

    def float(self, memory_format=None):
        return self.to(float32, memory_format=memory_format)

    def half(self, memory_format=None):
        return self.to(float16, memory_format=memory_format)

    def double(self, memory_format=None):
        return self.to(float64, memory_format=memory_format)

    def bfloat16(self, memory_format=None):
        return self.to(bfloat16, memory_format=memory_format)

    def int(self, memory_format=None):
        return self.to(int32, memory_format=memory_format)

    def long(self, memory_format=None):
        return self.to(int64, memory_format=memory_format)

    def short(self, memory_format=None):
        """This tensor as int16."""
        return self.to(int16, memory_format=memory_format)

    def char(self, memory_format=None):
        """This tensor as int8."""
        return self.to(int8, memory_format=memory_format)

    def byte(self, memory_format=None):
        """This tensor as uint8."""
        return self.to(uint8, memory_format=memory_format)

    def bool(self, memory_format=None):
        return self.to(bool_, memory_format=memory_format)

    def cpu(self):
        return self.to("cpu")

    def metal(self):
        return self.to("metal")

    def type_as(self, other):
        """This tensor converted to `other`'s dtype."""
        return self.to(other.dtype)

    def pin_memory(self):
        """This tensor: host memory needs no pinning for lucid's devices."""
        return self

    def nelement(self) -> int:
        return self.numel()

    @property
    def is_xpu(self) -> bool:
        return False

    def cuda(self, device=None, non_blocking=False):
        """Raises: lucid has no CUDA device (use ``.to("metal")`` on Apple Silicon)."""
        raise ValueError(no_cuda("Tensor.cuda()"))

    @property
    def is_cuda(self) -> bool:
        """False: lucid has no CUDA device."""
        return False

    @property
    def is_sparse(self) -> bool:
        """False: a lucid.Tensor is dense."""
        return False

    _TYPE_NAMES = {
        "float32": "FloatTensor",
        "float16": "HalfTensor",
        "bfloat16": "BFloat16Tensor",
        "int32": "IntTensor",
        "int64": "LongTensor",
        "bool": "BoolTensor",
        "float64": "DoubleTensor",
        "uint8": "ByteTensor",
        "int8": "CharTensor",
        "int16": "ShortTensor",
    }

    def type(self, dtype=None):
        """Without an argument, the type name (``"lucid.FloatTensor"``); with a dtype (or such a
        name, ``torch.`` accepted), this tensor converted to it."""
        if dtype is None:
            return f"lucid.{Tensor._TYPE_NAMES[self.dtype.name]}"
        if isinstance(dtype, str):
            short = dtype.split(".")[-1]
            names = {v: k for k, v in Tensor._TYPE_NAMES.items()}
            if short not in names:
                raise ValueError(f"type(): unknown tensor type {dtype!r}; known: {sorted(names)}")
            dtype = dtype_by_name(names[short])
        return self.to(dtype)

    # ---- copies ------------------------------------------------------------------------------

    def __deepcopy__(self, memo):
        """A new leaf with these values, dtype, device and requires_grad (a Parameter stays
        one); as in PyTorch, only leaves can be deep-copied."""
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("only tensors created explicitly (leaves) support deepcopy; detach() or clone() first")
        detached = _C.handle(_C.detach(self._h))
        try:
            copy = _C.handle(_C.clone(detached))
        finally:
            _C.release(detached)
        try:
            copied = result(_C.tensor_set_requires_grad(copy, self.requires_grad), type(self))
        finally:
            _C.release(copy)
        memo[id(self)] = copied
        return copied

    def __copy__(self):
        return self.__deepcopy__({})

    def __reduce_ex__(self, protocol):
        """Pickles as its values (numpy), dtype, device and requires_grad."""
        return type(self)._rebuild, (self.detach().numpy(), self.dtype.name, self.device.type, self.requires_grad)

    @classmethod
    def _rebuild(cls, array, dtype_name, device, requires_grad):
        """Unpickles a tensor (see __reduce_ex__)."""
        return leaf(tensor(array, dtype=dtype_by_name(dtype_name), device=device), requires_grad)

    # ---- new tensors like this one (dtype and device), as PyTorch's new_* methods ---------------

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return zeros(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return ones(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return leaf(full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device), requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_empty_strided(
        self, size, stride, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False
    ):
        """``empty_strided(size, stride)`` of this tensor's dtype and device unless given."""
        return empty_strided(
            size, stride, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


_core.register(Tensor)


def differentiated(tensors, fn, what):
    """`tensors` (a tensor or a sequence of them) as a list of tensors."""
    if isinstance(tensors, TensorBase):
        return [tensors]
    try:
        items = list(tensors)
    except TypeError:
        raise TypeError(
            f"{fn}(): {what} must be a lucid.Tensor or a sequence of them, got {type(tensors).__name__}"
        ) from None
    for i, t in enumerate(items):
        if not isinstance(t, TensorBase):
            raise TypeError(f"{fn}(): {what}[{i}] must be a lucid.Tensor, got {type(t).__name__}")
    return items


# ---- gradient hooks --------------------------------------------------------------------------
# The engine holds each hook as a context id and calls back with it (lucid/_C/_calls.py); the
# Python function lives here until the engine releases the context or the handle removes it.


class _HookTable(dict):
    """context -> (hook, kind, weak reference to its tensor, engine key). Popping an entry (a
    handle's remove()) unregisters it in the engine."""

    def pop(self, context, default=None):
        entry = dict.pop(self, context, None)
        if entry is None:
            return default
        _C.hook_remove(entry[3])
        return entry


_hooks = _HookTable()
# Contexts the engine has released, dropped at the next registration: never inside the release
# callback, which may run wherever the engine drops a graph.
_released_hooks = []
_hook_callbacks_set = False


def _call_hook(context, handle):
    value = result(handle)
    entry = dict.get(_hooks, context)
    if entry is None:
        return None
    hook, kind, ref = entry[0], entry[1], entry[2]
    name = getattr(hook, "__name__", type(hook).__name__)
    if kind == _C.HOOK_POST_ACCUMULATE:
        tensor = ref()
        out = hook(value if tensor is None else tensor)
        if out is not None:
            raise TypeError(f"post accumulate grad hook {name!r} must return None, got {type(out).__name__}")
        return None
    out = hook(value)
    if out is not None and not isinstance(out, TensorBase):
        raise TypeError(f"expected a lucid.Tensor or None, but hook {name!r} returned {type(out).__name__!r}")
    return out


def _register_hook(tensor, hook, kind, fn):
    global _hook_callbacks_set
    if not callable(hook):
        raise TypeError(f"{fn}() takes a callable, got {type(hook).__name__}")
    while _released_hooks:
        dict.pop(_hooks, _released_hooks.pop(), None)
    if not _hook_callbacks_set:
        _C.hook_callbacks(_call_hook, _released_hooks.append)
        _hook_callbacks_set = True
    handle = RemovableHandle(_hooks)
    key = _C.tensor_register_hook(tensor._h, kind, handle.id)
    dict.__setitem__(_hooks, handle.id, (hook, kind, weakref.ref(tensor), key))
    return handle


class _TypedTensorMeta(type):
    """Makes ``lucid.FloatTensor(...)`` a tensor of the class's dtype and ``isinstance(t,
    lucid.FloatTensor)`` a test of a tensor's dtype, as PyTorch's legacy tensor types."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, TensorBase) and obj.dtype is cls.dtype

    def __call__(cls, *args, device="cpu", requires_grad=False):
        """``(data)``: a tensor of `data` in this dtype; ``(2, 3)``: zeros of that size;
        ``()``: an empty one."""
        if not args:
            return zeros(0, dtype=cls.dtype, device=device, requires_grad=requires_grad)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return zeros(*args, dtype=cls.dtype, device=device, requires_grad=requires_grad)
        if len(args) == 1:
            return tensor(args[0], dtype=cls.dtype, device=device, requires_grad=requires_grad)
        raise TypeError(f"lucid.{cls.__name__}() takes data or a size of ints, got {args!r}")


def _typed(name, dtype):
    return _TypedTensorMeta(
        name, (), {"dtype": dtype, "__doc__": f"Tensors of dtype {dtype!r} (PyTorch's legacy tensor type)."}
    )


# PyTorch's legacy tensor types, by the name Tensor.type() gives each dtype.
TYPED = {name: _typed(name, dtype_by_name(d)) for d, name in Tensor._TYPE_NAMES.items()}
