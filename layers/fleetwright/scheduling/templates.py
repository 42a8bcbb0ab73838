"""NodePool documents (plus their EC2NodeClasses and existing nodes) as scheduler templates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import replace

from fleetwright.catalog.bill import DEFAULT_REGION, node_class_view
from fleetwright.model import resources as res
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.karpenter import kubelet_for
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.labels import CAPACITY_RESERVATION_ID, INSTANCE_TENANCY, NODEPOOL, TENANCIES
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.scheduling.types import NODES, NodePoolTemplate


def _kubelet(nodepool: NodePool, nodeclass: EC2NodeClass | None) -> KubeletOverrides | None:
    """The NodePool's kubelet settings, or None when they are the EKS defaults (the fast path)."""
    overrides = kubelet_for(nodepool, nodeclass)
    return None if overrides == KubeletOverrides() else overrides


def _ami_family(nodeclass: EC2NodeClass | None) -> str:
    return nodeclass.spec.resolved_ami_family() if nodeclass is not None else ""


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
    region: str = DEFAULT_REGION,
    public_subnets: Mapping[str, bool] | bool = False,
) -> list[NodePoolTemplate]:
    """One template per NodePool, with its node class's kubelet settings and its current usage;
    ``node_class_requirements`` are what each node class adds (its placement group), by name.

    Each template's ``bill`` prices its nodes' volumes and public IPv4 address in ``region``;
    ``public_subnets`` says, per node class name (or for all), whether its subnets assign public IPv4
    addresses on launch (``MapPublicIpOnLaunch``), which decides when ``associatePublicIPAddress`` is
    unset."""
    classes = {nc.name: nc for nc in nodeclasses}
    added = node_class_requirements or {}

    def public(name: str) -> bool:
        return public_subnets if isinstance(public_subnets, bool) else public_subnets.get(name, False)

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
            ami_family=_ami_family(classes.get(np.node_class_name())),
            static=np.spec.replicas is not None,
            bill=node_class_view(classes.get(np.node_class_name()), region, public(np.node_class_name())),
        )
        for np in nodepools
    ]


def with_reserved_offerings(known: InstanceType | None, other: InstanceType) -> InstanceType:
    """``known`` (a type as one node class lists it) with the reserved offerings ``other`` (the same type
    as another node class lists it) adds: each node class may select its own capacity reservations."""
    if known is None:
        return other
    have = {o.reservation_id for o in known.offerings if o.reservation_id}
    extra = tuple(o for o in other.offerings if o.reservation_id and o.reservation_id not in have)
    return replace(known, offerings=known.offerings + extra) if extra else known


def own_reservations(
    templates: Sequence[NodePoolTemplate], by_class: Mapping[str, Set[str]]
) -> list[NodePoolTemplate]:
    """Templates kept off the capacity reservations their EC2NodeClass does not select."""
    every = set().union(*by_class.values()) if by_class else set()
    result = []
    for template in templates:
        foreign = every - set(by_class.get(template.node_class, ()))
        if foreign:
            template = replace(
                template,
                requirements=template.requirements.intersect(
                    Requirements.of([Requirement.create(CAPACITY_RESERVATION_ID, "NotIn", sorted(foreign))])
                ),
            )
        result.append(template)
    return result
