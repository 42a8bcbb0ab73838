"""Reliability under faults: runs every scenario of ``tests/chaos`` and prints one row per fault with the six
figures and their targets, then the machine. Exit status 1 when any target is missed.

Each scenario builds the whole world (moto, the Kubernetes API emulator, the provisioner, the interruption
handler fed through SQS, the termination workflow on moto's Step Functions, the disruption pass) on a virtual
clock, injects one fault and lets the system recover (see docs/reliability.md).

    .venv/bin/python bench/chaos.py [-k PYTEST_EXPRESSION]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from scheduling import machine  # noqa: E402  (bench/scheduling.py)

REPORT_ENV = "FLEETWRIGHT_CHAOS_REPORT"  # tests/chaos/figures.py reads it
COLUMNS = (
    ("launched/needed", 15),
    ("limit over", 10),
    ("PDB viol.", 9),
    ("cordoned", 8),
    ("msgs lost", 9),
    ("orphans", 7),
)


def run_scenarios(expression: str | None) -> tuple[list[dict[str, Any]], int, float]:
    """Run the chaos tests with the report file set; the figures each recorded, pytest's exit status and
    the wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "figures.jsonl"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(ROOT / "tests" / "chaos"),
        ]
        if expression:
            command += ["-k", expression]
        started = time.perf_counter()
        result = subprocess.run(
            command,
            cwd=ROOT,
            env={**os.environ, REPORT_ENV: str(report)},
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - started
        rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
        if not rows:
            sys.stdout.write(result.stdout[-4000:] + result.stderr[-4000:])
        return rows, result.returncode, elapsed


def cells(row: dict[str, Any]) -> list[str]:
    ratio = row["ratio"]
    shown = f"{row['launched']}/{row['needed']}" + ("" if ratio == 1.0 else " !")
    return [
        shown,
        f"{row['limit_overshoot']:g}",
        str(row["pdb_violations"]),
        str(row["cordoned_left"]),
        str(row["messages_lost"]),
        str(row["orphans"]),
    ]


def missed(row: dict[str, Any]) -> bool:
    return row["ratio"] != 1.0 or any(
        row[k] for k in ("limit_overshoot", "pdb_violations", "cordoned_left", "messages_lost", "orphans")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="expression", help="only the scenarios pytest -k selects")
    args = parser.parse_args()
    rows, status, elapsed = run_scenarios(args.expression)
    width = max([len(r["scenario"]) for r in rows] + [len("fault")])
    header = "fault".ljust(width) + "  " + "  ".join(name.rjust(w) for name, w in COLUMNS) + "  target met"
    print(header)
    print("-" * len(header))
    print(
        "target".ljust(width)
        + "  "
        + "  ".join(t.rjust(w) for t, (_, w) in zip(["1.0", "0", "0", "0", "0", "0"], COLUMNS, strict=True))
    )
    failures = 0
    for row in rows:
        bad = missed(row)
        failures += bad
        values = cells(row)
        print(
            row["scenario"].ljust(width)
            + "  "
            + "  ".join(v.rjust(w) for v, (_, w) in zip(values, COLUMNS, strict=True))
            + ("  no" if bad else "  yes")
        )
    print(
        f"\n{len(rows)} scenarios, {failures} missing a target; pytest exit status {status}; {elapsed:.0f} s"
    )
    print(f"machine: {machine()}")
    return 1 if failures or status != 0 or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
