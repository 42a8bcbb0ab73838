"""NodePool documents (plus their EC2NodeClasses and existing nodes) as scheduler templates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleetwright.model import resources as res
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.karpenter import kubelet_for
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.labels import INSTANCE_TENANCY, NODEPOOL, TENANCIES
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.model.requirements import Requirement, Requirements
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


def launch_requirements(nodepool: NodePool, node_class: Requirements | None = None) -> Requirements:
    """The NodePool's requirements with what every launch offers, as Karpenter's instance types carry it:
    both tenancies (``default`` is launched unless only ``dedicated`` is allowed) and the node class's
    placement group (``node_class``, from
    :meth:`fleetwright.aws.provider.AwsProvider.node_class_requirements`)."""
    offered = Requirements.of([Requirement.create(INSTANCE_TENANCY, "In", TENANCIES)])
    return nodepool.requirements().intersect(offered).intersect(node_class or Requirements())


def nodepool_templates(
    nodepools: Sequence[NodePool],
    nodeclasses: Sequence[EC2NodeClass],
    nodes: Sequence[Node] = (),
    node_class_requirements: Mapping[str, Requirements] | None = None,
) -> list[NodePoolTemplate]:
    """One template per NodePool, with its node class's kubelet settings and its current usage;
    ``node_class_requirements`` are what each node class adds (its placement group), by name."""
    classes = {nc.name: nc for nc in nodeclasses}
    added = node_class_requirements or {}
    return [
        NodePoolTemplate(
            name=np.name,
            requirements=launch_requirements(np, added.get(np.node_class_name())),
            labels=np.labels(),
            taints=np.taints(),
            startup_taints=np.startup_taints(),
            weight=np.weight_value(),
            limits=np.limits(),
            kubelet=_kubelet(np, classes.get(np.node_class_name())),
            node_class=np.node_class_name(),
            usage=nodepool_usage(np.name, nodes),
            packing=np.packing(),
        )
        for np in nodepools
    ]
