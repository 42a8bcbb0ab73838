"""An EC2NodeClass resolved against AWS: subnets per zone, security groups, AMIs and launch templates."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from fleetwright.aws.amis import Ami, resolve_amis
from fleetwright.aws.capacityreservations import (
    list_capacity_reservations,
    reservation_labels,
    template_fields,
)
from fleetwright.aws.clients import AwsClients
from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.fleet import LaunchContext, TemplateChoice, efa_interfaces
from fleetwright.aws.instanceprofiles import ensure_instance_profile
from fleetwright.aws.instancetypes import describe_instance_types
from fleetwright.aws.launchtemplates import LaunchTemplates, launch_template_data, placement
from fleetwright.aws.placementgroups import PARTITION, PlacementGroup, resolve_placement_group
from fleetwright.aws.request import ReservationTarget
from fleetwright.aws.securitygroups import resolve_security_groups
from fleetwright.aws.subnets import Subnet, resolve_subnets, subnets_by_zone
from fleetwright.aws.tags import CLUSTER_TAG, NODECLASS_TAG, ownership_tags
from fleetwright.aws.userdata import BootstrapOptions, user_data_for
from fleetwright.aws.variants import arch_of, family_supports, variant_of
from fleetwright.cloud.launch import LaunchRequest
from fleetwright.cloud.nodeclass import ImageFound, Lookup, NodeClassResolution, SubnetFound
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType

log = logging.getLogger(__name__)

T = TypeVar("T")


class UnresolvedNodeClassError(Exception):
    """The node class selects no subnet, no security group or no AMI; nothing can launch with it."""


@dataclass(frozen=True, slots=True)
class ResolvedNodeClass:
    """What an EC2NodeClass's selector terms select right now."""

    name: str
    subnets: dict[str, Subnet]  # zone → the subnet with the most free addresses
    security_groups: tuple[str, ...]
    amis: tuple[Ami, ...]
    instance_profile: str
    placement_group: PlacementGroup | None = None


def _lookup(empty: T, resolve: Callable[[], T]) -> Lookup[T]:
    """``resolve()``, or why it failed."""
    try:
        return Lookup(resolve())
    except Exception as error:
        return Lookup.failed(empty, error)


def ami_filter(amis: Sequence[Ami]) -> Callable[[InstanceType], bool]:
    """Accepts instance types that one of the AMIs can boot (same arch; same variant when it has one)."""

    def accept(instance_type: InstanceType) -> bool:
        arch = arch_of(instance_type)
        variant = variant_of(instance_type)
        return any(boots(a, arch, variant) for a in amis)

    return accept


def boots(ami: Ami, arch: str, variant: str) -> bool:
    """True when ``ami`` boots instance types of this architecture and variant."""
    return ami.arch == arch and (ami.variant is None or ami.variant == variant)


def by_kind(instance_types: Sequence[InstanceType]) -> dict[tuple[str, str], list[InstanceType]]:
    """The instance types by (architecture, variant): what decides which AMIs boot them."""
    kinds: dict[tuple[str, str], list[InstanceType]] = {}
    for instance_type in instance_types:
        kinds.setdefault((arch_of(instance_type), variant_of(instance_type)), []).append(instance_type)
    return kinds


def family_filter(node_class: EC2NodeClass) -> Callable[[InstanceType], bool]:
    """Accepts instance types the node class's AMI family publishes an AMI for (no AWS calls)."""
    family = node_class.spec.resolved_ami_family()
    return lambda instance_type: family_supports(family, instance_type)


class NodeClassResolver:
    """Resolves EC2NodeClasses and prepares launches (the ``prepare`` of :class:`FleetLauncher`)."""

    def __init__(
        self, clients: AwsClients, cluster: ClusterInfo, templates: LaunchTemplates | None = None
    ) -> None:
        self.clients = clients
        self.cluster = cluster
        self.templates = templates or LaunchTemplates(clients, cluster.name)

    def forget_templates(self, names: Sequence[str]) -> None:
        """Forget that these launch templates exist (they were deleted); the next launch creates them."""
        self.templates.forget(names)

    def resolve(self, node_class: EC2NodeClass) -> ResolvedNodeClass:
        """Subnets, security groups, AMIs and instance profile.

        Raises UnresolvedNodeClassError when no subnet or security group matches, AmiResolutionError when
        no AMI does.
        """
        spec = node_class.spec
        subnets = subnets_by_zone(resolve_subnets(self.clients, spec.subnet_selector_terms))
        if not subnets:
            raise UnresolvedNodeClassError(
                f"EC2NodeClass {node_class.name}: no subnet matches subnetSelectorTerms"
            )
        groups = resolve_security_groups(self.clients, spec.security_group_selector_terms)
        if not groups:
            raise UnresolvedNodeClassError(
                f"EC2NodeClass {node_class.name}: no security group matches securityGroupSelectorTerms"
            )
        amis = resolve_amis(self.clients, spec.ami_selector_terms, self.cluster.version)
        profile = spec.instance_profile or ensure_instance_profile(
            self.clients, self.cluster.name, spec.role or ""
        )
        group = resolve_placement_group(self.clients, spec.placement_group_selector)
        if spec.placement_group_selector is not None and group is None:
            selector = spec.placement_group_selector.id or spec.placement_group_selector.name
            raise UnresolvedNodeClassError(
                f"EC2NodeClass {node_class.name}: placement group {selector} not found (or not available)"
            )
        return ResolvedNodeClass(node_class.name, subnets, tuple(groups), tuple(amis), profile, group)

    def status(self, node_class: EC2NodeClass) -> NodeClassResolution:
        """Each part of the node class resolved now (the lookups' caches shared with launches), or why its
        lookup failed; an instance profile is created from ``role`` when the node class names none."""
        spec, clients, cluster = node_class.spec, self.clients, self.cluster
        terms = spec.capacity_reservation_selector_terms
        return NodeClassResolution(
            subnets=_lookup(
                (),
                lambda: tuple(
                    SubnetFound(s.id, s.zone, s.zone_id)
                    for s in resolve_subnets(clients, spec.subnet_selector_terms)
                ),
            ),
            security_groups=_lookup(
                (), lambda: tuple(resolve_security_groups(clients, spec.security_group_selector_terms))
            ),
            amis=_lookup(
                (),
                lambda: tuple(
                    ImageFound(a.id, a.arch, a.variant, a.name)
                    for a in resolve_amis(clients, spec.ami_selector_terms, cluster.version)
                ),
            ),
            instance_profile=_lookup(
                "",
                lambda: (
                    spec.instance_profile or ensure_instance_profile(clients, cluster.name, spec.role or "")
                ),
            ),
            # Selecting no reservation is not a fault: the node class then offers none.
            capacity_reservations=_lookup(
                (),
                lambda: tuple(r.found() for r in list_capacity_reservations(clients, terms)) if terms else (),
            ),
        )

    def placement_group(self, node_class: EC2NodeClass) -> PlacementGroup | None:
        """The placement group the node class selects (None when it selects none or it is missing)."""
        return resolve_placement_group(self.clients, node_class.spec.placement_group_selector)

    def instance_type_filter(self, node_class: EC2NodeClass) -> Callable[[InstanceType], bool]:
        """Accepts the instance types the node class's resolved AMIs can boot (and, with
        ``cpuOptions.nestedVirtualization: enabled``, only those EC2 lists as supporting it; with a
        placement group, only those whose ``PlacementGroupInfo`` supports its strategy, as Karpenter)."""
        amis = resolve_amis(self.clients, node_class.spec.ami_selector_terms, self.cluster.version)
        bootable = ami_filter(amis)
        allowed: list[frozenset[str]] = []
        options = node_class.spec.cpu_options
        if options is not None and options.nested_virtualization == "enabled":
            allowed.append(nested_virtualization_types(self.clients))
        group = self._placement_group_if_known(node_class)
        if group is not None:
            allowed.append(placement_strategy_types(self.clients, group.strategy))
        if not allowed:
            return bootable
        return lambda instance_type: (
            all(instance_type.name in names for names in allowed) and bootable(instance_type)
        )

    def _placement_group_if_known(self, node_class: EC2NodeClass) -> PlacementGroup | None:
        """The node class's placement group, or None when it selects none or the lookup fails (the
        launch then fails with the reason; the catalog is not narrowed meanwhile)."""
        if node_class.spec.placement_group_selector is None:
            return None
        try:
            return self.placement_group(node_class)
        except Exception as error:
            log.warning("placement group lookup failed for %s: %s", node_class.name, error)
            return None

    def __call__(
        self, request: LaunchRequest, capacity_type: str, reservation: ReservationTarget | None = None
    ) -> LaunchContext:
        """Subnets and launch templates (one per AMI) for a request and the chosen capacity type; a
        reserved launch gets templates of its own that target ``reservation``."""
        node_class = request.node_class
        if node_class is None:
            raise ValueError(f"nodeclaim {request.nodeclaim} names no EC2NodeClass")
        resolved = self.resolve(node_class)
        spec = node_class.spec
        labels = {**request.labels, wk.NODEPOOL: request.nodepool, wk.CAPACITY_TYPE: capacity_type}
        if reservation is not None:
            labels.update(reservation_labels(reservation))
        options = BootstrapOptions(
            cluster=self.cluster,
            labels=labels,
            taints=(*request.taints, *request.startup_taints),
            kubelet=spec.kubelet,
            custom_user_data=spec.user_data,
            instance_store_policy=spec.instance_store_policy,
            bottlerocket_version=bottlerocket_version(node_class),
        )
        user_data = user_data_for(spec.resolved_ami_family(), options)
        template_tags = {CLUSTER_TAG: self.cluster.name, NODECLASS_TAG: node_class.name}
        decided = launch_labels(request.labels, resolved.placement_group)
        placement_fields = placement(
            decided[wk.INSTANCE_TENANCY],
            resolved.placement_group.id if resolved.placement_group else "",
            int(decided.get(wk.PLACEMENT_GROUP_PARTITION) or 0) or None,
        )
        choices = []
        kinds = by_kind(request.instance_types)
        for ami in resolved.amis:
            bootable = [
                t for (arch, variant), same in kinds.items() if boots(ami, arch, variant) for t in same
            ]
            if not bootable:
                continue  # no candidate type boots with it: do not create a template for nothing
            for efa_count in efa_counts(request, bootable):
                data = launch_template_data(
                    spec,
                    ami,
                    user_data,
                    resolved.security_groups,
                    resolved.instance_profile,
                    ownership_tags(self.cluster.name),
                    placement_fields=placement_fields,
                    efa_count=efa_count or 0,
                )
                if reservation is not None or spec.capacity_reservation_selector_terms:
                    data.update(template_fields(reservation))
                name = self.templates.ensure(data, template_tags)
                choices.append(TemplateChoice(name, ami.id, ami.arch, ami.variant, efa_count))
        return LaunchContext(
            subnets={zone: subnet.id for zone, subnet in resolved.subnets.items()},
            templates=tuple(choices),
            tags=dict(spec.tags or {}),
            labels=decided,
            fleet_context=spec.context or "",
        )


def nested_virtualization_types(clients: AwsClients) -> frozenset[str]:
    """Instance types whose ``ProcessorInfo.SupportedFeatures`` include ``nested-virtualization``."""
    return frozenset(
        str(entry["InstanceType"])
        for entry in describe_instance_types(clients)
        if "nested-virtualization" in ((entry.get("ProcessorInfo") or {}).get("SupportedFeatures") or [])
    )


def placement_strategy_types(clients: AwsClients, strategy: str) -> frozenset[str]:
    """Instance types whose ``PlacementGroupInfo.SupportedStrategies`` include ``strategy``."""
    return frozenset(
        str(entry["InstanceType"])
        for entry in describe_instance_types(clients)
        if strategy in ((entry.get("PlacementGroupInfo") or {}).get("SupportedStrategies") or [])
    )


def efa_counts(request: LaunchRequest, instance_types: Sequence[InstanceType]) -> Sequence[int | None]:
    """One entry per launch template an AMI needs: the distinct EFA interface counts of the candidate
    types when the claim's pods request EFA and the node class describes no interfaces itself (as
    Karpenter, a template per count), else a single entry (None) for every type."""
    node_class = request.node_class
    if not request.efa or node_class is None or node_class.spec.network_interfaces:
        return [None]
    return sorted({efa_interfaces(t) for t in instance_types})


def bottlerocket_version(node_class: EC2NodeClass) -> str:
    """The Bottlerocket release an alias pins (``bottlerocket@v1.46.0`` → ``v1.46.0``, ``latest``), or
    "" when the terms name none."""
    for term in node_class.spec.ami_selector_terms:
        family, _, version = (term.alias or "").partition("@")
        if family == "bottlerocket" and version:
            return version
    return ""


def launch_labels(claim_labels: Mapping[str, str], group: PlacementGroup | None) -> dict[str, str]:
    """The labels a launch decides, as Karpenter sets them: the tenancy (``default`` unless the claim
    allows only ``dedicated``) and, in a placement group, its id and, for the partition strategy, the
    partition the claim targets (one value)."""
    tenancy = claim_labels.get(wk.INSTANCE_TENANCY, "default")
    decided = {wk.INSTANCE_TENANCY: "dedicated" if tenancy == "dedicated" else "default"}
    if group is not None:
        decided[wk.PLACEMENT_GROUP_ID] = group.id
        partition = claim_labels.get(wk.PLACEMENT_GROUP_PARTITION, "")
        if group.strategy == PARTITION and partition in group.partitions():
            decided[wk.PLACEMENT_GROUP_PARTITION] = partition
    return decided
