"""Cost of viewing the built-in catalog as Windows nodes (``catalog.os_family.for_ami_family``), which every
Windows NodePool's preparation does: building the views, and reusing them for an unchanged catalog.
Prints the median of several runs of each and the machine.

    .venv/bin/python bench/windows_views.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduling import machine

from fleetwright.catalog import os_family
from fleetwright.catalog.loader import builtin_catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    catalog = builtin_catalog("us-east-1")
    build, reuse = [], []
    for _ in range(args.runs):
        os_family._VIEWS.clear()
        start = time.perf_counter()
        views = os_family.for_ami_family(catalog, "Windows2022")
        build.append(time.perf_counter() - start)
        start = time.perf_counter()
        os_family.for_ami_family(catalog, "Windows2022")
        reuse.append(time.perf_counter() - start)
    print(f"catalog: {len(catalog)} types, {len(views)} as Windows2022 nodes; median of {args.runs} runs")
    print(f"build views:  {statistics.median(build) * 1000:8.2f} ms")
    print(f"reuse views:  {statistics.median(reuse) * 1000:8.2f} ms")
    print(f"machine: {machine()}")


if __name__ == "__main__":
    main()
