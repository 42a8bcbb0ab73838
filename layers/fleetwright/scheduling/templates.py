"""NodePool documents (plus their EC2NodeClasses and existing nodes) as scheduler templates."""

from __future__ import annotations

from collections.abc import Sequence

from fleetwright.model import resources as res
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.karpenter import kubelet_for
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.labels import NODEPOOL
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.scheduling.types import NODES, NodePoolTemplate


def _kubelet(nodepool: NodePool, nodeclass: EC2NodeClass | None) -> KubeletOverrides | None:
    """The NodePool's kubelet settings, or None when they are the EKS defaults (the fast path)."""
    overrides = kubelet_for(nodepool, nodeclass)
    return None if overrides == KubeletOverrides() else overrides


def nodepool_usage(name: str, nodes: Sequence[Node]) -> res.ResourceList:
    """What a NodePool's existing nodes count against its limits (their capacity, as Karpenter counts, and
    one ``nodes`` each)."""
    mine = [n for n in nodes if n.labels.get(NODEPOOL) == name]
    return res.add(*(n.capacity or n.allocatable for n in mine), {NODES: len(mine)})


def nodepool_templates(
    nodepools: Sequence[NodePool], nodeclasses: Sequence[EC2NodeClass], nodes: Sequence[Node] = ()
) -> list[NodePoolTemplate]:
    """One template per NodePool, with its node class's kubelet settings and its current usage."""
    classes = {nc.name: nc for nc in nodeclasses}
    return [
        NodePoolTemplate(
            name=np.name,
            requirements=np.requirements(),
            labels=np.labels(),
            taints=np.taints(),
            startup_taints=np.startup_taints(),
            weight=np.weight_value(),
            limits=np.limits(),
            kubelet=_kubelet(np, classes.get(np.node_class_name())),
            node_class=np.node_class_name(),
            usage=nodepool_usage(np.name, nodes),
            packing=np.packing(),
            static=np.spec.replicas is not None,
        )
        for np in nodepools
    ]
