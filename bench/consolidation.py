"""Consolidation: how long the disruption planner takes to decide, and how close repeated consolidation gets
to the cheapest packing.

Usage: python bench/consolidation.py [--sizes 100,1000,5000] [--fragmented 100,1000] [--lp 100,1000]
                                     [--time-limit 120] [--max-passes 400]

Clusters are drawn with seed 42 from one on-demand NodePool (instance categories c, m and r, amd64, the
built-in us-east-1 catalog; budget: the default 10%), every node running the DaemonSets of
bench/packing.py, its other pods from bench/scheduling.py's mix (100m-1500m CPU, 100Mi-4Gi memory).

1. *Decision time*: a cluster of N nodes of seven common types, each filled to a utilisation drawn from
   15-95%; prints the seconds one ``plan()`` takes (best of --repeat), the command it returns and the
   simulations it ran.
2. *Fragmented cluster*: N large nodes (m5.2xlarge / m5.4xlarge / r5.2xlarge) holding 5-25% of their
   room each. Commands of ``plan()`` are applied in pure simulation (candidates removed, replacements
   started with their pods, the other pods bound where the scheduler puts them, nodes that end up
   empty marked empty; 60 s pass apart) until a pass returns no command. Prints the $/h before and
   after, nodes, passes, seconds, and the LP lower bound of packing the same pods on new nodes
   (bench/lp_bound.py) for the sizes in --lp.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from dataclasses import dataclass, replace

from lp_bound import lp_bound, packing_problem
from packing import daemonsets
from scheduling import CPUS, MEMORIES, SEED, machine

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.disruption import simulation
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import Command, DisruptionInput, NodeState
from fleetwright.model import labels as wk
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.model.pod import Pod
from fleetwright.model.resources import parse_resources
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import NewNodeClaim, SchedulingInput

MIXED_TYPES = ["m5.large", "m5.xlarge", "m5.2xlarge", "c5.xlarge", "c5.2xlarge", "r5.xlarge", "m5.4xlarge"]
LARGE_TYPES = ["m5.2xlarge", "m5.4xlarge", "r5.2xlarge"]
START = 1_750_000_000.0
PASS_SECONDS = 60.0


def nodepool(types: list[str] | None = None) -> NodePool:
    """The benchmark's NodePool: on-demand c/m/r amd64 (or only ``types``), consolidateAfter 30s, the default
    budget (10%)."""
    only = [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": types}] if types else []
    return NodePool.model_validate(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [
                            {"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
                            {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
                            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                            *only,
                        ],
                    }
                },
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
            },
        }
    )


@dataclass(slots=True)
class Maker:
    """Draws nodes and pods with one random generator."""

    catalog: dict[str, InstanceType]
    rng: random.Random
    pods: int = 0

    def daemon_pods(self, node: str) -> list[Pod]:
        return [
            replace(d, name=f"{d.name}-{node}", owner=("DaemonSet", d.name), node_name=node, phase="Running")
            for d in daemonsets()
        ]

    def pod(self, node: str) -> Pod:
        self.pods += 1
        requests = parse_resources(
            {"cpu": self.rng.choice(CPUS), "memory": self.rng.choice(MEMORIES), "pods": 1}
        )
        return Pod(
            namespace="bench",
            name=f"pod-{self.pods}",
            requests=requests,
            labels={"app": f"app-{self.pods % 50}"},
            owner=("ReplicaSet", f"app-{self.pods % 50}"),
            node_name=node,
            phase="Running",
        )

    def node(self, name: str, type_name: str, utilisation: float, created_at: float) -> NodeState:
        itype = self.catalog[type_name]
        zone = self.rng.choice(["us-east-1a", "us-east-1b", "us-east-1c"])
        offering = itype.cheapest(frozenset({zone}), frozenset({wk.ON_DEMAND}))
        assert offering is not None
        pods = self.daemon_pods(name)
        cpu = sum(p.requests.get("cpu", 0) for p in pods)
        memory = sum(p.requests.get("memory", 0) for p in pods)
        room_cpu, room_memory = itype.allocatable["cpu"], itype.allocatable["memory"]
        slots = itype.allocatable["pods"] - len(pods)
        for _ in range(200):
            candidate = self.pod(name)
            c, m = cpu + candidate.requests["cpu"], memory + candidate.requests["memory"]
            if max(c / room_cpu, m / room_memory) > utilisation or slots <= 0:
                break
            pods.append(candidate)
            cpu, memory, slots = c, m, slots - 1
        labels = {
            **itype.labels,
            wk.ZONE: zone,
            wk.CAPACITY_TYPE: wk.ON_DEMAND,
            wk.HOSTNAME: name,
            wk.NODEPOOL: "default",
        }
        return NodeState(
            node=Node(name, labels, dict(itype.allocatable), capacity=dict(itype.capacity), pods=pods),
            instance_type=type_name,
            capacity_type=wk.ON_DEMAND,
            zone=zone,
            price=offering.price,
            created_at=created_at,
        )


def cluster_input(
    nodes: list[NodeState], catalog: list[InstanceType], now: float, pool: NodePool | None = None
) -> DisruptionInput:
    return DisruptionInput(
        nodes=nodes,
        nodepools=[pool or nodepool()],
        nodeclasses=[],
        instance_types=catalog,
        now=now,
        daemonsets=daemonsets(),
    )


def mixed_cluster(
    size: int, catalog: list[InstanceType], low: float = 0.15, high: float = 0.95
) -> list[NodeState]:
    maker = Maker({t.name: t for t in catalog}, random.Random(SEED))
    return [
        maker.node(
            f"node-{i:05d}", maker.rng.choice(MIXED_TYPES), maker.rng.uniform(low, high), START - 86400
        )
        for i in range(size)
    ]


def stuck_cluster(size: int, catalog: list[InstanceType]) -> list[NodeState]:
    """c5.large nodes holding one 1.5-CPU pod each, in a NodePool of c5.large only: nothing to gain, so
    every simulation a pass may run fails (the slowest case)."""
    maker = Maker({t.name: t for t in catalog}, random.Random(SEED))
    nodes = [maker.node(f"node-{i:05d}", "c5.large", 0.0, START - 86400) for i in range(size)]
    for state in nodes:
        pod = maker.pod(state.name)
        pod.requests.update(cpu=1500, memory=1 << 30)
        state.node.pods.append(pod)
    return nodes


def fragmented_cluster(size: int, catalog: list[InstanceType]) -> list[NodeState]:
    maker = Maker({t.name: t for t in catalog}, random.Random(SEED + size))
    return [
        maker.node(
            f"node-{i:05d}", maker.rng.choice(LARGE_TYPES), maker.rng.uniform(0.05, 0.25), START - 86400
        )
        for i in range(size)
    ]


def counted_plan(inp: DisruptionInput) -> tuple[float, int, Command | None]:
    """Seconds, scheduler runs and the graceful command of one plan()."""
    runs = 0
    original = simulation.schedule

    def counting(arg: SchedulingInput):  # type: ignore[no-untyped-def]
        nonlocal runs
        runs += 1
        return original(arg)

    simulation.schedule = counting  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        result = plan(inp)
        seconds = time.perf_counter() - started
    finally:
        simulation.schedule = original  # type: ignore[assignment]
    return seconds, runs, result.command


def describe(command: Command | None) -> str:
    if command is None:
        return "no command"
    counts = f"{len(command.candidates)} node(s), {len(command.replacements)} new"
    return f"{command.method}: {counts}, saves ${command.savings:.3f}/h"


class Replay:
    """Applies commands to a cluster in pure simulation."""

    def __init__(self, nodes: list[NodeState], catalog: list[InstanceType]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.catalog = catalog
        self.by_name = {t.name: t for t in catalog}
        self.now = START
        self.launched = 0

    def input(self) -> DisruptionInput:
        return cluster_input(sorted(self.nodes.values(), key=lambda n: n.name), self.catalog, self.now)

    def start(self, claim: NewNodeClaim) -> None:
        self.launched += 1
        name = f"new-{self.launched:05d}"
        itype = claim.instance_types[0]
        zone = next(o.zone for o in sorted(itype.offerings, key=lambda o: o.price) if o.zone in claim.zones)
        pods = [replace(p, node_name=name, phase="Running") for p in claim.pods]
        pods += Maker(self.by_name, random.Random(0)).daemon_pods(name)
        labels = {**itype.labels, wk.ZONE: zone, wk.CAPACITY_TYPE: wk.ON_DEMAND, wk.HOSTNAME: name}
        labels[wk.NODEPOOL] = claim.nodepool
        self.nodes[name] = NodeState(
            node=Node(name, labels, dict(itype.allocatable), capacity=dict(itype.capacity), pods=pods),
            instance_type=itype.name,
            capacity_type=wk.ON_DEMAND,
            zone=zone,
            price=claim.price,
            created_at=self.now,
        )

    def apply(self, command: Command) -> None:
        leaving = [self.nodes.pop(c.name) for c in command.candidates]
        for claim in command.replacements:
            self.start(claim)
        placed = {p.key for claim in command.replacements for p in claim.pods}
        moving = [
            replace(p, node_name=None, phase="Pending")
            for s in leaving
            for p in s.node.pods
            if p.owner is None or p.owner[0] != "DaemonSet"
            if p.key not in placed
        ]
        if moving:
            nodes = [s.node for s in self.nodes.values()]
            results = schedule(
                SchedulingInput(
                    moving, nodepool_templates([nodepool()], [], nodes), self.catalog, nodes, daemonsets()
                )
            )
            for placement in results.existing:
                target = self.nodes[placement.node].node
                target.pods.extend(replace(p, node_name=target.name, phase="Running") for p in placement.pods)
            for claim in results.new_claims:
                self.start(claim)
            assert not results.errors, results.errors[0].reason
        for state in self.nodes.values():
            daemon_only = all(p.owner and p.owner[0] == "DaemonSet" for p in state.node.pods)
            if daemon_only and state.empty_since is None:
                state.empty_since = self.now

    @property
    def cost(self) -> float:
        return sum(s.price for s in self.nodes.values())

    def workload(self) -> list[Pod]:
        return [
            replace(p, node_name=None)
            for s in self.nodes.values()
            for p in s.node.pods
            if not (p.owner and p.owner[0] == "DaemonSet")
        ]


def main() -> None:
    """Print decision times, then the fragmented clusters' convergence."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--fragmented", default="100,1000")
    parser.add_argument("--lp", default="100,1000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds of column generation")
    parser.add_argument("--max-passes", type=int, default=400)
    args = parser.parse_args()
    catalog = builtin_catalog("us-east-1")
    print(f"machine: {machine()}")
    print(f"catalog: {len(catalog)} instance types; NodePool: on-demand c/m/r amd64, budget 10%")
    _decision_times(args, catalog)
    _convergence(args, catalog)


def _decision_times(args: argparse.Namespace, catalog: list[InstanceType]) -> None:
    """Seconds one plan() takes on mixed, packed and stuck clusters of each size."""
    print("\ndecision time: utilisation 15-95% (mixed) or 85-98% (packed); stuck: nothing to find")
    print(f"{'cluster':>7} {'nodes':>6} {'pods':>7} {'$/h':>9} {'plan s':>7} {'sims':>5}  command")
    for size in (int(s) for s in args.sizes.split(",") if s):
        for kind in ("mixed", "packed", "stuck"):
            pool = nodepool(["c5.large"]) if kind == "stuck" else nodepool()
            if kind == "stuck":
                nodes = stuck_cluster(size, catalog)
            else:
                nodes = mixed_cluster(size, catalog, *((0.15, 0.95) if kind == "mixed" else (0.85, 0.98)))
            pods = sum(len(n.node.pods) for n in nodes)
            cost = sum(n.price for n in nodes)
            best = None
            for _ in range(args.repeat):
                seconds, runs, command = counted_plan(cluster_input(nodes, catalog, START, pool))
                best = seconds if best is None else min(best, seconds)
            print(f"{kind:>7} {size:>6} {pods:>7} {cost:>9.2f} {best:>7.2f} {runs:>5}  {describe(command)}")


def _convergence(args: argparse.Namespace, catalog: list[InstanceType]) -> None:
    """Fragmented clusters consolidated pass after pass until nothing is left to do, against the LP bound."""
    print("\nfragmented cluster (5-25% used), plan() applied until no command")
    print(
        f"{'nodes':>6} {'pods':>6} {'before $/h':>10} {'after $/h':>9} {'nodes':>6} {'passes':>6} "
        f"{'plan s':>7} {'max s':>6} {'LP $/h':>8} {'LP nodes':>8} {'after/LP':>8} {'LP kind':>9}"
    )
    lp_sizes = {int(s) for s in args.lp.split(",") if s}
    for size in (int(s) for s in args.fragmented.split(",") if s):
        replay = Replay(fragmented_cluster(size, catalog), catalog)
        before = replay.cost
        pods = len(replay.workload())
        passes, total, slowest = 0, 0.0, 0.0
        methods: Counter[str] = Counter()
        while passes < args.max_passes:
            seconds, _, command = counted_plan(replay.input())
            total += seconds
            slowest = max(slowest, seconds)
            passes += 1
            if command is None:
                break
            methods[command.method] += 1
            replay.apply(command)
            replay.now += PASS_SECONDS
        after = replay.cost
        line = (
            f"{size:>6} {pods:>6} {before:>10.2f} {after:>9.2f} {len(replay.nodes):>6} {passes:>6} "
            f"{total:>7.1f} {slowest:>6.2f}"
        )
        if size in lp_sizes:
            templates = nodepool_templates([nodepool()], [])
            problem = packing_problem(replay.workload(), catalog, daemonsets(), templates)
            bound = lp_bound(problem, args.time_limit)
            line += f" {bound.value:>8.2f} {bound.nodes:>8.1f} {after / bound.value:>8.3f} {bound.kind:>9}"
        print(line)
        print("        commands: " + ", ".join(f"{n} {m}" for m, n in sorted(methods.items())))
        types = Counter(s.instance_type for s in replay.nodes.values())
        print("        after: " + ", ".join(f"{n} × {t}" for t, n in types.most_common(5)))


if __name__ == "__main__":
    main()
