"""Node repair: replace nodes whose conditions say they are broken, as Karpenter v1.14 does with its
``NodeRepair`` feature gate and the AWS provider's repair policies.

A node of ours is unhealthy when one of its conditions matches a :data:`REPAIR_POLICIES` entry (type and
status); it is repaired once that condition has held for the policy's toleration, counted from the
condition's ``lastTransitionTime`` (a condition that flaps starts over each time). A node whose condition
has no transition time is never repaired (its age is unknown).

Safety, as in Karpenter: when more than 20 % of a NodePool's nodes (rounded up) are unhealthy — counting
every matching condition, whatever its age — none of that pool's nodes is repaired, and each is reported
(``NodeRepairBlocked``): a cluster-wide outage (the kubelets cannot reach the API server, a bad AMI) must
not delete the fleet. Repairs are forceful: no disruption budget, ``karpenter.sh/do-not-disrupt`` or
PodDisruptionBudget holds them, and the node's pods are deleted at once (Karpenter sets the NodeClaim's
termination timestamp to now); no replacement is launched ahead (the provisioner launches for the pods
left pending).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from fleetwright.disruption.candidates import Cluster, describe_seconds
from fleetwright.disruption.method import PassContext
from fleetwright.disruption.types import REPAIR, UNHEALTHY, Command, NodeState

ALLOWED_UNHEALTHY_PERCENT: Final = 20


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A node condition that makes a node unhealthy, and how long it is tolerated."""

    condition: str
    status: str
    toleration_seconds: float


# The AWS provider's policies: the kubelet's Ready, and the EKS node monitoring agent's conditions.
REPAIR_POLICIES: Final = (
    RepairPolicy("Ready", "False", 30 * 60.0),
    RepairPolicy("Ready", "Unknown", 30 * 60.0),
    RepairPolicy("AcceleratedHardwareReady", "False", 10 * 60.0),
    RepairPolicy("StorageReady", "False", 30 * 60.0),
    RepairPolicy("NetworkingReady", "False", 30 * 60.0),
    RepairPolicy("KernelReady", "False", 30 * 60.0),
    RepairPolicy("ContainerRuntimeReady", "False", 30 * 60.0),
)


@dataclass(frozen=True, slots=True)
class Unhealthy:
    """The matching condition that is due first: since when it holds, and when it is due."""

    policy: RepairPolicy
    since: float | None
    due: float | None

    def describe(self) -> str:
        """``Ready=Unknown``."""
        return f"{self.policy.condition}={self.policy.status}"


def unhealthy(state: NodeState) -> Unhealthy | None:
    """The node's matching condition due soonest (None when no condition matches a policy)."""
    found: Unhealthy | None = None
    for policy in REPAIR_POLICIES:
        condition = state.conditions.get(policy.condition)
        if condition is None or condition[0] != policy.status:
            continue
        since = condition[1]
        due = None if since is None else since + policy.toleration_seconds
        if found is None or (due is not None and (found.due is None or due < found.due)):
            found = Unhealthy(policy, since, due)
    return found


def allowed_unhealthy(total: int) -> int:
    """How many of ``total`` nodes may be unhealthy with repairs still going on (20 %, rounded up)."""
    return math.ceil(total * ALLOWED_UNHEALTHY_PERCENT / 100)


def pool_repair_block(cluster: Cluster, pool: str) -> str | None:
    """Why ``pool``'s nodes may not be repaired now (None when they may)."""
    nodes = cluster.pool_nodes.get(pool, [])
    sick = sum(1 for s in nodes if unhealthy(s) is not None)
    if sick > allowed_unhealthy(len(nodes)):
        return f"more than {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the nodepool"
    return None


def due_repair(cluster: Cluster, state: NodeState) -> Unhealthy | None:
    """The condition ``state`` is to be repaired for now (None when it is healthy, not yet due, not ours
    or already going). The NodePool's 20 % rule is :func:`pool_repair_block`'s."""
    if cluster.pool_of(state) is None or state.terminating:
        return None
    found = unhealthy(state)
    if found is None or found.due is None or cluster.now < found.due:
        return None
    return found


def repair_commands(cluster: Cluster, blocked: dict[str, str]) -> list[Command]:
    """One forceful command per node due for repair, oldest condition first; nodes of a NodePool with too
    many unhealthy nodes go to ``blocked`` (node name → why) instead."""
    due: list[tuple[NodeState, Unhealthy]] = []
    for state in cluster.ours:
        found = due_repair(cluster, state)
        if found is not None:
            due.append((state, found))
    commands: list[Command] = []
    verdicts: dict[str, str | None] = {}
    for state, found in sorted(due, key=lambda item: (item[1].due or 0.0, item[0].name)):
        pool = state.nodepool
        if pool not in verdicts:
            verdicts[pool] = pool_repair_block(cluster, pool)
        why = verdicts[pool]
        if why is not None:
            blocked[state.name] = why
            continue
        held = describe_seconds(cluster.now - (found.since or cluster.now))
        commands.append(
            Command(
                method=REPAIR,
                reason=UNHEALTHY,
                candidates=[state],
                condition=found.policy.condition,
                explanation=(
                    f"repair node {state.name} ({state.instance_type}): {found.describe()} for {held}, "
                    f"tolerated {describe_seconds(found.policy.toleration_seconds)}"
                ),
            )
        )
    return commands


class Repair:
    """Node repair as a disruption method (forceful, a command per node; only with ``node_repair`` on)."""

    name = REPAIR
    reason = UNHEALTHY
    forceful = True

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Unhealthy past its condition's toleration (the NodePool's 20 % rule aside)."""
        return due_repair(cluster, state) is not None

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """One command per node due for repair; the nodes the 20 % rule keeps go to ``repair_blocked``."""
        if not ctx.cluster.settings.node_repair:
            return []
        return repair_commands(ctx.cluster, ctx.plan.repair_blocked)

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """Every node is still due for repair and its NodePool still under the 20 % rule."""
        for state in fresh:
            if not self.should_disrupt(cluster, state):
                return f"node {state.name} is no longer unhealthy long enough"
            why = pool_repair_block(cluster, state.nodepool)
            if why is not None:
                return why
        return None
