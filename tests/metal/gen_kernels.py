"""Compiles lucid's Metal kernel library as C++ for the Metal emulation: reads every `kernel`
of the given .metal files (after the C preprocessor, so macro-made kernels count) with the MSL
attributes of its parameters, and writes one C++ file that includes the files in the given
order (Common.metal first, as tools/embed_metal.py lists them) and a table describing every
kernel with a function that calls it from bound arguments
(tests/metal/MSLKernels/include/MSLKernels.h). Each family's file is a library of its own,
Common.metal followed by the file: the table carries the hash of that joined source, which
the emulated makeLibrary(source:) compares with the source it is given.

    python tests/metal/gen_kernels.py --clang CLANG --out OUT.cpp $(python tools/embed_metal.py --list) \
        --test-library tests/metal/EmulationTestKernels.metal

`--test-library` files are compiled too, each as a library of its own (its own hash): kernels
that only the emulation's own tests use.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILTINS = {
    "thread_position_in_grid",
    "threads_per_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "threadgroups_per_grid",
    "thread_index_in_threadgroup",
    "simdgroup_index_in_threadgroup",
    "thread_index_in_simdgroup",
}
# SIMD groups of 32 threads, numbered along the threadgroup's thread index, as on Apple GPUs.
SIMD_WIDTH = 32
KINDS = {
    "device": "LUCID_MSL_DEVICE_POINTER",
    "constant": "LUCID_MSL_CONSTANT_REF",
    "threadgroup": "LUCID_MSL_THREADGROUP",
}


def fnv1a(data: bytes) -> int:
    h = 1469598103934665603
    for b in data:
        h ^= b
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def split_top(text, sep=","):
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def body_of(text, start):
    """The text of the braced body that opens at text[start] == '{'."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    raise SystemExit(f"gen_kernels: unbalanced braces after offset {start}")


def barrier_functions(text):
    """Names of the (non-kernel) functions that call threadgroup_barrier or a SIMD-group
    collective, directly or through another such function."""
    bodies = {}
    for m in re.finditer(r"\b(?:inline\s+)?[\w:<>]+\s+(\w+)\s*\([^;{]*\)\s*\{", text):
        if m.group(1) in ("if", "for", "while", "switch"):
            continue
        bodies[m.group(1)] = body_of(text, m.end() - 1)
    # The SIMD-group collectives meet as barriers do (metal_stdlib).
    found = {
        name for name, body in bodies.items() if "threadgroup_barrier" in body or "lucid_msl_simd_exchange" in body
    }
    while True:
        more = {
            name
            for name, body in bodies.items()
            if name not in found and any(re.search(rf"\b{f}\s*\(", body) for f in found)
        }
        if not more:
            return found
        found |= more


def parse_param(kernel, raw):
    m = re.search(r"\[\[\s*(\w+)\s*(?:\(\s*(\d+)\s*\))?\s*\]\]", raw)
    if not m:
        raise SystemExit(f"gen_kernels: {kernel}: parameter '{raw.strip()}' has no MSL attribute")
    attr, index = m.group(1), m.group(2)
    decl = (raw[: m.start()] + raw[m.end() :]).strip()
    tokens = re.findall(r"[A-Za-z_]\w*|\*|&", decl)
    if not tokens:
        raise SystemExit(f"gen_kernels: {kernel}: cannot read parameter '{raw.strip()}'")
    name = tokens[-1]
    rest = tokens[:-1]
    space = rest[0] if rest and rest[0] in KINDS else None
    if space:
        rest = rest[1:]
    is_const = "const" in rest
    pointer = "*" in rest
    reference = "&" in rest
    type_ = " ".join(t for t in rest if t not in ("const", "*", "&"))
    if attr in BUILTINS:
        if space or pointer or reference or type_ not in ("uint", "uint2", "uint3"):
            raise SystemExit(f"gen_kernels: {kernel}: builtin '{name}' must be a plain uint, uint2 or uint3")
        return dict(name=name, kind="LUCID_MSL_BUILTIN", index=-1, type=type_, const=0, builtin=attr)
    if attr == "buffer":
        if space == "device" and pointer:
            kind = "LUCID_MSL_DEVICE_POINTER"
        elif space == "constant" and reference:
            kind = "LUCID_MSL_CONSTANT_REF"
        else:
            raise SystemExit(f"gen_kernels: {kernel}: '{name}' [[buffer]] must be `device T*` or `constant T&`")
    elif attr == "threadgroup":
        if space != "threadgroup" or not pointer:
            raise SystemExit(f"gen_kernels: {kernel}: '{name}' [[threadgroup]] must be `threadgroup T*`")
        kind = "LUCID_MSL_THREADGROUP"
    else:
        raise SystemExit(f"gen_kernels: {kernel}: unknown attribute [[{attr}]] on '{name}'")
    return dict(name=name, kind=kind, index=int(index), type=type_, const=int(is_const), builtin=None)


def argument(i, p):
    if p["kind"] == "LUCID_MSL_BUILTIN":
        field = f"t->{p['builtin']}"
        if p["builtin"] == "thread_index_in_threadgroup":
            return field
        if p["builtin"] == "simdgroup_index_in_threadgroup":
            return f"(t->thread_index_in_threadgroup / {SIMD_WIDTH}u)"
        if p["builtin"] == "thread_index_in_simdgroup":
            return f"(t->thread_index_in_threadgroup % {SIMD_WIDTH}u)"
        return {
            "uint": f"{field}.x",
            "uint2": f"uint2{{{field}.x, {field}.y}}",
            "uint3": f"uint3{{{field}.x, {field}.y, {field}.z}}",
        }[p["type"]]
    const = "const " if p["const"] or p["kind"] == "LUCID_MSL_CONSTANT_REF" else ""
    if p["kind"] == "LUCID_MSL_CONSTANT_REF":
        return f"*static_cast<const {p['type']} *>(args[{i}])"
    return f"static_cast<{const}{p['type']} *>(args[{i}])"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clang", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--test-library", action="append", default=[])
    ap.add_argument("sources", nargs="+")
    opts = ap.parse_args()
    out = Path(opts.out)
    lines = [
        "// Generated by tests/metal/gen_kernels.py: lucid's Metal kernels compiled as C++. Do not edit.",
        '#include <metal_stdlib>',
        '#include "MSLKernels.h"',
        "",
        "namespace lucid_msl {",
    ]
    sources = [Path(src).resolve() for src in opts.sources]
    # (file, the hash of the library it belongs to): each family's library (Common.metal and
    # the family's file), then each test library alone.
    common = sources[0].read_bytes()
    units = [(src, fnv1a(common + src.read_bytes())) for src in sources[1:]]
    units += [(src, fnv1a(src.read_bytes())) for src in (Path(t).resolve() for t in opts.test_library)]
    lines += [f'#include "{os.path.relpath(src, out.parent)}"' for src in [sources[0]] + [u for u, _ in units]] + [""]
    texts = []
    for src, _ in units:
        # A family's file sees Common.metal's macros (its shared kernel bodies), as it does
        # when joined with it into its library.
        shared = ["-include", str(sources[0])] if src in sources[1:] else []
        scan = subprocess.run(
            [
                opts.clang,
                "-E",
                "-P",
                "-x",
                "c++",
                "-std=c++17",
                "-D__LUCID_MSL_SCAN__",
                f"-I{HERE / 'include'}",
                *shared,
                str(src),
            ],
            capture_output=True,
            text=True,
        )
        if scan.returncode:
            sys.stderr.write(scan.stderr)
            raise SystemExit(f"gen_kernels: preprocessing {src} failed")
        texts.append(scan.stdout)
    # A kernel may call a barrier through a helper from an earlier file of its library.
    helpers = barrier_functions("\n".join(texts))
    table = []
    for (src, library_hash), text in zip(units, texts):
        for m in re.finditer(r"\bkernel\s+void\s+(\w+)\s*\(", text):
            name = m.group(1)
            close = m.end()
            depth = 1
            while depth:
                depth += {"(": 1, ")": -1}.get(text[close], 0)
                close += 1
            params = [parse_param(name, p) for p in split_top(text[m.end() : close - 1])]
            brace = text.index("{", close)
            body = body_of(text, brace)
            barrier = "threadgroup_barrier" in body or any(re.search(rf"\b{f}\s*\(", body) for f in helpers)
            if re.search(r"\bthreadgroup\s+[\w:<>]+\s+\w+\s*\[", body):
                # An array declared in the body would be one copy per thread in C++ (pointers
                # into threadgroup memory are fine).
                raise SystemExit(
                    f"gen_kernels: {name}: declare threadgroup memory as a `threadgroup T* name "
                    f"[[threadgroup(n)]]` parameter (sized with setThreadgroupMemoryLength), "
                    f"not inside the kernel"
                )
            call = ", ".join(argument(i, p) for i, p in enumerate(params))
            lines.append(f"static void invoke_{name}(void *const *args, const lucid_msl_thread *t) {{")
            lines.append(f"    (void)t;\n    {name}({call});\n}}")
            rows = []
            for p in params:
                size = "0" if p["kind"] == "LUCID_MSL_BUILTIN" else f"int32_t(sizeof({p['type']}))"
                builtin = f'"{p["builtin"]}"' if p["builtin"] else "nullptr"
                rows.append(
                    f'    {{"{p["name"]}", {p["kind"]}, {p["index"]}, "{p["type"]}", {size}, {p["const"]}, {builtin}}},'
                )
            lines.append(f"static const lucid_msl_param params_{name}[] = {{")
            lines += rows
            lines.append("};")
            table.append(("lucid_msl", name, src.stem, library_hash, len(params), barrier))
    lines += ["}  // namespace lucid_msl", ""]
    lines.append("static const lucid_msl_kernel kernel_table[] = {")
    for ns, name, unit, h, n, barrier in table:
        lines.append(
            f'    {{"{name}", "{unit}", {h}ull, {n}, {ns}::params_{name}, {int(barrier)}, {ns}::invoke_{name}}},'
        )
    lines += [
        "};",
        "",
        "extern \"C\" const lucid_msl_kernel *lucid_msl_kernels(int32_t *count) {",
        f"    *count = {len(table)};",
        "    return kernel_table;",
        "}",
        "",
    ]
    new = "\n".join(lines)
    if not out.exists() or out.read_text() != new:
        out.write_text(new)
    print(f"gen_kernels: {len(table)} kernels from {len(units)} files -> {out}")


if __name__ == "__main__":
    main()
