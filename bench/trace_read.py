"""Reading and writing ``fleetwright simulate`` traces: how long a generated day takes.

Usage: python bench/trace_read.py [--pods 10000] [--repeat 5] [--seed 1]

Generates a day (``fleetwright trace generate``), writes it to a temporary CSV, and prints the median of
--repeat runs of ``read_trace`` (every field checked), of ``write_trace``, and of the generator, with the
file size and the machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scheduling import machine

from fleetwright.local.simulate.generate import DayOptions, generate_day
from fleetwright.local.simulate.tracefile import read_trace, write_trace


def _median(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    options = DayOptions(pods=args.pods, seed=args.seed)
    generate = _median(args.repeat, lambda: generate_day(options))
    trace = generate_day(options)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "day.csv"
        write = _median(args.repeat, lambda: write_trace(trace, path))
        read = _median(args.repeat, lambda: read_trace(path))
        size = path.stat().st_size
    print(f"machine: {machine()}")
    print(f"{len(trace.pods)} pods, {size / 1000:.0f} kB, median of {args.repeat} runs:")
    print(f"  read_trace   {read * 1000:8.1f} ms  ({read / len(trace.pods) * 1e6:.1f} µs a pod)")
    print(f"  write_trace  {write * 1000:8.1f} ms")
    print(f"  generate     {generate * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
