"""The AWS cloud provider: :class:`AwsProvider` implements :class:`fleetwright.cloud.provider.CloudProvider`
(instance types, launch, describe, terminate, launch templates, what node classes select now);
:class:`~fleetwright.aws.instances.ClusterInstances` implements its describe-and-terminate view without the
launch machinery.

EC2 throttling and EC2-side failures of the instance calls come out as the contract's
:class:`~fleetwright.cloud.errors.ThrottledError` / :class:`~fleetwright.cloud.errors.TransientCloudError`;
other errors pass through unchanged."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from fleetwright.aws.amis import resolve_amis
from fleetwright.aws.capacityreservations import (
    EXPIRING,
    CapacityReservation,
    ReservationAvailability,
    default_availability,
    expiring_capacity_blocks,
    list_capacity_reservations,
)
from fleetwright.aws.clients import AwsClients, clients_for, error_code
from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.fleet import FleetLauncher
from fleetwright.aws.instances import (
    call_translating,
    describe_instances,
    find_claimed_instances,
    find_instances,
    get_one,
    list_instances,
    terminate_instances,
)
from fleetwright.aws.instancetypes import list_instance_types
from fleetwright.aws.launchtemplates import (
    delete_launch_template,
    describe_launch_templates,
    launch_template_image,
)
from fleetwright.aws.nodeclass import NodeClassResolver
from fleetwright.aws.placementgroups import placement_group_requirements
from fleetwright.aws.securitygroups import resolve_security_groups
from fleetwright.aws.subnets import resolve_subnets
from fleetwright.aws.unavailable import default_cache
from fleetwright.cloud.errors import LaunchError
from fleetwright.cloud.instances import Instance, LaunchTemplateInfo, TerminateResult
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest
from fleetwright.cloud.nodeclass import NodeClassResolution
from fleetwright.cloud.offerings import UnavailableOfferings
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.requirements import Requirements

log = logging.getLogger(__name__)


class AwsProvider:
    """Everything Fleetwright asks of AWS for one cluster.

    ``clients`` defaults to the module-scope clients of ``region``; ``unavailable`` to the process-wide
    in-memory unavailable-offerings cache.
    """

    def __init__(
        self,
        cluster: ClusterInfo,
        region: str,
        *,
        clients: AwsClients | None = None,
        unavailable: UnavailableOfferings | None = None,
        reservations: ReservationAvailability | None = None,
    ) -> None:
        self.cluster = cluster
        self.clients = clients or clients_for(region)
        self.unavailable = unavailable if unavailable is not None else default_cache()
        self.reservations = reservations if reservations is not None else default_availability()
        self.resolver = NodeClassResolver(self.clients, cluster)
        self.launcher = FleetLauncher(
            self.clients,
            cluster.name,
            self.resolver,
            unavailable=self.unavailable,
            reservations=self.reservations,
        )

    def instance_types(self, node_class: EC2NodeClass | None = None) -> list[InstanceType]:
        """Instance types with offerings; with a node class, only those its AMIs boot, with its kubelet
        settings applied."""
        if node_class is None:
            return list_instance_types(self.clients, unavailable=self.unavailable)
        return list_instance_types(
            self.clients,
            accept=self.resolver.instance_type_filter(node_class),
            kubelet=node_class.kubelet_overrides(),
            unavailable=self.unavailable,
            reservations=self.capacity_reservations(node_class),
        )

    def capacity_reservations(self, node_class: EC2NodeClass) -> list[CapacityReservation]:
        """The active capacity reservations the node class selects (none when it selects none).

        When EC2 cannot be asked, the node class offers no reserved capacity this time: the error is
        logged and its other offerings still launch.
        """
        terms = node_class.spec.capacity_reservation_selector_terms
        if not terms:
            return []
        try:
            return list_capacity_reservations(self.clients, terms, availability=self.reservations)
        except Exception as error:
            if not error_code(error):
                raise
            log.error("cannot list capacity reservations of EC2NodeClass %s: %s", node_class.name, error)
            return []

    def node_class_requirements(self, node_class: EC2NodeClass) -> Requirements:
        """What the node class adds to its NodePools' requirements: its placement group's id and
        partitions (nothing without a group, or while the group cannot be found)."""
        return placement_group_requirements(self.resolver.placement_group(node_class))

    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        """Launch one NodeClaim with its own CreateFleet (or find the instance already launched for it);
        raises LaunchError. Inside a deadline scope, stops at its deadline."""
        return self.launcher.launch(request)

    def launch_many(self, requests: Sequence[LaunchRequest]) -> list[LaunchedInstance | LaunchError]:
        """Launch NodeClaims one after the other, one CreateFleet each."""
        return self.launcher.launch_many(requests)

    def find_claimed(self, nodeclaims: Iterable[str]) -> dict[str, LaunchedInstance]:
        """Live instances launched for these NodeClaims (by their ``fleetwright.io/nodeclaim`` tag)."""
        return call_translating(lambda: find_claimed_instances(self.clients, self.cluster.name, nodeclaims))

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """This cluster's instances among ``instance_ids`` (gone or foreign ones are left out)."""
        return call_translating(lambda: describe_instances(self.clients, self.cluster.name, instance_ids))

    def get(self, instance_id: str) -> Instance:
        """This cluster's instance ``instance_id``; raises InstanceNotFoundError when gone or not ours."""
        return get_one(self.describe([instance_id]), instance_id)

    def list(self) -> list[Instance]:
        """Every live instance of this cluster."""
        return call_translating(lambda: list_instances(self.clients, self.cluster.name))

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate instances of this cluster; raises NotOwnedError for any that is not ours."""
        return call_translating(lambda: terminate_instances(self.clients, self.cluster.name, instance_ids))

    def describe_any(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """Instances among ``instance_ids`` whoever owns them, terminated ones included (ownership checks
        only: :meth:`terminate` still refuses anything not ours)."""
        return call_translating(lambda: find_instances(self.clients, instance_ids))

    def node_class_amis(self, node_class: EC2NodeClass) -> set[str]:
        """The AMI ids the node class's ``amiSelectorTerms`` select now (cached five minutes, as for
        launches)."""
        terms = node_class.spec.ami_selector_terms
        return {a.id for a in resolve_amis(self.clients, terms, self.cluster.version)}

    def node_class_subnets(self, node_class: EC2NodeClass) -> set[str]:
        """The subnet ids the node class's ``subnetSelectorTerms`` select now (cached a minute, as for
        launches)."""
        return {s.id for s in resolve_subnets(self.clients, node_class.spec.subnet_selector_terms)}

    def node_class_security_groups(self, node_class: EC2NodeClass) -> set[str]:
        """The security-group ids the node class's ``securityGroupSelectorTerms`` select now."""
        return set(resolve_security_groups(self.clients, node_class.spec.security_group_selector_terms))

    def node_class_status(self, node_class: EC2NodeClass) -> NodeClassResolution:
        """Its subnets, security groups, AMIs, instance profile and capacity reservations, each found now
        (cached as for launches) or with the reason its lookup failed."""
        return self.resolver.status(node_class)

    def expiring_reservations(self, reservation_ids: Sequence[str]) -> dict[str, float]:
        """The Capacity Blocks among these reservation ids within their expiry window (id → end, epoch
        seconds; each id's answer cached a minute)."""
        return {
            r.id: r.end_time.timestamp()
            for r in expiring_capacity_blocks(self.clients, reservation_ids, availability=self.reservations)
            if r.state == EXPIRING and r.end_time is not None
        }

    def launch_templates(self) -> Sequence[LaunchTemplateInfo]:
        """This cluster's launch templates (by the ownership tag), with ids and creation times."""
        return describe_launch_templates(self.clients, self.cluster.name)

    def launch_template_image(self, template_id: str) -> str:
        """The AMI the template's latest version boots ("" when it names none)."""
        return launch_template_image(self.clients, template_id)

    def delete_launch_template(self, name: str) -> bool:
        """Delete one of this cluster's launch templates; False when it was already gone."""
        deleted = delete_launch_template(self.clients, self.cluster.name, name)
        self.resolver.templates.forget([name])
        return deleted
