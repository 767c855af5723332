from __future__ import annotations

import contextlib
import itertools
from collections import OrderedDict

from .. import _C
from .._ops import writes
from .._grad_mode import no_grad
from .._tensor import Tensor
from .._types import as_device, bfloat16, dtype as _dtype, float16, float32, float64, no_cuda
from .parameter import Parameter

# While a lucid.amp.inspect() is live: a context manager each module call runs in, which
# records the module path its ops run under. None otherwise.
_call_observer = None


_hook_ids = itertools.count()


class RemovableHandle:
    """The handle a hook registration returns: ``remove()`` unregisters the hook (a second
    call does nothing); usable as a context manager that removes it on exit."""

    def __init__(self, *tables):
        self._tables = tables
        self.id = next(_hook_ids)

    def remove(self):
        for table in self._tables:
            table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Module:
    """Base class of every layer: holds parameters and sub-modules registered as attributes."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_hooks_with_kwargs", set())

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

    def add_module(self, name: str, module):
        """Registers ``module`` (a Module, or None for an empty slot) as the sub-module ``name``,
        as assigning the attribute does."""
        if not isinstance(name, str):
            raise TypeError(f"module name must be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"module name must be a non-empty string without '.', got {name!r}")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if (hasattr(self, name) and name not in self._modules) or name in self._parameters or name in self._buffers:
            raise KeyError(f"attribute {name!r} already exists")
        self._modules[name] = module

    def register_module(self, name: str, module):
        """The same as :meth:`add_module`."""
        self.add_module(name, module)

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

    @property
    def autocast_policy(self):
        """The precision this module's forward runs in inside any autocast scope: ``None`` (the
        default: its ops follow the scope's policies), or a floating dtype (``"float32"`` is
        ``lucid.float32``).

        With ``lucid.float32``, inside a scope its floating tensor inputs are cast to float32 on
        entry and its forward runs with autocast off, so its outputs are float32 (PyTorch's
        ``custom_fwd(cast_inputs=torch.float32)``). With ``lucid.float16`` or
        ``lucid.bfloat16``, its inputs are cast to that dtype and its forward runs in an
        autocast scope of that dtype. Outside autocast it changes nothing.
        """
        return self.__dict__.get("_autocast_dtype")

    @autocast_policy.setter
    def autocast_policy(self, value):
        if isinstance(value, str) and value == "float32":
            value = float32
        if value is not None and value not in (float32, float16, bfloat16):
            raise ValueError(f"autocast_policy must be None, 'float32', lucid.float32, lucid.float16 or "
                             f"lucid.bfloat16, got {value!r}")
        self.__dict__["_autocast_dtype"] = value

    def __call__(self, *args, **kwargs):
        observer = _call_observer
        if observer is not None:
            with observer(self):
                return self._call_in_precision(args, kwargs)
        return self._call_in_precision(args, kwargs)

    def _call_in_precision(self, args, kwargs):
        d = self.__dict__
        precision = d.get("_autocast_dtype")
        if precision is not None:
            from ..amp.autocast_mode import autocast, cast_floating_args, is_autocast_enabled
            devices = [device for device in ("metal", "cpu") if is_autocast_enabled(device)]
            if devices:
                args, kwargs = cast_floating_args(args, kwargs, precision)
                with contextlib.ExitStack() as scopes:
                    for device in devices:
                        scopes.enter_context(autocast(device, enabled=False) if precision == float32
                                             else autocast(device, dtype=precision))
                    return self._call(args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        d = self.__dict__
        pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
        if not pre and not post:
            return self.forward(*args, **kwargs)
        with_kwargs = d["_hooks_with_kwargs"]
        for key, hook in list(pre.items()):
            if key in with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("a forward pre-hook registered with_kwargs=True must return None or a "
                                           f"tuple (args, kwargs), got {result!r}")
                    args, kwargs = result
                    args = args if isinstance(args, tuple) else (args,)
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        try:
            output = self.forward(*args, **kwargs)
        except Exception:
            for key, hook in list(post.items()):
                if key in d.get("_always_call", ()):  # told of the failure with output None
                    hook(self, args, kwargs, None) if key in with_kwargs else hook(self, args, None)
            raise
        for key, hook in list(post.items()):
            result = hook(self, args, kwargs, output) if key in with_kwargs else hook(self, args, output)
            if result is not None:
                output = result
        return output

    def _hook_tables(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before registering hooks")
        if "_forward_hooks" not in self.__dict__:  # a module unpickled from before hooks existed
            for name, table in (("_forward_pre_hooks", OrderedDict()), ("_forward_hooks", OrderedDict()),
                                ("_hooks_with_kwargs", set())):
                object.__setattr__(self, name, table)
        return self._forward_pre_hooks, self._forward_hooks, self._hooks_with_kwargs

    @staticmethod
    def _add_hook(table, handle, hook, prepend):
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)

    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        """Calls ``hook(module, args)`` before each forward; a result other than None replaces
        the positional arguments (a non-tuple is the one argument). With ``with_kwargs`` the hook
        is ``hook(module, args, kwargs)`` and returns None or ``(args, kwargs)``. ``prepend`` runs
        it before the hooks already registered. Returns a handle whose ``remove()`` unregisters
        it."""
        if not callable(hook):
            raise TypeError(f"register_forward_pre_hook takes a callable, got {hook!r}")
        pre, _, with_kw = self._hook_tables()
        handle = RemovableHandle(pre, _Discard(with_kw))
        self._add_hook(pre, handle, hook, prepend)
        if with_kwargs:
            with_kw.add(handle.id)
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """Calls ``hook(module, args, output)`` after each forward; a result other than None
        replaces the output. With ``with_kwargs`` the hook is ``hook(module, args, kwargs,
        output)``. ``prepend`` runs it before the hooks already registered. Returns a handle whose
        ``remove()`` unregisters it. With ``always_call`` it is also called, with output None,
        when forward raises (the exception then propagates)."""
        if not callable(hook):
            raise TypeError(f"register_forward_hook takes a callable, got {hook!r}")
        _, post, with_kw = self._hook_tables()
        if "_always_call" not in self.__dict__:
            object.__setattr__(self, "_always_call", set())
        handle = RemovableHandle(post, _Discard(with_kw), _Discard(self._always_call))
        self._add_hook(post, handle, hook, prepend)
        if with_kwargs:
            with_kw.add(handle.id)
        if always_call:
            self._always_call.add(handle.id)
        return handle

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
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target: str) -> "Module":
        """The submodule at the dotted path `target` (``"encoder.layers.3"``); ``""`` is this
        module. AttributeError names the first part that is not a submodule."""
        module = self
        for part in target.split(".") if target else ():
            child = module.__dict__.get("_modules", {}).get(part)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no submodule `{part}` (looking up {target!r})")
            module = child
        return module

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

    def cpu(self):
        """Moves the parameters and buffers to the CPU; returns this module."""
        return self.to(device="cpu")

    def share_memory(self):
        """Returns this module: its tensors live in the engine, whose storage every thread of
        the process shares; there is nothing to move into shared memory."""
        return self

    def cuda(self, device=None):
        """Raises: lucid has no CUDA device (use ``.to("metal")`` on Apple Silicon)."""
        raise ValueError(no_cuda("Module.cuda()"))

    def half(self):
        return self.to(dtype=float16)

    def double(self):
        return self.to(dtype=float64)

    def bfloat16(self):
        return self.to(dtype=bfloat16)

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

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copies values into the parameters and buffers (converted to each one's dtype and
        device). With ``assign`` the module takes the given tensors themselves instead (their
        dtype and device kept; a parameter keeps its ``requires_grad``), as PyTorch does.

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
            v = state_dict[name]
            if not assign:
                with no_grad():  # into the module's own tensors, as PyTorch copies them
                    t.copy_(v)
            elif attr in m._parameters:
                if not isinstance(v, Parameter):
                    v = Parameter(v.detach(), requires_grad=t.requires_grad)
                else:
                    v.requires_grad_(t.requires_grad)
                m._parameters[attr] = v
            else:
                m._buffers[attr] = v
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



class _Discard:
    """Removes a hook's id from a set, for RemovableHandle (which pops from mappings)."""

    def __init__(self, ids):
        self._ids = ids

    def pop(self, key, default=None):
        self._ids.discard(key)
        return default
