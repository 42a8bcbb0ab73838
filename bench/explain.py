"""``fleetwright explain``: how long an answer takes on a cluster of N nodes, read from manifests.

Usage: python bench/explain.py [--sizes 100,1000] [--repeat 3]

Each cluster (seed 42) has N nodes of one on-demand NodePool (m5.large / m5.xlarge / m5.2xlarge, created 10
days before the time judged), each running 2-12 pods of bench/scheduling.py's request mix, one
PodDisruptionBudget per 50 pods' app allowing one disruption, and 20 pending pods. Prints, best of
--repeat: reading the manifests (``from_files``), ``explain node`` on the first node (one planning pass,
each method's verdict, the removal simulation) and ``explain pod`` on a pending pod (the batch with the
other pending pods, then the NodePool alone).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scheduling import CPUS, MEMORIES, SEED, machine

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.explain.node import explain_node
from fleetwright.explain.pod import explain_pod
from fleetwright.explain.view import from_files

NOW = 1_790_000_000.0
CREATED = "2026-09-11T00:00:00Z"  # 10 days before NOW
TYPES = {"m5.large": ("1930m", "6Gi"), "m5.xlarge": ("3920m", "14Gi"), "m5.2xlarge": ("7910m", "29Gi")}

HEAD = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge, m5.2xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-bench
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
"""


def _node(name: str, kind: str, zone: str) -> str:
    cpu, memory = TYPES[kind]
    return f"""---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  creationTimestamp: "{CREATED}"
  labels: {{karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: {kind},
    topology.kubernetes.io/zone: {zone}, karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64,
    kubernetes.io/os: linux, kubernetes.io/hostname: {name}}}
spec: {{providerID: "aws:///{zone}/i-{name}"}}
status:
  allocatable: {{cpu: {cpu}, memory: {memory}, pods: "58"}}
  conditions: [{{type: Ready, status: "True"}}]
"""


def _pod(name: str, app: str, cpu: str, memory: str, node: str = "") -> str:
    bound = f"\n  nodeName: {node}" if node else ""
    status = "{phase: Running, startTime: '" + CREATED + "'}" if node else "{phase: Pending}"
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: bench, labels: {{app: {app}}}}}
spec:{bound}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: {cpu}, memory: {memory}}}}}}}]
status: {status}
"""


def manifests(nodes: int, rng: random.Random) -> str:
    """The NodePool, EC2NodeClass, nodes, their pods, PDBs and pending pods as one YAML stream."""
    parts = [HEAD]
    count = 0
    for i in range(nodes):
        name = f"node-{i:05d}"
        parts.append(_node(name, rng.choice(list(TYPES)), rng.choice(["us-east-1a", "us-east-1b"])))
        for _ in range(rng.randint(2, 12)):
            count += 1
            cpu, memory = rng.choice(CPUS[:4]), rng.choice(MEMORIES[:4])
            parts.append(_pod(f"pod-{count}", f"app-{count % 50}", cpu, memory, name))
    for app in range(50):
        parts.append(
            "---\napiVersion: policy/v1\nkind: PodDisruptionBudget"
            f"\nmetadata: {{name: app-{app}, namespace: bench}}"
            f"\nspec: {{selector: {{matchLabels: {{app: app-{app}}}}}, maxUnavailable: 1}}"
            "\nstatus: {disruptionsAllowed: 1}\n"
        )
    for i in range(20):
        parts.append(_pod(f"pending-{i}", "pending", rng.choice(CPUS), rng.choice(MEMORIES)))
    return "".join(parts)


def best(repeat: int, call: Callable[[], object]) -> float:
    """The fastest of ``repeat`` calls, seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    types = builtin_catalog("us-east-1")
    print(f"machine: {machine()}")
    print(f"{'nodes':>6} {'pods':>6} {'read s':>8} {'node s':>8} {'pod s':>8}")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "cluster.yaml"
            path.write_text(manifests(size, random.Random(SEED)))
            view = from_files([str(path)])
            read = best(args.repeat, lambda p=path: from_files([str(p)]))
        node = best(args.repeat, lambda v=view: explain_node(v, "node-00000", types, "us-east-1", NOW))
        pod = best(args.repeat, lambda v=view: explain_pod(v, "bench/pending-0", types, "us-east-1"))
        pods = sum(len(n.pods) for n in view.manifests.nodes) + len(view.manifests.pods)
        print(f"{size:>6} {pods:>6} {read:>8.2f} {node:>8.2f} {pod:>8.2f}")


if __name__ == "__main__":
    main()
