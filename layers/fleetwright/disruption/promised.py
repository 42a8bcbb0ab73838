"""The room a replacement on its way was launched for, kept for the pods it was launched for.

A command launches replacements for its nodes' pods, then drains the nodes once the replacements are
Ready. Until the pods have moved, the replacement looks empty: an in-flight claim, or a registered node
not initialized yet. A later simulation (the next round of the same invocation, or the next invocation)
would count that room as free and plan other pods into it; when the first command's pods then arrive,
some of them find no room and go pending. As the provisioner does for interruption replacements
(``Provisioner._reserve_promised_pods``), each replacement on its way here carries the pods its claim
was launched for that still run on a node being disrupted. Pods that already moved are on their new node
and are not counted twice. Pods a command moves onto existing nodes leave no such trace
(:func:`room_is_kept`).
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetwright.claims.records import MAX_POD_KEYS
from fleetwright.disruption.candidates import evictable_pods
from fleetwright.disruption.types import Command, DisruptionInput
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.state.nodeclaims import NodeClaimRecord


def reserve_promised_pods(inp: DisruptionInput, claims: Mapping[str, NodeClaimRecord]) -> int:
    """Put the promised pods on the replacements on their way (see the module docstring); how many."""
    going: dict[str, Pod] = {p.key: p for s in inp.nodes if s.terminating for p in s.node.pods}
    if not going:
        return 0
    coming: list[tuple[Node, NodeClaimRecord]] = [
        (node, claims[node.name]) for node in inp.in_flight if node.name in claims
    ]
    coming.extend(
        (s.node, claims[s.claim_id])
        for s in inp.nodes
        if not s.initialized and not s.terminating and s.claim_id in claims
    )
    reserved = 0
    for node, record in coming:
        there = {p.key for p in node.pods}
        for key in record.pods:
            pod = going.get(key)
            if pod is not None and key not in there:
                node.pods.append(pod)
                reserved += 1
    return reserved


def room_is_kept(command: Command) -> bool:
    """True when every pod ``command`` moves is promised to one of its replacements (or it moves none), so
    the next plan sees the room those pods need (see :func:`reserve_promised_pods`). A command that moves
    pods onto existing nodes leaves no trace of that room until they land there: another plan made before
    then could give it away, so the controller does not plan again in the same invocation after one."""
    moving = {p.key for c in command.candidates for p in evictable_pods(c)}
    if not moving:
        return True
    if any(len(r.pods) > MAX_POD_KEYS for r in command.replacements):
        return False  # a claim records only its first pods: the rest would not be reserved
    promised = {p.key for r in command.replacements for p in r.pods}
    return moving <= promised
