"""Consolidation (reason ``Underutilized``): remove nodes whose pods fit elsewhere, or replace several nodes
(or one) by a single cheaper node.

Candidates: our nodes of NodePools with ``consolidationPolicy: WhenEmptyOrUnderutilized`` (or
``Balanced``) and a consolidateAfter other than ``Never``, whose last pod event (a pod bound to or gone
from the node, :mod:`fleetwright.disruption.podevents`) is at least consolidateAfter ago, at least
``min_node_age_seconds`` old (0 by default), with a known price, not empty (empty nodes wait for
emptiness' own timer), and not blocked (see :meth:`Cluster.graceful_block`). They are ordered by the
dollars they waste — their whole bill × the unused share of their tightest resource (cpu or memory), most
first — then fewer evictable pods, then name.

Every dollar here is a node's whole hourly bill (:meth:`Cluster.bill`: instance, EBS volumes, public IPv4
address, burstable CPU credits for its pods' requests), not its instance price alone: a replacement of a
lower price whose volumes or credits cost more is no saving.

A set of candidates forms a valid command when the scheduler places every evictable pod on the other
nodes (plus the NodeClaims in flight) opening at most one new NodeClaim, and, with one, that claim still
has instance types after :func:`cheaper_replacement`'s filters. Multi-node consolidation binary-searches
the longest valid prefix (at least two nodes) of the first ``max_candidates`` candidates that the budgets
and PodDisruptionBudgets allow together; single-node consolidation tries candidates one by one, first
valid wins, at most :data:`SINGLE_NODE_ATTEMPTS` simulations per pass (deterministic, unlike a timer).

A command taking nodes of a ``Balanced`` NodePool must also pass that pool's score
(:mod:`fleetwright.disruption.balanced`); single-node consolidation skips, without simulating, a
Balanced candidate that would fail it even if deleted outright.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from fleetwright.catalog.bill import node_bill
from fleetwright.disruption import balanced
from fleetwright.disruption.candidates import (
    Cluster,
    CommandBuilder,
    evictable_pods,
    node_is_empty,
    type_summary,
)
from fleetwright.disruption.method import PassContext
from fleetwright.disruption.simulation import Simulator
from fleetwright.disruption.types import MULTI_NODE, SINGLE_NODE, UNDERUTILIZED, Command, NodeState
from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.labels import CAPACITY_TYPE, ON_DEMAND, SPOT
from fleetwright.model.nodepool import FEWER_NODES
from fleetwright.model.quantity import CPU, MEMORY
from fleetwright.model.requirements import Requirements
from fleetwright.scheduling.types import NewNodeClaim, Results

SINGLE_NODE_ATTEMPTS: Final = 50
WHEN_EMPTY_OR_UNDERUTILIZED: Final = "WhenEmptyOrUnderutilized"
# Policies under which busy nodes are consolidated (not only empty ones).
UNDERUTILIZED_POLICIES: Final = frozenset({WHEN_EMPTY_OR_UNDERUTILIZED, balanced.BALANCED})


def consolidatable(cluster: Cluster, state: NodeState) -> bool:
    """True when ``state``'s NodePool lets it be consolidated now (policy, consolidateAfter, age, price)."""
    pool = cluster.pool_of(state)
    if pool is None or pool.spec.disruption.consolidation_policy not in UNDERUTILIZED_POLICIES:
        return False
    if cluster.is_static(state):  # a static pool keeps its nodes
        return False
    after = cluster.consolidate_after[pool.name]
    if after is None or state.price <= 0:
        return False
    if cluster.now - state.created_at < cluster.settings.min_node_age_seconds:
        return False
    return cluster.now - quiet_since(state) >= after


def quiet_since(state: NodeState) -> float:
    """Since when ``consolidateAfter`` counts for ``state``: its last pod event, else its launch."""
    return state.last_pod_event if state.last_pod_event is not None else state.created_at


def wasted_dollars(cluster: Cluster, state: NodeState) -> float:
    """Whole bill × the unused share of the node's tightest resource (cpu or memory)."""
    used = 0.0
    for resource in (CPU, MEMORY):
        total = state.node.allocatable.get(resource, 0)
        if total > 0:
            requested = sum(
                p.requests.get(resource, 0) for p in state.node.pods if p.phase not in ("Succeeded", "Failed")
            )
            used = max(used, min(1.0, requested / total))
    return cluster.bill(state).total * (1.0 - used)


def ordered_candidates(cluster: Cluster, excluded: set[str], skipped: dict[str, str]) -> list[NodeState]:
    """Consolidation candidates, most wasted dollars first (see the module docstring)."""
    found: list[NodeState] = []
    for state in cluster.ours:
        if state.name in excluded or state.terminating or not consolidatable(cluster, state):
            continue
        if node_is_empty(state):
            continue
        block = cluster.graceful_block(state)
        if block is not None:
            skipped.setdefault(state.name, f"not consolidated: {block}")
            continue
        found.append(state)
    return sorted(found, key=lambda s: (-wasted_dollars(cluster, s), len(evictable_pods(s)), s.name))


def required_saving(cluster: Cluster, nodes: Sequence[NodeState]) -> float:
    """The least a command removing ``nodes`` must save per hour."""
    settings = cluster.settings
    return max(settings.min_saving_fraction * cluster.bill_of(nodes), settings.min_saving_dollars)


def cheaper_replacement(
    cluster: Cluster, claim: NewNodeClaim, nodes: Sequence[NodeState], single: bool
) -> tuple[NewNodeClaim | None, str]:
    """``claim`` narrowed to the instance types that make the command worth it, or None and why not.

    Kept: types whose whole bill on their cheapest allowed offering (with the credits the claim's pods
    would spend on a burstable type) is below the removed nodes' bill less the required saving, other
    than the removed nodes' own types: replacing a node by its own type is churn. And, as Karpenter's
    ``filterOutSameInstanceType`` does, when a removed node's type is among the types that could hold all
    the pods, only types cheaper than that node are kept: a new node costing as much would be no better
    than keeping that node and moving the others' pods onto it, without the launch and with fewer
    evictions (:func:`same_type_ceiling`).
    When every removed node is spot and the claim may be spot, only spot offerings count, and a
    single-node command needs ``spot_to_spot_min_types`` cheaper types (Karpenter's rule, so a spot
    node is not walked down the price ladder); the replacement keeps that many cheapest types, more when
    the NodePool's ``minValues`` need more. A replacement whose types no longer satisfy ``minValues`` is
    refused.
    """
    settings = cluster.settings
    window = _Window(
        ceiling=min(
            cluster.bill_of(nodes) - required_saving(cluster, nodes), same_type_ceiling(cluster, claim, nodes)
        ),
        zones=frozenset(claim.zones) or None,
        capacity_types=frozenset(claim.capacity_types) or None,
    )
    spot_to_spot = all(s.capacity_type == SPOT for s in nodes) and (
        window.capacity_types is None or SPOT in window.capacity_types
    )
    if spot_to_spot:
        if not settings.spot_to_spot:
            return None, "spot-to-spot consolidation is disabled"
        window = replace(window, capacity_types=frozenset({SPOT}))
    priced = _cheaper_types(claim, {s.instance_type for s in nodes}, window)
    if spot_to_spot:
        if single and len(priced) < settings.spot_to_spot_min_types:
            return None, (
                f"spot-to-spot needs {settings.spot_to_spot_min_types} cheaper instance types, "
                f"found {len(priced)}"
            )
        priced = _cheapest_keeping_min_values(claim, priced, settings.spot_to_spot_min_types)
    if not priced:
        return None, f"no replacement type is cheaper than ${window.ceiling:.3f}/h"
    short = min_values_short(claim.requirements, [claim.instance_types[i] for _, _, i, _, _ in priced])
    if short is not None:
        return None, f"the cheaper instance types {short}"
    return _narrowed(claim, priced, window, spot_to_spot), ""


def same_type_ceiling(cluster: Cluster, claim: NewNodeClaim, nodes: Sequence[NodeState]) -> float:
    """The bill of the cheapest removed node whose instance type is among the claim's (could hold all
    the pods); infinity when none is."""
    fitting = {t.name for t in claim.instance_types}
    return min((cluster.bill(s).total for s in nodes if s.instance_type in fitting), default=math.inf)


def min_values_short(requirements: Requirements, types: Sequence[InstanceType]) -> str | None:
    """Why ``types`` fail a requirement's ``minValues`` (too few distinct values of its label), or None."""
    for requirement in requirements:
        if requirement.min_values:
            values = {t.labels.get(requirement.key) for t in types} - {None}
            if len(values) < requirement.min_values:
                return (
                    f"offer {len(values)} value(s) of {requirement.key}, "
                    f"minValues is {requirement.min_values}"
                )
    return None


@dataclass(frozen=True, slots=True)
class _Window:
    """The offerings a replacement may use: a whole bill below ``ceiling`` per hour, in ``zones`` and of
    ``capacity_types`` (None: any)."""

    ceiling: float
    zones: frozenset[str] | None
    capacity_types: frozenset[str] | None

    def allows(self, offering: Offering, beyond: float) -> bool:
        """``offering`` is available, its price plus ``beyond`` (the rest of the node's bill) under the
        ceiling, in an allowed zone and capacity type."""
        return (
            offering.available
            and offering.price + beyond < self.ceiling
            and (self.zones is None or offering.zone in self.zones)
            and (self.capacity_types is None or offering.capacity_type in self.capacity_types)
        )


_Priced = tuple[float, str, int, float, float]  # bill, type name, index in the claim, price, beyond the price


def _beyond(claim: NewNodeClaim, instance_type: str) -> float:
    """What a node of ``instance_type`` for the claim's pods costs beyond its instance: the node class's
    volumes and address, and the CPU credits of a burstable type."""
    credits = node_bill(instance_type, 0.0, cpu_millicores=claim.requests.get(CPU, 0)).credits
    return claim.bill.volumes + claim.bill.address + credits


def _cheaper_types(claim: NewNodeClaim, own: set[str], window: _Window) -> list[_Priced]:
    """The claim's types other than ``own`` whose bill on their cheapest allowed offering is under the
    ceiling, cheapest bill first."""
    priced: list[_Priced] = []
    for i, instance_type in enumerate(claim.instance_types):
        if instance_type.name in own:
            continue
        offering = instance_type.cheapest(window.zones, window.capacity_types)
        beyond = _beyond(claim, instance_type.name)
        if offering is not None and window.allows(offering, beyond):
            priced.append((offering.price + beyond, instance_type.name, i, offering.price, beyond))
    return sorted(priced)


def _cheapest_keeping_min_values(claim: NewNodeClaim, priced: list[_Priced], count: int) -> list[_Priced]:
    """The ``count`` cheapest of ``priced``, and more, cheapest first, until the claim's ``minValues``
    hold (Karpenter raises its 15-type cap the same way)."""
    kept = priced[:count]
    for extra in priced[count:]:
        if min_values_short(claim.requirements, [claim.instance_types[i] for _, _, i, _, _ in kept]) is None:
            break
        kept.append(extra)
    return kept


def _narrowed(
    claim: NewNodeClaim, priced: Sequence[_Priced], window: _Window, spot_to_spot: bool
) -> NewNodeClaim:
    """``claim`` with only the ``priced`` types and, of those, only the offerings whose bill is under the
    ceiling: a launch falling back to another zone or capacity type (spot gone, so on-demand) must still
    save what the command promised."""
    types: list[InstanceType] = []
    allowed_zones: set[str] = set()
    allowed_capacity: set[str] = set()
    for _, _, i, _, beyond in priced:
        instance_type = claim.instance_types[i]
        offerings = tuple(o for o in instance_type.offerings if window.allows(o, beyond))
        types.append(replace(instance_type, offerings=offerings))
        allowed_zones.update(o.zone for o in offerings)
        allowed_capacity.update(o.capacity_type for o in offerings)
    requirements = claim.requirements
    labels = dict(claim.labels)
    if spot_to_spot:
        requirements = requirements.intersect(Requirements.from_labels({CAPACITY_TYPE: SPOT}))
        labels[CAPACITY_TYPE] = SPOT
    _, name, _, price, _ = priced[0]
    credits = node_bill(name, price, cpu_millicores=claim.requests.get(CPU, 0)).credits
    return replace(
        claim,
        instance_types=types,
        zones=sorted(allowed_zones),
        capacity_types=sorted(allowed_capacity, key=lambda c: (c != SPOT, c != ON_DEMAND, c)),
        price=price,
        bill=replace(claim.bill, instance=price, credits=credits),
        requirements=requirements,
        labels=labels,
    )


def evaluate(
    cluster: Cluster, simulator: Simulator, nodes: Sequence[NodeState], method: str
) -> tuple[Command | None, str]:
    """The command removing ``nodes`` (with at most one cheaper replacement), or None and why not."""
    results = simulator.run(nodes, waiting=True)
    if len(results.new_claims) > 1:
        # LowestCost may spread the pods over several nodes cheaper together than any one; a command
        # launches at most one, so try first fit, which opens as few as it can (Karpenter's packing).
        fewest = simulator.run(nodes, waiting=True, packing=FEWER_NODES)
        if len(fewest.new_claims) <= 1:
            results = fewest
    refused = _unsettled(simulator, results)
    if refused is not None:
        return None, refused
    if len(results.new_claims) > 1:
        return None, f"its pods would need {len(results.new_claims)} new nodes"
    before = cluster.bill_of(nodes)
    count = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    head = f"consolidate {count} ({type_summary(nodes)}, ${before:.3f}/h)"
    if not results.new_claims:
        if before < required_saving(cluster, nodes):
            return None, f"saving ${before:.3f}/h is below the minimum"
        refused = balanced.rejection(cluster, nodes, before)
        if refused is not None:
            return None, refused
        text = _scored(cluster, nodes, before, f"{head} onto existing nodes: saves ${before:.3f}/h")
        found = balanced.scores(cluster, nodes, before)
        return Command(method, UNDERUTILIZED, list(nodes), savings=before, explanation=text, scores=found), ""
    claim, why = cheaper_replacement(cluster, results.new_claims[0], nodes, method == SINGLE_NODE)
    if claim is None:
        return None, why
    saving = before - claim.bill.total
    refused = balanced.rejection(cluster, nodes, saving)
    if refused is not None:
        return None, refused
    text = f"{head} into 1 {claim.instance_types[0].name} (${claim.bill.total:.3f}/h): saves ${saving:.3f}/h"
    text = _scored(cluster, nodes, saving, text)
    found = balanced.scores(cluster, nodes, saving)
    return Command(
        method, UNDERUTILIZED, list(nodes), [claim], savings=saving, explanation=text, scores=found
    ), ""


def _unsettled(simulator: Simulator, results: Results) -> str | None:
    """Why the simulation's placements do not make a command (None when they do), as Karpenter's
    ``SimulateScheduling`` judges them: a leaving node's pod that fits nowhere; a waiting pod
    (:meth:`Simulator.waiting`) pushed off the room it had; a leaving node's pod placed on a node not
    initialized yet (it would wait there, and that room is the pods' its claim was launched for)."""
    waiting = {p.key for p in simulator.waiting()}
    mine = [e for e in results.errors if e.pod.key not in waiting]
    if mine:
        first = mine[0]
        return f"{len(mine)} pod(s) cannot be scheduled elsewhere ({first.pod.key}: {first.reason})"
    pushed = [e.pod.key for e in results.errors] + [
        p.key for c in results.new_claims for p in c.pods if p.key in waiting
    ]
    if pushed:
        return f"it would take the room pod {pushed[0]} is waiting for"
    for placement in results.existing:
        if placement.node in simulator.uninitialized and any(p.key not in waiting for p in placement.pods):
            return f"its pods would wait for node {placement.node}, not initialized yet"
    return None


def _scored(cluster: Cluster, nodes: Sequence[NodeState], saving: float, text: str) -> str:
    """``text`` with the Balanced pools' scores, when the command takes nodes of any."""
    scores = balanced.approval(cluster, nodes, saving)
    return f"{text}; {scores}" if scores else text


def multi_node_command(
    cluster: Cluster, simulator: Simulator, candidates: Sequence[NodeState]
) -> Command | None:
    """The longest valid prefix (≥ 2 nodes) of the candidates the budgets allow together, or None."""
    builder = CommandBuilder(cluster, UNDERUTILIZED)
    for state in candidates:
        if len(builder.taken) >= cluster.settings.max_candidates:
            break
        builder.add(state)
    pool = builder.taken
    low, high = 2, len(pool)
    best: Command | None = None
    while low <= high:
        middle = (low + high) // 2
        command, _ = evaluate(cluster, simulator, pool[:middle], MULTI_NODE)
        if command is not None:
            best, low = command, middle + 1
        else:
            high = middle - 1
    return best


def single_node_command(
    cluster: Cluster,
    simulator: Simulator,
    candidates: Sequence[NodeState],
    skipped: dict[str, str],
    unconsolidatable: dict[str, str] | None = None,
) -> Command | None:
    """The first candidate that forms a valid command alone (at most SINGLE_NODE_ATTEMPTS tries); why
    each candidate tried before it failed goes into ``unconsolidatable``."""
    attempts = 0
    for state in candidates:
        refusal = CommandBuilder(cluster, UNDERUTILIZED).refusal(state)
        if refusal is not None:
            skipped.setdefault(state.name, f"not consolidated: {refusal}")
            continue
        if attempts >= SINGLE_NODE_ATTEMPTS:
            break
        if not balanced.could_pass(cluster, state):
            if unconsolidatable is not None:
                unconsolidatable[state.name] = (
                    balanced.rejection(cluster, [state], cluster.bill(state).total)
                    or "consolidationPolicy Balanced"
                )
            continue
        attempts += 1
        command, why = evaluate(cluster, simulator, [state], SINGLE_NODE)
        if command is not None:
            return command
        if unconsolidatable is not None:
            unconsolidatable[state.name] = why
    return None


def still_consolidatable(cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
    """None when ``command``'s consolidation still holds for ``fresh`` with as many replacements and none
    dearer than planned; otherwise why not."""
    if not all(consolidatable(cluster, s) for s in fresh):
        return "a node is no longer eligible for consolidation"
    again, why = evaluate(cluster, Simulator(cluster), fresh, command.method)
    if again is None:
        return f"consolidation no longer valid: {why}"
    if len(again.replacements) != len(command.replacements):
        return (
            f"consolidation now needs {len(again.replacements)} new node(s) "
            f"instead of {len(command.replacements)}"
        )
    if again.replacements and again.replacements[0].bill.total > command.replacements[0].bill.total + 1e-9:
        return (
            f"the replacement would now cost ${again.replacements[0].bill.total:.3f}/h "
            f"instead of ${command.replacements[0].bill.total:.3f}/h"
        )
    return None


_CANDIDATES: Final = "consolidation-candidates"


def pass_candidates(ctx: PassContext) -> list[NodeState]:
    """The pass's consolidation candidates (:func:`ordered_candidates`), found once for both methods."""
    found = ctx.cluster.memo.get(_CANDIDATES)
    if not isinstance(found, list):
        found = ordered_candidates(ctx.cluster, ctx.static, ctx.skipped)
        ctx.cluster.memo[_CANDIDATES] = found
    return found


class MultiNodeConsolidation:
    """Multi-node consolidation as a disruption method (graceful, one command per pass)."""

    name = MULTI_NODE
    reason = UNDERUTILIZED
    forceful = False

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Consolidatable under its NodePool's policy, and not empty (emptiness takes empty nodes)."""
        return consolidatable(cluster, state) and not node_is_empty(state)

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """The longest valid prefix (≥ 2 nodes) of the candidates, or none."""
        command = multi_node_command(ctx.cluster, ctx.simulator, pass_candidates(ctx))
        return [command] if command is not None else []

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """Still consolidatable, and no dearer."""
        return still_consolidatable(cluster, command, fresh)


class SingleNodeConsolidation:
    """Single-node consolidation as a disruption method (graceful, one command per pass)."""

    name = SINGLE_NODE
    reason = UNDERUTILIZED
    forceful = False

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Consolidatable under its NodePool's policy, and not empty (emptiness takes empty nodes)."""
        return consolidatable(cluster, state) and not node_is_empty(state)

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """The first candidate that forms a valid command alone, or none; why the others tried did not
        goes into ``unconsolidatable``."""
        command = single_node_command(
            ctx.cluster, ctx.simulator, pass_candidates(ctx), ctx.skipped, ctx.plan.unconsolidatable
        )
        return [command] if command is not None else []

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """Still consolidatable, and no dearer."""
        return still_consolidatable(cluster, command, fresh)
