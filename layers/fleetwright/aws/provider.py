"""The AWS cloud provider in one object: instance types, launch, describe, terminate."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from fleetwright.aws.capacityreservations import (
    CapacityReservation,
    ReservationAvailability,
    default_availability,
    list_capacity_reservations,
)
from fleetwright.aws.clients import AwsClients, clients_for, error_code
from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.fleet import FleetLauncher
from fleetwright.aws.instances import (
    Instance,
    TerminateResult,
    describe_instances,
    find_claimed_instances,
    find_instances,
    list_instances,
    terminate_instances,
)
from fleetwright.aws.instancetypes import list_instance_types
from fleetwright.aws.launchtemplates import (
    LaunchTemplateInfo,
    delete_launch_template,
    describe_launch_templates,
    launch_template_image,
)
from fleetwright.aws.nodeclass import NodeClassResolver
from fleetwright.aws.placementgroups import placement_group_requirements
from fleetwright.aws.request import LaunchedInstance, LaunchError, LaunchRequest
from fleetwright.aws.unavailable import UnavailableOfferings, default_cache
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
        return find_claimed_instances(self.clients, self.cluster.name, nodeclaims)

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """This cluster's instances among ``instance_ids`` (gone or foreign ones are left out)."""
        return describe_instances(self.clients, self.cluster.name, instance_ids)

    def list(self) -> list[Instance]:
        """Every live instance of this cluster."""
        return list_instances(self.clients, self.cluster.name)

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate instances of this cluster; raises NotOwnedError for any that is not ours."""
        return terminate_instances(self.clients, self.cluster.name, instance_ids)

    def describe_any(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """Instances among ``instance_ids`` whoever owns them, terminated ones included (ownership checks
        only: :meth:`terminate` still refuses anything not ours)."""
        return find_instances(self.clients, instance_ids)

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
