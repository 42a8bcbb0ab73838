"""Scheduling benchmark: N pending pods against 400 instance types and one NodePool.

Usage: python bench/scheduling.py [--mix karpenter|plain|mixed|all] [--sizes 500,1000,...] [--repeat 3]

The instance types are 400 of the built-in us-east-1 catalog, drawn with seed 42. Three pod mixes:

*karpenter* is the mix of Karpenter's own scheduling benchmark (``makeDiversePods``), built the same
way: a fifth each of generic pods, zonal spread, hostname spread (both maxSkew 1, DoNotSchedule, label
and selector ``my-label`` each drawn from a..g independently), zonal self-affinity (``my-affininity``
from a..g) and hostname anti-affinity (all ``app: nginx``, so they repel each other: one node each),
the remainder generic; every generic pod also carries a random ``my-label``. Requests are drawn from
{100, 250, 500, 1000, 1500}m CPU and {100, 256, 512, 1024, 2048, 4096}Mi memory. Its NodePool has
``limits``: cpu 10000000 (Karpenter's benchmark figure) and memory 1000000Ti. Karpenter's 10000000Gi
would bind here: each claim counts against the limits at its largest candidate, 24 TiB and 896 vCPU
for this catalog's u7in-24tb.224xlarge (Karpenter's fake catalog has nothing that large), so 20,000
pods would stop at 442 nodes. The run follows ``fleetwright plan -o json``: manifests to scheduling input, the
solve, then the JSON document written as the CLI writes it. Solve and JSON seconds are shown apart.

*plain* (no constraints) and *mixed* (the same five kinds, each constrained fifth spread over 10
workloads by label ``app``, NodePool without limits) time the solve alone.

Prints, for each N, the median of --repeat runs: solve seconds (wall clock, and the CPU time of this
process, which other load on the machine disturbs less), JSON seconds, pods/s, nodes, their instances' $/h
and their whole bill's $/h (instances, volumes, addresses, burstable credits: ``docs/scheduling.md``). For
scale: Karpenter's published benchmark takes 0.42 s for 500 pods and 35.7 s for 20,000.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.manifests import load_manifests
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import HOSTNAME, ZONE
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from fleetwright.model.resources import parse_resources
from fleetwright.plan import Plan, scheduling_input, write_plan_json
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NodePoolTemplate, Results, SchedulingInput

CPUS = ["100m", "250m", "500m", "1000m", "1500m"]
MEMORIES = ["100Mi", "250Mi", "500Mi", "1Gi", "2Gi", "4Gi"]
SEED = 42


def machine() -> str:
    """One line describing where the figures were measured."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}{load}"


def instance_types(count: int = 400) -> list[InstanceType]:
    """``count`` instance types of the built-in catalog, drawn with the benchmark's seed."""
    catalog = sorted(builtin_catalog("us-east-1"), key=lambda it: it.name)
    return random.Random(SEED).sample(catalog, count)


def pending_pods(count: int) -> list[Pod]:
    """``count`` pods of a random plain mix (no constraints), drawn with the benchmark's seed."""
    rng = random.Random(SEED)
    return [
        Pod(
            namespace="bench",
            name=f"pod-{i}",
            requests=parse_resources({"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES), "pods": 1}),
        )
        for i in range(count)
    ]


WORKLOADS = 10
KINDS = ("plain", "zone-spread", "host-spread", "zone-affinity", "host-anti-affinity")


def mixed_pods(count: int) -> list[Pod]:
    """``count`` pods of Karpenter's benchmark mix (see the module docstring), seed 42."""
    pods = pending_pods(count)
    rng = random.Random(SEED + 1)
    for i, pod in enumerate(pods):
        kind = KINDS[i % len(KINDS)]
        if kind == "plain":
            continue
        app = f"{kind}-{rng.randrange(WORKLOADS)}"
        pod.labels = {"app": app}
        selector = LabelSelector((("app", app),))
        if kind == "zone-spread":
            pod.topology_spread = (TopologySpreadConstraint(ZONE, 1, "DoNotSchedule", selector),)
        elif kind == "host-spread":
            pod.topology_spread = (TopologySpreadConstraint(HOSTNAME, 1, "DoNotSchedule", selector),)
        elif kind == "zone-affinity":
            pod.pod_affinity = (PodAffinityTerm(ZONE, selector, ("bench",)),)
        else:
            pod.pod_anti_affinity = (PodAffinityTerm(HOSTNAME, selector, ("bench",)),)
    return pods


KARPENTER_CPUS = ["100m", "250m", "500m", "1000m", "1500m"]
KARPENTER_MEMORIES = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"]
LABEL_VALUES = "abcdefg"
KARPENTER_NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/os, operator: In, values: [linux]}
  limits:
    cpu: "10000000"
    memory: 1000000Ti
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-bench
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
"""


class Seconds(NamedTuple):
    """One run's timings: solve (wall clock and this process's CPU time) and JSON output (wall)."""

    solve: float
    solve_cpu: float
    json: float


def karpenter_pods(count: int) -> list[Pod]:
    """``count`` pods of Karpenter's ``makeDiversePods`` mix (see the module docstring), seed 42."""
    rng = random.Random(SEED)
    pods: list[Pod] = []

    def pod(labels: dict[str, str]) -> Pod:
        requests = {"cpu": rng.choice(KARPENTER_CPUS), "memory": rng.choice(KARPENTER_MEMORIES)}
        made = Pod(namespace="bench", name=f"pod-{len(pods)}", requests=parse_resources(requests))
        made.labels = labels
        pods.append(made)
        return made

    def my_label() -> dict[str, str]:
        return {"my-label": rng.choice(LABEL_VALUES)}

    share = count // 5
    for _ in range(share):
        pod(my_label())
    for key in (ZONE, HOSTNAME):
        for _ in range(share):
            spread = pod(my_label())
            selector = LabelSelector(tuple(my_label().items()))
            spread.topology_spread = (TopologySpreadConstraint(key, 1, "DoNotSchedule", selector),)
    for _ in range(share):
        labels = {"my-affininity": rng.choice(LABEL_VALUES)}
        affine = pod(labels)
        affine.pod_affinity = (PodAffinityTerm(ZONE, LabelSelector(tuple(labels.items())), ("bench",)),)
    nginx = {"app": "nginx"}
    for _ in range(share):
        repelled = pod(dict(nginx))
        repelled.pod_anti_affinity = (
            PodAffinityTerm(HOSTNAME, LabelSelector(tuple(nginx.items())), ("bench",)),
        )
    while len(pods) < count:
        pod(my_label())
    return pods


def karpenter_plan(
    pods: list[Pod], types: list[InstanceType], nodepool: str = KARPENTER_NODEPOOL
) -> tuple[Seconds, Plan]:
    """Plan as ``fleetwright plan -o json`` does; the seconds it took and the plan.

    ``nodepool`` holds the NodePool and EC2NodeClass documents.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nodepool.yaml"
        path.write_text(nodepool, encoding="utf-8")
        manifests = load_manifests([str(path)])
    manifests.pods = pods
    inp = scheduling_input(manifests, types)
    start, start_cpu = time.perf_counter(), time.process_time()
    plan = Plan(inp, schedule(inp))
    solved, solved_cpu = time.perf_counter(), time.process_time()
    write_plan_json(plan, io.StringIO())
    return Seconds(solved - start, solved_cpu - start_cpu, time.perf_counter() - solved), plan


def run(pods: list[Pod], types: list[InstanceType]) -> tuple[Seconds, Results]:
    """Schedule once (NodePool without limits); seconds and results."""
    inp = SchedulingInput(pods=pods, nodepools=[NodePoolTemplate(name="default")], instance_types=types)
    start, start_cpu = time.perf_counter(), time.process_time()
    result = schedule(inp)
    return Seconds(time.perf_counter() - start, time.process_time() - start_cpu, 0.0), result


def measure(mix: str, size: int, types: list[InstanceType], repeat: int) -> tuple[Seconds, Results]:
    """Per column, the median seconds over ``repeat`` runs, and the results (identical every run)."""
    runs: list[Seconds] = []
    result: Results | None = None
    for _ in range(repeat):
        if mix == "karpenter":
            seconds, plan = karpenter_plan(karpenter_pods(size), types)
            result = plan.results
        else:
            pods = pending_pods(size) if mix == "plain" else mixed_pods(size)
            seconds, result = run(pods, types)
        runs.append(seconds)
    assert result is not None
    return Seconds(*(statistics.median(column) for column in zip(*runs, strict=True))), result


def main() -> None:
    """Print one line per N."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--mix", choices=("karpenter", "plain", "mixed", "all"), default="all")
    parser.add_argument("--sizes", default="")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    types = instance_types()
    print(f"machine: {machine()}")
    print(f"instance types: {len(types)} (built-in us-east-1 catalog, seed {SEED}); median of {args.repeat}")
    mixes = ("karpenter", "plain", "mixed") if args.mix == "all" else (args.mix,)
    for mix in mixes:
        default_sizes = "1,100,500,1000,5000,20000" if mix == "plain" else "500,1000,5000,20000"
        sizes = [int(x) for x in (args.sizes or default_sizes).split(",")]
        print(
            f"\n{mix} pods"
            + (" (fleetwright plan -o json path, NodePool with limits)" if mix == "karpenter" else "")
        )
        print(
            f"{'pods':>7} {'solve s':>9} {'cpu s':>7} {'json s':>8} {'pods/s':>10} {'nodes':>6} {'$/h':>10} "
            f"{'bill $/h':>10} {'unsched':>8}"
        )
        timings: dict[int, float] = {}
        for size in sizes:
            seconds, result = measure(mix, size, types, args.repeat)
            timings[size] = seconds.solve
            print(
                f"{size:>7} {seconds.solve:>9.3f} {seconds.solve_cpu:>7.3f} {seconds.json:>8.3f} "
                f"{size / seconds.solve:>10.0f} {len(result.new_claims):>6} {result.hourly_cost:>10.3f} "
                f"{result.bill.total:>10.3f} {len(result.errors):>8}"
            )
        if len(timings) > 1:
            smallest, largest = min(timings), max(timings)
            ratio = timings[largest] / timings[smallest]
            print(f"t({largest}) / t({smallest}) = {ratio:.1f} (solve)")


if __name__ == "__main__":
    main()
