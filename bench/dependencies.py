"""What retrying pods costs: batches whose pods wait for other pods of the batch, or never fit.

Usage: python bench/dependencies.py [--sizes 1000,5000,20000] [--repeat 3]

Pods that cannot be placed yet are retried while the batch makes progress (docs/scheduling.md, step 3).
Three batches of N pods from bench/scheduling.py's plain mix (seed 42, 400 instance types, one NodePool):
- *plain*: the pods as they are (the reference; every pod fits at its first try);
- *chains*: the pods split into workloads of four tiers, ui -> cache -> web -> db (zone, hostname and
  zone affinity to the tier below; each db tier pinned to one zone), with ui declared and sorted
  first, so most pods wait for a later pass (a cache pod whose web pods' nodes are all full stays
  pending: hostname affinity cannot open a node, and its ui pods then have nothing to follow);
- *unfit*: the plain pods plus N/10 pods too big for any instance type, interleaved (each fails every
  pass that follows a placement).
Prints, per N, the best of --repeat runs: seconds, the ratio to *plain* of the same N, pods placed.
"""

from __future__ import annotations

import argparse
import random
import time

from scheduling import SEED, instance_types, machine, pending_pods

from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import HOSTNAME, ZONE
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm
from fleetwright.model.requirements import Requirements
from fleetwright.model.resources import parse_resources
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput

TIERS = ("ui", "cache", "web", "db")  # each follows the next one
KEYS = {"ui": ZONE, "cache": HOSTNAME, "web": ZONE}
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def chained_pods(count: int) -> list[Pod]:
    """The plain pods as workloads of four tiers, about 20 pods each, declared ui first."""
    pods = pending_pods(count)
    rng = random.Random(SEED + 2)
    for i, pod in enumerate(pods):
        workload, tier = i // 20, TIERS[min(3, (i % 20) // 5)]
        pod.labels = {"app": f"w{workload}", "tier": tier}
        if tier == "db":
            pod.node_selector = Requirements.from_labels({ZONE: rng.choice(ZONES)})
            continue
        below = TIERS[TIERS.index(tier) + 1]
        selector = LabelSelector((("app", f"w{workload}"), ("tier", below)))
        pod.pod_affinity = (PodAffinityTerm(KEYS[tier], selector, ("bench",)),)
    return pods


def unfit_pods(count: int) -> list[Pod]:
    """The plain pods with one pod in ten too big for any instance type, interleaved."""
    pods: list[Pod] = []
    for i, pod in enumerate(pending_pods(count)):
        pods.append(pod)
        if i % 10 == 9:
            requests = parse_resources({"cpu": "2000", "memory": "1Gi", "pods": 1})
            pods.append(Pod(namespace="bench", name=f"huge-{i}", requests=requests))
    return pods


def best_run(pods: list[Pod], types: list[InstanceType], repeat: int) -> tuple[float, Results]:
    """The fastest of ``repeat`` runs: seconds and its results."""
    best: tuple[float, Results] | None = None
    for _ in range(repeat):
        inp = SchedulingInput(pods=pods, nodepools=[NodePoolTemplate(name="default")], instance_types=types)
        start = time.perf_counter()
        result = schedule(inp)
        outcome = (time.perf_counter() - start, result)
        if best is None or outcome[0] < best[0]:
            best = outcome
    assert best is not None
    return best


def main() -> None:
    """Print one line per batch and N."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    types = instance_types()
    print(f"machine: {machine()}")
    print(f"instance types: {len(types)} (built-in us-east-1 catalog, seed {SEED})")
    print(f"{'batch':>7} {'pods':>7} {'seconds':>9} {'x plain':>8} {'placed':>7} {'unsched':>8}")
    for size in (int(x) for x in args.sizes.split(",")):
        reference = 0.0
        for name, pods in (
            ("plain", pending_pods(size)),
            ("chains", chained_pods(size)),
            ("unfit", unfit_pods(size)),
        ):
            seconds, result = best_run(pods, types, args.repeat)
            reference = reference or seconds
            print(
                f"{name:>7} {len(pods):>7} {seconds:>9.3f} {seconds / reference:>8.2f} "
                f"{result.scheduled:>7} {len(result.errors):>8}"
            )


if __name__ == "__main__":
    main()
