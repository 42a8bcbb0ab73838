"""The replay's cloud: :class:`SimCloud`, an in-memory :class:`~fleetwright.cloud.provider.CloudProvider`
on the virtual clock; a node starts as the emulator's do (:class:`~fleetwright.local.nodestart.NodeStart`).

Launches pick what CreateFleet would: the capacity type by
:func:`fleetwright.aws.fleet.choose_capacity_type` (reserved, then spot, then on-demand, as Karpenter),
then the cheapest offering of that type among the claim's instance types and zones (the first override
Fleetwright sends, cheapest first). An instance is ``pending`` for ``NodeStart.boot_seconds``, then
``running``; a terminated one is ``shutting-down`` for a few seconds, then ``terminated``. Every instance
keeps its launch and end time for the bill (:mod:`fleetwright.local.simulate.report`).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from fleetwright.aws.fleet import choose_capacity_type
from fleetwright.aws.nodeclass import family_filter
from fleetwright.aws.variants import arch_of
from fleetwright.catalog.loader import with_kubelet
from fleetwright.cloud.errors import (
    NO_LAUNCHABLE_OFFERING,
    FailureKind,
    InstanceNotFoundError,
    LaunchError,
    LaunchFailure,
    NotOwnedError,
)
from fleetwright.cloud.instances import (
    CLUSTER_TAG,
    NODECLAIM_TAG,
    Instance,
    LaunchTemplateInfo,
    TerminateResult,
)
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest
from fleetwright.cloud.nodeclass import ImageFound, Lookup, NodeClassResolution, SubnetFound
from fleetwright.cloud.offerings import UnavailableOffering, UnavailableOfferings
from fleetwright.local.nodestart import NodeStart
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.requirements import Requirements

SIM_IMAGE = "ami-0simulated0000000"
SIM_SECURITY_GROUP = "sg-0simulated000000"
SHUTDOWN_SECONDS = 5.0  # shutting-down → terminated
NODEPOOL_TAG = "karpenter.sh/nodepool"


@dataclass(slots=True)
class SimInstance:
    """One instance of the in-memory cloud: what was asked, what was launched, and when it ran."""

    id: str
    request: LaunchRequest
    launched: LaunchedInstance
    price: float
    launched_at: float
    running_at: float
    ended_at: float | None = None  # when it started shutting down (billing stops: EC2 docs)
    interrupted: bool = False

    def state(self, now: float) -> str:
        """Its EC2 state at ``now``."""
        if self.ended_at is not None:
            return "terminated" if now >= self.ended_at + SHUTDOWN_SECONDS else "shutting-down"
        return "running" if now >= self.running_at else "pending"


class MemoryUnavailableOfferings:
    """Offerings refused recently, kept in memory on the virtual clock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._entries: dict[tuple[str, str, str], tuple[str, float]] = {}

    def mark(
        self, instance_type: str, zone: str, capacity_type: str, reason: str, ttl: float = 180.0
    ) -> None:
        """Remember the offering as unavailable for ``ttl`` seconds."""
        self._entries[(instance_type, zone, capacity_type)] = (reason, self.clock() + ttl)

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        """True while remembered."""
        entry = self._entries.get((instance_type, zone, capacity_type))
        return entry is not None and entry[1] > self.clock()

    def entries(self) -> list[UnavailableOffering]:
        """The live entries (as the unavailable-offerings interface lists them)."""
        now = self.clock()
        return [
            UnavailableOffering(t, z, c, reason, until)
            for (t, z, c), (reason, until) in sorted(self._entries.items())
            if until > now
        ]


@dataclass
class SimCloud:
    """The cloud contract in memory for one cluster, on ``clock`` (epoch seconds, virtual).

    ``catalog`` holds the instance types that can be launched; ``zones`` (empty: all) the zones with a
    subnet; ``unavailable`` the refused offerings (the state table's, as deployed).
    """

    cluster: str
    catalog: Sequence[InstanceType]
    clock: Callable[[], float]
    unavailable: UnavailableOfferings
    start: NodeStart = NodeStart.default
    zones: frozenset[str] = frozenset()
    region: str = "us-east-1"
    instances: dict[str, SimInstance] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _types: dict[str, list[InstanceType]] = field(default_factory=dict)

    # -- instance types ------------------------------------------------------------------------------

    def instance_types(self, node_class: EC2NodeClass | None = None) -> list[InstanceType]:
        """The catalog (its zones narrowed to the subnets'), for a node class only the types its AMI
        family boots with its kubelet settings; refused offerings marked unavailable."""
        key = node_class.name if node_class is not None else ""
        types = self._types.get(key)
        if types is None:
            types = [self._in_zones(t) for t in self.catalog]
            if node_class is not None:
                accept = family_filter(node_class)
                types = with_kubelet([t for t in types if accept(t)], node_class.kubelet_overrides())
            self._types[key] = types
        refused = {(e.instance_type, e.zone, e.capacity_type) for e in self.unavailable.entries()}
        if not refused:
            return list(types)
        return [self._refused(t, refused) for t in types]

    def _in_zones(self, instance_type: InstanceType) -> InstanceType:
        if not self.zones:
            return instance_type
        kept = tuple(o for o in instance_type.offerings if o.zone in self.zones)
        return dataclasses.replace(instance_type, offerings=kept)

    @staticmethod
    def _refused(instance_type: InstanceType, refused: set[tuple[str, str, str]]) -> InstanceType:
        if not any((instance_type.name, o.zone, o.capacity_type) in refused for o in instance_type.offerings):
            return instance_type
        offerings = tuple(
            dataclasses.replace(o, available=False)
            if (instance_type.name, o.zone, o.capacity_type) in refused
            else o
            for o in instance_type.offerings
        )
        return dataclasses.replace(instance_type, offerings=offerings)

    def node_class_requirements(self, node_class: EC2NodeClass) -> Requirements:
        """Nothing: placement groups are not simulated."""
        return Requirements()

    # -- launches ------------------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        """The cheapest offering of the capacity type CreateFleet would be asked for; the instance
        already launched for the claim when there is one."""
        found = self.find_claimed([request.nodeclaim]).get(request.nodeclaim)
        if found is not None:
            return dataclasses.replace(found, reused=True)
        capacity_type = choose_capacity_type(request, self.unavailable)
        offering = self._cheapest(request, capacity_type) if capacity_type else None
        if offering is None:
            failure = LaunchFailure(
                FailureKind.INSUFFICIENT_CAPACITY, NO_LAUNCHABLE_OFFERING, "no offering is available"
            )
            raise LaunchError(request.nodeclaim, [failure])
        instance_type, chosen = offering
        now = self.clock()
        instance_id = f"i-{next(self._ids):017x}"
        launched = LaunchedInstance(
            nodeclaim=request.nodeclaim,
            instance_id=instance_id,
            instance_type=instance_type.name,
            zone=chosen.zone,
            capacity_type=chosen.capacity_type,
            image_id=SIM_IMAGE,
            price=chosen.price,
            labels=chosen.reservation_labels(),
        )
        self.instances[instance_id] = SimInstance(
            instance_id, request, launched, chosen.price, now, now + self.start.boot_seconds
        )
        return launched

    def _cheapest(self, request: LaunchRequest, capacity_type: str) -> tuple[InstanceType, Offering] | None:
        best: tuple[float, str, str, InstanceType, Offering] | None = None
        for instance_type in request.instance_types:
            for offering in instance_type.offerings:
                if offering.capacity_type != capacity_type or not offering.available:
                    continue
                if request.zones and offering.zone not in request.zones:
                    continue
                if self.zones and offering.zone not in self.zones:
                    continue
                if self.unavailable.is_unavailable(instance_type.name, offering.zone, capacity_type):
                    continue
                key = (offering.price, instance_type.name, offering.zone)
                if best is None or key < best[:3]:
                    best = (*key, instance_type, offering)
        return None if best is None else (best[3], best[4])

    def find_claimed(self, nodeclaims: Iterable[str]) -> dict[str, LaunchedInstance]:
        """Live instances launched for these claims."""
        wanted = set(nodeclaims)
        now = self.clock()
        return {
            i.request.nodeclaim: i.launched
            for i in self.instances.values()
            if i.request.nodeclaim in wanted and i.state(now) in ("pending", "running")
        }

    # -- describing and terminating ------------------------------------------------------------------

    def _describe_one(self, instance: SimInstance, now: float) -> Instance:
        launched = instance.launched
        return Instance(
            id=instance.id,
            instance_type=launched.instance_type,
            zone=launched.zone,
            state=instance.state(now),
            capacity_type=launched.capacity_type,
            image_id=SIM_IMAGE,
            private_dns_name=node_name(instance.id),
            launch_time=_iso(instance.launched_at),
            tags={
                CLUSTER_TAG: self.cluster,
                NODECLAIM_TAG: instance.request.nodeclaim,
                NODEPOOL_TAG: instance.request.nodepool,
            },
        )

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """The instances among ``instance_ids`` this cloud holds."""
        now = self.clock()
        return {i: self._describe_one(self.instances[i], now) for i in instance_ids if i in self.instances}

    def describe_any(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """As :meth:`describe` (every instance here is this cluster's)."""
        return self.describe(instance_ids)

    def get(self, instance_id: str) -> Instance:
        """One instance; InstanceNotFoundError when unknown."""
        if instance_id not in self.instances:
            raise InstanceNotFoundError(instance_id)
        return self._describe_one(self.instances[instance_id], self.clock())

    def list(self) -> list[Instance]:
        """Every live instance."""
        now = self.clock()
        found = [self._describe_one(i, now) for i in self.instances.values()]
        return [i for i in found if i.state in ("pending", "running")]

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Start shutting the instances down (billing stops now); unknown ids are not ours."""
        ids = list(instance_ids)
        unknown = [i for i in ids if i not in self.instances]
        if unknown:
            raise NotOwnedError(f"not this cluster's instances: {', '.join(unknown)}")
        result = TerminateResult()
        now = self.clock()
        for instance_id in ids:
            instance = self.instances[instance_id]
            if instance.ended_at is not None:
                result.already_gone.append(instance_id)
            else:
                instance.ended_at = now
                result.terminating.append(instance_id)
        return result

    # -- what the collector and drift ask -----------------------------------------------------------

    def launch_templates(self) -> Sequence[LaunchTemplateInfo]:
        """None: launch templates are not simulated."""
        return []

    def launch_template_image(self, template_id: str) -> str:
        """The one simulated image."""
        return SIM_IMAGE

    def delete_launch_template(self, name: str) -> bool:
        """Nothing to delete."""
        return False

    def node_class_amis(self, node_class: EC2NodeClass) -> set[str]:
        """The simulated image (AMI drift is not simulated)."""
        return {SIM_IMAGE}

    def node_class_subnets(self, node_class: EC2NodeClass) -> set[str]:
        """Nothing: subnet drift is not simulated."""
        return set()

    def node_class_security_groups(self, node_class: EC2NodeClass) -> set[str]:
        """Nothing: security-group drift is not simulated."""
        return set()

    def node_class_status(self, node_class: EC2NodeClass) -> NodeClassResolution:
        """A subnet per zone of the catalog's offerings, one security group, the simulated image for each
        architecture, the node class's profile (or its role's name), no capacity reservation."""
        zones = sorted(self.zones or {o.zone for t in self.catalog for o in t.offerings})
        arches = sorted({arch_of(t) for t in self.catalog})
        spec = node_class.spec
        return NodeClassResolution(
            subnets=Lookup(tuple(SubnetFound(f"subnet-sim-{zone}", zone) for zone in zones)),
            security_groups=Lookup((SIM_SECURITY_GROUP,)),
            amis=Lookup(tuple(ImageFound(SIM_IMAGE, arch) for arch in arches)),
            instance_profile=Lookup(spec.instance_profile or spec.role or ""),
            capacity_reservations=Lookup(()),
        )

    def expiring_reservations(self, reservation_ids: Sequence[str]) -> dict[str, float]:
        """None: capacity reservations do not end in a replay."""
        return {}

    def live(self) -> Mapping[str, SimInstance]:
        """Instances not yet shut down."""
        return {k: v for k, v in self.instances.items() if v.ended_at is None}


def node_name(instance_id: str) -> str:
    """The Node name of an instance (EKS names nodes by private DNS name; ids make them unique here)."""
    return f"{instance_id}.ec2.internal"


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")
