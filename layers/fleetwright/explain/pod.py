"""``fleetwright explain pod NS/NAME``: where the scheduler would put a pod and, NodePool by NodePool, whether
a node of that pool could run it and why not, in the scheduler's own words.

Two kinds of run of the same scheduler (:func:`fleetwright.scheduling.scheduler.schedule`):

- the decision: the pod with the other pending pods, on the nodes there are and the NodePools, as the
  provisioner's next pass would batch them; a launch gives the ``Nominated`` event, a failure the
  ``FailedScheduling`` one, with the messages the provisioner publishes;
- each NodePool alone, the existing nodes counted (limits, topology) but closed to the pod: whether a new
  node of that pool could run it, with the instance types it could be, or the scheduler's reason
  (requirements, taints and tolerations, limits, resources, topology).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fleetwright.disruption.candidates import as_pending
from fleetwright.explain.view import View, scheduling_for
from fleetwright.kube.events import Event
from fleetwright.kube.reasons import failed_scheduling, nominated
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.pod import Pod
from fleetwright.plan import claim_json
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import NewNodeClaim, NodePoolTemplate, Results, SchedulingInput

BOUND = "bound"  # the pod runs on a node already
EXISTING = "existing-node"  # the scheduler would place it on a node there is (or one on its way)
LAUNCH = "launch"  # a new node would be launched for it
UNSCHEDULABLE = "unschedulable"


class ExplainError(ValueError):
    """What was asked for is not in the view (no such pod or node)."""


@dataclass(slots=True)
class PoolFit:
    """Whether a new node of ``nodepool`` could run the pod: the types it could be (cheapest first), or
    the scheduler's ``reason``."""

    nodepool: str
    instance_types: list[InstanceType] = field(default_factory=list)
    price: float = 0.0
    reason: str = ""

    @property
    def fits(self) -> bool:
        """True when a node of the pool could run the pod."""
        return bool(self.instance_types)


@dataclass(slots=True)
class PodExplanation:
    """The pod, what would happen to it (``action``), the event that says so and each NodePool's fit."""

    pod: Pod
    action: str
    node: str = ""  # the node it runs on (bound) or would be placed on (existing-node)
    claim: NewNodeClaim | None = None
    reason: str = ""
    event: Event | None = None
    pools: list[PoolFit] = field(default_factory=list)


def parse_key(text: str) -> tuple[str, str]:
    """``NS/NAME`` (or ``NAME`` in ``default``) as (namespace, name)."""
    namespace, _, name = text.rpartition("/")
    if not name:
        raise ExplainError(f"expected a pod as NAMESPACE/NAME, got {text!r}")
    return namespace or "default", name


def explain_pod(view: View, key: str, instance_types: list[InstanceType], region: str) -> PodExplanation:
    """Explain the pod ``key`` (``NS/NAME``); raises :class:`ExplainError` when the view has no such pod and
    ``fleetwright.plan.PlanError`` when a NodePool's EC2NodeClass is missing."""
    namespace, name = parse_key(key)
    pod = view.find_pod(namespace, name)
    if pod is None:
        raise ExplainError(f"pod {namespace}/{name} not found in the {view.source}")
    inp = scheduling_for(view, instance_types, region)
    [pending] = as_pending([pod])
    templates = sorted(inp.nodepools, key=lambda t: (-t.weight, t.name))
    pools = [pool_fit(inp, template, pending) for template in templates]
    if pod.node_name:
        return PodExplanation(pod, BOUND, node=pod.node_name, pools=pools)
    batch = [p for p in inp.pods if p.key != pod.key] + [pending]
    coming = {n.name for n in view.in_flight}
    explanation = decision(pending, schedule(replace(inp, pods=batch)), view.claims, coming)
    explanation.pools = pools
    return explanation


def decision(
    pod: Pod, results: Results, claims: Mapping[str, str], coming: Collection[str] = ()
) -> PodExplanation:
    """What ``results`` do with ``pod``, and the event the provisioner would publish for it (``claims``:
    node name → its NodeClaim's name, which ``Nominated`` names with the node; ``coming``: the NodeClaims
    on their way, which it names alone)."""
    for claim in results.new_claims:
        if any(p.key == pod.key for p in claim.pods):
            return PodExplanation(pod, LAUNCH, claim=claim, event=nominated(pod, nodeclaim=claim.name))
    for placement in results.existing:
        if any(p.key == pod.key for p in placement.pods):
            if placement.node in coming:  # a NodeClaim on its way: no node yet
                event = nominated(pod, nodeclaim=placement.node)
            else:
                event = nominated(pod, nodeclaim=claims.get(placement.node, ""), node=placement.node)
            return PodExplanation(pod, EXISTING, node=placement.node, event=event)
    reason = next((e.reason for e in results.errors if e.pod.key == pod.key), "not placed")
    return PodExplanation(pod, UNSCHEDULABLE, reason=reason, event=failed_scheduling(pod, reason))


def pool_fit(inp: SchedulingInput, template: NodePoolTemplate, pod: Pod) -> PoolFit:
    """Whether a new node of ``template`` could run ``pod`` (the existing nodes closed to it)."""
    closed = [replace(n, unschedulable=True) for n in inp.nodes]
    probe = replace(inp, pods=[pod], nodepools=[template], nodes=closed)
    results = schedule(probe)
    if results.existing:  # the pod tolerates cordoned nodes: ask again without any node
        results = schedule(replace(probe, nodes=[]))
    if results.new_claims:
        claim = results.new_claims[0]
        return PoolFit(template.name, list(claim.instance_types), claim.price)
    reason = results.errors[0].reason if results.errors else "not placed"
    return PoolFit(template.name, reason=reason.removeprefix(f"NodePool {template.name}: "))


# --- output ----------------------------------------------------------------------------------------------


def event_json(event: Event | None) -> dict[str, str] | None:
    """An event as ``{type, reason, message}``."""
    if event is None:
        return None
    return {"type": event.type, "reason": event.reason, "message": event.message}


def pod_json(found: PodExplanation) -> dict[str, Any]:
    """The explanation as the JSON document of docs/explain.md."""
    return {
        "pod": found.pod.key,
        "decision": {
            "action": found.action,
            "node": found.node or None,
            "nodeClaim": claim_json(found.claim) if found.claim is not None else None,
            "reason": found.reason or None,
        },
        "event": event_json(found.event),
        "nodePools": [
            {
                "name": fit.nodepool,
                "fits": fit.fits,
                "reason": fit.reason or None,
                "instanceTypes": [t.name for t in fit.instance_types],
                "price": round(fit.price, 6) if fit.fits else None,
            }
            for fit in found.pools
        ],
    }


def render_pod(found: PodExplanation) -> str:
    """The explanation for people."""
    lines = [f"Pod {found.pod.key}"]
    if found.action == BOUND:
        lines.append(f"  runs on node {found.node}; below, whether a new node of each NodePool could run it")
    elif found.action == EXISTING:
        lines.append(f"  would be placed on node {found.node} (no launch needed)")
    elif found.action == LAUNCH and found.claim is not None:
        lines.append(f"  would launch a node: {_claim_text(found.claim)}")
    else:
        lines.append(f"  cannot be scheduled: {found.reason}")
    if found.event is not None:
        lines.append(f"  event {found.event.reason}: {found.event.message}")
    lines += ["", "NodePools (in the order the scheduler tries them):"]
    if not found.pools:
        lines.append("  none")
    for fit in found.pools:
        if fit.fits:
            lines.append(f"  {fit.nodepool}: fits, {_types_text(fit.instance_types, fit.price)}")
        else:
            lines.append(f"  {fit.nodepool}: does not fit: {fit.reason}")
    return "\n".join(lines) + "\n"


def _claim_text(claim: NewNodeClaim) -> str:
    zones = ", ".join(claim.zones) or "any zone"
    kinds = "/".join(claim.capacity_types)
    return (
        f"NodePool {claim.nodepool}, {_types_text(claim.instance_types, claim.price)}, {zones}, {kinds}, "
        f"with {len(claim.pods)} pod(s)"
    )


def _types_text(types: list[InstanceType], price: float, shown: int = 5) -> str:
    names = ", ".join(t.name for t in types[:shown])
    more = f" and {len(types) - shown} more" if len(types) > shown else ""
    noun = "instance type" if len(types) == 1 else "instance types"
    return f"{len(types)} {noun} ({names}{more}), from ${price:.4f}/h"
