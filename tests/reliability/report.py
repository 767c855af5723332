"""Turns the log the reliability tests write (one JSON line per kind of case tried) into
RELIABILITY.md. `make reliability` runs the tests in their full form, then this:

    python tests/reliability/report.py LOG RELIABILITY.md
"""

import json
import platform
import sys
from collections import OrderedDict
from datetime import datetime, timezone

ORDER = [
    "Python API fuzz",
    "C ABI fuzz",
    "C program",
    "Threads",
    "Shared machines",
    "Leaks",
    "Faults during training",
    "Bad files",
]

HEADER = """# Reliability

What lucid's reliability tests (`tests/reliability/`) tried, how many cases, and what held
for every one of them. `make reliability` runs them in their full form and writes this page;
`make test` runs a short form of the same tests (far fewer cases) on every change.
A row is written only by a test that passed, so every figure here is a count of cases that
held.

The documented exception types are `ValueError` (a bad value: a size, a shape, a NaN where an
integer is needed, a malformed file), `TypeError` (a bad type, dtype or device kind),
`IndexError` (an index or dimension out of range) and `RuntimeError` (a state error: a scope
left on the wrong thread, a released tensor, out of memory); reading a path can also raise
`OSError`. Anything else — a signal, an abort, another exception type — fails the test.

Besides these, CI runs the Swift tests under ThreadSanitizer and AddressSanitizer
(`make check-sanitize`): the engine's allocator, random generator, kernel caches, autocast's
weight cache and the fallback's one-time warning are exercised from several threads there.
"""


def main(log_path, out_path):
    rows = []
    with open(log_path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    if not rows:
        sys.exit(f"{log_path} holds no results: did the reliability tests run?")
    kinds = OrderedDict((k, []) for k in ORDER)
    for row in rows:
        kinds.setdefault(row["kind"], []).append(row)

    out = [HEADER]
    out.append("| kind | cases | tests |")
    out.append("|---|---:|---:|")
    for kind, items in kinds.items():
        if items:
            out.append(f"| [{kind}](#{_anchor(kind)}) | {sum(r['cases'] for r in items):,} | {len(items)} |")
    missing = [k for k in ORDER if not kinds[k]]
    if missing:
        sys.exit(f"{log_path} has no results for: {', '.join(missing)}")
    for kind, items in kinds.items():
        out.append(f"\n## {kind}\n")
        out.append("| what was tried | cases | what held |")
        out.append("|---|---:|---|")
        for r in items:
            out.append(f"| {_cell(r['what'])} | {r['cases']:,} | {_cell(r['held'])} |")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    out.append(
        f"\nGenerated {stamp} on {platform.system()} {platform.machine()}, Python {platform.python_version()}.\n"
    )
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))


def _anchor(kind):
    return "".join(c for c in kind.lower().replace(" ", "-") if c.isalnum() or c == "-")


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: report.py LOG OUT.md")
    main(sys.argv[1], sys.argv[2])
