"""Registration labels the Node as Karpenter does: what the claim knows (NodePool, EC2NodeClass, capacity
type, the instance type's labels, the claim's labels and taints), ``karpenter.sh/registered`` and the
termination finalizer when it registers, ``karpenter.sh/initialized`` once it is Ready; once, not at every
reconciliation; a Node that vanishes or an API that refuses leaves the claim where it was."""

from __future__ import annotations

from typing import Any

from fleetwright.claims.registration import (
    INITIALIZED_LABEL,
    NODE_SYNC_ERRORS,
    NODECLASS_LABEL,
    REGISTERED_LABEL,
    TERMINATION_FINALIZER,
)
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.resources import NODES
from fleetwright.local.apiserver import ApiServer
from fleetwright.model import labels as wk
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning.provisioner import Provisioner
from fleetwright.state import ClaimStatus
from tests.support.provisioning import World, make_config, nodepool


def _node(world: World, name: str) -> dict[str, Any]:
    found = world.kube.get_node(name)
    assert found is not None
    return found


def test_a_registering_node_gets_the_claims_labels_the_finalizer_and_then_initialized(world: World) -> None:
    startup = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
    world.pending(1)
    provisioner = world.provisioner(make_config(nodepool(startup_taints=[startup])))
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=False)

    assert provisioner.reconcile().registered == [claim.id]

    node = _node(world, "node-a")
    labels = node["metadata"]["labels"]
    family, size = claim.instance_type.split(".")
    assert labels[wk.NODEPOOL] == "default"
    assert labels[NODECLASS_LABEL] == "default"
    assert labels[wk.CAPACITY_TYPE] == claim.capacity_type
    assert labels[wk.INSTANCE_TYPE] == claim.instance_type
    assert labels[wk.ZONE] == claim.zone
    assert labels[wk.INSTANCE_FAMILY] == family and labels[wk.INSTANCE_SIZE] == size
    assert labels[wk.INSTANCE_CPU] and labels[wk.INSTANCE_MEMORY] and labels[wk.INSTANCE_HYPERVISOR]
    for key in (
        wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        wk.INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        wk.INSTANCE_CAPABILITY_FLEX,
        wk.NITRO_SANDBOX,
    ):
        assert labels[key], key
    zone_ids = {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1", "us-east-1c": "use1-az2"}
    zone_ids |= {"us-east-1d": "use1-az4", "us-east-1e": "use1-az3", "us-east-1f": "use1-az5"}
    assert labels[wk.ZONE_ID] == zone_ids[claim.zone]  # the zone's id, as the cloud controller sets it
    assert labels[wk.HOSTNAME] == "node-a"  # the kubelet's, never the claim's
    assert labels[REGISTERED_LABEL] == "true" and INITIALIZED_LABEL not in labels
    assert node["metadata"]["finalizers"] == [TERMINATION_FINALIZER]
    assert {"key": startup["key"], "effect": "NoSchedule"} in node["spec"]["taints"]  # synced, as Karpenter

    world.register_node(claim.provider_id, "node-a", ready=True, taints=[])
    assert provisioner.reconcile().initialized == [claim.id]
    assert _node(world, "node-a")["metadata"]["labels"][INITIALIZED_LABEL] == "true"


def test_labels_are_written_once(world: World) -> None:
    world.pending(1)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=False)
    provisioner.reconcile()
    written = _node(world, "node-a")["metadata"]["resourceVersion"]

    provisioner.reconcile()
    provisioner.reconcile()

    assert _node(world, "node-a")["metadata"]["resourceVersion"] == written


class _DeletedBeforeTheWrite:
    """The API as Fleetwright sees it when the kubelet's Node is deleted between the read and the write:
    the first PATCH of a Node finds it gone."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.deleted: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def patch(self, resource: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if resource == NODES and not self.deleted:
            self.client.delete(NODES, name)
            self.deleted.append(name)
        return self.client.patch(resource, name, *args, **kwargs)


def test_a_node_that_vanishes_meanwhile_is_not_an_error(world: World) -> None:
    world.pending(1)
    [claim] = world.provisioner().run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=True)
    api = _DeletedBeforeTheWrite(world.client)
    provisioner = Provisioner(
        KubeCluster(api),
        world.cloud,
        world.state,
        make_config(),
        wall_clock=world.wall,
        sleep=lambda _s: None,
    )

    report = provisioner.reconcile()

    assert api.deleted == ["node-a"]
    assert report.error == "" and report.registered == []
    record = world.state.nodeclaims.get(claim.id)
    assert record is not None and record.status == ClaimStatus.LAUNCHED
    world.register_node(claim.provider_id, "node-a", ready=True)  # the kubelet registers it again
    assert provisioner.reconcile().registered == [claim.id]


def test_a_refused_write_leaves_the_claim_launched_counts_and_is_tried_again(
    world: World, apiserver: ApiServer
) -> None:
    world.pending(1)
    metrics = RecordingMetrics()
    provisioner = world.provisioner(metrics=metrics)
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=True)
    apiserver.faults.inject(403, verb="PATCH", resource="nodes", times=1)

    report = provisioner.reconcile()

    assert report.registered == []
    assert metrics.total(NODE_SYNC_ERRORS) == 1
    assert REGISTERED_LABEL not in _node(world, "node-a")["metadata"]["labels"]
    again = provisioner.reconcile()
    assert again.registered == [claim.id] and again.initialized == [claim.id]
    assert _node(world, "node-a")["metadata"]["finalizers"] == [TERMINATION_FINALIZER]


def test_a_node_being_deleted_is_no_room_for_pending_pods(world: World) -> None:
    world.register_node("aws:///us-east-1a/i-existing", "existing", ready=True)  # 4 CPUs free
    world.client.patch(NODES, "existing", {"metadata": {"finalizers": [TERMINATION_FINALIZER]}})
    world.client.delete(NODES, "existing")  # kubectl delete node: Terminating, not cordoned yet
    world.pending(3, cpu="1")

    report = world.provisioner().run_once()

    assert report.passes[0].placed_on_existing == 0
    assert len(report.launched) == 1
