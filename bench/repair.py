"""Node repair: what checking every node's conditions adds to a disruption pass's decision.

Usage: python bench/repair.py [--sizes 1000,5000] [--repeat 5]

Clusters come from bench/consolidation.py's mixed cluster (seed 42, one NodePool). Every node carries a
Ready=True condition; in the "unhealthy" rows 10 % of them have been Ready=False for 45 minutes (under the
20 % rule, so all of them are repaired and the pass stops there). Prints the median seconds of
``repair_commands`` alone over --repeat runs, and of a whole ``plan()`` with node repair off and on for
the healthy cluster (the overhead a healthy cluster pays).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from consolidation import START, cluster_input, mixed_cluster
from scheduling import machine

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.disruption.candidates import Cluster
from fleetwright.disruption.planner import plan
from fleetwright.disruption.repair import repair_commands
from fleetwright.disruption.types import DisruptionInput, DisruptionSettings, NodeState


def with_conditions(nodes: list[NodeState], unhealthy_every: int | None) -> None:
    for i, state in enumerate(nodes):
        state.conditions = {"Ready": ("True", START - 86400.0)}
        if unhealthy_every and i % unhealthy_every == 0:
            state.conditions["Ready"] = ("False", START - 45 * 60.0)


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    catalog = builtin_catalog("us-east-1")
    print(f"machine: {machine()}")
    print(f"{'nodes':>6} {'cluster':>9} {'repairs':>7} {'repair s':>9} {'plan off s':>10} {'plan on s':>9}")
    for size in (int(s) for s in args.sizes.split(",") if s):
        for kind, every in (("healthy", None), ("unhealthy", 10)):
            nodes = mixed_cluster(size, catalog)
            with_conditions(nodes, every)
            off: DisruptionInput = cluster_input(nodes, catalog, START)
            on = replace(off, settings=DisruptionSettings(node_repair=True))
            commands = repair_commands(Cluster(on), {})
            repair_s = median_seconds(lambda on=on: repair_commands(Cluster(on), {}), args.repeat)
            if kind == "healthy":
                plan_off = median_seconds(lambda off=off: plan(off), args.repeat)
                plan_on = median_seconds(lambda on=on: plan(on), args.repeat)
                plans = f"{plan_off:>10.3f} {plan_on:>9.3f}"
            else:
                plans = f"{'':>10} {'':>9}"
            print(f"{size:>6} {kind:>9} {len(commands):>7} {repair_s:>9.4f} {plans}")


if __name__ == "__main__":
    main()
