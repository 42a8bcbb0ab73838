"""What a disruption pass tells users on their Nodes, NodeClaims and NodePools: why a node may not be
disrupted (``DisruptionBlocked``), why consolidation leaves it as it is (``Unconsolidatable``), which
NodePools' budgets allow no disruption now, and how a consolidation command reads in its
``ConsolidationCandidate`` / ``ConsolidationRejected`` events, from the planner's input and plan alone
(pure: the controller publishes them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from fleetwright.claims.conditions import CONSOLIDATABLE, DISRUPTION_REASON, Condition, true
from fleetwright.claims.conditions import DRIFTED as DRIFTED_CONDITION
from fleetwright.disruption.budgets import allowed_disruptions
from fleetwright.disruption.candidates import Cluster, is_terminal, node_is_empty
from fleetwright.disruption.consolidation import UNDERUTILIZED_POLICIES, consolidatable
from fleetwright.disruption.drift import drift_kind, drift_reason
from fleetwright.disruption.emptiness import empty_for
from fleetwright.disruption.execution import CommandOutcome
from fleetwright.disruption.types import (
    DRIFTED,
    EMPTY,
    MULTI_NODE,
    SINGLE_NODE,
    UNDERUTILIZED,
    Command,
    DisruptionInput,
    NodeState,
    Plan,
)
from fleetwright.model.donotdisrupt import pod_protection
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION
from fleetwright.model.pod import Pod

DISRUPTION_BLOCKED: Final = "DisruptionBlocked"
UNCONSOLIDATABLE: Final = "Unconsolidatable"

# Conditions to set (or, None, to remove) on NodeClaim objects, by claim.
ClaimConditions = dict[str, dict[str, Condition | None]]

# Skip reasons that name a budget or PodDisruptionBudget refusal (the node itself could go).
_REFUSALS: Final = ("budget:", "PodDisruptionBudget")


@dataclass(frozen=True, slots=True)
class Notice:
    """One event to publish on a node (and on its NodeClaim, ``claim``, when it has one)."""

    node: str
    claim: str
    reason: str
    message: str


def plan_notices(inp: DisruptionInput, plan: Plan) -> list[Notice]:
    """``DisruptionBlocked`` for nodes a do-not-disrupt annotation, a PodDisruptionBudget, a NodePool budget
    or initialization holds back; ``Unconsolidatable`` for nodes consolidation may not or did not take."""
    cluster = Cluster(inp)
    notices: list[Notice] = []
    decided = {s.name for command in [*plan.expirations, *plan.scale_down] for s in command.candidates}
    if plan.command is not None:
        decided.update(plan.command.node_names)
    for state in cluster.ours:
        if state.terminating or state.name in decided:
            continue
        blocked = _blocked(cluster, state, plan)
        if blocked:
            notices.append(Notice(state.name, state.claim_id, DISRUPTION_BLOCKED, blocked))
            continue
        why = _unconsolidatable(cluster, state, plan)
        if why:
            notices.append(Notice(state.name, state.claim_id, UNCONSOLIDATABLE, why))
    return notices


CONSOLIDATION_METHODS: Final = frozenset({SINGLE_NODE, MULTI_NODE})
BUDGETED_REASONS: Final = (EMPTY, DRIFTED, UNDERUTILIZED)


def blocked_pools(inp: DisruptionInput) -> list[tuple[str, str]]:
    """``(NodePool, reason)`` for each NodePool with initialized nodes whose budgets allow no disruption
    for ``reason`` now (Karpenter counts the pool's nodes as ``BuildDisruptionBudgetMapping`` does)."""
    cluster = Cluster(inp)
    found: list[tuple[str, str]] = []
    for name, states in sorted(cluster.pool_nodes.items()):
        pool = cluster.pools.get(name)
        counted = [s for s in states if s.initialized and not s.node.in_flight]
        if pool is None or not counted:
            continue
        for reason in BUDGETED_REASONS:
            if allowed_disruptions(pool, reason, len(counted), 0, cluster.moment) == 0:
                found.append((name, reason))
    return found


def command_text(command: Command, state: NodeState) -> str:
    """The command as ``state``'s events name it, in Karpenter's shape: ``Underutilized: replace:
    nodepools=[default]: [node-a] -> [1 replacement]``, or ``delete: [node-a] (part of 3-node
    consolidation)`` for one node of several."""
    decision = "replace" if command.replacements else "delete"
    if len(command.candidates) > 1:
        return f"{decision}: [{state.name}] (part of {len(command.candidates)}-node consolidation)"
    pools = ",".join(sorted({c.nodepool for c in command.candidates}))
    text = f"{command.reason}: {decision}: nodepools=[{pools}]: [{', '.join(command.node_names)}]"
    if command.replacements:
        count = len(command.replacements)
        text += f" -> [{count} replacement{'s' if count != 1 else ''}]"
    return text


def blocked_why(message: str) -> str:
    """The kind of a ``DisruptionBlocked`` message, the ``Why`` dimension of its metric: ``Budget`` (a
    NodePool's disruption budget), ``PodDisruptionBudget``, ``DoNotDisrupt`` (the annotation on the node or
    one of its pods), ``NotInitialized``, or ``Other``."""
    if "budget:" in message:
        return "Budget"
    if "PodDisruptionBudget" in message:
        return "PodDisruptionBudget"
    if DO_NOT_DISRUPT_ANNOTATION in message:
        return "DoNotDisrupt"
    if "not initialized" in message.lower():
        return "NotInitialized"
    return "Other"


def invalid_do_not_disrupt(inp: DisruptionInput) -> list[tuple[Pod, str]]:
    """Running pods on our nodes whose ``karpenter.sh/do-not-disrupt`` value is ignored, and why."""
    found: list[tuple[Pod, str]] = []
    for state in Cluster(inp).ours:
        for pod in state.node.pods:
            if is_terminal(pod):
                continue
            invalid = pod_protection(pod.annotations, pod.started_at, inp.now).invalid
            if invalid:
                found.append((pod, invalid))
    return found


def do_not_disrupt_durations(inp: DisruptionInput) -> list[tuple[Pod, float, bool]]:
    """Running pods on our nodes protected by a ``karpenter.sh/do-not-disrupt`` duration:
    ``(pod, until, active)``, ``until`` the epoch second the protection ends."""
    found: list[tuple[Pod, float, bool]] = []
    for state in Cluster(inp).ours:
        for pod in state.node.pods:
            if is_terminal(pod):
                continue
            protection = pod_protection(pod.annotations, pod.started_at, inp.now)
            if protection.until is not None:
                found.append((pod, protection.until, protection.active))
    return found


def claim_conditions(inp: DisruptionInput) -> ClaimConditions:
    """For each of our nodes' claims, Karpenter's ``Drifted`` (reason Karpenter's drift reason, message
    why) and ``Consolidatable`` conditions: the condition when it holds, None when it does not."""
    cluster = Cluster(inp)
    found: ClaimConditions = {}
    for state in cluster.ours:
        if not state.claim_id or state.terminating:
            continue
        drifted = drift_reason(cluster, state)
        ready = consolidatable(cluster, state) or empty_for(cluster, state) is not None
        found[state.claim_id] = {
            DRIFTED_CONDITION: true(
                DRIFTED_CONDITION, reason=drift_kind(drifted), message=drifted[:1].upper() + drifted[1:]
            )
            if drifted
            else None,
            CONSOLIDATABLE: true(CONSOLIDATABLE) if ready else None,
            # A node no workflow is disrupting any more (its disruption called off, say) loses it.
            DISRUPTION_REASON: None,
        }
    return found


def disrupting_conditions(commands: Sequence[Command], outcomes: Sequence[CommandOutcome]) -> ClaimConditions:
    """``DisruptionReason`` (reason and message the command's reason: ``Drifted``, ``Underutilized``, ...)
    on the claims of the nodes whose termination workflow a command started, as Karpenter marks the
    NodeClaims of a command it starts."""
    found: ClaimConditions = {}
    for command, outcome in zip(commands, outcomes, strict=True):
        for state in command.candidates:
            if state.claim_id and state.name in outcome.executions:
                marked = true(DISRUPTION_REASON, reason=command.reason, message=command.reason)
                found[state.claim_id] = {DISRUPTION_REASON: marked}
    return found


def _blocked(cluster: Cluster, state: NodeState, plan: Plan) -> str:
    block = cluster.graceful_block(state)
    if block:
        return block
    skipped = plan.skipped.get(state.name, "")
    if any(marker in skipped for marker in _REFUSALS):
        return skipped
    return ""


def _unconsolidatable(cluster: Cluster, state: NodeState, plan: Plan) -> str:
    pool = cluster.pool_of(state)
    if pool is None:
        return ""
    if cluster.consolidate_after.get(pool.name) is None:
        return f'NodePool "{pool.name}" has consolidation disabled'
    if pool.spec.disruption.consolidation_policy not in UNDERUTILIZED_POLICIES:
        if not node_is_empty(state):
            return f'NodePool "{pool.name}" has consolidation policy WhenEmpty, but node is not empty'
        return ""
    return plan.unconsolidatable.get(state.name, "")
