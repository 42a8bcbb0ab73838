"""Packing quality: the scheduler's $/h against a true lower bound (the LP relaxation, bench/lp_bound.py).

Usage: python bench/packing.py [--sizes 500,1000,5000] [--time-limit 300] [--node-fixed-cost 0]

The pods and the 400 instance types are those of bench/scheduling.py (plain mix, seed 42); every node
also runs the DaemonSets below (205m CPU, 300Mi memory and 4 pod slots per node, close to an EKS
cluster with the VPC CNI, kube-proxy, the EBS CSI driver and a log agent). For each N it prints, for
each packing strategy of the NodePool (``LowestCost``, the default, and ``FewerNodes``), the
scheduler's $/h, nodes, ratio scheduler / bound and seconds; then the LP bound and which kind it is
(exact LP optimum, or a Farley bound when the time limit stopped column generation), the nodes of the
LP solution (fractional), the LP's solve time, the packing obtained by rounding every LP pattern up
(nodes, $/h), and for contrast the simple
bound max(total CPU × cheapest $/CPU, total memory × cheapest $/GiB).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Mapping

from lp_bound import LPBound, PackingProblem, lp_bound, packing_problem, simple_bound
from scheduling import SEED, instance_types, machine, pending_pods

from fleetwright.model.pod import Pod
from fleetwright.model.resources import parse_resources
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput

# (name, cpu, memory): what each DaemonSet pod requests on every node (each also takes a pod slot).
DAEMONSETS = [
    ("aws-node", "25m", "50Mi"),  # VPC CNI
    ("kube-proxy", "100m", "30Mi"),
    ("ebs-csi-node", "30m", "120Mi"),  # three containers of 10m / 40Mi
    ("fluent-bit", "50m", "100Mi"),  # log agent
]


def daemonsets() -> list[Pod]:
    """One pod per DaemonSet of :data:`DAEMONSETS`."""
    return [
        Pod(
            namespace="kube-system",
            name=name,
            requests=parse_resources({"cpu": cpu, "memory": memory, "pods": 1}),
        )
        for name, cpu, memory in DAEMONSETS
    ]


def mix(counts: Mapping[str, float], limit: int = 4) -> str:
    """``12 × m7g.xlarge, 3 × c7g.large`` for the most used types."""
    top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return ", ".join(f"{n:g} × {name}" for name, n in top)


def lp_mix(problem: PackingProblem, bound: LPBound) -> dict[str, float]:
    """Nodes per instance type in the LP solution (fractional, one decimal)."""
    counts: dict[str, float] = {}
    for pattern in bound.patterns:
        name = problem.options[pattern.option].name.split("/", 1)[1]
        counts[name] = counts.get(name, 0.0) + pattern.x
    return {name: round(n, 1) for name, n in counts.items()}


def scheduler_mix(result: Results) -> Counter[str]:
    """Nodes per (cheapest) instance type the scheduler launches."""
    return Counter(claim.instance_types[0].name for claim in result.new_claims if claim.instance_types)


def main() -> None:
    """Print one line per N, then what each solution buys."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", default="500,1000,5000")
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds of column generation per N")
    parser.add_argument("--node-fixed-cost", type=float, default=0.0, help="USD/h added to every node")
    args = parser.parse_args()
    types = instance_types()
    daemons = daemonsets()
    print(f"machine: {machine()}")
    print(f"instance types: {len(types)} (built-in us-east-1 catalog, seed {SEED}); DaemonSets: 205m, 300Mi")
    strategies = ("LowestCost", "FewerNodes")
    header = f"{'pods':>6} " + " ".join(
        f"{s[:6] + ' $/h':>11} {'nodes':>5} {'ratio':>6} {'s':>5}" for s in strategies
    )
    header += f" {'LP $/h':>9} {'LP nodes':>8} {'kind':>9} {'LP s':>6}"
    header += f" {'rounded':>8} {'round $/h':>10} {'simple $/h':>10}"
    print(header)
    details: list[str] = []
    for size in (int(s) for s in args.sizes.split(",")):
        pods = pending_pods(size)
        problem = packing_problem(
            pods, types, daemons, [NodePoolTemplate(name="default")], args.node_fixed_cost
        )
        started = time.perf_counter()
        bound = lp_bound(problem, args.time_limit)
        seconds = time.perf_counter() - started
        nodes, rounded_cost = bound.rounded()
        line = f"{size:>6} "
        mixes: list[str] = []
        for strategy in strategies:
            template = NodePoolTemplate(name="default", packing=strategy)
            started = time.perf_counter()
            result = schedule(SchedulingInput(pods, [template], types, [], daemons))
            elapsed = time.perf_counter() - started
            cost = result.hourly_cost + args.node_fixed_cost * len(result.new_claims)
            unplaced = f" ({len(result.errors)} unschedulable!)" if result.errors else ""
            ratio = cost / bound.value
            line += f"{cost:>11.3f} {len(result.new_claims):>5} {ratio:>6.3f} {elapsed:>5.2f}{unplaced} "
            mixes.append(f"        {strategy + ':':<11} {mix(scheduler_mix(result))}")
        print(
            f"{line}{bound.value:>9.3f} {bound.nodes:>8.1f} {bound.kind:>9} {seconds:>6.1f} {nodes:>8} "
            f"{rounded_cost:>10.3f} {simple_bound(problem):>10.3f}"
        )
        details.append(
            f"{size:>6}: {len(problem.classes)} pod classes, {len(problem.options)} undominated types, "
            f"{bound.iterations} rounds, {bound.columns} columns, master LP ${bound.master_value:.4f}/h\n"
            + "\n".join(mixes)
            + f"\n        {'LP:':<11} {mix(lp_mix(problem, bound))}"
        )
    print()
    print("\n".join(details))


if __name__ == "__main__":
    main()
