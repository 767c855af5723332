"""Writes lucid/_C/_abi.py and lucid/_C/_ops.py from include/lucid.h.

The header is the ABI's one source of truth. _abi.py holds every function's ctypes signature
and every enum's values (with the comment each constant carries); _ops.py a Python function
per entry point, named as the header names it without `lucid_`, that takes the header's
parameters by name, converts and range-checks them, raises the engine's error, and returns
the out-values. The few entry points whose shape no rule here covers (callbacks, arrays
written back, scopes) are hand-written in lucid/_C/_calls.py. tests/test_abi_header.py
checks the Swift exports against the header too. After changing the header, run

    python tools/gen_abi.py            # rewrite both files
    python tools/gen_abi.py --check    # exit 1 when either is not the header's
"""

from __future__ import annotations

import keyword
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "lucid.h"
ABI_OUTPUT = ROOT / "lucid" / "_C" / "_abi.py"
OPS_OUTPUT = ROOT / "lucid" / "_C" / "_ops.py"

# C scalar types and their ctypes names.
_SCALARS = {
    "int32_t": "c_int32",
    "uint32_t": "c_uint32",
    "int64_t": "c_int64",
    "uint64_t": "c_uint64",
    "double": "c_double",
    "float": "c_float",
    "char": "c_char",
    "void": "None",
}


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

    def __init__(self, base: str, const: bool, pointers: int, function: bool = False, name: str = "", length: str = ""):
        self.base, self.const, self.pointers, self.function = base, const, pointers, function
        self.name, self.length = name, length  # the parameter's name; an array's declared length
        self.tensor = False  # declared as lucid_tensor

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
    name, length = "", ""
    array = re.search(r"(\w+)\s*\[([^\]]*)\]", decl)
    if array:  # an array parameter (its name before the brackets) is a pointer
        name, length = array.group(1), array.group(2).strip()
        decl, named = decl[: array.start()] + "*", False
    tokens = re.findall(r"\w+|\*", decl)
    if named and len([t for t in tokens if t != "*"]) >= 2 and tokens[-1] != "*":
        name, tokens = tokens[-1], tokens[:-1]  # the parameter's name
    const = "const" in tokens
    words = [t for t in tokens if t not in ("const", "*")]
    pointers = tokens.count("*")
    if len(words) != 1:
        raise ValueError(f"cannot read the C type {decl!r}")
    base = words[0]
    if base in functions:
        return Param("", False, 0, function=True, name=name)
    tensor = base == "lucid_tensor"
    while base in typedefs:
        base = typedefs[base]
    if base not in _SCALARS:
        raise ValueError(f"unknown C type {base!r} in {decl!r}")
    param = Param(base, const, pointers, name=name, length=length)
    param.tensor = tensor
    return param


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
            args = (
                []
                if params in ("", "void")
                else [parse_type(p, typedefs, function_types, True) for p in split_top_level(params)]
            )
            functions[name] = (parse_type(ret, typedefs, function_types, False), args)
    return enums, functions


def unconverted(args) -> bool:
    """Whether ctypes can pass a call's arguments without `argtypes`, and so without converting
    them on every call: each is a 32-bit integer (which ctypes passes a Python int as) or a data
    pointer (passed as a ctypes array, byref() or None). A double, a 64-bit integer or a
    function pointer needs its declared type."""
    return all((a.pointers and not a.function) or a.base in ("int32_t", "uint32_t") for a in args)


def render(enums, functions, docs) -> str:
    lines = [
        '"""The engine\'s C ABI as ctypes declarations, generated from include/lucid.h by',
        'tools/gen_abi.py; do not edit (change the header and run the tool)."""',
        "",
        "from ctypes import (POINTER, c_char_p, c_double, c_float, c_int32, c_int64, c_uint32, c_uint64,  # noqa: F401",
        "                    c_void_p)",
        "",
        "# name: ([argument types], return type)",
        "SIGNATURES = {",
    ]
    for name, (ret, args) in functions.items():
        lines.append(f'    "{name}": ([{", ".join(a.ctypes() for a in args)}], {ret.ctypes()}),')
    lines += [
        "}",
        "",
        "# Entry points whose arguments are all 32-bit integers or data pointers: called without",
        "# argtypes, so nothing is converted per call (tools/gen_abi.py, unconverted).",
        "UNCONVERTED = frozenset({",
    ]
    lines += [f'    "{name}",' for name, (_, args) in functions.items() if unconverted(args)]
    lines += ["})", "", "# Every enum of the header, by name: {constant: value}.", "ENUMS = {"]
    for name, values in enums.items():
        body = ", ".join(f'"{k}": {v}' for k, v in values.items())
        lines.append(f'    "{name}": {{{body}}},')
    lines += ["}", "", "# The comment each enum constant carries in the header, where it has one.", "DOCS = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in docs.items()]
    lines += ["}", ""]
    for values in enums.values():
        for k, v in values.items():
            lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n"


def _comment_text(comment: str) -> str:
    """A C comment's words, without its markers and leading stars."""
    lines = [re.sub(r"^\s*\*\s?", "", line).strip() for line in comment.strip("/*").strip().splitlines()]
    return " ".join(line for line in lines if line).strip()


def function_docs(text: str) -> dict:
    """{function: the comment just above its declaration}."""
    docs = {}
    pattern = r"/\*((?:(?!\*/).)*)\*/\s*(?:const\s+)?\w+\s*\**\s*(\w+)\s*\("
    for m in re.finditer(pattern, text, flags=re.S):
        docs[m.group(2)] = _comment_text(m.group(1))
    return docs


def constant_docs(text: str) -> dict:
    """{enum constant: the comment after it, where it has one}."""
    docs = {}
    for body in re.findall(r"enum\s+\w+\s*\{(.*?)\}", text, flags=re.S):
        for m in re.finditer(r"(\w+)\s*=\s*[-\w]+\s*,?\s*/\*(.*?)\*/", body, flags=re.S):
            docs[m.group(1)] = _comment_text(m.group(2))
    return docs


# ---- the Python functions ---------------------------------------------------------------------

# An item run of lucid_index and its kin, one Python argument: (kind, (v0, v1, v2), flags,
# handle) tuples.
_SUBSCRIPT = ("kinds", "values", "flags", "tensors")


class Unsupported(Exception):
    """An entry point no rule here covers: it is hand-written in lucid/_C/_calls.py."""


# Entry points the rules would cover that are hand-written all the same, and why.
HAND_WRITTEN = {
    "guard_create": "entered on every autocast scope: called holding the GIL, into a slot the caller holds",
    "guard_destroy": "takes the handle as the c_uint64 it was written into, with no conversion",
    "lucid_tensor_release": "releases are batched (lucid/_C/_calls.py)",
    "lucid_tensor_release_many": "releases are batched (lucid/_C/_calls.py)",
    "lucid_backward": "re-raises the exception a custom function's Python backward raised",
    "lucid_autograd_backward": "re-raises the exception a Python hook or custom backward raised",
    "lucid_autograd_grad": "re-raises the exception a Python hook or custom backward raised; writes an array",
    "lucid_attention": "asks for the weights only when they are wanted",
    "lucid_set_element": "Python's x[i] = v: range-checked once by the caller, padded without a loop",
    "lucid_amp_inspect_entry": "writes sixteen values into an array the caller passes",
}


def _python_name(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


def _output(p: Param) -> bool:
    """An out-parameter: a pointer the engine writes through (a record, a value, a name)."""
    if p.function:
        return False
    if p.length == "LUCID_RECORD_LEN":
        return True
    if p.base == "char":
        return p.pointers == 2
    return p.pointers == 1 and not p.const and p.base != "void"


def _array(p: Param) -> bool:
    return p.pointers == 1 and p.base in ("int32_t", "int64_t", "uint32_t") and not _output(p)


def wrapper(name: str, ret: Param, args, doc: str) -> list:
    """The lines of the Python function for entry point `name`; Unsupported when its shape is
    none of the rules'."""
    if name in HAND_WRITTEN:
        raise Unsupported(f"{name}: {HAND_WRITTEN[name]}")
    if any(a.function for a in args):
        raise Unsupported(f"{name}: a function pointer")
    if ret.canonical() != "int32_t":
        raise Unsupported(f"{name}: returns no status")
    outputs = [a for a in args if _output(a)]
    inputs = args[: len(args) - len(outputs)]
    if any(_output(a) for a in inputs):
        raise Unsupported(f"{name}: an out-parameter before an input")
    params, body, call = [], [], []
    i = 0
    while i < len(inputs):
        # A run of arrays, then the int32 count they share (none after a fixed-length array).
        run = []
        while i < len(inputs) and _array(inputs[i]):
            run.append(inputs[i])
            i += 1
        count = inputs[i] if i < len(inputs) and inputs[i].base == "int32_t" and not inputs[i].pointers else None
        if run and tuple(r.name for r in run) == _SUBSCRIPT:
            if count is None:
                raise Unsupported(f"{name}: a subscript without its count")
            params.append("items")
            call.append("*_subscript(items)")
            i += 1
            continue
        if run:
            counted = count is not None and not run[0].length
            for r in run:
                pn = _python_name(r.name)
                params.append(pn)
                make = "_handles" if r.tensor else "_int64s"
                if r.length:
                    body.append(f"    {pn}_ = {make}({pn}, {r.length})")
                elif not counted:
                    raise Unsupported(f"{name}: an array without a count")
                elif r is run[0]:
                    body.append(f"    {pn}_, {count.name} = {make}({pn})")
                else:
                    body.append(f"    {pn}_ = {make}({pn}, {count.name})")
                call.append(f"{pn}_")
            if counted:
                call.append(count.name)
                i += 1
            continue
        a = inputs[i]
        pn = _python_name(a.name)
        params.append(pn)
        if a.base == "char":
            call.append(f"_name({pn})")
        elif a.tensor and not a.pointers:
            # A tensor or its handle: a tensor passed here stays alive until the call returns,
            # so the handle of a temporary cannot be released under the engine.
            call.append(f"({pn} if {pn}.__class__ is int else {pn}._h)")
        else:
            if a.base == "int64_t" and not a.pointers:  # ctypes would wrap it silently
                body.append(f"    if not -0x8000000000000000 <= {pn} <= 0x7FFFFFFFFFFFFFFF:")
                body.append(f"        _out_of_range({pn!r}, {pn})")
            call.append(pn)
        i += 1
    results = []
    for o in outputs:
        v = f"{o.name}_"
        if o.length == "LUCID_RECORD_LEN":
            body.append(f"    {v} = Record()")
            call.append(v)
            results.append(v)
            continue
        ctype = "c_char_p" if o.base == "char" else _SCALARS[o.base]
        body.append(f"    {v} = {ctype}()")
        call.append(f"byref({v})")
        if o.base == "char":
            results.append(f"_text({v}.value)")
        elif o.name == "recorded":
            results.append(f"{v}.value != 0")
        else:
            results.append(f"{v}.value")
    py = name[len("lucid_") :] if name.startswith("lucid_") else name
    lines = [f"_{name} = _lib.{name}", "", "", f"def {py}({', '.join(params)}):"]
    if doc:
        lines += _docstring(doc)
    lines += body
    lines.append(f"    rc = _{name}({', '.join(call)})")
    lines += ["    if rc:", "        _raise(rc)"]
    if results:
        lines.append(f"    return {', '.join(results)}")
    return lines


def _docstring(doc: str) -> list:
    """`doc` as a docstring's lines, wrapped at the project's line length."""
    words = doc.replace("\\", "\\\\").replace('"', "'").split()
    lines, line = [], '    """'
    for w in words:
        if len(line) + 1 + len(w) > 100 and line.strip('" '):
            lines.append(line)
            line = "    " + w
        else:
            line = line + w if line.endswith('"""') else f"{line} {w}"
    if lines:
        return lines + [line, '    """']
    return [line + '"""']


_OPS_HEAD = '''"""The engine's entry points as Python functions, generated from include/lucid.h by
tools/gen_abi.py; do not edit (change the header and run the tool).

Each takes the header's parameters by their names, less the out-parameters and the counts of
arrays: a tensor is a tensor or its handle (an int; a tensor given stays alive through the
call), an array a sequence of ints (or of tensors or handles), a name a str. It raises the
engine's error as the matching Python exception and returns what the engine wrote: an op's
record, a value, or a tuple of them.
"""

from ctypes import byref, c_char_p, c_double, c_int32, c_int64, c_uint32, c_uint64  # noqa: F401

from ._library import (Record, handles as _handles, int64s as _int64s, lib as _lib, name as _name,
                       out_of_range as _out_of_range, raise_error as _raise, subscript as _subscript,
                       text as _text)
'''


def render_ops(functions, docs) -> str:
    lines, left = [_OPS_HEAD.rstrip("\n")], []
    for name, (ret, args) in functions.items():
        try:
            fn = wrapper(name, ret, args, docs.get(name, ""))
        except Unsupported:
            left.append(name)
            continue
        lines += ["", ""] + fn
    lines += [
        "",
        "",
        "# The entry points no rule above covers, hand-written in lucid/_C/_calls.py.",
        "HAND_WRITTEN = frozenset({",
    ]
    lines += [f'    "{n}",' for n in left]
    lines += ["})"]
    return "\n".join(lines) + "\n"


def outputs() -> dict:
    """{path: text} of every generated file."""
    header = HEADER.read_text()
    enums, functions = parse_header(header)
    return {
        ABI_OUTPUT: render(enums, functions, constant_docs(header)),
        OPS_OUTPUT: render_ops(functions, function_docs(header)),
    }


def main(argv):
    files = outputs()
    if "--check" in argv:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(
                f"gen_abi: {p.relative_to(ROOT)} is not include/lucid.h's; run python tools/gen_abi.py", file=sys.stderr
            )
        return 1 if stale else 0
    for p, text in files.items():
        p.write_text(text)
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
