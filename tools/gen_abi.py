"""Writes lucid/_abi.py, the engine's C ABI as ctypes declarations, from include/lucid.h.

The header is the ABI's one source of truth: every function's ctypes signature and every
enum's values in Python come from it, and tests/test_abi_header.py checks the Swift exports
against it too. After changing the header, run

    python tools/gen_abi.py            # rewrite lucid/_abi.py
    python tools/gen_abi.py --check    # exit 1 when lucid/_abi.py is not the header's
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "lucid.h"
OUTPUT = ROOT / "lucid" / "_abi.py"

# C scalar types and their ctypes names.
_SCALARS = {"int32_t": "c_int32", "uint32_t": "c_uint32", "int64_t": "c_int64", "uint64_t": "c_uint64", "double": "c_double", "float": "c_float",
            "char": "c_char", "void": "None"}


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _statements(text: str):
    """The header's declarations, one string each (preprocessor lines and extern "C" dropped)."""
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    text = re.sub(r'extern\s+"C"\s*\{', " ", text)
    for statement in text.split(";"):
        statement = " ".join(statement.split())
        if statement and statement != "}":
            yield statement.lstrip("} ").strip()


def split_top_level(params: str, opening: str = "(", closing: str = ")"):
    """`params` split at the commas outside any bracket."""
    parts, depth, current = [], 0, ""
    for ch in params:
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += ch in opening
        depth -= ch in closing
        current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


class Param:
    """One C type, canonicalised: base type (typedefs resolved), const-ness of the pointee,
    pointer depth, or a function pointer."""

    def __init__(self, base: str, const: bool, pointers: int, function: bool = False):
        self.base, self.const, self.pointers, self.function = base, const, pointers, function

    def canonical(self) -> str:
        if self.function:
            return "function pointer"
        return ("const " if self.const else "") + self.base + "*" * self.pointers

    def ctypes(self) -> str:
        if self.function:
            return "c_void_p"
        if self.base == "char" and self.pointers >= 1:
            return "POINTER(" * (self.pointers - 1) + "c_char_p" + ")" * (self.pointers - 1)
        if self.base == "void" and self.pointers >= 1:
            return "POINTER(" * (self.pointers - 1) + "c_void_p" + ")" * (self.pointers - 1)
        t = _SCALARS[self.base]
        return "POINTER(" * self.pointers + t + ")" * self.pointers


def parse_type(decl: str, typedefs: dict, functions: set, named: bool) -> Param:
    """A parameter or return type; `named` when the declaration ends with a parameter name."""
    if "(" in decl:  # an inline function pointer: R (*name)(args)
        return Param("", False, 0, function=True)
    if "[" in decl:  # an array parameter (its name before the brackets) is a pointer
        decl, named = re.sub(r"\w+\s*\[[^\]]*\]", "*", decl), False
    tokens = re.findall(r"\w+|\*", decl)
    if named and len([t for t in tokens if t != "*"]) >= 2 and tokens[-1] != "*":
        tokens = tokens[:-1]  # the parameter's name
    const = "const" in tokens
    words = [t for t in tokens if t not in ("const", "*")]
    pointers = tokens.count("*")
    if len(words) != 1:
        raise ValueError(f"cannot read the C type {decl!r}")
    base = words[0]
    if base in functions:
        return Param("", False, 0, function=True)
    while base in typedefs:
        base = typedefs[base]
    if base not in _SCALARS:
        raise ValueError(f"unknown C type {base!r} in {decl!r}")
    return Param(base, const, pointers)


def parse_header(text: str):
    """(enums: {name: {constant: value}}, functions: {name: (return Param, [Param])})."""
    text = strip_comments(text)
    enums, functions, typedefs, function_types = {}, {}, {}, set()
    for st in _statements(text):
        if st.startswith("enum"):
            m = re.fullmatch(r"enum\s+(\w+)\s*\{(.*)\}", st)
            if not m:
                raise ValueError(f"every enum in the header needs a name: {st!r}")
            values = {}
            for entry in m.group(2).split(","):
                if entry.strip():
                    name, value = (x.strip() for x in entry.split("="))
                    values[name] = int(value, 0)
            enums[m.group(1)] = values
        elif st.startswith("typedef"):
            m = re.fullmatch(r"typedef\s+.*\(\s*\*\s*(\w+)\s*\)\s*\(.*\)", st)
            if m:
                function_types.add(m.group(1))
                continue
            m = re.fullmatch(r"typedef\s+(\w+)\s+(\w+)", st)
            if not m:
                raise ValueError(f"cannot read the typedef {st!r}")
            typedefs[m.group(2)] = m.group(1)
        elif "(" in st:
            head, _, rest = st.partition("(")
            name = re.findall(r"\w+", head)[-1]
            ret = head[: head.rindex(name)]
            depth, i = 1, 0
            while depth:
                depth += {"(": 1, ")": -1}.get(rest[i], 0)
                i += 1
            params = rest[: i - 1].strip()
            args = [] if params in ("", "void") else [parse_type(p, typedefs, function_types, True)
                                                      for p in split_top_level(params)]
            functions[name] = (parse_type(ret, typedefs, function_types, False), args)
    return enums, functions


def unconverted(args) -> bool:
    """Whether ctypes can pass a call's arguments without `argtypes`, and so without converting
    them on every call: each is a 32-bit integer (which ctypes passes a Python int as) or a data
    pointer (passed as a ctypes array, byref() or None). A double, a 64-bit integer or a
    function pointer needs its declared type."""
    return all((a.pointers and not a.function) or a.base in ("int32_t", "uint32_t") for a in args)


def render(enums, functions) -> str:
    lines = ['"""The engine\'s C ABI as ctypes declarations, generated from include/lucid.h by',
             'tools/gen_abi.py; do not edit (change the header and run the tool)."""', "",
             "from ctypes import (POINTER, c_char_p, c_double, c_float, c_int32, c_int64, c_uint32, c_uint64,  # noqa: F401",
             "                    c_void_p)",
             "", "# name: ([argument types], return type)", "SIGNATURES = {"]
    for name, (ret, args) in functions.items():
        lines.append(f'    "{name}": ([{", ".join(a.ctypes() for a in args)}], {ret.ctypes()}),')
    lines += ["}", "", "# Entry points whose arguments are all 32-bit integers or data pointers: called without",
              "# argtypes, so nothing is converted per call (tools/gen_abi.py, unconverted).", "UNCONVERTED = frozenset({"]
    lines += [f'    "{name}",' for name, (_, args) in functions.items() if unconverted(args)]
    lines += ["})", "", "# Every enum of the header, by name: {constant: value}.", "ENUMS = {"]
    for name, values in enums.items():
        body = ", ".join(f'"{k}": {v}' for k, v in values.items())
        lines.append(f'    "{name}": {{{body}}},')
    lines += ["}", ""]
    for values in enums.values():
        for k, v in values.items():
            lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n"


def main(argv):
    enums, functions = parse_header(HEADER.read_text())
    text = render(enums, functions)
    if "--check" in argv:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print("gen_abi: lucid/_abi.py is not include/lucid.h's; run python tools/gen_abi.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {len(functions)} functions, {len(enums)} enums")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
