"""The strict check of lucid's Metal kernels: compiles each kernel library (Kernels/Common.metal
followed by one family's file, as the backend compiles it) as C++ with clang, syntax only,
against tests/metal/strict/metal_stdlib, in which `device`, `constant` and `threadgroup` are
distinct clang address spaces (`thread` the default one), vectors are clang's vector types,
and `half`/`bfloat` are the compiler's 16-bit floats, under -Wall -Wextra -pedantic -Werror
and -Wimplicit-float-conversion (no implicit narrowing to half or bfloat). A pointer into one
address space passed where another is expected, which the emulation's C++ build (where the
spaces vanish) accepts and Apple's compiler rejects, fails it. It also checks itself: planted
mistakes (a threadgroup pointer passed where a device pointer is expected, a constant written
through a device pointer, a float narrowed to half implicitly) must be rejected.

Each library is compiled on its own, so a family's file that uses another family's
declarations (which the emulation's one C++ file would hide) fails here too.

    python tests/metal/check_msl_strict.py --clang CLANG $(python tools/embed_metal.py --list)
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLAGS = [
    "-fsyntax-only",
    "-x",
    "c++",
    "-std=c++17",
    "-Wall",
    "-Wextra",
    "-pedantic",
    "-Werror",
    "-Wimplicit-float-conversion",
    # The MSL attributes ([[buffer(0)]], [[thread_position_in_grid]]) are not clang's.
    "-Wno-unknown-attributes",
    # Kernels take builtins ([[thread_index_in_simdgroup]]) some variants do not use.
    "-Wno-unused-parameter",
    f"-I{HERE / 'strict'}",
]

# Mistakes the check must reject, each valid C++ once the address spaces vanish and `half` is a
# plain float type, and an error in Metal (or a silent rounding lucid's kernels never make).
PLANTED = {
    "a threadgroup pointer passed as a device pointer": (
        """
inline void store_one(device float* out, uint i) { out[i] = 1.0f; }
kernel void planted(device float* out [[buffer(0)]], threadgroup float* shared [[threadgroup(0)]],
                    uint lane [[thread_index_in_threadgroup]]) {
    store_one(shared, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[lane] = shared[lane];
}
""",
        "address space",
    ),
    "a constant reference written through a device pointer": (
        """
kernel void planted(constant float& scale [[buffer(0)]], uint gid [[thread_position_in_grid]]) {
    device float* p = &scale;
    p[gid] = 1.0f;
}
""",
        "address_space(2)",
    ),
    "a float narrowed to half implicitly": (
        """
kernel void planted(device half* out [[buffer(0)]], device const float* x [[buffer(1)]],
                    uint gid [[thread_position_in_grid]]) {
    out[gid] = x[gid] * 2.0f;
}
""",
        "loses floating-point precision",
    ),
}


def prepared(text: str) -> str:
    # `threadgroup` is a macro for an address space; as an attribute's name it stays a name.
    return re.sub(r"\[\[\s*threadgroup\s*\(", "[[lucid_threadgroup(", text)


def compile_library(clang: str, name: str, text: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.metal.cpp"
        path.write_text(prepared(text))
        return subprocess.run([clang, *FLAGS, str(path)], capture_output=True, text=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clang", required=True)
    ap.add_argument("sources", nargs="+")
    opts = ap.parse_args()
    common, *families = [Path(s) for s in opts.sources]
    failed = []
    for f in families:
        r = compile_library(opts.clang, f.stem, common.read_text() + f.read_text())
        if r.returncode:
            failed.append(f.stem)
            sys.stderr.write(f"check_msl_strict: {f.name} (with {common.name}):\n{r.stderr}\n")
    for what, (code, expected) in PLANTED.items():
        planted = compile_library(opts.clang, "Planted", common.read_text() + code)
        if planted.returncode == 0 or expected not in planted.stderr:
            sys.stderr.write(f"check_msl_strict: {what} was not rejected:\n{planted.stderr}\n")
            return 1
    if failed:
        print(
            f"check_msl_strict: {len(failed)} of {len(families)} libraries fail: {', '.join(failed)}", file=sys.stderr
        )
        return 1
    print(f"check_msl_strict: {len(families)} libraries pass; {len(PLANTED)} planted mistakes are rejected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
