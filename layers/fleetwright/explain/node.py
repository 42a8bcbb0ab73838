"""``fleetwright explain node NAME``: which disruption methods apply to a node, what holds each back, what the
next pass would decide, and where its pods would go if it were removed now.

Everything comes from the disruption planner's pure functions over the view (:mod:`fleetwright.disruption`):
the pass itself (:func:`~fleetwright.disruption.planner.plan`) and the notices it leads to (the
``DisruptionBlocked`` and ``Unconsolidatable`` events, :mod:`fleetwright.disruption.notices`), each
method's own test (expired, empty for consolidateAfter, drifted, consolidatable), the blocks every graceful
method shares (:meth:`~fleetwright.disruption.candidates.Cluster.graceful_block`, budgets and PDBs through
:class:`~fleetwright.disruption.candidates.CommandBuilder`), consolidation's verdict with its savings
threshold (:func:`~fleetwright.disruption.consolidation.evaluate`) and the removal simulation
(:class:`~fleetwright.disruption.simulation.Simulator`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetwright.disruption.candidates import (
    Cluster,
    CommandBuilder,
    claims_summary,
    describe_seconds,
    evictable_pods,
    node_is_empty,
)
from fleetwright.disruption.consolidation import (
    UNDERUTILIZED_POLICIES,
    consolidatable,
    evaluate,
    quiet_since,
)
from fleetwright.disruption.drift import drift_reason
from fleetwright.disruption.emptiness import empty_for
from fleetwright.disruption.expiration import is_expired
from fleetwright.disruption.notices import DISRUPTION_BLOCKED, plan_notices
from fleetwright.disruption.notices import invalid_do_not_disrupt as ignored_annotations
from fleetwright.disruption.planner import plan
from fleetwright.disruption.simulation import Simulator
from fleetwright.disruption.types import (
    DRIFTED,
    EMPTY,
    EXPIRED,
    SINGLE_NODE,
    UNDERUTILIZED,
    Command,
    NodeState,
)
from fleetwright.explain.pod import ExplainError, event_json
from fleetwright.explain.view import View, disruption_for
from fleetwright.kube.events import Event
from fleetwright.kube.reasons import disruption_blocked, invalid_do_not_disrupt, node_ref, unconsolidatable
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.pod import Pod
from fleetwright.plan import claim_json
from fleetwright.scheduling.types import NewNodeClaim

# What the view does not hold (docs/explain.md), said with every node explanation.
LIMITS = (
    "read without the state table and EC2: the price is the catalog's offering, the last pod event the "
    "latest start of the node's pods (else its creation), and drift only the NodePool-requirements kind"
)


@dataclass(slots=True)
class Verdict:
    """One disruption method for the node: whether it ``applies`` and why (``detail``), and what holds it
    back (``blocked``, "" when nothing does)."""

    method: str
    reason: str
    applies: bool
    detail: str
    blocked: str = ""


@dataclass(slots=True)
class Move:
    """Where one of the node's pods would go: a ``node`` there is, a new ``claim``, or nowhere
    (``reason``)."""

    pod: Pod
    node: str = ""
    claim: NewNodeClaim | None = None
    reason: str = ""


@dataclass(slots=True)
class NodeExplanation:
    """The node as the planner sees it, the pass's decision on it, its events, each method's verdict and
    the removal simulation."""

    state: NodeState
    bill: float
    ours: bool
    now: float
    decision: Command | None = None
    held: str = ""
    events: list[Event] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    replacements: list[NewNodeClaim] = field(default_factory=list)


def explain_node(
    view: View, name: str, instance_types: list[InstanceType], region: str, now: float
) -> NodeExplanation:
    """Explain the node ``name`` at ``now``; raises :class:`ExplainError` when the view has no such node."""
    inp = disruption_for(view, instance_types, region, now)
    cluster = Cluster(inp)
    state = cluster.by_name.get(name)
    if state is None:
        raise ExplainError(f"node {name} not found in the {view.source}")
    ours = cluster.pool_of(state) is not None
    found = NodeExplanation(state, cluster.bill(state).total if ours else state.price, ours, now)
    decided = plan(inp)
    commands = [*decided.repairs, *decided.expirations, *decided.scale_down]
    commands += [decided.command] if decided.command is not None else []
    found.decision = next((c for c in commands if name in c.node_names), None)
    found.held = decided.skipped.get(name) or decided.unconsolidatable.get(name, "")
    for notice in plan_notices(inp, decided):
        if notice.node == name:
            make = disruption_blocked if notice.reason == DISRUPTION_BLOCKED else unconsolidatable
            found.events.append(make(node_ref(name), notice.message))
    mine = {p.key for p in state.node.pods}
    found.events += [invalid_do_not_disrupt(p, why) for p, why in ignored_annotations(inp) if p.key in mine]
    if ours:
        found.verdicts = verdicts(cluster, state)
    found.moves, found.replacements = removal(cluster, state)
    return found


def verdicts(cluster: Cluster, state: NodeState) -> list[Verdict]:
    """Each method's verdict on ``state``, in the order a pass tries them."""
    if state.terminating:
        methods = (
            ("expiration", EXPIRED),
            ("emptiness", EMPTY),
            ("drift", DRIFTED),
            ("consolidation", UNDERUTILIZED),
        )
        return [
            Verdict(m, r, False, "already being disrupted (cordoned for it, or being deleted)")
            for m, r in methods
        ]
    return [
        expiration(cluster, state),
        emptiness(cluster, state),
        drift(cluster, state),
        consolidation(cluster, state),
    ]


def _block(cluster: Cluster, state: NodeState, reason: str) -> str:
    """What holds a graceful method back: the node's own blocks, else its NodePool's budget or a PDB."""
    return cluster.graceful_block(state) or CommandBuilder(cluster, reason).refusal(state) or ""


def expiration(cluster: Cluster, state: NodeState) -> Verdict:
    """Expired (forceful: budgets, PDBs and do-not-disrupt do not hold it), or when it will be."""
    lifetime = cluster.expire_after[state.nodepool]
    age = cluster.now - state.created_at
    if is_expired(cluster, state):
        detail = f"{describe_seconds(age)} old, expireAfter {describe_seconds(lifetime or 0)}"
        return Verdict(
            "expiration",
            EXPIRED,
            True,
            detail + " (forceful: budgets, PDBs and do-not-disrupt "
            "do not hold it; terminationGracePeriod bounds the drain)",
        )
    if lifetime is None:
        return Verdict("expiration", EXPIRED, False, "expireAfter is Never")
    return Verdict(
        "expiration",
        EXPIRED,
        False,
        f"expires in {describe_seconds(lifetime - age)} ({describe_seconds(age)} old, "
        f"expireAfter {describe_seconds(lifetime)})",
    )


def emptiness(cluster: Cluster, state: NodeState) -> Verdict:
    """Empty for its NodePool's consolidateAfter, or why not."""
    after = cluster.consolidate_after[state.nodepool]
    if cluster.is_static(state):
        return Verdict("emptiness", EMPTY, False, "static NodePool: it keeps its nodes")
    if not node_is_empty(state):
        return Verdict(
            "emptiness", EMPTY, False, f"not empty: {len(evictable_pods(state))} pod(s) would need a new home"
        )
    if after is None:
        return Verdict("emptiness", EMPTY, False, "empty, but consolidateAfter is Never")
    empty = empty_for(cluster, state)
    since = cluster.now - max(state.empty_since or state.created_at, state.last_pod_event or 0.0)
    if empty is None:
        return Verdict(
            "emptiness",
            EMPTY,
            False,
            f"empty for {describe_seconds(since)}, consolidateAfter {describe_seconds(after)} not yet passed",
        )
    detail = f"empty for {describe_seconds(empty)} (consolidateAfter {describe_seconds(after)})"
    return Verdict("emptiness", EMPTY, True, detail, _block(cluster, state, EMPTY))


def drift(cluster: Cluster, state: NodeState) -> Verdict:
    """Drifted, and why."""
    why = drift_reason(cluster, state)
    if why is None:
        return Verdict("drift", DRIFTED, False, "not drifted")
    return Verdict("drift", DRIFTED, True, f"drifted: {why}", _block(cluster, state, DRIFTED))


def consolidation(cluster: Cluster, state: NodeState) -> Verdict:
    """A consolidation candidate, and then whether removing or replacing it alone is worth it (the
    savings threshold) — or why it is no candidate."""
    if not consolidatable(cluster, state):
        return Verdict("consolidation", UNDERUTILIZED, False, _not_candidate(cluster, state))
    if node_is_empty(state):
        return Verdict("consolidation", UNDERUTILIZED, False, "empty: emptiness removes it")
    block = _block(cluster, state, UNDERUTILIZED)
    if block:
        return Verdict("consolidation", UNDERUTILIZED, True, "candidate", block)
    command, why = evaluate(cluster, Simulator(cluster), [state], SINGLE_NODE)
    if command is None:
        return Verdict("consolidation", UNDERUTILIZED, True, "candidate", f"not worth it: {why}")
    return Verdict("consolidation", UNDERUTILIZED, True, command.explanation)


def _not_candidate(cluster: Cluster, state: NodeState) -> str:
    pool = cluster.pools[state.nodepool]
    policy = pool.spec.disruption.consolidation_policy
    after = cluster.consolidate_after[pool.name]
    if policy not in UNDERUTILIZED_POLICIES:
        return f"consolidationPolicy {policy}: only empty nodes are removed"
    if cluster.is_static(state):
        return "static NodePool: it keeps its nodes"
    if after is None:
        return "consolidateAfter is Never"
    if state.price <= 0:
        return f"no price known for {state.instance_type} {state.capacity_type} in {state.zone}"
    age = cluster.now - state.created_at
    if age < cluster.settings.min_node_age_seconds:
        return f"younger ({describe_seconds(age)}) than the minimum node age"
    quiet = cluster.now - quiet_since(state)
    return (
        f"last pod event {describe_seconds(quiet)} ago, consolidateAfter {describe_seconds(after)} not passed"
    )


def removal(cluster: Cluster, state: NodeState) -> tuple[list[Move], list[NewNodeClaim]]:
    """Where each of the node's pods would go if it left now, and the nodes launched for them."""
    results = Simulator(cluster).run([state])
    moves: dict[str, Move] = {}
    for placement in results.existing:
        for pod in placement.pods:
            moves[pod.key] = Move(pod, node=placement.node)
    for claim in results.new_claims:
        for pod in claim.pods:
            moves[pod.key] = Move(pod, claim=claim)
    for error in results.errors:
        moves[error.pod.key] = Move(error.pod, reason=error.reason)
    ordered = [moves[p.key] for p in evictable_pods(state) if p.key in moves]
    return ordered, list(results.new_claims)


# --- output ----------------------------------------------------------------------------------------------


def node_json(found: NodeExplanation) -> dict[str, Any]:
    """The explanation as the JSON document of docs/explain.md."""
    state = found.state
    decision = found.decision
    return {
        "node": state.name,
        "nodePool": state.nodepool or None,
        "instanceType": state.instance_type,
        "capacityType": state.capacity_type,
        "zone": state.zone,
        "price": round(found.bill, 6),
        "ageSeconds": max(0, round(found.now - state.created_at)),
        "decision": (
            {"method": decision.method, "reason": decision.reason, "explanation": decision.explanation}
            if decision is not None
            else None
        ),
        "heldBack": found.held or None,
        "events": [event_json(e) for e in found.events],
        "methods": [
            {
                "method": v.method,
                "reason": v.reason,
                "applies": v.applies,
                "detail": v.detail,
                "blockedBy": v.blocked or None,
            }
            for v in found.verdicts
        ],
        "removal": {
            "pods": [
                {
                    "pod": m.pod.key,
                    "node": m.node or None,
                    "nodeClaim": m.claim.name if m.claim is not None else None,
                    "reason": m.reason or None,
                }
                for m in found.moves
            ],
            "nodeClaims": [claim_json(c) for c in found.replacements],
        },
        "limits": LIMITS,
    }


def render_node(found: NodeExplanation) -> str:
    """The explanation for people."""
    state = found.state
    age = describe_seconds(max(0.0, found.now - state.created_at))
    where = f"{state.instance_type or 'unknown type'} {state.capacity_type} in {state.zone or 'unknown zone'}"
    if not found.ours:
        lines = [f"Node {state.name}: {where}, {age} old; not managed by a NodePool of this cluster"]
    else:
        lines = [f"Node {state.name}: NodePool {state.nodepool}, {where}, ${found.bill:.4f}/h, {age} old"]
        lines.append(f"  next pass: {_decision_text(found)}")
    lines += [f"  event {e.reason}: {e.message}" for e in found.events]
    if found.verdicts:
        lines += ["", "Disruption methods (in the order a pass tries them):"]
    for verdict in found.verdicts:
        status = "applies" if verdict.applies else "no"
        lines.append(f"  {verdict.method} ({verdict.reason}): {status}: {verdict.detail}")
        if verdict.blocked:
            lines.append(f"      blocked: {verdict.blocked}")
    lines += ["", "If it were removed now, pod by pod:"]
    if not found.moves:
        lines.append("  no pod would need a new home")
    lines += [f"  {move.pod.key} -> {_move_text(move)}" for move in found.moves]
    if found.replacements:
        lines.append(f"  launching {claims_summary(found.replacements)}")
    lines += ["", f"Note: {LIMITS}."]
    return "\n".join(lines) + "\n"


def _decision_text(found: NodeExplanation) -> str:
    if found.decision is not None:
        return f"{found.decision.method}: {found.decision.explanation}"
    if found.held:
        return f"left alone: {found.held}"
    return "left alone"


def _move_text(move: Move) -> str:
    if move.node:
        return f"node {move.node}"
    if move.claim is not None:
        types = ", ".join(t.name for t in move.claim.instance_types[:3])
        return f"new node {move.claim.name} (NodePool {move.claim.nodepool}: {types}, ...)"
    return f"nowhere: {move.reason}"
