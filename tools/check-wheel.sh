#!/usr/bin/env bash
# `pip install .` gives a lucid that needs Python and pip, nothing else: the checkout (or the
# wheel given) is installed into a fresh venv outside it, and tools/wheel_smoke.py then runs
# there. On Linux it runs in a private mount namespace where the Swift toolchain's folders
# and any system OpenBLAS or oneDNN are hidden; on macOS (no mount namespaces) it runs as it
# is, and checks instead that the engine's run paths name only /usr/lib/swift and its own
# folder. It computes against numpy and checks what the process loaded.
#
#     bash tools/check-wheel.sh              (make check-wheel; CI runs it after the tests)
#     bash tools/check-wheel.sh WHEEL        (a built wheel: the release and macOS workflows)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
wheel=${1:-}
if [ -n "$wheel" ]; then
    [ -f "$wheel" ] || { echo "check-wheel: $wheel is not a file" >&2; exit 2; }
    wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -n "$wheel" ]; then
    echo "check-wheel: $(basename "$wheel") into a fresh venv ($work/venv)"
    "$python" -m venv "$work/venv"
    "$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
else

    # The checkout's files as a fresh clone has them (plus uncommitted ones), without its builds.
    mkdir "$work/src"
    (cd "$repo" && git ls-files -co --exclude-standard) | while IFS= read -r f; do
        if [ -f "$repo/$f" ]; then
            mkdir -p "$work/src/$(dirname "$f")"
            cp -p "$repo/$f" "$work/src/$f"
        fi
    done

    echo "check-wheel: pip install into a fresh venv ($work/venv)"
    "$python" -m venv "$work/venv"
    "$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$work/src"
    rm -rf "$work/src"
fi

if [ "$(uname -s)" = Darwin ]; then
    cd "$work"
    "$work/venv/bin/python" "$repo/tools/wheel_smoke.py"
    exit 0
fi

# What to hide: the folders of the Swift toolchain's runtime and programs, and every system
# copy of OpenBLAS or oneDNN the dynamic linker knows of.
# (A machine without the toolchain on PATH, such as a release's checking job, has none to hide.)
hide_dirs=
if command -v swift >/dev/null; then
    swift_bin=$(dirname "$(readlink -f "$(command -v swift)")")
    swift_usr=$(dirname "$swift_bin")
    hide_dirs="$swift_usr/lib/swift"
    [ "$swift_usr" != /usr ] && hide_dirs="$hide_dirs $swift_bin"
fi
hide_files=$( (ldconfig -p 2>/dev/null || true) | sed -n 's/.*=> \(.*\(openblas\|dnnl\|libblas\|libcblas\).*\)/\1/p' \
    | xargs -r readlink -f | sort -u | tr '\n' ' ')
echo "check-wheel: hiding $hide_dirs ${hide_files:-(no system BLAS or oneDNN found)}"

script='
set -e
for d in $HIDE_DIRS; do mount -t tmpfs -o size=1m lucid-hidden "$d"; done
for f in $HIDE_FILES; do mount --bind /dev/null "$f"; done
cd "$WORK"
exec "$WORK/venv/bin/python" "$SMOKE"
'
if [ "$(id -u)" = 0 ]; then unshare_args="--mount"; else unshare_args="--user --map-root-user --mount"; fi
HIDE_DIRS=$hide_dirs HIDE_FILES=$hide_files WORK=$work SMOKE="$repo/tools/wheel_smoke.py" \
    unshare $unshare_args --propagation private sh -c "$script"
