"""How much of the PyTorch API that real programs use lucid provides.

    python tools/api_coverage.py --extract CORPUS_DIR [--out tools/api_corpus.json]
    python tools/api_coverage.py [--corpus tools/api_corpus.json] [--json | --table] [--check MIN]

The corpus is every ``.py`` file of these repositories, at these commits (``CORPUS`` below):

    pytorch/examples            77f55b912142e11fcfdf5b530231fb9c52f181e8
    karpathy/nanoGPT            3adf61e154c3fe3fca428ad6bc3818b27a3b8291
    karpathy/minGPT             37baab71b9abea1b76ab957409a1cc2fbfba8a26
    karpathy/makemore           988aa59e4d8fefa526d06f3b453ad116258398d4
    karpathy/build-nanogpt      6104ab1b53920f6e2159749676073ff7d815c1fa
    karpathy/ng-video-lecture   52201428ed7b46804849dea0b3ccf0de9df1a5c3
    karpathy/llama2.c           350e04fe35433e6d2941dce5a1f53308f87058eb
    rasbt/LLMs-from-scratch     28c65cdfbc3338e2e040016eea4b7fdf556e4d57

To re-extract, check each out as ``CORPUS_DIR/<owner>/<name>`` (``git clone
https://github.com/<owner>/<name> CORPUS_DIR/<owner>/<name>``, then ``git -C … checkout
<commit>``; only the ``.py`` files are read) and run ``--extract``; it refuses a git checkout at
another commit. Extraction needs neither torch nor lucid: it parses each file with ``ast`` and
writes ``tools/api_corpus.json``, which is committed, so the check runs anywhere (CI included).

``--extract`` records every name a program uses, normalised:

* ``torch.X``, ``torch.nn.X``, ``torch.nn.functional.X``, ``torch.optim.lr_scheduler.X``, … —
  the full dotted path of any attribute reached from an imported torch module, however it was
  imported (``import torch.nn as nn``, ``from torch import nn, optim``,
  ``from torch.nn import functional as F``, ``from torch.utils.data import DataLoader``, …),
  with private homes made public (``torch.nn.modules.linear.Linear`` is ``torch.nn.Linear``).
  ``torchvision``/``torchtext``/``torchaudio`` names are recorded the same way (out of scope).
* ``Tensor.X`` — a method called, or one of a tensor's plain attributes (``TENSOR_PROPERTIES``)
  read, on a value judged to be a tensor;
* ``torch.nn.Module.X``, ``torch.optim.Optimizer.X``, ``torch.optim.lr_scheduler.LRScheduler.X``,
  ``torch.utils.data.DataLoader.X``, ``torch.amp.GradScaler.X`` — a name of that API (the fixed
  lists ``MODULE_API``… below) used on a value judged to be a module, optimizer, scheduler, data
  loader or gradient scaler, unless the program's own class defines it; and
  ``torch.nn.parallel.DistributedDataParallel.module``;

and, for each, the keyword arguments passed to it and the files that use it.

Which values are what is a heuristic: an abstract interpretation of each file that tracks a
"kind" for each name, ``self`` attribute and function result:

* a tensor: the result of a torch function (``torch.randn``, ``F.softmax``, ``torch.nn.init``,
  ``torch.linalg``…, but not ``torch.device``, ``torch.load``, ``torch.manual_seed`` and the
  like), of ``nn.Parameter``, of calling a module, of a tensor method (except the ones that
  return Python values: ``item``, ``tolist``, ``size``, ``numpy``…), of arithmetic, comparison
  or indexing with a tensor operand, of ``scaler.scale(…)``; ``.T``/``.data``/``.grad`` of a
  tensor; ``.weight``, ``.bias`` and ``.grad`` of anything; an element of a tensor, of
  ``split``/``chunk``/``sort``/``topk``… results, of ``parameters()``, of a data loader (each
  batch); the values of ``state_dict()``; a buffer registered with ``register_buffer``; a
  parameter annotated ``Tensor``; the non-``self`` parameters of ``forward`` in a module class;
* a module: an ``nn.<Layer>(…)`` or an instance of a class derived from ``nn.Module``,
  ``self`` inside such a class, a sub-attribute of a module, an element of a
  ``ModuleList``/``modules()``, ``model.to(…)``/``.train()``…, ``torch.compile(model)``;
* an optimizer, scheduler, data loader or scaler: the result of its constructor;
* function parameters named ``model``/``net`` (module), ``optimizer`` (optimizer),
  ``scheduler`` (scheduler) or ``…loader`` (data loader), or annotated with those types;
* what a function or method returns (from its ``return`` statements), and ``self.X``
  attributes assigned anywhere in the class: a repository's files are interpreted first to
  learn these (classes and functions imported from a sibling file included), then again to
  record.

After an ``if``, a name has the kind a branch that rebinds it gave it, a known kind rather
than an unknown one; elsewhere the last assignment in statement order wins; loop bodies are
interpreted twice. Limits: values from ``torch.load`` or other libraries, containers filled by
``append``, packages imported whole (``import pkg.mod``) and untyped function arguments are
unknown, so uses on them are missed (under-counting); a value wrongly judged a tensor would
add its methods as ``Tensor.X`` (over-counting), which is why plain attributes count only from
``TENSOR_PROPERTIES`` and why ``NOT_TENSOR_METHODS`` (list, dict and str methods, other kinds'
API) and the methods the file's own classes define are never taken for tensor methods.

The check (the default) looks each name up in lucid (``torch.`` becomes ``lucid.``; the
``Tensor``, module, optimizer, scheduler, loader and scaler names are looked up on an
instance, and an attribute a class's methods assign to ``self`` counts) and each keyword with
``inspect.signature`` (accepted by name or by ``**kwargs``). Names under ``OUT_OF_SCOPE`` are
reported apart, with the reason. Coverage counts in-scope names and (name, keyword) pairs
alike: covered / in scope.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections import ChainMap, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "tools" / "api_corpus.json"
FORMAT = 1

# The corpus: (GitHub owner/name, commit). Every .py file in each is parsed.
CORPUS = [
    ("pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8"),
    ("karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"),
    ("karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26"),
    ("karpathy/makemore", "988aa59e4d8fefa526d06f3b453ad116258398d4"),
    # Also typical: the GPT-2 reproduction, the lecture's bigram/GPT scripts and a Llama trainer.
    ("karpathy/build-nanogpt", "6104ab1b53920f6e2159749676073ff7d815c1fa"),
    ("karpathy/ng-video-lecture", "52201428ed7b46804849dea0b3ccf0de9df1a5c3"),
    ("karpathy/llama2.c", "350e04fe35433e6d2941dce5a1f53308f87058eb"),
    # The code of a book that builds, pretrains and fine-tunes a GPT (and newer LLMs) from scratch.
    ("rasbt/LLMs-from-scratch", "28c65cdfbc3338e2e040016eea4b7fdf556e4d57"),
]

# Top-level packages whose names are recorded.
ROOTS = ("torch", "torchvision", "torchtext", "torchaudio")

# Modules (a bare reference to one, as in `from torch import nn`, is not a use of an API name).
MODULES = (
    {
        f"torch.{m}"
        for m in (
            "nn",
            "nn.functional",
            "nn.init",
            "nn.utils",
            "nn.utils.rnn",
            "nn.parallel",
            "nn.modules",
            "optim",
            "optim.lr_scheduler",
            "utils",
            "utils.data",
            "utils.data.distributed",
            "utils.checkpoint",
            "utils.tensorboard",
            "distributed",
            "distributed.rpc",
            "distributed.autograd",
            "distributed.optim",
            "distributed.nn",
            "distributed.fsdp",
            "distributed.tensor",
            "distributed.tensor.parallel",
            "distributed.checkpoint",
            "distributed.device_mesh",
            "distributed._tensor",
            "distributed.algorithms",
            "distributed.elastic",
            "multiprocessing",
            "cuda",
            "cuda.amp",
            "cuda.nccl",
            "backends",
            "backends.cudnn",
            "backends.cuda",
            "backends.mps",
            "fft",
            "linalg",
            "special",
            "amp",
            "autograd",
            "autograd.profiler",
            "onnx",
            "jit",
            "fx",
            "fx.node",
            "fx.proxy",
            "distributions",
            "testing",
            "profiler",
            "hub",
            "accelerator",
            "serialization",
            "random",
            "sparse",
            "export",
            "compiler",
            "_dynamo",
            "futures",
            "ao",
            "quantization",
            "nested",
            "masked",
        )
    }
    | {f"torchvision.{m}" for m in ("datasets", "transforms", "models", "utils", "io", "ops")}
    | {
        f"torchtext.{m}"
        for m in ("data", "data.utils", "datasets", "vocab", "legacy", "legacy.data", "legacy.datasets")
    }
    | set(ROOTS)
)

# nn.Module / Optimizer / LRScheduler / DataLoader API names recorded on values of that kind.
MODULE_API = {
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "children",
    "named_children",
    "modules",
    "named_modules",
    "train",
    "eval",
    "to",
    "cuda",
    "cpu",
    "float",
    "half",
    "double",
    "bfloat16",
    "type",
    "zero_grad",
    "state_dict",
    "load_state_dict",
    "apply",
    "register_buffer",
    "register_parameter",
    "register_module",
    "add_module",
    "register_forward_hook",
    "register_forward_pre_hook",
    "register_full_backward_hook",
    "register_backward_hook",
    "requires_grad_",
    "training",
    "forward",
    "get_submodule",
    "get_parameter",
    "get_buffer",
    "extra_repr",
    "share_memory",
    "to_empty",
}
OPTIMIZER_API = {
    "zero_grad",
    "step",
    "param_groups",
    "state",
    "state_dict",
    "load_state_dict",
    "add_param_group",
    "defaults",
}
SCHEDULER_API = {
    "step",
    "get_last_lr",
    "get_lr",
    "state_dict",
    "load_state_dict",
    "last_epoch",
    "optimizer",
    "base_lrs",
}
LOADER_API = {"dataset", "sampler", "batch_size", "num_workers", "batch_sampler", "drop_last"}
SCALER_API = {"scale", "step", "update", "unscale_", "get_scale", "is_enabled", "state_dict", "load_state_dict"}
OWNER = {
    "module": ("torch.nn.Module", MODULE_API),
    "optimizer": ("torch.optim.Optimizer", OPTIMIZER_API),
    "scheduler": ("torch.optim.lr_scheduler.LRScheduler", SCHEDULER_API),
    "loader": ("torch.utils.data.DataLoader", LOADER_API),
    "scaler": ("torch.amp.GradScaler", SCALER_API),
}

# torch.X functions whose result is not a tensor.
NON_TENSOR_FUNCS = {
    "device",
    "dtype",
    "manual_seed",
    "seed",
    "initial_seed",
    "no_grad",
    "enable_grad",
    "inference_mode",
    "set_grad_enabled",
    "is_grad_enabled",
    "is_tensor",
    "is_floating_point",
    "is_complex",
    "is_nonzero",
    "numel",
    "get_default_dtype",
    "set_default_dtype",
    "set_default_device",
    "set_float32_matmul_precision",
    "load",
    "save",
    "set_printoptions",
    "set_num_threads",
    "get_num_threads",
    "set_num_interop_threads",
    "finfo",
    "iinfo",
    "Generator",
    "Size",
    "autocast",
    "compile",
    "use_deterministic_algorithms",
    "typename",
    "equal",
    "is_inference_mode_enabled",
    "is_storage",
    "set_rng_state",
}
# Functions and tensor methods that return a tuple of tensors.
TUPLE_FUNCS = {
    "split",
    "chunk",
    "unbind",
    "sort",
    "topk",
    "kthvalue",
    "mode",
    "tensor_split",
    "meshgrid",
    "broadcast_tensors",
    "std_mean",
    "var_mean",
    "unique_consecutive",
    "hsplit",
    "vsplit",
    "dsplit",
    "aminmax",
    "frexp",
    "slogdet",
    "qr",
    "svd",
    "eig",
    "eigh",
    "lu",
}
REDUCE_PAIR = {"max", "min", "median", "nanmedian", "cummax", "cummin"}  # a tuple when given a dim
# Tensor methods whose result is not a tensor.
NON_TENSOR_METHODS = {
    "item",
    "tolist",
    "size",
    "dim",
    "ndimension",
    "numel",
    "nelement",
    "element_size",
    "is_contiguous",
    "data_ptr",
    "stride",
    "get_device",
    "numpy",
    "backward",
    "storage",
    "untyped_storage",
    "register_hook",
    "is_floating_point",
    "is_complex",
    "equal",
    "storage_offset",
    "is_pinned",
    "is_shared",
    "__len__",
}
TENSOR_ATTRS = {"T", "mT", "H", "mH", "data", "grad", "real", "imag"}
# Attributes (read, not called) recorded on tensors: a value mis-judged a tensor (a torchtext
# batch, a DTensor) has attributes of its own, and these are all a tensor's plain attributes.
TENSOR_PROPERTIES = TENSOR_ATTRS | {
    "shape",
    "dtype",
    "device",
    "requires_grad",
    "is_leaf",
    "grad_fn",
    "ndim",
    "is_cuda",
    "is_mps",
    "is_cpu",
    "is_xpu",
    "is_meta",
    "is_sparse",
    "is_quantized",
    "is_nested",
    "layout",
    "names",
    "itemsize",
    "nbytes",
    "retains_grad",
    "output_nr",
}
# Methods of other kinds of object never recorded as tensor methods, where a value was
# mis-judged a tensor: Module/optimizer/scheduler/loader API that tensors lack, list/dict/str
# methods, RPC remote references and DTensor.
NOT_TENSOR_METHODS = {
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "children",
    "named_children",
    "modules",
    "named_modules",
    "train",
    "eval",
    "zero_grad",
    "state_dict",
    "load_state_dict",
    "step",
    "forward",
    "register_buffer",
    "register_parameter",
    "add_module",
    "param_groups",
    "add_param_group",
    "get_last_lr",
    "append",
    "extend",
    "insert",
    "keys",
    "items",
    "update",
    "setdefault",
    "get",
    "pop",
    "join",
    "format",
    "startswith",
    "endswith",
    "encode",
    "decode",
    "lower",
    "upper",
    "strip",
    "replace",
    "readlines",
    "write",
    "to_here",
    "local_value",
    "owner",
    "rpc_sync",
    "rpc_async",
    "remote",
    "full_tensor",
    "to_local",
    "redistribute",
}
ANY_TENSOR_ATTRS = {"weight", "bias", "grad"}  # a tensor whatever it is read from
MODULE_SAME = {
    "to",
    "cuda",
    "cpu",
    "train",
    "eval",
    "float",
    "half",
    "double",
    "bfloat16",
    "requires_grad_",
    "apply",
    "type",
    "to_empty",
}
PARAM_HINTS = {
    "model": ("module", None),
    "net": ("module", None),
    "optimizer": ("optimizer",),
    "scheduler": ("scheduler",),
    "lr_scheduler": ("scheduler",),
}

TENSOR = ("tensor",)
TUPLE = ("iterof", TENSOR)  # a tuple or list of tensors
DDP = ("module", "<DistributedDataParallel>")


# Where torch defines a public name in a private module, the public spelling.
PUBLIC_HOME = [
    ("torch.nn.modules.", "torch.nn."),
    ("torch.nn.parameter.", "torch.nn."),
    ("torch.utils.data.dataloader.", "torch.utils.data."),
    ("torch.utils.data.dataset.", "torch.utils.data."),
    ("torch.utils.data.sampler.", "torch.utils.data."),
]


def normalise(path: str) -> str:
    """``torch.nn.modules.linear.Linear`` -> ``torch.nn.Linear`` and the like."""
    for private, public in PUBLIC_HOME:
        if path.startswith(private):
            rest = path[len(private) :]
            if private == "torch.nn.modules.":
                if rest.endswith("NonDynamicallyQuantizableLinear"):  # not exported by torch.nn
                    return path
                rest = rest.split(".", 1)[1] if "." in rest else rest
            return public + rest
    return path


def ref(path):
    return ("ref", path)


def is_ref(k):
    return k is not None and k[0] == "ref"


def elem_of(k):
    """The kind of an element of a value of kind `k` (iterating or indexing it)."""
    if k is None:
        return None
    tag = k[0]
    if tag == "tensor" or tag == "loader":
        return TENSOR
    if tag == "iterof":
        return k[1]
    if tag == "module":
        return ("module", None)  # ModuleList / Sequential
    if tag == "zip":
        return ("seq", tuple(elem_of(x) for x in k[1]))
    if tag == "enumerate":
        return ("seq", (None, elem_of(k[1])))
    if tag == "seq":
        kinds = set(k[1])
        return k[1][0] if len(kinds) == 1 else None
    return None


class _File:
    """Interprets one file (see the module docstring) and records what it uses."""

    def __init__(self, tree, filename, uses, project=None, path=None):
        self.tree = tree
        self.filename = filename
        self.uses = uses  # name -> {"files": set, "kwargs": {kw: set}}
        self.project = {} if project is None else project  # the repository's files: path -> _File
        self.path = path or filename  # this file's path in the repository
        self.recording = False
        self.classes = {}  # class name -> {"bases": [...], "kind": str|None, "attrs": {}, "methods": {}}
        self.functions = {}  # module-level function name -> return kind
        self.modules = set()  # dotted paths bound as modules
        self.user_methods = {
            n.name
            for c in ast.walk(tree)
            if isinstance(c, ast.ClassDef)
            for n in c.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.cls = None  # the class whose method is being interpreted
        self.body_cls = None  # the class whose body is being interpreted
        self.func = None  # (class name or None, function name) whose returns are collected

    # ---- driving ----------------------------------------------------------------------------

    def run(self, record=True):
        for recording in (False, True) if record else (False,):
            self.recording = recording
            self.modules = set()
            env = {}
            self.block(self.tree.body, env)

    def record(self, name, keywords=()):
        if not self.recording or name.split(".")[-1].startswith("__"):
            return
        entry = self.uses.setdefault(name, {"files": set(), "kwargs": {}})
        entry["files"].add(self.filename)
        for kw in keywords:
            entry["kwargs"].setdefault(kw, set()).add(self.filename)

    def record_ref(self, path, keywords=()):
        if path in self.modules or path in MODULES:
            return
        if path.rsplit(".", 1)[-1].startswith("__"):  # record_function.__enter__ = …: a use of its owner
            return self.record_ref(path.rsplit(".", 1)[0])
        self.record(normalise(path), keywords)

    # ---- statements -------------------------------------------------------------------------

    def block(self, body, env):
        deferred = []
        for stmt in body:
            self.stmt(stmt, env, deferred)
        for fn, fenv, cls in deferred:
            self.function(fn, fenv, cls)

    def stmt(self, s, env, deferred):
        t = type(s)
        if t in (ast.Import, ast.ImportFrom):
            self.imports(s, env)
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef):
            for d in s.decorator_list:
                self.expr(d, env)
            self.signature_exprs(s, env)
            if self.body_cls is None:
                env[s.name] = ("userfn", s.name)
            deferred.append((s, env, self.body_cls))
        elif t is ast.ClassDef:
            self.classdef(s, env, deferred)
        elif t is ast.Assign:
            k = self.expr(s.value, env)
            for target in s.targets:
                self.bind(target, k, env)
        elif t is ast.AnnAssign:
            k = self.expr(s.value, env) if s.value is not None else None
            ann = self.annotation_kind(s.annotation, env)
            self.bind(s.target, k or ann, env)
        elif t is ast.AugAssign:
            k = self.expr(s.value, env)
            tk = self.expr(s.target, env)
            if isinstance(s.target, ast.Name) and (k == TENSOR or tk == TENSOR):
                env[s.target.id] = TENSOR
        elif t in (ast.For, ast.AsyncFor):
            it = self.expr(s.iter, env)
            for _ in range(2):  # twice, so names assigned late in the body are known early
                self.bind(s.target, elem_of(it), env)
                self.stmts(s.body, env, deferred)
            self.stmts(s.orelse, env, deferred)
        elif t is ast.While:
            self.expr(s.test, env)
            for _ in range(2):
                self.stmts(s.body, env, deferred)
            self.stmts(s.orelse, env, deferred)
        elif t is ast.If:
            self.expr(s.test, env)
            # Both branches start from the same kinds. After them a name has the kind the one
            # branch that rebinds it gave it (if ddp: model = DDP(model)), or where both do,
            # a known kind rather than an unknown one (loss = None in one branch).
            local = env.maps[0] if isinstance(env, ChainMap) else env
            before = dict(local)
            self.stmts(s.body, env, deferred)
            after_body = dict(local)
            local.clear()
            local.update(before)
            self.stmts(s.orelse, env, deferred)
            for name, k in after_body.items():
                old, other = before.get(name), local.get(name)
                if k is not None and (other is None or other == old != k):
                    local[name] = k
        elif t in (ast.With, ast.AsyncWith):
            for item in s.items:
                k = self.expr(item.context_expr, env)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, k, env)
            self.stmts(s.body, env, deferred)
        elif t in (ast.Try, getattr(ast, "TryStar", ast.Try)):
            self.stmts(s.body, env, deferred)
            for h in s.handlers:
                if h.type is not None:
                    self.expr(h.type, env)
                self.stmts(h.body, env, deferred)
            self.stmts(s.orelse, env, deferred)
            self.stmts(s.finalbody, env, deferred)
        elif t is ast.Return:
            k = self.expr(s.value, env) if s.value is not None else None
            if not self.recording and self.func is not None and k is not None:
                cls, name = self.func
                table = self.classes[cls]["methods"] if cls else self.functions
                if table.get(name) is None:
                    table[name] = k
        elif t is ast.Match:
            self.expr(s.subject, env)
            for case in s.match_cases:
                self.stmts(case.body, env, deferred)
        else:
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.expr(child, env)

    def stmts(self, body, env, deferred):
        for stmt in body:
            self.stmt(stmt, env, deferred)

    def imports(self, s, env):
        if isinstance(s, ast.Import):
            for a in s.names:
                top = a.name.split(".")[0]
                if top not in ROOTS:
                    local = self.sibling(a.name, 0)
                    if local is not None and (a.asname or "." not in a.name):
                        env[a.asname or a.name] = ("localmod", local.path)
                    continue
                if a.asname:
                    env[a.asname] = ref(a.name)
                    self.modules.add(a.name)
                else:
                    env[top] = ref(top)
                    self.modules.add(top)
                    self.modules.add(a.name)
            return
        if s.level or not s.module or s.module.split(".")[0] not in ROOTS:
            local = self.sibling(s.module or "", s.level)
            for a in s.names:
                if local is not None and a.name != "*":
                    env[a.asname or a.name] = self.from_sibling(local, a.name)
            return
        for a in s.names:
            if a.name == "*":
                continue
            path = f"{s.module}.{a.name}"
            env[a.asname or a.name] = ref(path)
            if path in MODULES:
                self.modules.add(path)

    def sibling(self, module, level):
        """The file of this repository that `import module` (with `level` dots) finds, or None."""
        here = self.path.split("/")[:-1]
        if level:
            bases = [here[: len(here) - (level - 1)]]
        else:
            bases = [here[:i] for i in range(len(here), -1, -1)]  # the script's folder, then upwards
        rel = module.split(".") if module else []
        for base in bases:
            for cand in ("/".join(base + rel) + ".py", "/".join(base + rel + ["__init__.py"])):
                f = self.project.get(cand.lstrip("/"))
                if f is not None and f is not self:
                    return f
        return None

    def from_sibling(self, f, name):
        """The kind of `name` imported from the repository's file `f`: a class or function of it."""
        if name in f.classes:
            for cname, info in f.classes.items():  # with its bases
                mine = self.classes.get(cname)
                if mine is None or mine["file"] != self.filename:
                    self.classes[cname] = info
                    self.user_methods |= set(info["methods"])
            return ("usercls", name)
        if name in f.functions:
            key = f"{f.path}:{name}"
            self.functions[key] = f.functions[name]
            return ("userfn", key)
        return None

    def signature_exprs(self, fn, env):
        args = fn.args
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.expr(d, env)
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                self.expr(a.annotation, env)
        if fn.returns is not None:
            self.expr(fn.returns, env)

    def classdef(self, s, env, deferred):
        for b in s.bases:
            self.expr(b, env)
        for kw in s.keywords:
            self.expr(kw.value, env)
        for d in s.decorator_list:
            self.expr(d, env)
        info = self.classes.get(s.name)
        if info is None or info["file"] != self.filename:
            info = self.classes[s.name] = {"attrs": {}, "methods": {}, "kind": None, "bases": [], "file": self.filename}
        info["kind"] = None
        for b in s.bases:
            k = self.expr_quiet(b, env)
            if is_ref(k):
                p = k[1]
                if p in ("torch.nn.Module",) or p.startswith("torch.nn.") and p.rsplit(".", 1)[-1][:1].isupper():
                    info["kind"] = "module"
                elif p.startswith("torch.optim.lr_scheduler."):
                    info["kind"] = "scheduler"
                elif p.startswith("torch.optim."):
                    info["kind"] = "optimizer"
            elif k is not None and k[0] == "usercls" and k[1] in self.classes:
                info["kind"] = info["kind"] or self.classes[k[1]]["kind"]
                if k[1] not in info["bases"]:
                    info["bases"].append(k[1])
        for stmt in s.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                info["methods"].setdefault(stmt.name, None)
        env[s.name] = ("usercls", s.name)
        outer, self.body_cls = self.body_cls, s.name
        cenv = ChainMap({}, env)
        inner = []
        for stmt in s.body:
            self.stmt(stmt, cenv, inner)
        self.body_cls = outer
        # Methods see the enclosing scope, not the class body.
        deferred.extend((fn, env, cls) for fn, _, cls in inner)

    def function(self, fn, env, cls):
        local = {}
        fenv = ChainMap(local, env)
        info = self.classes.get(cls) if cls else None
        params = fn.args.posonlyargs + fn.args.args
        for i, a in enumerate(params + fn.args.kwonlyargs):
            k = self.annotation_kind(a.annotation, env) if a.annotation is not None else None
            if k is None and info is not None and i == 0 and a in params:
                if info["kind"] == "module":
                    k = ("module", cls)
                elif info["kind"] in OWNER:
                    k = (info["kind"],)
                else:
                    k = ("obj", cls)
            elif k is None and info is not None and info["kind"] == "module" and fn.name == "forward" and a in params:
                k = TENSOR
            elif k is None:
                k = PARAM_HINTS.get(a.arg)
                if k is None and a.arg.endswith("loader"):
                    k = ("loader",)
            local[a.arg] = k
        for a in (fn.args.vararg, fn.args.kwarg):
            if a is not None:
                local[a.arg] = None
        outer = (self.cls, self.body_cls, self.func)
        self.cls, self.body_cls, self.func = cls, None, (cls, fn.name)
        self.block(fn.body, fenv)
        self.cls, self.body_cls, self.func = outer

    def annotation_kind(self, node, env):
        k = self.expr_quiet(node, env)
        if isinstance(node, ast.Subscript):  # Optional[Tensor], List[Tensor]
            inner = self.annotation_kind(node.slice, env)
            return inner if inner == TENSOR and "Optional" in ast.dump(node.value) else None
        if not is_ref(k):
            return None
        p = k[1]
        if p in ("torch.Tensor", "torch.nn.Parameter"):
            return TENSOR
        if p.startswith("torch.nn.") and p.rsplit(".", 1)[-1][:1].isupper():
            return ("module", None)
        if p.startswith("torch.optim.lr_scheduler."):
            return ("scheduler",)
        if p.startswith("torch.optim."):
            return ("optimizer",)
        if p.endswith("DataLoader"):
            return ("loader",)
        return None

    def bind(self, target, k, env):
        if isinstance(target, ast.Name):
            env[target.id] = k
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            if k is not None and k[0] == "seq" and len(k[1]) == len(elts):
                parts = k[1]
            else:
                parts = [elem_of(k)] * len(elts)
            for e, pk in zip(elts, parts):
                self.bind(e.value if isinstance(e, ast.Starred) else e, pk, env)
        elif isinstance(target, ast.Attribute):
            owner = self.expr(target.value, env, inner=True)
            if owner is not None and owner[0] in ("module", "obj") and owner[1] == self.cls and self.cls:
                attrs = self.classes[self.cls]["attrs"]
                if not self.recording and k is not None:  # the last assignment wins (model = DDP(model))
                    attrs[target.attr] = k
            else:
                self.attribute(target, env, inner=False, owner=owner)
        elif isinstance(target, ast.Subscript):
            self.expr(target.value, env)
            self.expr(target.slice, env)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, k, env)

    # ---- expressions ------------------------------------------------------------------------

    def expr_quiet(self, node, env):
        rec, self.recording = self.recording, False
        try:
            return self.expr(node, env, inner=True)
        finally:
            self.recording = rec

    def expr(self, node, env, inner=False):
        t = type(node)
        if t is ast.Name:
            k = env.get(node.id)
            if is_ref(k) and not inner:
                self.record_ref(k[1])
            return k
        if t is ast.Attribute:
            return self.attribute(node, env, inner)
        if t is ast.Call:
            return self.call(node, env)
        if t is ast.Subscript:
            k = self.expr(node.value, env)
            self.expr(node.slice, env)
            if k is None:
                return None
            if k[0] == "seq" and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                try:
                    return k[1][node.slice.value]
                except IndexError:
                    return None
            if k[0] == "tdict":
                return TENSOR
            if k == TENSOR and isinstance(node.slice, ast.Slice):
                return TENSOR
            return elem_of(k)
        if t is ast.BinOp:
            a, b = self.expr(node.left, env), self.expr(node.right, env)
            return TENSOR if TENSOR in (a, b) else None
        if t is ast.UnaryOp:
            k = self.expr(node.operand, env)
            return TENSOR if k == TENSOR and not isinstance(node.op, ast.Not) else None
        if t is ast.Compare:
            ks = [self.expr(node.left, env)] + [self.expr(c, env) for c in node.comparators]
            is_ops = all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops)
            return TENSOR if TENSOR in ks and not is_ops else None
        if t is ast.IfExp:
            self.expr(node.test, env)
            a, b = self.expr(node.body, env), self.expr(node.orelse, env)
            return a if a is not None else b
        if t in (ast.Tuple, ast.List):
            return ("seq", tuple(self.expr(e, env) for e in node.elts))
        if t in (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp):
            cenv = ChainMap({}, env)
            for g in node.generators:
                self.bind(g.target, elem_of(self.expr(g.iter, cenv)), cenv)
                for cond in g.ifs:
                    self.expr(cond, cenv)
            if t is ast.DictComp:
                self.expr(node.key, cenv)
                return ("tdict",) if self.expr(node.value, cenv) == TENSOR else None
            return ("iterof", self.expr(node.elt, cenv))
        if t is ast.Dict:
            vals = [self.expr(v, env) for v in node.values]
            for key in node.keys:
                if key is not None:
                    self.expr(key, env)
            return ("tdict",) if vals and all(v == TENSOR for v in vals) else None
        if t is ast.Lambda:
            lenv = ChainMap({a.arg: None for a in node.args.args}, env)
            for d in node.args.defaults:
                self.expr(d, env)
            self.expr(node.body, lenv)
            return None
        if t is ast.NamedExpr:
            k = self.expr(node.value, env)
            self.bind(node.target, k, env)
            return k
        if t is ast.Starred:
            return self.expr(node.value, env)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, env)
            elif isinstance(child, ast.comprehension):
                self.expr(child.iter, env)
        return None

    def attribute(self, node, env, inner, owner=None):
        v = owner if owner is not None else self.expr(node.value, env, inner=True)
        attr = node.attr
        if is_ref(v):
            path = f"{v[1]}.{attr}"
            if not inner:
                self.record_ref(path)
            return ref(path)
        if v is not None and v[0] == "localmod":
            return self.from_sibling(self.project[v[1]], attr)
        name = self.owner_name(v, attr)
        if name:
            self.record(name)
        return self.attr_kind(v, attr)

    def owner_name(self, v, attr, called=False):
        """The normalised name of `attr` used on a value of kind `v`, or None."""
        if v is None:
            return None
        if v == TENSOR:
            if attr.startswith("__") or attr in NOT_TENSOR_METHODS or attr in self.user_methods:
                return None
            if not called and attr not in TENSOR_PROPERTIES:
                return None
            return f"Tensor.{attr}"
        if v == DDP and attr == "module":
            return "torch.nn.parallel.DistributedDataParallel.module"
        if v[0] in OWNER:
            prefix, api = OWNER[v[0]]
            if attr not in api:
                return None
            if v[0] == "module" and v[1] is not None and self.user_defines(v[1], attr):
                return None
            return f"{prefix}.{attr}"
        return None

    def user_defines(self, cls, attr, seen=()):
        info = self.classes.get(cls)
        if info is None or cls in seen:
            return False
        if attr in info["attrs"] or attr in info["methods"]:
            return True
        return any(self.user_defines(b, attr, seen + (cls,)) for b in info.get("bases", ()))

    def class_attr(self, cls, attr, seen=()):
        info = self.classes.get(cls)
        if info is None or cls in seen:
            return None
        if attr in info["attrs"]:
            return info["attrs"][attr]
        for b in info.get("bases", ()):
            k = self.class_attr(b, attr, seen + (cls,))
            if k is not None:
                return k
        return None

    def attr_kind(self, v, attr):
        if attr in ANY_TENSOR_ATTRS:
            return TENSOR
        if v is None:
            return None
        tag = v[0]
        if tag == "tensor":
            return TENSOR if attr in TENSOR_ATTRS else None
        if tag == "iterof" and v[1] == TENSOR and attr in ("values", "indices"):
            return TENSOR
        if tag in ("module", "obj"):
            cls = v[1]
            if attr == "module" and tag == "module":
                return ("module", None)
            if cls is not None and self.user_defines(cls, attr):
                k = self.class_attr(cls, attr)
                if k is None and attr in self.classes[cls]["methods"]:
                    return ("method", cls, attr)
                return k
            if tag == "module" and attr not in MODULE_API:
                return ("module", None)  # a sub-module, most likely
        return None

    def call(self, node, env):
        keywords = [k.arg for k in node.keywords if k.arg is not None]
        args = [self.expr(a, env) for a in node.args]
        for k in node.keywords:
            self.expr(k.value, env)
        f = node.func
        if isinstance(f, ast.Attribute):
            v = self.expr(f.value, env, inner=True)
            if is_ref(v):
                path = f"{v[1]}.{f.attr}"
                self.record_ref(path, keywords)
                return self.torch_result(path, args, node)
            if v is not None and v[0] == "localmod":
                return self.call_kind(self.from_sibling(self.project[v[1]], f.attr))
            name = self.owner_name(v, f.attr, called=True)
            if name:
                self.record(name, keywords)
            return self.method_result(v, f.attr, args, node, env)
        k = self.expr(f, env, inner=True)
        if is_ref(k):
            self.record_ref(k[1], keywords)
            return self.torch_result(k[1], args, node)
        if k is None:
            if isinstance(f, ast.Name):
                if f.id in ("zip",):
                    return ("zip", tuple(args))
                if f.id == "enumerate" and args:
                    return ("enumerate", args[0])
                if f.id in ("list", "tuple", "iter", "reversed", "sorted") and args:
                    return ("iterof", elem_of(args[0]))
                if f.id == "next" and args:
                    return elem_of(args[0])
            return None
        return self.call_kind(k)

    def call_kind(self, k):
        """The kind of the result of calling a value of kind `k` (not a torch name)."""
        if k is None:
            return None
        tag = k[0]
        if tag == "usercls":
            kind = self.classes.get(k[1], {}).get("kind")
            if kind == "module":
                return ("module", k[1])
            if kind in OWNER:
                return (kind,)
            return ("obj", k[1])
        if tag == "userfn":
            return self.functions.get(k[1])
        if tag == "method":
            return self.classes[k[1]]["methods"].get(k[2])
        if tag == "module":
            if k[1] is not None:
                ret = self.classes.get(k[1], {}).get("methods", {}).get("forward")
                if ret is not None:
                    return ret
            return TENSOR
        return None

    def torch_result(self, path, args, node):
        parts = path.split(".")
        last = parts[-1]
        if parts[0] != "torch":
            return None
        if path in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") or last.endswith("Tensor"):
            return TENSOR
        if path in ("torch.compile", "torch.jit.script", "torch.jit.trace"):
            return args[0] if args else None
        if path.startswith("torch.nn.functional.") or path.startswith("torch.nn.init."):
            return TUPLE if last in TUPLE_FUNCS else TENSOR
        if path in ("torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel"):
            return DDP
        if path.startswith("torch.nn.utils.") and not last[:1].isupper():
            return TENSOR  # clip_grad_norm_ (the norm), parameters_to_vector, pad_sequence…
        if path.startswith("torch.nn.") and last[:1].isupper():
            return ("module", None)
        if path.startswith("torch.optim.lr_scheduler.") and last[:1].isupper():
            return ("scheduler",)
        if path.startswith("torch.optim.") and len(parts) == 3 and last[:1].isupper():
            return ("optimizer",)
        if path.endswith("DataLoader"):
            return ("loader",)
        if path.endswith(".GradScaler"):
            return ("scaler",)
        if path == "torch.autograd.grad":
            return TUPLE
        if len(parts) == 2 or parts[1] in ("fft", "linalg", "special") and len(parts) == 3:
            if last in NON_TENSOR_FUNCS or last[:1].isupper():
                return None
            if last in TUPLE_FUNCS or last in REDUCE_PAIR and (len(node.args) > 1 or node.keywords):
                return TUPLE
            return TENSOR
        return None

    def method_result(self, v, attr, args, node, env):
        if v is None:
            return None
        tag = v[0]
        if tag == "tensor":
            if attr in NON_TENSOR_METHODS:
                return None
            if attr in TUPLE_FUNCS or attr in REDUCE_PAIR and (node.args or node.keywords):
                return TUPLE
            return TENSOR
        if tag in ("module", "obj"):
            cls = v[1]
            if cls is not None and attr in self.classes.get(cls, {}).get("methods", {}):
                return self.method_return(cls, attr)
            if tag == "obj":
                return None
            if attr in ("parameters", "buffers"):
                return TUPLE
            if attr in ("named_parameters", "named_buffers"):
                return ("iterof", ("seq", (None, TENSOR)))
            if attr == "state_dict":
                return ("tdict",)
            if attr in ("modules", "children"):
                return ("iterof", ("module", None))
            if attr in ("named_modules", "named_children"):
                return ("iterof", ("seq", (None, ("module", None))))
            if attr in MODULE_SAME:
                return v
            if attr in self.user_methods:  # a method of some class of this file
                for info in self.classes.values():
                    if info["methods"].get(attr) is not None:
                        return info["methods"][attr]
                return None
            if attr not in MODULE_API:  # calling a sub-module
                return TENSOR
            return None
        if tag == "scaler" and attr == "scale":
            return TENSOR
        if tag == "tdict":
            if attr == "items":
                return ("iterof", ("seq", (None, TENSOR)))
            if attr == "values":
                return TUPLE
            if attr in ("get", "pop"):
                return TENSOR
        return None

    def method_return(self, cls, name, seen=()):
        info = self.classes.get(cls)
        if info is None or cls in seen:
            return None
        if info["methods"].get(name) is not None:
            return info["methods"][name]
        for b in info.get("bases", ()):
            k = self.method_return(b, name, seen + (cls,))
            if k is not None:
                return k
        return None


def extract_source(source: str, filename: str, uses: dict | None = None) -> dict:
    """Records the names `source` uses into `uses` (name -> {"files", "kwargs"}) and returns it."""
    uses = {} if uses is None else uses
    tree = ast.parse(source, filename=filename)
    _File(tree, filename, uses).run()
    return uses


def to_json(uses: dict, corpus: list) -> dict:
    return {
        "format": FORMAT,
        "corpus": [{"repo": repo, "commit": commit} for repo, commit in corpus],
        "names": {
            name: {"files": sorted(e["files"]), "kwargs": {kw: sorted(fs) for kw, fs in sorted(e["kwargs"].items())}}
            for name, e in sorted(uses.items())
        },
    }


def extract(corpus_dir: Path, corpus=CORPUS) -> dict:
    """The names the repositories of `corpus`, checked out under `corpus_dir`, use."""
    uses = {}
    for repo, commit in corpus:
        base = corpus_dir / repo
        if not base.is_dir():
            raise SystemExit(f"{base}: missing; check out {repo} at {commit} there")
        if (base / ".git").exists():
            head = subprocess.run(
                ["git", "-C", str(base), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
            if head != commit:
                raise SystemExit(f"{base}: at {head}, the corpus pins {commit}")
        project = {}
        for path in sorted(base.rglob("*.py")):
            if ".git" in path.parts:
                continue
            inside = path.relative_to(base).as_posix()
            try:
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=inside)
            except SyntaxError as e:  # Python 2 leftovers and the like
                print(f"skipped {repo}/{inside}: {e.msg} (line {e.lineno})", file=sys.stderr)
                continue
            project[inside] = _File(tree, f"{repo}/{inside}", uses, project, inside)
        # What each file's classes and functions are is learnt first (twice, as files import
        # each other), then every file is interpreted again and records its uses.
        for _ in range(2):
            for f in project.values():
                f.run(record=False)
        for f in project.values():
            f.run()
    return to_json(uses, corpus)


# ---- the check ------------------------------------------------------------------------------

# Device-choice queries stay in scope though the rest of torch.cuda is out: programs call them
# to pick the device and its dtype.
CUDA_DEVICE_QUERIES = {
    "torch.cuda.is_available",
    "torch.cuda.device_count",
    "torch.cuda.current_device",
    "torch.cuda.set_device",
    "torch.cuda.get_device_name",
    "torch.cuda.is_bf16_supported",
}

RPC = "RPC framework over TensorPipe, with its futures (lucid.distributed is MPI collectives)"

# (prefix, reason): a name equal to the prefix or under it is out of scope. First match wins.
OUT_OF_SCOPE = [
    ("torch.cuda.nccl", "NCCL-only collectives"),
    ("torch.cuda.amp", "deprecated CUDA-only spelling of torch.amp (the torch.amp names are checked)"),
    ("torch.cuda", "CUDA-only runtime: streams, events, kernels, and the CUDA device's RNG and memory"),
    ("torch.version.cuda", "the version of the CUDA toolkit torch was built with (CUDA-only)"),
    ("torch.backends.cudnn", "cuDNN (CUDA-only) kernel switches"),
    ("torch.backends.cuda", "CUDA-only kernel switches (TF32, attention kernel choice)"),
    ("torch.compile", "compilation: torch.compile"),
    ("torch._dynamo", "compilation: torch.compile"),
    ("torch.jit", "compilation: TorchScript (torch.jit)"),
    ("torch.fx", "program capture and rewriting, the front end of torch.compile/jit"),
    ("torch.onnx", "export to ONNX, by tracing with torch.jit/torch.export"),
    ("torch.classes", "C++ extensions: TorchScript custom classes and the operator registry"),
    ("torch.ops", "C++ extensions: TorchScript custom classes and the operator registry"),
    ("torch.distributed.rpc", RPC),
    ("torch.distributed.autograd", RPC),
    # (ZeroRedundancyOptimizer, the rest of torch.distributed.optim, is in scope.)
    ("torch.distributed.optim.DistributedOptimizer", RPC),
    ("torch.distributed.optim.PostLocalSGDOptimizer", "sharded/tensor-parallel training over NCCL/Gloo process groups"),
    (
        "torch.distributed.optim.apply_optimizer_in_backward",
        "sharded/tensor-parallel training over NCCL/Gloo process groups",
    ),
    ("torch.distributed.optim.named_optimizer", "sharded/tensor-parallel training over NCCL/Gloo process groups"),
    ("torch.distributed.nn", RPC),
    ("torch.futures", RPC),
    ("torch.distributed.fsdp", "sharded/tensor-parallel training over NCCL/Gloo process groups"),
    ("torch.distributed.tensor", "sharded/tensor-parallel training over NCCL/Gloo process groups"),
    ("torch.distributed._tensor", "sharded/tensor-parallel training over NCCL/Gloo process groups"),
    ("torch.distributed.device_mesh", "sharded/tensor-parallel training over NCCL/Gloo process groups"),
    ("torch.distributed.checkpoint", "sharded/tensor-parallel training over NCCL/Gloo process groups"),
    ("torch.distributed.algorithms", "sharded/tensor-parallel training over NCCL/Gloo process groups"),
    ("torch.distributed.is_nccl_available", "NCCL-only"),
    ("torch.distributed.is_gloo_available", "Gloo-only"),
    ("torch.utils.tensorboard", "TensorBoard logging (the tensorboard package)"),
    (
        "torch.multiprocessing",
        "starting training processes from Python: lucid.distributed's ranks are started by "
        "mpiexec, and its tensors live in the engine, not in shared memory",
    ),
    ("torch.nn.Module.share_memory", "sharing a module's tensors with processes torch.multiprocessing starts"),
    ("torch.autograd.profiler", "the autograd profiler (lucid.metal.stats() counts what the GPU ran)"),
    ("torch.profiler", "the autograd profiler (lucid.metal.stats() counts what the GPU ran)"),
    ("torch.hub", "downloads of models and weights from the network"),
    ("torch.nn.modules.linear.NonDynamicallyQuantizableLinear", "an internal class of PyTorch's quantization"),
    ("torch.polar", "complex tensors (lucid has none; rotary embeddings are written with cos and sin)"),
    ("torch.view_as_complex", "complex tensors (lucid has none; rotary embeddings are written with cos and sin)"),
    ("torch.view_as_real", "complex tensors (lucid has none; rotary embeddings are written with cos and sin)"),
    ("torch.nn.Module.to_empty", "materialising a module built on the meta device, for sharded training"),
    ("torchvision", "separate package: torchvision"),
    ("torchtext", "separate package: torchtext"),
    ("torchaudio", "separate package: torchaudio"),
]

AREAS = [  # (title, prefix) in report order; a name goes to the longest matching prefix
    ("torch (functions, dtypes, classes)", "torch."),
    ("Tensor methods and attributes", "Tensor."),
    ("torch.nn (layers, Module)", "torch.nn."),
    ("torch.nn.functional", "torch.nn.functional."),
    ("torch.nn.init", "torch.nn.init."),
    ("torch.nn.utils", "torch.nn.utils."),
    ("torch.optim", "torch.optim."),
    ("torch.optim.lr_scheduler", "torch.optim.lr_scheduler."),
    ("torch.utils.data", "torch.utils.data."),
    ("torch.amp, torch.autograd", "torch.amp."),
    ("torch.amp, torch.autograd", "torch.autograd."),
    ("torch.distributed, torch.multiprocessing", "torch.distributed."),
    ("torch.distributed, torch.multiprocessing", "torch.multiprocessing."),
    ("torch.nn.parallel", "torch.nn.parallel."),
    ("torch.cuda, torch.backends", "torch.cuda."),
    ("torch.cuda, torch.backends", "torch.backends."),
    ("other packages", "torchvision."),
    ("other packages", "torchtext."),
    ("other packages", "torchaudio."),
]


def out_of_scope(name: str):
    """The reason `name` is out of scope, or None."""
    if name in CUDA_DEVICE_QUERIES:
        return None
    for prefix, reason in OUT_OF_SCOPE:
        if name == prefix or name.startswith(prefix + "."):
            return reason
    return None


def area(name: str) -> str:
    best = ("other", "")
    for title, prefix in AREAS:
        if name.startswith(prefix) and len(prefix) > len(best[1]):
            best = (title, prefix)
    return best[0]


def _instances():
    """Representative lucid objects: the receivers of the Tensor., Module, optimizer, scheduler
    and loader names (instance attributes count as well as class ones)."""
    import lucid

    made = {}

    def attempt(key, make):
        try:
            made[key] = make()
        except Exception:  # a missing class leaves the look-up to the class path
            pass

    attempt("Tensor", lambda: lucid.zeros(2, 2))
    attempt("torch.nn.Module", lambda: lucid.nn.Module())
    attempt("torch.optim.Optimizer", lambda: lucid.optim.SGD([lucid.nn.Parameter(lucid.zeros(2))], lr=0.1))
    if "torch.optim.Optimizer" in made:
        attempt(
            "torch.optim.lr_scheduler.LRScheduler",
            lambda: lucid.optim.lr_scheduler.StepLR(made["torch.optim.Optimizer"], step_size=1),
        )
    attempt("torch.utils.data.DataLoader", lambda: lucid.utils.data.DataLoader([lucid.zeros(2)]))
    attempt("torch.amp.GradScaler", lambda: lucid.amp.GradScaler())
    return made


def resolve(name: str, instances: dict):
    """The lucid object that serves the torch name `name`; raises LookupError if there is none."""
    import importlib

    owner, _, attr = name.rpartition(".")
    if owner in instances:
        obj = instances[owner]
        if hasattr(type(obj), attr):  # a method or property: its signature is the class's
            return getattr(type(obj), attr)
        try:
            return getattr(obj, attr)
        except AttributeError:
            if _sets_attribute(type(obj), attr):
                return None
            raise LookupError(name) from None
        except Exception:  # a property that fails on this instance exists all the same
            return None
    parts = name.split(".")
    if parts[0] == "Tensor":
        parts = ["torch"] + parts
    if parts[0] != "torch":
        raise LookupError(name)
    parts[0] = "lucid"
    obj = importlib.import_module("lucid")
    for i in range(1, len(parts)):
        try:
            obj = getattr(obj, parts[i])
            continue
        except AttributeError:
            pass
        if isinstance(obj, type) and i == len(parts) - 1 and _sets_attribute(obj, parts[i]):
            return None  # an instance attribute (DistributedDataParallel.module)
        try:
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ImportError:
            raise LookupError(name) from None
    return obj


def _sets_attribute(cls: type, attr: str) -> bool:
    """Whether a method of `cls` or of a base assigns ``self.<attr>``."""
    import inspect
    import textwrap

    for klass in cls.__mro__:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and t.attr == attr
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                ):
                    return True
    return False


def accepts(obj, keyword: str) -> bool:
    """Whether calling `obj` accepts `keyword` (by name, or through **kwargs)."""
    import inspect

    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            return True
        if p.name == keyword and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            return True
    return False


def check(corpus: dict) -> dict:
    """Each name and (name, keyword) of `corpus` marked covered, missing or out of scope."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    instances = _instances()
    rows = []
    for name, entry in corpus["names"].items():
        reason = out_of_scope(name)
        obj, found = None, False
        if reason is None:
            try:
                obj, found = resolve(name, instances), True
            except LookupError:
                pass
        kwargs = {}
        for kw, files in entry["kwargs"].items():
            kwargs[kw] = {"files": files, "covered": found and accepts(obj, kw)}
        rows.append(
            {
                "name": name,
                "area": area(name),
                "files": entry["files"],
                "out_of_scope": reason,
                "covered": found,
                "kwargs": kwargs,
            }
        )
    return {"rows": rows}


def _pct(num, den):
    return f"{100.0 * num / den:.1f} %" if den else "–"


def summary(result: dict) -> dict:
    """Counts per area and in total."""
    order = []
    for title, _ in AREAS:
        if title not in order:
            order.append(title)
    order.append("other")
    counts = {t: defaultdict(int) for t in order}
    for r in result["rows"]:
        for key in (r["area"], "total"):
            c = counts.setdefault(key, defaultdict(int))
            c["used"] += 1
            c["kw_used"] += len(r["kwargs"])
            if r["out_of_scope"]:
                c["out"] += 1
                c["kw_out"] += len(r["kwargs"])
                continue
            c["in"] += 1
            c["covered"] += r["covered"]
            c["kw_in"] += len(r["kwargs"])
            c["kw_covered"] += sum(k["covered"] for k in r["kwargs"].values())
    return {t: counts[t] for t in order + ["total"] if counts[t]["used"]}


def coverage(result: dict) -> float:
    c = summary(result)["total"]
    den = c["in"] + c["kw_in"]
    return 100.0 * (c["covered"] + c["kw_covered"]) / den if den else 100.0


def missing(result: dict) -> list:
    """Missing names and keywords, most used first: {"name", "keyword" (or None), "files"}."""
    out = []
    for r in result["rows"]:
        if r["out_of_scope"]:
            continue
        if not r["covered"]:
            out.append({"name": r["name"], "keyword": None, "files": r["files"]})
        for kw, k in r["kwargs"].items():
            if not k["covered"]:
                out.append({"name": r["name"], "keyword": kw, "files": k["files"]})
    out.sort(key=lambda m: (-len(m["files"]), m["name"], m["keyword"] or ""))
    return out


def table(result: dict) -> str:
    """The coverage table, one row per area and a total."""
    lines = [
        "| Area | Names used | Out of scope | Names covered | Keyword arguments covered | Coverage |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for title, c in summary(result).items():
        label = f"**{title}**" if title == "total" else title
        lines.append(
            f"| {label} | {c['used']} | {c['out']} | {c['covered']} / {c['in']} "
            f"| {c['kw_covered']} / {c['kw_in']} "
            f"| {_pct(c['covered'] + c['kw_covered'], c['in'] + c['kw_in'])} |"
        )
    return "\n".join(lines)


def report(result: dict, corpus: dict) -> str:
    lines = [
        f"Corpus: every Python file of {', '.join(c['repo'] for c in corpus['corpus'])} "
        "(commits pinned in tools/api_coverage.py).",
        "",
        table(result),
        "",
        "Coverage counts in-scope names and (name, keyword argument) pairs alike.",
        "",
    ]
    reasons = defaultdict(list)
    for r in result["rows"]:
        if r["out_of_scope"]:
            reasons[r["out_of_scope"]].append(r["name"])
    lines.append("Out of scope:")
    for reason, names in sorted(reasons.items(), key=lambda x: -len(x[1])):
        lines.append(f"- {reason}: {len(names)} ({', '.join(sorted(names)[:4])}{', …' if len(names) > 4 else ''})")
    miss = missing(result)
    lines += ["", f"Missing ({len(miss)}), by number of files using it:"]
    for m in miss:
        what = m["name"] if m["keyword"] is None else f"{m['name']}({m['keyword']}=)"
        files = ", ".join(m["files"][:3]) + (", …" if len(m["files"]) > 3 else "")
        lines.append(f"- `{what}` — {len(m['files'])}: {files}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--extract",
        metavar="CORPUS_DIR",
        type=Path,
        help="parse the corpus checked out under CORPUS_DIR/<owner>/<name> and write the JSON",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_JSON, help="where --extract writes (default: %(default)s)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_JSON, help="the JSON to check (default: %(default)s)")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the missing names as JSON instead of the report")
    out.add_argument("--table", action="store_true", help="print only the coverage table (the README's)")
    ap.add_argument("--check", type=float, metavar="MIN", help="exit 1 if coverage is below MIN %%")
    args = ap.parse_args(argv)
    if args.extract is not None:
        data = extract(args.extract)
        args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{args.out}: {len(data['names'])} names", file=sys.stderr)
        return 0
    corpus = json.loads(args.corpus.read_text())
    if corpus.get("format") != FORMAT:
        raise SystemExit(f"{args.corpus}: format {corpus.get('format')}, expected {FORMAT}")
    result = check(corpus)
    cov = coverage(result)
    if args.json:
        print(json.dumps({"coverage": round(cov, 2), "missing": missing(result)}, indent=1))
    elif args.table:
        print(table(result))
    else:
        print(report(result, corpus))
    if args.check is not None and cov < args.check:
        print(f"coverage {cov:.1f} % is below {args.check} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
