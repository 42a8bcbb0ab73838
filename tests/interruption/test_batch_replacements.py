"""Several nodes interrupted at once: a node that is going is no room for another's pods, and a replacement
keeps the room it was launched for."""

from __future__ import annotations

import threading
from typing import Any

from fleetwright.kube.resources import PODS
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.kube.objects import pod_object
from tests.support.interruption import SPOT_WARNING, Interruptions, claimed_node, for_instance

NODES = {"node-a": "default-aaaa1111", "node-b": "default-bbbb2222"}


def _interrupted_pair(interruptions: Interruptions, cpu: str) -> list[str]:
    """Two spot nodes with one pod each; their instance ids."""
    harness = interruptions.harness
    instances = []
    for node, claim in NODES.items():
        instance = claimed_node(harness, claim, node)
        harness.world.client.create(PODS, pod_object(f"{node}-web", node=node, cpu=cpu))
        instances.append(str(instance["InstanceId"]))
    return instances


def _deliver_before_draining(interruptions: Interruptions, *instances: str) -> dict[str, Any]:
    """Deliver one batch of spot warnings; the workflows (started at once) drain only after the batch is
    handled, so every replacement is computed while the interrupted nodes' pods still run."""
    handled = threading.Event()

    def drain_after_the_batch(step: str, _: dict[str, Any]) -> None:
        if step == "drain":
            handled.wait(timeout=60)

    interruptions.harness.before_step.append(drain_after_the_batch)
    try:
        return interruptions.deliver(*(for_instance(SPOT_WARNING, i) for i in instances))
    finally:
        handled.set()


def _replacements(interruptions: Interruptions) -> list[NodeClaimRecord]:
    claims = interruptions.harness.world.state.nodeclaims.list()
    return [r for r in claims if r.id not in NODES.values() and r.status == ClaimStatus.LAUNCHED]


def test_nodes_interrupted_together_are_no_room_for_each_other(interruptions: Interruptions) -> None:
    # Each node has room for the other's pod; both are going, so their pods need new capacity.
    first, second = _interrupted_pair(interruptions, cpu="500m")

    response = _deliver_before_draining(interruptions, first, second)

    assert response == {"batchItemFailures": []}
    replacements = _replacements(interruptions)
    assert replacements, "the pods were counted onto the other interrupted node"
    assert sum(r.pod_count for r in replacements) >= 1


def test_a_replacement_keeps_the_room_it_was_launched_for(interruptions: Interruptions) -> None:
    # Two pods that cannot share a node: the second replacement must not count the first one's room as
    # free while the first node's pod still runs.
    first, second = _interrupted_pair(interruptions, cpu="1200m")

    response = _deliver_before_draining(interruptions, first, second)

    assert response == {"batchItemFailures": []}
    replacements = _replacements(interruptions)
    assert len(replacements) == 2
    assert sorted(p for r in replacements for p in r.pods) == ["default/node-a-web", "default/node-b-web"]


def test_one_batch_reads_the_cluster_once(interruptions: Interruptions, monkeypatch: Any) -> None:
    from fleetwright.interruption import replacement

    reads: list[int] = []
    real = replacement.read_snapshot

    def counted(kube: Any) -> Any:
        reads.append(1)
        return real(kube)

    monkeypatch.setattr(replacement, "read_snapshot", counted)
    first, second = _interrupted_pair(interruptions, cpu="1200m")

    assert _deliver_before_draining(interruptions, first, second) == {"batchItemFailures": []}
    assert len(reads) == 1  # two replacements, one read of nodes, pods, DaemonSets and PDBs
    assert len(_replacements(interruptions)) == 2
    # The next batch reads the cluster again.
    harness = interruptions.harness
    third = claimed_node(harness, "default-cccc3333", "node-c")
    harness.world.client.create(PODS, pod_object("node-c-web", node="node-c", cpu="1200m"))
    assert _deliver_before_draining(interruptions, str(third["InstanceId"])) == {"batchItemFailures": []}
    assert len(reads) == 2
