#!/bin/sh
# Checks what `make` needs before it starts, and prints one line naming the first thing that
# is missing and how to get it (nothing when all is there). Always exits 0: the Makefile
# turns the line into its error.
#
#     PYTHON=python3 VENV=.venv sh tools/prereqs.sh swift python cc

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

swift_ok() {
    if ! command -v swift >/dev/null 2>&1; then
        echo "lucid: no Swift toolchain: \`swift\` is not on PATH. The engine needs Swift 6 or newer: install it from https://www.swift.org/install (Linux) or Xcode 16 (macOS) and put its usr/bin on PATH"
        return 1
    fi
    version=$(swift --version 2>&1 | sed -n 's/.*Swift version \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1.\2/p' | head -n 1)
    major=${version%%.*}
    if [ -z "$version" ]; then
        echo "lucid: \`swift --version\` ($(command -v swift)) did not say which Swift it is; the engine needs Swift 6 or newer from https://www.swift.org/install"
        return 1
    fi
    if [ "$major" -lt 6 ]; then
        echo "lucid: Swift $version ($(command -v swift)) is too old: the engine needs Swift 6 or newer. Install it from https://www.swift.org/install (Linux) or Xcode 16 (macOS) and put it first on PATH"
        return 1
    fi
}

python_ok() {
    # A .venv that already works needs nothing more from the system Python.
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        return 0
    fi
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
        echo "lucid: no Python: \`$PYTHON\` was not found. lucid needs Python 3.10 or newer with its venv module: install one (python.org, or your system's packages) or name it with \`make PYTHON=/path/to/python3\`"
        return 1
    fi
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        found=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "unknown")
        echo "lucid: Python $found (\`$PYTHON\`) is too old: lucid needs Python 3.10 or newer. Install one and name it with \`make PYTHON=/path/to/python3.X\`"
        return 1
    fi
    if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
        echo "lucid: \`$PYTHON\` cannot make virtual environments (its venv/ensurepip modules are missing). Install them (Debian/Ubuntu: the python3-venv package) or name another Python with \`make PYTHON=/path/to/python3\`"
        return 1
    fi
}

cc_ok() {
    for c in cc gcc clang; do
        command -v "$c" >/dev/null 2>&1 && return 0
    done
    echo "lucid: no C compiler: the tests build a C program against include/lucid.h and need \`cc\`, \`gcc\` or \`clang\` on PATH. Install one (Debian/Ubuntu: gcc; macOS: \`xcode-select --install\`)"
    return 1
}

for need in "$@"; do
    case "$need" in
        swift) swift_ok || exit 0 ;;
        python) python_ok || exit 0 ;;
        cc) cc_ok || exit 0 ;;
        *) echo "lucid: tools/prereqs.sh: unknown check '$need'"; exit 0 ;;
    esac
done
