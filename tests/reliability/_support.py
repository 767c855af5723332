"""Shared by the reliability tests: how hard to try, and the log RELIABILITY.md is made from.

`make test` runs these tests in their short form. `make reliability` sets LUCID_RELIABILITY=full
(more cases, longer runs) and LUCID_RELIABILITY_LOG to a file that each test appends one JSON
line to per kind of case it tried; tests/reliability/report.py turns that log into
RELIABILITY.md.
"""

import json
import os

FULL = os.environ.get("LUCID_RELIABILITY") == "full"


def scale(short, full):
    """`short` under `make test`, `full` under `make reliability`."""
    return full if FULL else short


def record(kind: str, what: str, cases: int, held: str) -> None:
    """Logs one row of the report: the kind of test, what it tried, how many cases, and what
    held for all of them. Call it only after the checks passed."""
    path = os.environ.get("LUCID_RELIABILITY_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"kind": kind, "what": what, "cases": int(cases), "held": held}) + "\n")
