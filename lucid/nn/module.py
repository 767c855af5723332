from __future__ import annotations

import contextlib
from collections import OrderedDict

from .._ops import writes
from .._ops.creation import zeros_like as _zeros_like
from .._ops.shape import cat as _cat
from .._grad_mode import is_grad_enabled, no_grad
from .._tensor import Tensor
from ..utils.hooks import RemovableHandle
from .._types import _DEVICES, as_device, bfloat16, dtype as _dtype, float16, float32, float64, no_cuda
from .parameter import Parameter

# Context managers every module call runs in, by handle id: `factory(module)` is entered
# around the call (lucid.amp.inspect registers one while an inspection is live, which records
# the module path its ops run under). Registered with _register_call_context.
_call_contexts = OrderedDict()


def _register_call_context(factory):
    """Makes every module call run inside ``factory(module)`` (a context manager) until the
    returned handle's ``remove()``."""
    handle = RemovableHandle(_call_contexts)
    _call_contexts[handle.id] = factory
    return handle


# Hooks every module runs (register_module_forward_hook and its kin), before each module's own.
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_with_kwargs = {}
_global_forward_hooks_always_called = {}
_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()


def _callable(hook, fn):
    if not callable(hook):
        raise TypeError(f"{fn} takes a callable, got {hook!r}")


def register_module_forward_pre_hook(hook):
    """Registers ``hook(module, args)`` to run before every module's forward, before the
    module's own pre-hooks; as :meth:`Module.register_forward_pre_hook`, a result other than
    None replaces the arguments. Returns a handle whose ``remove()`` unregisters it."""
    _callable(hook, "register_module_forward_pre_hook")
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, with_kwargs: bool = False, always_call: bool = False):
    """Registers ``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
    `with_kwargs`) to run after every module's forward, before the module's own forward hooks;
    a result other than None replaces the output. With `always_call` it also runs, with output
    None, when forward raises. Returns a handle whose ``remove()`` unregisters it."""
    _callable(hook, "register_module_forward_hook")
    handle = RemovableHandle(
        _global_forward_hooks, extra_dict=[_global_forward_hooks_with_kwargs, _global_forward_hooks_always_called]
    )
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook):
    """Registers ``hook(module, grad_output)`` to run in every module's backward, before the
    module's own backward pre-hooks (see :meth:`Module.register_full_backward_pre_hook`)."""
    _callable(hook, "register_module_full_backward_pre_hook")
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return handle


def register_module_full_backward_hook(hook):
    """Registers ``hook(module, grad_input, grad_output)`` to run in every module's backward,
    before the module's own backward hooks (see :meth:`Module.register_full_backward_hook`)."""
    _callable(hook, "register_module_full_backward_hook")
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return handle


def _join(tensors):
    """(hub, pieces): `pieces` stand for `tensors` in the forward pass and are views of `hub`,
    one tensor whose graph node gathers all of their gradients. Backward runs that node only
    once every piece's gradient has arrived, so a hook on the hub sees all of them together.
    Several tensors go into one flat hub of a dtype holding each exactly (float64 when one is
    float64, float32 otherwise)."""
    if len(tensors) == 1:
        t = tensors[0]
        hub = t.view(t.shape)
        return hub, [hub]
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise RuntimeError(
            f"full backward hooks: the module's tensors are on several devices ({sorted(map(str, devices))})"
        )
    common = float64 if any(t.dtype == float64 for t in tensors) else float32
    hub = _cat([t.reshape(-1).to(common) for t in tensors])
    pieces, start = [], 0
    for t in tensors:
        n = t.numel()
        pieces.append(hub[start : start + n].reshape(t.shape).to(t.dtype))
        start += n
    return hub, pieces


def _split(g, tensors):
    """The hub gradient `g` of `_join(tensors)` as one gradient per tensor, in its dtype."""
    if len(tensors) == 1:
        return [g]
    out, start = [], 0
    for t in tensors:
        n = t.numel()
        out.append(g[start : start + n].reshape(t.shape).to(t.dtype))
        start += n
    return out


def _rejoin(grads, tensors, like):
    """Gradients per tensor back into the hub's layout (`like` is the hub's gradient)."""
    if len(tensors) == 1:
        return grads[0]
    return _cat([g.reshape(-1).to(like.dtype) for g in grads])


class _BackwardHooks:
    """One forward call's full backward hooks: its tensor inputs and outputs pass through hubs
    (`_join`) whose gradient hooks call the module's backward pre-hooks once the gradients of
    all outputs are known, and its backward hooks once those of all inputs are."""

    def __init__(self, module, pre_hooks, hooks):
        self.module, self.pre_hooks, self.hooks = module, pre_hooks, hooks
        self.grad_outputs = None
        self.n_args = 0
        self.input_positions = []

    def setup_inputs(self, args):
        self.n_args = len(args)
        self.input_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not self.input_positions:
            return args
        inputs = [args[i] for i in self.input_positions]
        hub, pieces = _join(inputs)
        self.inputs = inputs
        self.inputs_reached = self._watch(pieces)
        hub.register_hook(self._on_grad_input)
        args = list(args)
        for i, p in zip(self.input_positions, pieces):
            args[i] = p
        return tuple(args)

    def setup_outputs(self, output):
        single = isinstance(output, Tensor)
        outs = (output,) if single else tuple(output) if isinstance(output, (tuple, list)) else ()
        self.n_outputs = len(outs)
        self.output_positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not self.output_positions:
            return output
        outputs = [outs[i] for i in self.output_positions]
        hub, pieces = _join(outputs)
        self.outputs = outputs
        self.outputs_reached = self._watch(pieces)
        hub.register_hook(self._on_grad_output)
        outs = list(outs)
        for i, p in zip(self.output_positions, pieces):
            outs[i] = p
        return outs[0] if single else type(output)(outs)

    @staticmethod
    def _watch(pieces):
        """Flags, one per piece, set when a gradient reaches it in a backward pass: a piece no
        gradient reaches gets None rather than the hub's zeros."""
        if len(pieces) == 1:
            return None
        reached = [False] * len(pieces)
        for k, p in enumerate(pieces):
            p.register_hook(lambda g, k=k: reached.__setitem__(k, True))
        return reached

    @staticmethod
    def _reached(grads, reached):
        if reached is None:
            return grads
        out = [g if r else None for g, r in zip(grads, reached)]
        reached[:] = [False] * len(reached)  # for the next backward of a retained graph
        return out

    @staticmethod
    def _packed(values, positions, n):
        full = [None] * n
        for i, v in zip(positions, values):
            full[i] = v
        return tuple(full)

    def _replacement(self, result, current, what):
        """The gradients a hook returned, checked against the ones it was given."""
        result = result if isinstance(result, (tuple, list)) else (result,)
        if len(result) != len(current):
            raise RuntimeError(
                f"backward hook returned an invalid number of {what}, got {len(result)}, but expected {len(current)}"
            )
        for i, (r, c) in enumerate(zip(result, current)):
            if r is not None and not isinstance(r, Tensor):
                raise TypeError(
                    f"backward hook returned a {type(r).__name__} as {what}[{i}]; expected a lucid.Tensor or None"
                )
            if r is not None and c is not None and r.shape != c.shape:
                raise RuntimeError(
                    f"backward hook returned {what}[{i}] of shape {tuple(r.shape)}, expected shape {tuple(c.shape)}"
                )
        return tuple(result)

    def _on_grad_output(self, g):
        grads = self._reached(_split(g, self.outputs), self.outputs_reached)
        grad_output = self._packed(grads, self.output_positions, self.n_outputs)
        changed = False
        for hook in self.pre_hooks:
            result = hook(self.module, grad_output)
            if result is not None:
                grad_output = self._replacement(result, grad_output, "grad_output")
                changed = True
        self.grad_outputs = grad_output
        if not self.input_positions:  # no input needs a gradient: the hooks are called now
            self._call_hooks(self._packed([], [], self.n_args))
        if not changed:
            return None
        new = [
            grad_output[i] if grad_output[i] is not None else _zeros_like(t)
            for i, t in zip(self.output_positions, self.outputs)
        ]
        return _rejoin(new, self.outputs, g)

    def _call_hooks(self, grad_input):
        for hook in self.hooks:
            result = hook(self.module, grad_input, self.grad_outputs)
            if result is not None:
                grad_input = self._replacement(result, grad_input, "grad_input")
        return grad_input

    def _on_grad_input(self, g):
        grads = self._reached(_split(g, self.inputs), self.inputs_reached)
        grad_input = self._packed(grads, self.input_positions, self.n_args)
        new = self._call_hooks(grad_input)
        if new is grad_input:
            return None
        grads = [new[i] if new[i] is not None else _zeros_like(t) for i, t in zip(self.input_positions, self.inputs)]
        return _rejoin(grads, self.inputs, g)


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
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_backward_hooks", OrderedDict())

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
            raise TypeError(
                f"cannot register {type(param).__name__} as parameter {name!r} (expected Parameter or None)"
            )
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
            raise ValueError(
                f"autocast_policy must be None, 'float32', lucid.float32, lucid.float16 or "
                f"lucid.bfloat16, got {value!r}"
            )
        self.__dict__["_autocast_dtype"] = value

    def __call__(self, *args, **kwargs):
        if _call_contexts:
            with contextlib.ExitStack() as contexts:
                for factory in list(_call_contexts.values()):
                    contexts.enter_context(factory(self))
                return self._call_in_precision(args, kwargs)
        return self._call_in_precision(args, kwargs)

    def _call_in_precision(self, args, kwargs):
        d = self.__dict__
        precision = d.get("_autocast_dtype")
        if precision is not None:
            from ..amp.autocast_mode import autocast, cast_floating_args, is_autocast_enabled

            devices = [d.type for d in _DEVICES if is_autocast_enabled(d.type)]
            if devices:
                args, kwargs = cast_floating_args(args, kwargs, precision)
                with contextlib.ExitStack() as scopes:
                    for device in devices:
                        scopes.enter_context(
                            autocast(device, enabled=False)
                            if precision == float32
                            else autocast(device, dtype=precision)
                        )
                    return self._call(args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        d = self.__dict__
        pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
        bw_pre, bw = d.get("_backward_pre_hooks"), d.get("_backward_hooks")
        if not (
            pre
            or post
            or bw_pre
            or bw
            or _global_forward_pre_hooks
            or _global_forward_hooks
            or _global_backward_pre_hooks
            or _global_backward_hooks
        ):
            return self.forward(*args, **kwargs)
        with_kwargs = d.get("_hooks_with_kwargs", ())
        for hook in list(_global_forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        for key, hook in list((pre or {}).items()):
            if key in with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            "a forward pre-hook registered with_kwargs=True must return None or a "
                            f"tuple (args, kwargs), got {result!r}"
                        )
                    args, kwargs = result
                    args = args if isinstance(args, tuple) else (args,)
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward = None
        if (bw_pre or bw or _global_backward_pre_hooks or _global_backward_hooks) and is_grad_enabled():
            backward = _BackwardHooks(
                self,
                list(_global_backward_pre_hooks.values()) + list((bw_pre or {}).values()),
                list(_global_backward_hooks.values()) + list((bw or {}).values()),
            )
            args = backward.setup_inputs(args)
        hooks = [
            (hook, key in _global_forward_hooks_with_kwargs, key in _global_forward_hooks_always_called)
            for key, hook in _global_forward_hooks.items()
        ]
        always = d.get("_always_call", ())
        hooks += [(hook, key in with_kwargs, key in always) for key, hook in (post or {}).items()]
        try:
            output = self.forward(*args, **kwargs)
        except Exception:
            for hook, kw, always_call in hooks:
                if always_call:  # told of the failure with output None
                    hook(self, args, kwargs, None) if kw else hook(self, args, None)
            raise
        for hook, kw, _ in hooks:
            result = hook(self, args, kwargs, output) if kw else hook(self, args, output)
            if result is not None:
                output = result
        if backward is not None:
            output = backward.setup_outputs(output)
        return output

    def _hook_tables(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before registering hooks")
        for name, make in (
            ("_forward_pre_hooks", OrderedDict),
            ("_forward_hooks", OrderedDict),
            ("_hooks_with_kwargs", set),
            ("_backward_pre_hooks", OrderedDict),
            ("_backward_hooks", OrderedDict),
            ("_always_call", set),
        ):
            if name not in self.__dict__:  # a module unpickled from before hooks existed
                object.__setattr__(self, name, make())
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
        handle = RemovableHandle(pre, extra_dict=_Discard(with_kw))
        self._add_hook(pre, handle, hook, prepend)
        if with_kwargs:
            with_kw.add(handle.id)
        return handle

    def register_forward_hook(
        self, hook, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False
    ):
        """Calls ``hook(module, args, output)`` after each forward; a result other than None
        replaces the output. With ``with_kwargs`` the hook is ``hook(module, args, kwargs,
        output)``. ``prepend`` runs it before the hooks already registered. Returns a handle whose
        ``remove()`` unregisters it. With ``always_call`` it is also called, with output None,
        when forward raises (the exception then propagates)."""
        if not callable(hook):
            raise TypeError(f"register_forward_hook takes a callable, got {hook!r}")
        _, post, with_kw = self._hook_tables()
        handle = RemovableHandle(post, extra_dict=[_Discard(with_kw), _Discard(self._always_call)])
        self._add_hook(post, handle, hook, prepend)
        if with_kwargs:
            with_kw.add(handle.id)
        if always_call:
            self._always_call.add(handle.id)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """Calls ``hook(module, grad_output)`` in each backward pass through this module, once the
        gradients with respect to its outputs are known and before they flow into it:
        ``grad_output`` holds one gradient per output (None for an output that is not a tensor
        requiring grad). A tuple it returns replaces ``grad_output``. ``prepend`` runs it before
        the hooks already registered. Returns a handle whose ``remove()`` unregisters it."""
        if not callable(hook):
            raise TypeError(f"register_full_backward_pre_hook takes a callable, got {hook!r}")
        self._hook_tables()
        handle = RemovableHandle(self._backward_pre_hooks)
        self._add_hook(self._backward_pre_hooks, handle, hook, prepend)
        return handle

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """Calls ``hook(module, grad_input, grad_output)`` in each backward pass through this
        module, once the gradients with respect to its inputs are computed. ``grad_input`` holds
        one gradient per positional argument of forward (None for an argument that is not a
        tensor requiring grad; keyword arguments are left out), ``grad_output`` one per output. A
        tuple it returns replaces ``grad_input`` in the rest of the backward pass. The hook must
        not change its arguments in place. ``prepend`` runs it before the hooks already
        registered. Returns a handle whose ``remove()`` unregisters it.

        Examples
        --------
        >>> layer = lucid.nn.Linear(3, 2)
        >>> h = layer.register_full_backward_hook(lambda m, gin, gout: print(gout[0].shape))
        >>> layer(lucid.randn(4, 3, requires_grad=True)).sum().backward()
        (4, 2)
        """
        if not callable(hook):
            raise TypeError(f"register_full_backward_hook takes a callable, got {hook!r}")
        self._hook_tables()
        handle = RemovableHandle(self._backward_hooks)
        self._add_hook(self._backward_hooks, handle, hook, prepend)
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
            if new is not p:  # as p.data = new: p keeps its requires_grad and its gradient hooks
                writes.set_data(p, new)
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
