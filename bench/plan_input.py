"""Manifests for ``fleetwright plan``: bench/scheduling.py's plain pods on an on-demand c/m/r NodePool.

Usage: python bench/plan_input.py [--pods 5000] [--limit-cpu CORES] [--min-values N]
                                  [--packing LowestCost|FewerNodes] > input.yaml

The pods (seed 42) become one Deployment per request shape; one DaemonSet of 150m / 200Mi runs on every
node. ``--limit-cpu`` adds ``spec.limits.cpu``; ``--min-values`` adds ``instance-family Exists`` with
that ``minValues``; ``--packing`` sets the annotation ``fleetwright.io/packing`` (default: none).
Measure with ``python bench/lp_bound.py -f input.yaml`` (scheduler nodes, $/h and ratio to the bound).
"""

from __future__ import annotations

import argparse
from collections import Counter

from scheduling import pending_pods

from fleetwright.model.labels import CAPACITY_TYPE, INSTANCE_CATEGORY, INSTANCE_FAMILY
from fleetwright.model.quantity import CPU, MEMORY


def manifests(pods: int, limit_cpu: int | None, min_values: int | None, packing: str | None) -> str:
    """The NodePool, EC2NodeClass, DaemonSet and Deployments as one YAML stream."""
    annotations = f"\n  annotations:\n    fleetwright.io/packing: {packing}" if packing else ""
    family = (
        f"\n        - key: {INSTANCE_FAMILY}\n          operator: Exists\n          minValues: {min_values}"
        if min_values
        else ""
    )
    limits = f'\n  limits:\n    cpu: "{limit_cpu}"' if limit_cpu is not None else ""
    docs = [
        f"""apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default{annotations}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - key: {INSTANCE_CATEGORY}
          operator: In
          values: ["c", "m", "r"]
        - key: {CAPACITY_TYPE}
          operator: In
          values: ["on-demand"]{family}{limits}
""",
        """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-bench
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
""",
        """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: agent, resources: {requests: {cpu: 150m, memory: 200Mi}}}]
""",
    ]
    shapes = Counter((p.requests[CPU], p.requests[MEMORY]) for p in pending_pods(pods))
    for i, ((cpu, memory), count) in enumerate(sorted(shapes.items())):
        docs.append(
            f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: shape-{i}, namespace: bench}}
spec:
  replicas: {count}
  selector: {{matchLabels: {{app: shape-{i}}}}}
  template:
    metadata: {{labels: {{app: shape-{i}}}}}
    spec:
      containers: [{{name: c, image: pause, resources: {{requests: {{cpu: {cpu}m, memory: "{memory}"}}}}}}]
"""
        )
    return "---\n".join(docs)


def main() -> None:
    """Print the manifests."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--limit-cpu", type=int, default=None, help="cores")
    parser.add_argument("--min-values", type=int, default=None)
    parser.add_argument("--packing", choices=("LowestCost", "FewerNodes"), default=None)
    args = parser.parse_args()
    print(manifests(args.pods, args.limit_cpu, args.min_values, args.packing), end="")


if __name__ == "__main__":
    main()
