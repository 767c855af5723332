from __future__ import annotations

from collections import OrderedDict

from .. import _C
from .._ops import writes
from .._grad_mode import no_grad
from .._tensor import Tensor
from .._types import as_device, dtype as _dtype, float16, float32, no_cuda
from .parameter import Parameter


class Module:
    """Base class of every layer: holds parameters and sub-modules registered as attributes."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if params is None:
            raise AttributeError("call Module.__init__() before assigning attributes")
        modules = self.__dict__["_modules"]
        buffers = self.__dict__["_buffers"]
        if name in buffers and not isinstance(value, (Parameter, Module)):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (expected a Tensor or None)")
            buffers[name] = value
            return
        params.pop(name, None)
        modules.pop(name, None)
        if isinstance(value, Parameter):
            params[name] = value
        elif isinstance(value, Module):
            modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        if name in d.get("_parameters", ()):
            return d["_parameters"][name]
        if name in d.get("_modules", ()):
            return d["_modules"][name]
        if name in d.get("_buffers", ()):
            return d["_buffers"][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._modules:
            del self._modules[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent.discard(name)
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name: str, param):
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot register {type(param).__name__} as parameter {name!r} (expected Parameter or None)")
        else:
            self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True):
        """Registers a tensor that is state but not a parameter (e.g. running statistics):
        moved by ``to()`` and, when ``persistent``, saved in ``state_dict()``."""
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"buffer name must be a non-empty string without '.', got {name!r}")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot register {type(tensor).__name__} as buffer {name!r} (expected a Tensor or None)")
        if name in self._parameters or name in self._modules:
            raise KeyError(f"attribute {name!r} already exists")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def named_buffers(self, prefix="", recurse=True):
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mp}.{name}" if mp else name), b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def apply(self, fn):
        """Calls ``fn`` on every sub-module (children first) and then on this module; returns
        this module (``model.apply(init_weights)``)."""
        if not callable(fn):
            raise TypeError(f"apply takes a callable, got {fn!r}")
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- traversal -----------------------------------------------------------------------

    def named_children(self):
        yield from self._modules.items()

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mp}.{name}" if mp else name), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def zero_grad(self, set_to_none: bool = True):
        """Clears every parameter's gradient: to None (default), or to zeros in place (each
        gradient stays the same tensor)."""
        writes.zero_grads(self.parameters(), set_to_none)

    # ---- modes ---------------------------------------------------------------------------

    def train(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise TypeError(f"train(mode) expects a bool, got {mode!r}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    # ---- conversion ----------------------------------------------------------------------

    def to(self, *args, dtype=None, device=None):
        """Moves parameters to a device and/or casts floating-point ones to a dtype, in place."""
        for a in args:
            if isinstance(a, _dtype):
                dtype = a
            else:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"Module.to() only accepts floating-point dtypes, got {dtype!r}")
        dev = as_device(device) if device is not None else None
        for p in self.parameters():
            new = p.to(dtype=dtype if p.dtype.is_floating_point else None, device=dev)
            if new is not p:
                p._replace(_C.tensor_set_requires_grad(new._h, p.requires_grad))
        for m in self.modules():
            for name, b in m._buffers.items():
                if b is not None:
                    m._buffers[name] = b.to(dtype=dtype if b.dtype.is_floating_point else None, device=dev)
        return self

    def float(self):
        return self.to(dtype=float32)

    def cuda(self, device=None):
        """Raises: lucid has no CUDA device (use ``.to("metal")`` on Apple Silicon)."""
        raise ValueError(no_cuda("Module.cuda()"))

    def half(self):
        return self.to(dtype=float16)

    # ---- state ---------------------------------------------------------------------------

    def _named_state(self):
        """(name, owning module, attribute, tensor) for every parameter and persistent buffer."""
        for mp, m in self.named_modules():
            for name, p in m._parameters.items():
                if p is not None:
                    yield (f"{mp}.{name}" if mp else name), m, name, p
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    yield (f"{mp}.{name}" if mp else name), m, name, b

    def state_dict(self):
        """An ordered mapping from parameter and persistent buffer names to their tensors
        (detached, sharing storage)."""
        return OrderedDict((name, t.detach()) for name, _, _, t in self._named_state())

    def load_state_dict(self, state_dict, strict: bool = True):
        """Copies values into the parameters (converted to each parameter's dtype and device).

        Returns ``(missing_keys, unexpected_keys)``; with ``strict`` either one raises.
        """
        own = {name: (m, attr, t) for name, m, attr, t in self._named_state()}
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for name, (_, _, t) in own.items():
            if name not in state_dict:
                continue
            v = state_dict[name]
            if not isinstance(v, Tensor):
                raise TypeError(f"load_state_dict: {name!r} must be a lucid.Tensor, got {type(v).__name__}")
            if v.shape != t.shape:
                raise ValueError(f"load_state_dict: {name!r} has shape {v.shape}, the module's has {t.shape}")
        for name, (m, attr, t) in own.items():
            if name not in state_dict:
                continue
            with no_grad():  # into the module's own tensors, as PyTorch copies them
                t.copy_(state_dict[name])
        return missing, unexpected

    # ---- display -------------------------------------------------------------------------

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

