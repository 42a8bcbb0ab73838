"""What the cloud provider answers about instances and launch templates: plain, frozen records, so a
capability reads attributes, never a provider's raw description."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleetwright.model import labels as wk

# The tag naming the cluster that owns an instance, and the one naming the NodeClaim it was launched for
# (the launch's idempotency key).
CLUSTER_TAG = "fleetwright.io/cluster"
NODECLAIM_TAG = "fleetwright.io/nodeclaim"
# The NodePool an instance was launched for: written by the controller's own CreateFleet and required,
# with the cluster tag, before an instance is terminated (as Karpenter requires it). The cluster tag alone
# is one ``CreateTags`` away from any instance; docs/iam.md says how to keep both keys the controller's.
NODEPOOL_TAG = "karpenter.sh/nodepool"

LIVE_STATES = ("pending", "running", "stopping", "stopped")


@dataclass(frozen=True, slots=True)
class Instance:
    """An instance as Fleetwright sees it: ``state`` is the provider's lifecycle state (``pending``,
    ``running``, ``stopping``, ``stopped``, ``shutting-down``, ``terminated``), ``capacity_type``
    ``spot``, ``on-demand`` or ``reserved``, ``launch_time`` ISO-8601."""

    id: str
    instance_type: str
    zone: str
    state: str
    capacity_type: str
    image_id: str = ""
    private_dns_name: str = ""
    launch_time: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    capacity_reservation_id: str = ""  # the reservation it runs in ("" when none, or it ended)
    capacity_block: bool = False
    placement: Mapping[str, str] = field(default_factory=dict, hash=False)  # node labels of its placement
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()

    @property
    def reservation_labels(self) -> dict[str, str]:
        """The capacity-reservation labels the provider's description of the instance tells (none outside
        one)."""
        if not self.capacity_reservation_id:
            return {}
        return {
            wk.CAPACITY_RESERVATION_ID: self.capacity_reservation_id,
            wk.CAPACITY_RESERVATION_TYPE: "capacity-block" if self.capacity_block else "default",
        }

    @property
    def cluster(self) -> str:
        """The cluster whose ownership tag the instance carries ("" when none: not Fleetwright's)."""
        return self.tags.get(CLUSTER_TAG, "")

    @property
    def nodepool(self) -> str:
        """The NodePool this instance was launched for ("" when untagged: then it carries the cluster tag
        by someone else's hand, and nothing terminates it)."""
        return self.tags.get(NODEPOOL_TAG, "")

    @property
    def nodeclaim(self) -> str:
        """The NodeClaim id this instance was launched for ("" when untagged)."""
        return self.tags.get(NODECLAIM_TAG, "")

    @property
    def provider_id(self) -> str:
        """``aws:///<zone>/<instance id>``."""
        return f"aws:///{self.zone}/{self.id}"


@dataclass(slots=True)
class TerminateResult:
    """What a terminate call did: ids it asked the provider to terminate and ids that were already gone."""

    terminating: list[str] = field(default_factory=list)
    already_gone: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LaunchTemplateInfo:
    """One launch template as the garbage collector sees it; ``created_at`` in epoch seconds (0 when
    the provider did not say)."""

    id: str
    name: str
    created_at: float
