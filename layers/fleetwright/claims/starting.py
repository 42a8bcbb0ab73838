"""Nodes Fleetwright launched that are still starting, as every scheduling simulation must see them.

A node registers long before it takes pods: the node lifecycle controller keeps
``node.kubernetes.io/not-ready:NoSchedule`` on it until its kubelet reports Ready, and agents such as
Cilium keep their startup taint (a NodePool's ``startupTaints``) until they run. Taken at face value
those taints make the pods the node was launched for look unplaceable, and the next pass would launch
again for them. As Karpenter's cluster state does (``StateNode.Taints()`` and ``Allocatable()``), a node
that has a claim record and is not initialized yet is seen here without the known ephemeral taints and
without its claim's startup taints, and with the claim's allocatable wherever the Node reports none
yet; the DaemonSets that will run there and have no pod on it yet (they wait, like the node's other
pods, for it to be Ready) have their room kept, as Karpenter keeps an existing node's remaining daemon
resources. Initialized nodes, and nodes Fleetwright did not launch, are taken as they are.

The provisioner and the disruption simulations both read nodes through :func:`scheduling_nodes` /
:func:`scheduling_node`, so the two cannot disagree about where a starting node's pods go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from fleetwright.claims.records import parse_taint
from fleetwright.claims.registration import INITIALIZED_LABEL, instance_id_of
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.taints import NO_EXECUTE, NO_SCHEDULE, Taint, tolerates_all
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

# Karpenter's KnownEphemeralTaints (pkg/scheduling/taints.go): taints a node carries while it starts.
# A taint matches one of them by key and effect, as Kubernetes' Taint.MatchTaint compares them.
KNOWN_EPHEMERAL_TAINTS: tuple[Taint, ...] = (
    Taint("node.kubernetes.io/not-ready", NO_SCHEDULE),
    Taint("node.kubernetes.io/not-ready", NO_EXECUTE),
    Taint("node.kubernetes.io/unreachable", NO_SCHEDULE),
    Taint("node.cloudprovider.kubernetes.io/uninitialized", NO_SCHEDULE, "true"),
    Taint("karpenter.sh/unregistered", NO_EXECUTE),
)

# A claim in these states may have a Node that has not initialized yet.
_STARTING = frozenset({ClaimStatus.LAUNCHING, ClaimStatus.LAUNCHED, ClaimStatus.REGISTERED})


def _matches(taint: Taint, others: Iterable[Taint]) -> bool:
    return any(taint.key == other.key and taint.effect == other.effect for other in others)


def is_starting(node: Node, record: NodeClaimRecord | None) -> bool:
    """``node`` was launched by Fleetwright (``record`` is its claim) and is not initialized yet: neither
    the Node's ``karpenter.sh/initialized`` label nor the claim says so."""
    if record is None or record.status not in _STARTING:
        return False
    return node.labels.get(INITIALIZED_LABEL) != "true"


def scheduling_node(node: Node, record: NodeClaimRecord | None, daemonsets: Sequence[Pod] = ()) -> Node:
    """``node`` as the scheduling simulation sees it: unchanged unless :func:`is_starting`; a starting node
    without the known ephemeral taints and its claim's startup taints, with the claim's allocatable for
    every resource the Node reports none of yet, and holding the pods of the ``daemonsets`` (their
    templates, as in ``ClusterSnapshot.daemonsets``) that will run there and are not bound to it yet (a
    copy: ``node`` itself is left as it is)."""
    if not is_starting(node, record):
        return node
    assert record is not None  # is_starting says so
    ignored = (*KNOWN_EPHEMERAL_TAINTS, *map(parse_taint, record.startup_taints))
    taints = tuple(t for t in node.taints if not _matches(t, ignored))
    allocatable = dict(node.allocatable)
    for name, amount in record.allocatable.items():
        if allocatable.get(name, 0) <= 0:
            allocatable[name] = amount
    coming = _daemons_coming(node, taints, daemonsets)
    if taints == node.taints and allocatable == node.allocatable and not coming:
        return node
    return replace(node, taints=taints, allocatable=allocatable, pods=[*node.pods, *coming])


def _daemons_coming(node: Node, taints: Sequence[Taint], daemonsets: Sequence[Pod]) -> list[Pod]:
    """The DaemonSet pods (templates) that will run on ``node`` (labels match, ``taints`` tolerated) and
    have none of their pods on it yet."""
    present = {(p.namespace, p.owner) for p in node.pods if p.owner is not None}
    return [
        ds
        for ds in daemonsets
        if (ds.namespace, ds.owner) not in present
        and tolerates_all(ds.tolerations, taints) is None
        and any(option.matches(node.labels) for option in ds.node_requirement_options())
    ]


def claims_by_instance(records: Iterable[NodeClaimRecord]) -> dict[str, NodeClaimRecord]:
    """Claim records by the instance id they launched (records without an instance left out)."""
    return {r.instance_id: r for r in records if r.instance_id}


def scheduling_nodes(
    nodes: Sequence[Node], records: Iterable[NodeClaimRecord], daemonsets: Sequence[Pod] = ()
) -> list[Node]:
    """Each of ``nodes`` through :func:`scheduling_node`, its claim found by its providerID's instance."""
    by_instance: Mapping[str, NodeClaimRecord] = claims_by_instance(records)
    return [scheduling_node(n, by_instance.get(instance_id_of(n.provider_id)), daemonsets) for n in nodes]
