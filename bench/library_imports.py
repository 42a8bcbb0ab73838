"""What the kept libraries (cachetools, croniter, pydantic-settings) cost a function's start, before/after.

For each function, in fresh interpreters: the cold start (``import handler``, which must load none of them)
and the first invocation's imports (boto3, the function's wiring ``fleetwright.runtime.<name>``, the
environment model and ``ProvisionerConfig``, the NodePool model with its schedules, the disruption budgets
and an AWS adapter with its TTL cache), as wall seconds around the imports; and, from
``python -X importtime``, the cumulative microseconds of each library's own top-level import within the
first invocation's (what it adds on top of what was loaded before it).

    .venv/bin/python bench/library_imports.py [--layers DIR] [--repeat 9]

``--layers`` points at another tree's ``layers/`` (an export of an earlier commit) to measure it with the
same interpreter and packages; figures are medians, printed with the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("provisioner", "disruption", "interruption", "termination")
LIBRARIES = ("cachetools", "croniter", "pydantic_settings", "dateutil")
FIRST_INVOCATION = (
    "boto3",
    "fleetwright.runtime.{name}",
    "fleetwright.config.environment",
    "fleetwright.config.settings",
    "fleetwright.model.nodepool",
    "fleetwright.disruption.budgets",
    "fleetwright.aws.instancetypes",
)
TIMED = "import time as _t; _s = _t.perf_counter(); {imports}; print(_t.perf_counter() - _s)"


def run(
    statement: str, layers: Path, cwd: Path, importtime: bool = False
) -> subprocess.CompletedProcess[str]:
    """``statement`` in a fresh interpreter importing from ``layers``."""
    flags = ["-X", "importtime"] if importtime else []
    env = {**os.environ, "PYTHONPATH": str(layers)}
    command = [sys.executable, *flags, "-c", statement]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=True)


def library_micros(stderr: str) -> dict[str, int]:
    """Cumulative µs of each library's top-level import line (the first time it is imported)."""
    found: dict[str, int] = {}
    for line in stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)$", line)
        if match and match.group(3) in LIBRARIES and match.group(3) not in found:
            found[match.group(3)] = int(match.group(1))
    return found


def measure(name: str, layers: Path, repeat: int) -> tuple[float, float, dict[str, float]]:
    cwd = ROOT / "functions" / name
    imports = "; ".join(f"import {module.format(name=name)}" for module in FIRST_INVOCATION)
    cold = [float(run(TIMED.format(imports="import handler"), layers, cwd).stdout) for _ in range(repeat)]
    first = [float(run(TIMED.format(imports=imports), layers, cwd).stdout) for _ in range(repeat)]
    per_library: dict[str, list[int]] = {library: [] for library in LIBRARIES}
    for _ in range(repeat):
        for library, micros in library_micros(run(imports, layers, cwd, importtime=True).stderr).items():
            per_library[library].append(micros)
    medians = {library: statistics.median(v) / 1e6 for library, v in per_library.items() if v}
    return statistics.median(cold), statistics.median(first), medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=Path, default=ROOT / "layers")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    machine = platform.processor() or platform.machine()
    print(f"{machine}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"layers: {args.layers}; load average before: {os.getloadavg()[0]:.1f}")
    print("function | import handler | first invocation's imports | " + " | ".join(LIBRARIES))
    for name in FUNCTIONS:
        cold, first, libraries = measure(name, args.layers.resolve(), args.repeat)
        cells = " | ".join(f"{libraries[n] * 1000:.1f} ms" if n in libraries else "-" for n in LIBRARIES)
        print(f"{name} | {cold:.3f} s | {first:.3f} s | {cells}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
