"""lucid.amp.inspect: where a lower precision hurts, per op and per module.

While an inspection is live on a thread, the engine counts, for every op that runs in float16
or bfloat16 under autocast there, the values of its floating inputs before the cast and of its
result: the largest magnitude, how many overflow float16's and bfloat16's finite ranges, how
many non-zero ones fall below their normal ranges (to subnormals or zero), and how many are
infinite or NaN. The counting is done by kernels on the tensors' device, into counters there;
nothing is read back until the inspection ends. Module paths come from ``Module.__call__``.
GradScaler steps taken inside the scope are recorded too: the scale of each step, and for a
skipped one the parameters whose gradients were not finite.
"""

from __future__ import annotations

import contextlib
import threading
import weakref

from .. import _C
from .._types import dtype_from_code
from ..nn import module as _module

_BANDS = ("overflow_float16", "underflow_float16", "overflow_bfloat16", "underflow_bfloat16", "nonzero", "nonfinite")
_DEVICES = dict(_C.device_table())

SAFE_FLOAT16 = "safe in float16"
USE_BFLOAT16 = "use bfloat16"
KEEP_FLOAT32 = "keep in float32"
_VERDICTS = {
    _C.VERDICT_SAFE_FLOAT16: SAFE_FLOAT16,
    _C.VERDICT_USE_BFLOAT16: USE_BFLOAT16,
    _C.VERDICT_KEEP_FLOAT32: KEEP_FLOAT32,
}
_SEVERITY = {SAFE_FLOAT16: 0, USE_BFLOAT16: 1, KEEP_FLOAT32: 2}


class _Thread(threading.local):
    def __init__(self):
        self.live = []  # this thread's live inspection runs (_Run), innermost last
        self.modules = []  # (module, path) of the module calls in progress


_thread = _Thread()


def _child_name(parent, child):
    """`child`'s dotted name under `parent` (a direct child, or one deeper), or its class name."""
    for name, m in parent.__dict__.get("_modules", {}).items():
        if m is child:
            return name
    for name, m in parent.named_modules():
        if m is child and name:
            return name
    return type(child).__name__


@contextlib.contextmanager
def _module_call(module):
    """Records the ops of `module`'s forward under its path while an inspection is live."""
    stack = _thread.modules
    if not _thread.live:
        yield
        return
    if stack:
        parent, parent_path = stack[-1]
        name = _child_name(parent, module)
        path = f"{parent_path}.{name}" if parent_path else name
    else:
        path = ""
        for run in _thread.live:
            run.roots.setdefault(id(module), weakref.ref(module))
    stack.append((module, path))
    _C.amp_inspect_set_module(path)
    try:
        yield
    finally:
        stack.pop()
        _C.amp_inspect_set_module(stack[-1][1] if stack else "")


_live = 0  # inspections live in the process: module calls record their paths only while any is
_live_lock = threading.Lock()
_call_context = None  # the handle of _module_call among the module call contexts, while any is live


def _set_live(change):
    global _live, _call_context
    with _live_lock:
        _live += change
        if _live and _call_context is None:
            _call_context = _module._register_call_context(_module_call)
        elif not _live and _call_context is not None:
            _call_context.remove()
            _call_context = None


def _fraction(count, total):
    return count / total if total else 0.0


class OpRecord:
    """What an inspection found for one op in one module (on one device, in one dtype).
    ``input_bands`` and ``result_bands`` are the raw counts by band: ``overflow_float16``,
    ``underflow_float16``, ``overflow_bfloat16``, ``underflow_bfloat16``, ``nonzero`` and
    ``nonfinite`` (see :mod:`lucid.amp.inspect`)."""

    def __init__(self, op, module, device, dtype, calls, inputs, results, verdict, reason):
        self.op, self.module, self.device, self.dtype, self.calls = op, module, device, dtype, calls
        self._judgement = (_VERDICTS[verdict], reason)
        self.input_elements = int(inputs[0])
        self.max_abs = inputs[1]
        self.result_max_abs = results[1]
        self.result_elements = int(results[0])
        self.input_bands = dict(zip(_BANDS, (int(v) for v in inputs[2:])))  # counts by band
        self.result_bands = dict(zip(_BANDS, (int(v) for v in results[2:])))

    @property
    def _half(self):
        return self.dtype.name == "float16"

    @property
    def overflow(self) -> float:
        """Fraction of the finite input values beyond the target dtype's finite range."""
        band = "overflow_float16" if self._half else "overflow_bfloat16"
        return _fraction(self.input_bands[band], self.input_elements)

    @property
    def underflow(self) -> float:
        """Fraction of the non-zero input values the cast makes subnormal or zero."""
        band = "underflow_float16" if self._half else "underflow_bfloat16"
        return _fraction(self.input_bands[band], self.input_bands["nonzero"])

    @property
    def nonfinite_inputs(self) -> int:
        """Input values that were already infinite or NaN (from an earlier op)."""
        return self.input_bands["nonfinite"]

    @property
    def nonfinite_result(self) -> bool:
        """Whether the result held an infinity or NaN."""
        return self.result_bands["nonfinite"] > 0

    @property
    def introduced_nonfinite(self) -> bool:
        """The result held inf or NaN while every input was finite: this op made them."""
        return self.nonfinite_result and self.nonfinite_inputs == 0

    @property
    def judgement(self) -> tuple:
        """``(verdict, reason)``, the engine's: whether this op is safe in float16, needs
        bfloat16's range, or needs float32, and the first finding that says so ("" when safe).
        More than 1 % of non-zero inputs below a dtype's normals counts as a finding."""
        return self._judgement

    @property
    def verdict(self) -> str:
        """Whether this op is safe in float16, needs bfloat16's range, or needs float32."""
        return self.judgement[0]

    @property
    def risk(self) -> tuple:
        """Sort key, highest risk first when sorted in reverse."""
        return (
            _SEVERITY[self.verdict],
            self.introduced_nonfinite,
            self.overflow,
            self.nonfinite_result,
            self.underflow,
            self.max_abs,
        )

    @property
    def flagged(self) -> bool:
        """Whether anything was found: an overflow, an underflow past the limit, or inf/NaN."""
        return self.verdict != SAFE_FLOAT16 or self.nonfinite_result or self.nonfinite_inputs > 0

    def as_dict(self) -> dict:
        return {
            "op": self.op,
            "module": self.module,
            "device": self.device,
            "dtype": self.dtype.name,
            "calls": self.calls,
            "max_abs": self.max_abs,
            "overflow": self.overflow,
            "underflow": self.underflow,
            "nonfinite_inputs": self.nonfinite_inputs,
            "nonfinite_result": self.nonfinite_result,
            "introduced_nonfinite": self.introduced_nonfinite,
            "result_max_abs": self.result_max_abs,
            "input_elements": self.input_elements,
            "result_elements": self.result_elements,
            "verdict": self.verdict,
            "reason": self.judgement[1],
        }

    def __repr__(self):
        return (
            f"OpRecord({self.module or '<top>'}: {self.op}, {self.dtype.name}, calls={self.calls}, "
            f"max_abs={self.max_abs:.4g}, overflow={self.overflow:.3g}, underflow={self.underflow:.3g}, "
            f"nonfinite_result={self.nonfinite_result}, verdict={self.verdict!r})"
        )


class ScalerStep:
    """One GradScaler step inside an inspection: its scale, whether it was skipped, and the
    parameters whose gradients were infinite or NaN."""

    def __init__(self, step, scale, skipped, nonfinite):
        self.step, self.scale, self.skipped, self.nonfinite = step, scale, skipped, nonfinite

    def as_dict(self) -> dict:
        return {"step": self.step, "scale": self.scale, "skipped": self.skipped, "nonfinite": list(self.nonfinite)}

    def __repr__(self):
        return f"ScalerStep({self.step}, scale={self.scale:g}, skipped={self.skipped}, nonfinite={self.nonfinite})"


class Report:
    """An inspection's findings: ``ops`` sorted by risk (highest first), a verdict per module,
    and the GradScaler history."""

    def __init__(self, ops, scaler):
        self.ops = sorted(ops, key=lambda r: r.risk, reverse=True)
        self.scaler = scaler

    @property
    def findings(self) -> list:
        """The ops where something was found (empty for a model safe in float16)."""
        return [r for r in self.ops if r.flagged]

    @property
    def modules(self) -> dict:
        """``{module path: verdict}``, the worst verdict of the ops run directly in it, riskiest
        first ("" is ops outside any module or in the top-level module's own forward)."""
        return {m: verdict for m, (verdict, _) in self.judgements.items()}

    @property
    def judgements(self) -> dict:
        """``{module path: (verdict, reason)}``: each module's verdict and one line on why, from
        its riskiest op ("" when safe), riskiest module first."""
        out = {}
        for r in self.ops:  # riskiest first, so a module's first op is its worst
            out.setdefault(r.module, r.judgement)
        return dict(sorted(out.items(), key=lambda kv: -_SEVERITY[kv[1][0]]))

    @property
    def skipped_steps(self) -> list:
        return [s for s in self.scaler if s.skipped]

    def as_dict(self) -> dict:
        return {
            "ops": [r.as_dict() for r in self.ops],
            "modules": self.modules,
            "reasons": {m: why for m, (_, why) in self.judgements.items()},
            "grad_scaler": [s.as_dict() for s in self.scaler],
        }

    def to_markdown(self) -> str:
        lines = ["| module | verdict | why |", "|---|---|---|"]
        lines += [f"| `{m or '<top>'}` | {v} | {why} |" for m, (v, why) in self.judgements.items()]
        lines += [
            "",
            "| module | op | dtype | calls | max \\|x\\| | overflow | underflow | inf/NaN out | verdict |",
            "|---|---|---|---:|---:|---:|---:|---|---|",
        ]
        for r in self.ops:
            out = "made here" if r.introduced_nonfinite else ("passed on" if r.nonfinite_result else "no")
            lines.append(
                f"| `{r.module or '<top>'}` | {r.op} | {r.dtype.name} | {r.calls} | {r.max_abs:.4g} | "
                f"{r.overflow:.2%} | {r.underflow:.2%} | {out} | {r.verdict} |"
            )
        if self.scaler:
            skipped = self.skipped_steps
            lines += [
                "",
                f"GradScaler: {len(self.scaler)} steps, {len(skipped)} skipped; scale "
                f"{self.scaler[0].scale:g} → {self.scaler[-1].scale:g}.",
            ]
            for s in skipped[:10]:
                lines.append(
                    f"- step {s.step} skipped (scale {s.scale:g}): non-finite gradient in "
                    f"{', '.join(s.nonfinite) or 'no parameter named'}"
                )
            if len(skipped) > 10:
                lines.append(f"- … and {len(skipped) - 10} more skipped steps")
        return "\n".join(lines)

    def __str__(self):
        return self.to_markdown()

    def __repr__(self):
        return f"Report({len(self.ops)} ops, {len(self.findings)} findings, {len(self.scaler)} scaler steps)"


class inspect(contextlib.ContextDecorator):
    """Records where float16 or bfloat16 hurts, per op and per module path, for the ops that
    run in a lower precision under autocast on this thread while it is live.

    ::

        with lucid.amp.inspect() as inspection:
            with lucid.autocast("metal", dtype=lucid.float16):
                loss = model(x).sum()
            scaler.scale(loss).backward()
            scaler.step(opt); scaler.update()
        print(inspection.report.to_markdown())

    As a decorator, each call is inspected and ``report`` is the last call's. Off (no live
    inspection), nothing is counted; on, every cast input and result is read once more by a
    kernel on its device.
    """

    SAFE_FLOAT16, USE_BFLOAT16, KEEP_FLOAT32 = SAFE_FLOAT16, USE_BFLOAT16, KEEP_FLOAT32

    def __init__(self):
        self.report = None
        self._open = {}  # thread id -> this object's live runs on that thread, innermost last

    def __enter__(self):
        run = _Run(_C.amp_inspect_begin())
        self._open.setdefault(threading.get_ident(), []).append(run)
        _thread.live.append(run)
        _set_live(+1)
        _C.amp_inspect_set_module(_thread.modules[-1][1] if _thread.modules else "")
        return self

    def __exit__(self, *exc):
        runs = self._open.get(threading.get_ident())
        if not runs:
            raise RuntimeError("lucid.amp.inspect: the scope must end on the thread that began it")
        run = runs.pop()
        if not runs:
            del self._open[threading.get_ident()]
        _thread.live.remove(run)
        _set_live(-1)
        self.report = run.end()
        return False

    # The report's views, for ``with inspect() as i: ...; i.to_markdown()``.
    def to_markdown(self) -> str:
        return self._ended().to_markdown()

    def as_dict(self) -> dict:
        return self._ended().as_dict()

    def _ended(self) -> Report:
        if self.report is None:
            raise RuntimeError("the inspection has no report until its scope ends")
        return self.report


class _Run:
    """One entered scope of an inspection: the engine's id, the top-level modules called in it
    and GradScaler's steps."""

    def __init__(self, id_):
        self.id = id_
        self.roots = {}
        self.scaler = []

    def end(self) -> Report:
        n = _C.amp_inspect_end(self.id)
        ops = []
        for i in range(n):
            op, module, device, dtype, calls, inputs, results, verdict, reason = _C.amp_inspect_entry(i)
            ops.append(
                OpRecord(op, module, _DEVICES[device], dtype_from_code(dtype), calls, inputs, results, verdict, reason)
            )
        steps = []
        for i, (scale, found, flags) in enumerate(self.scaler):
            skipped = bool(found.item())
            steps.append(
                ScalerStep(i, float(scale.item()), skipped, [n for n, flag in flags if skipped and flag.item()])
            )
        return Report(ops, steps)

    def record_scaler_step(self, scale, found, flags):
        # Parameters are named now, after the modules called in the scope (which may be gone by
        # its end); one never called through a module is named by its shape.
        names = {}
        for ref in self.roots.values():
            root = ref()
            if root is not None:
                for name, p in root.named_parameters():
                    names.setdefault(id(p), name)
        self.scaler.append(
            (scale, found, [(names.get(id(p), f"<parameter {tuple(p.shape)}>"), flag) for p, flag in flags])
        )


def _scaler_step(scale, found, flags):
    """Called by GradScaler.update with device tensors (read when the inspection ends)."""
    for run in _thread.live:
        run.record_scaler_step(scale, found, flags)


__all__ = ["inspect", "Report", "OpRecord", "ScalerStep", "SAFE_FLOAT16", "USE_BFLOAT16", "KEEP_FLOAT32"]
