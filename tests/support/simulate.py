"""Builders for replay tests: NodePool and EC2NodeClass documents, traces of hand-made pods."""

from __future__ import annotations

from fleetwright.local.simulate.trace import Trace, TracePod

NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-my-cluster
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
"""


def nodepool(
    types: tuple[str, ...] = ("m5.large",),
    consolidate_after: str = "5m",
    budget: str | None = None,
    capacity_types: tuple[str, ...] = ("on-demand",),
) -> str:
    """A NodePool of ``types`` (one capacity type list) consolidating when empty or underutilized."""
    budgets = f'\n    budgets:\n      - nodes: "{budget}"' if budget else ""
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: [{", ".join(f'"{t}"' for t in types)}]
        - key: karpenter.sh/capacity-type
          operator: In
          values: [{", ".join(f'"{c}"' for c in capacity_types)}]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: {consolidate_after}{budgets}
"""


def pods(count: int, start: float, end: float | None, cpu: str = "1", memory: str = "1Gi") -> list[TracePod]:
    """``count`` identical pods named ``p0``… running from ``start`` to ``end``."""
    return [TracePod(f"p{i}", start, end, cpu, memory) for i in range(count)]


def trace(items: list[TracePod], duration: float) -> Trace:
    """A trace of ``items`` in start order."""
    return Trace(tuple(sorted(items, key=lambda p: p.start)), duration)
