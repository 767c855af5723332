"""include/lucid.h is the C ABI's one source of truth: the Swift exports, the generated Python
declarations (lucid/_C/_abi.py) and the engine's enums must all say what it says."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from _helpers import load_file

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "lucid.h"
EXPORTS = ROOT / "Sources" / "LucidCABI"
ENGINE = ROOT / "Sources" / "LucidEngine"


GEN = load_file("tools/gen_abi.py")
ENUMS, FUNCTIONS = GEN.parse_header(HEADER.read_text())


def test_the_python_declarations_are_generated_from_the_header():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_abi.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_the_embedded_metal_kernels_are_generated_from_the_kernel_files():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "embed_metal.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_entry_point_has_its_python_function():
    """Generated (lucid/_C/_ops.py) or, where the generator leaves it to hand, called from
    lucid/_C/_calls.py; and nothing in lucid/_C calls what the header does not declare."""
    from lucid import _C

    ops = (ROOT / "lucid" / "_C" / "_ops.py").read_text()
    generated = set(re.findall(r"^_(\w+) = _lib\.(\w+)$", ops, flags=re.M))
    assert all(a == b for a, b in generated)
    generated = {a for a, _ in generated}
    calls = (ROOT / "lucid" / "_C" / "_calls.py").read_text() + (ROOT / "lucid" / "_C" / "_library.py").read_text()
    hand = {a or b for a, b in re.findall(r'lib(?:_holding_gil)?(?:\.(\w+)|\["(\w+)"\])', calls)}
    assert generated | hand <= set(FUNCTIONS), f"not in include/lucid.h: {sorted((generated | hand) - set(FUNCTIONS))}"
    assert set(_C.HAND_WRITTEN) <= hand, f"left to hand but never called: {sorted(set(_C.HAND_WRITTEN) - hand)}"
    assert generated | set(_C.HAND_WRITTEN) == set(FUNCTIONS)
    python_names = set(re.findall(r"^def (\w+)\(", ops, flags=re.M))
    assert not python_names & set(_C._calls.__all__), "a hand-written call hides a generated one in lucid._C"


# ---- the Swift side ---------------------------------------------------------------------------

_SWIFT_SCALARS = {
    "UInt32": "uint32_t",
    "UInt64": "uint64_t",
    "Int32": "int32_t",
    "Int64": "int64_t",
    "Double": "double",
    "Float": "float",
    "CChar": "char",
    "Void": "void",
}


def _swift_function_types():
    text = "".join(p.read_text() for p in EXPORTS.glob("*.swift"))
    return set(re.findall(r"typealias (\w+) = @convention\(c\)", text))


SWIFT_FUNCTION_TYPES = _swift_function_types()


def swift_type(t: str) -> str:
    """A Swift parameter type as the header's canonical C type (see gen_abi.Param.canonical)."""
    t = t.strip()
    if "@convention(c)" in t or t.rstrip("?") in SWIFT_FUNCTION_TYPES:
        return "function pointer"
    if t.endswith("?"):
        t = t[:-1]
    if t in ("UnsafeRawPointer", "UnsafeMutableRawPointer"):
        return ("const " if t == "UnsafeRawPointer" else "") + "void*"
    m = re.fullmatch(r"Unsafe(Mutable)?Pointer<(.+)>", t)
    if m:
        inner = swift_type(m.group(2))
        if m.group(1):
            return inner + "*"
        return ("const " + inner if not inner.startswith("const ") else inner) + "*"
    if t not in _SWIFT_SCALARS:
        raise ValueError(f"no C equivalent for the Swift type {t!r}")
    return _SWIFT_SCALARS[t]


def swift_exports():
    """{symbol: (return type, [parameter types])} of every @_cdecl function, as C types."""
    exports = {}
    for path in sorted(EXPORTS.glob("*.swift")):
        text = path.read_text()
        for m in re.finditer(r'@_cdecl\("(\w+)"\)\s*public func \w+\(', text):
            depth, i = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            name, params = m.group(1), text[m.end() : i - 1]
            ret = re.match(r"\s*(?:->\s*([^{]+?))?\s*\{", text[i:]).group(1) or "Void"
            flat = " ".join(params.split()).replace("->", "→")  # an arrow's > closes no bracket
            types = [swift_type(p.split(":", 1)[1]) for p in GEN.split_top_level(flat, "(<", ")>")]
            assert name not in exports, f"{name} is exported twice"
            exports[name] = (swift_type(ret), types)
    return exports


def test_the_swift_exports_are_the_headers_functions_with_its_argument_types():
    exports = swift_exports()
    assert set(exports) == set(FUNCTIONS), (
        f"only in Swift: {sorted(set(exports) - set(FUNCTIONS))}; "
        f"only in the header: {sorted(set(FUNCTIONS) - set(exports))}"
    )
    for name, (ret, args) in FUNCTIONS.items():
        want = (ret.canonical(), [a.canonical() for a in args])
        assert exports[name] == want, f"{name}: Swift exports {exports[name]}, include/lucid.h declares {want}"


def _camel_to_upper_snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def swift_enum(path: Path, name: str) -> dict:
    """{case: raw value} of the Int32 enum `name` declared in `path` (implicit values count up)."""
    text = path.read_text()
    m = re.search(rf"\benum {name}: Int32[^{{]*\{{", text)
    assert m, f"enum {name}: Int32 not found in {path}"
    # The body's lines, each with the brace depth at its start (1: the enum's own level).
    depth, i, body, line, start = 1, m.end(), [], "", 1
    while depth:
        ch = text[i]
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "\n":
            body.append((start, line))
            line, start = "", depth
        elif depth:
            line += ch
        i += 1
    body.append((start, line))
    values, nxt = {}, 0
    for d, ln in body:
        ln = ln.split("//")[0].strip()
        if d != 1 or not ln.startswith("case "):
            continue
        for entry in ln[5:].split(","):
            key, _, value = entry.partition("=")
            nxt = int(value) if value.strip() else nxt
            values[key.strip()] = nxt
            nxt += 1
    return values


# Every enum of the header and the Swift enum that holds its codes (the engine's where it has
# one, else the C ABI layer's, Sources/LucidCABI/Codes.swift): (header enum, file under
# Sources/, the Swift enum as the C ABI names it, the prefix of the header's names). A code a
# caller passes is read through the Swift enum's init(rawValue:) (`decode` in ABISupport.swift).
ENUM_PAIRS = [
    ("lucid_status", "LucidEngine/Core/LucidError.swift", "LucidError.Kind", "LUCID_ERR_"),
    ("lucid_record_field", "LucidCABI/Codes.swift", "RecordField", "LUCID_RECORD_"),
    ("lucid_dtype", "LucidEngine/Core/DType.swift", "DType", "LUCID_"),
    ("lucid_device", "LucidEngine/Core/Device.swift", "Device", "LUCID_"),
    ("lucid_scalar_kind", "LucidEngine/Ops/Elementwise.swift", "ScalarOperand.Kind", "LUCID_SCALAR_"),
    ("lucid_binary_op", "LucidEngine/Backends/BinaryKernel.swift", "BinaryKernel", "LUCID_"),
    ("lucid_compare_op", "LucidEngine/Backends/CompareKernel.swift", "CompareKernel", "LUCID_"),
    ("lucid_unary_op", "LucidEngine/Backends/UnaryKernel.swift", "UnaryKernel", "LUCID_"),
    ("lucid_reduce_op", "LucidCABI/Codes.swift", "ReduceOp", "LUCID_"),
    ("lucid_reduction", "LucidEngine/Ops/Losses.swift", "Losses.Reduction", "LUCID_REDUCTION_"),
    ("lucid_cast_policy", "LucidEngine/AMP/CastPolicy.swift", "CastPolicy", "LUCID_POLICY_"),
    ("lucid_index_kind", "LucidCABI/Codes.swift", "IndexKind", "LUCID_INDEX_"),
    ("lucid_assign_flag", "LucidCABI/Codes.swift", "AssignFlag", "LUCID_ASSIGN_"),
    ("lucid_split_mode", "LucidCABI/Codes.swift", "SplitMode", "LUCID_SPLIT_"),
    ("lucid_pointwise_loss_kind", "LucidCABI/Codes.swift", "PointwiseLossKind", "LUCID_LOSS_"),
    ("lucid_precision_verdict", "LucidEngine/AMP/Inspection.swift", "PrecisionVerdict", "LUCID_VERDICT_"),
    ("lucid_hook_kind", "LucidCABI/Codes.swift", "HookKind", "LUCID_HOOK_"),
    ("lucid_qr_mode", "LucidEngine/Ops/Linalg.swift", "Linalg.QRMode", "LUCID_QR_"),
]


def test_every_header_enum_has_its_swift_enum():
    paired = [p[0] for p in ENUM_PAIRS]
    assert len(paired) == len(set(paired)), "a header enum is paired twice"
    assert set(paired) == set(ENUMS), (
        f"no Swift enum for {sorted(set(ENUMS) - set(paired))}; not in the header: {sorted(set(paired) - set(ENUMS))}"
    )


@pytest.mark.parametrize("header_enum,path,swift_name,prefix", ENUM_PAIRS, ids=[p[0] for p in ENUM_PAIRS])
def test_the_swift_enums_have_the_headers_values(header_enum, path, swift_name, prefix):
    cases = swift_enum(ROOT / "Sources" / path, swift_name.split(".")[-1])
    swift = {prefix + _camel_to_upper_snake(k): v for k, v in cases.items()}
    header = dict(ENUMS[header_enum])
    if header_enum == "lucid_status":
        assert header.pop("LUCID_OK") == 0  # success is no error kind
    assert swift == header


def test_the_c_abi_decodes_codes_only_through_its_one_helper():
    """Every code a caller passes is read by `decode` (`decodeFlags` for a flags word) in
    ABISupport.swift, as the Swift enum of a header enum; no export decodes one by hand."""
    text = {p.name: "\n".join(ln.split("//")[0] for ln in p.read_text().splitlines()) for p in EXPORTS.glob("*.swift")}
    assert "func decode<E: RawRepresentable" in text["ABISupport.swift"]
    for name, code in text.items():
        if name != "ABISupport.swift":
            assert "(rawValue:" not in code, f"{name} decodes a code with init(rawValue:) by hand; use decode(_:as:_:)"
            assert "(code:" not in code, f"{name} decodes a code by hand; use decode(_:as:_:)"
    decoded = set(
        re.findall(r"\bdecode(?:Flags)?\(\s*[^,()]+(?:\[\w+\])?,\s*as: ([\w.]+)\.self", "".join(text.values()))
    )
    swift_names = {p[2] for p in ENUM_PAIRS}
    assert decoded <= swift_names, f"decoded as enums the header does not have: {sorted(decoded - swift_names)}"
    # Only the engine writes these (results, statuses, records); every other enum is read.
    written_only = {"LucidError.Kind", "RecordField", "PrecisionVerdict"}
    assert swift_names - written_only <= decoded, f"never decoded: {sorted(swift_names - written_only - decoded)}"


def test_the_header_parser_reads_what_the_header_can_say():
    # The parser must fail loudly on what it does not understand, not guess.
    enums, functions = GEN.parse_header("""
        typedef uint64_t lucid_tensor;
        typedef void (*lucid_callback)(uint64_t context);
        enum lucid_things { LUCID_A = 0, LUCID_B = 0x10 };
        int32_t f(const lucid_tensor *xs, int64_t params[4], lucid_callback cb, void (*inline_cb)(const char *m),
                  const char **name, double *out);
        const char *g(void);
    """)
    assert enums == {"lucid_things": {"LUCID_A": 0, "LUCID_B": 16}}
    ret, args = functions["f"]
    assert ret.canonical() == "int32_t"
    assert [a.canonical() for a in args] == [
        "const uint64_t*",
        "int64_t*",
        "function pointer",
        "function pointer",
        "const char**",
        "double*",
    ]
    assert [a.ctypes() for a in args] == [
        "POINTER(c_uint64)",
        "POINTER(c_int64)",
        "c_void_p",
        "c_void_p",
        "POINTER(c_char_p)",
        "POINTER(c_double)",
    ]
    assert functions["g"][0].ctypes() == "c_char_p" and functions["g"][1] == []
    with pytest.raises(ValueError, match="needs a name"):
        GEN.parse_header("enum { LUCID_X = 1 };")
    with pytest.raises(ValueError, match="unknown C type"):
        GEN.parse_header("int32_t h(size_t n);")


def test_dtype_device_and_autocast_rules_come_from_the_engine():
    import lucid
    from lucid import _C
    from lucid._C import _abi

    table = _C.dtype_table()
    assert [row[0] for row in table] == sorted(ENUMS["lucid_dtype"].values())
    for code, name, size, floating in table:
        d = lucid._types.dtype_from_code(code)
        assert (d.name, d.itemsize, d.is_floating_point) == (name, size, floating)
        assert d.numpy.itemsize == size
        assert ENUMS["lucid_dtype"]["LUCID_" + name.upper()] == code
    assert [name for _, name in _C.device_table()] == ["cpu", "metal"]
    for bad in (-1, len(table), 1 << 20):
        assert _C.lib.lucid_dtype_info(bad, None, None, None) == _abi.LUCID_ERR_VALUE
        assert b"dtype" in _C.lib.lucid_last_error()
        assert _C.lib.lucid_device_info(bad, None) == _abi.LUCID_ERR_VALUE
    for device in ("cpu", "metal"):
        code = lucid._types._DEVICE_CODES[device]
        assert lucid.amp.autocast(device).dtype.code == _C.autocast_default_dtype(code)
        for d in (lucid.int32, lucid.int64, lucid.bool_):
            with pytest.raises(
                ValueError, match="autocast dtype must be lucid.float16, lucid.bfloat16 or lucid.float32"
            ):
                lucid.amp.autocast(device, dtype=d)
    assert _abi.LUCID_CPU == lucid._types._DEVICE_CODES["cpu"]
