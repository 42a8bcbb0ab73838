"""NodeClaim objects mirroring the claims, as ``kubectl get nodeclaims`` shows them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fleetwright.claims.nodeclaim_objects import FINALIZER, SYNC_ERRORS
from fleetwright.kube import reasons
from fleetwright.kube.resources import EVENTS, NODE_CLAIMS, NODE_POOLS
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.state import ClaimStatus
from tests.support.local import Kubectl
from tests.support.provisioning import World

JsonObject = dict[str, Any]


@pytest.fixture
def crds(apiserver: ApiServer) -> None:
    install_karpenter_crds(apiserver.store)


def table(kubectl: Kubectl, *args: str) -> dict[str, dict[str, str]]:
    """``kubectl get nodeclaims`` as {name: {column: value}} (cells cut at the header's column starts:
    an empty cell stays empty)."""
    lines = kubectl("get", "nodeclaims", *args).rstrip().splitlines()
    if not lines:  # "No resources found"
        return {}
    columns = [(m.group(), m.start()) for m in re.finditer(r"\S+", lines[0])]
    ends = [start for _, start in columns[1:]] + [None]
    rows = [
        {name: line[start:end].strip() for (name, start), end in zip(columns, ends, strict=True)}
        for line in lines[1:]
    ]
    return {row["NAME"]: row for row in rows}


def nodeclaim(world: World, name: str) -> JsonObject:
    return dict(world.client.get(NODE_CLAIMS, name))


def condition(obj: JsonObject, kind: str) -> str:
    return next(c["status"] for c in obj["status"]["conditions"] if c["type"] == kind)


@pytest.mark.usefixtures("crds")
def test_a_launched_claim_is_listed_with_its_type_zone_and_readiness(world: World, kubectl: Kubectl) -> None:
    world.pending(2)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched

    row = table(kubectl)[claim.id]
    assert row["TYPE"] == claim.instance_type
    assert row["CAPACITY"] == "on-demand"
    assert row["ZONE"] == claim.zone
    assert row["READY"] == "Unknown" and row["NODE"] == ""

    obj = nodeclaim(world, claim.id)
    assert obj["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    assert obj["metadata"]["finalizers"] == [FINALIZER]
    assert obj["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    requirements = {r["key"]: r for r in obj["spec"]["requirements"]}
    assert requirements["node.kubernetes.io/instance-type"]["values"] == claim.instance_types
    assert obj["spec"]["resources"]["requests"]["cpu"]  # the pods' requests
    assert obj["status"]["providerID"] == claim.provider_id
    assert obj["status"]["imageID"].startswith("ami-")
    assert obj["status"]["allocatable"]["cpu"] and obj["status"]["capacity"]["memory"]
    assert condition(obj, "Launched") == "True" and condition(obj, "Registered") == "Unknown"


@pytest.mark.usefixtures("crds")
def test_the_object_follows_registration_and_initialization(world: World, kubectl: Kubectl) -> None:
    world.pending(1)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=False)
    provisioner.reconcile()
    registered = nodeclaim(world, claim.id)
    assert condition(registered, "Registered") == "True" and condition(registered, "Initialized") == "Unknown"
    assert registered["status"]["nodeName"] == "node-a"

    world.register_node(claim.provider_id, "node-a", ready=True)
    provisioner.reconcile()

    row = table(kubectl, "-o", "wide")[claim.id]
    assert row["READY"] == "True" and row["NODE"] == "node-a"
    assert row["NODEPOOL"] == "default" and row["ID"] == claim.provider_id


@pytest.mark.usefixtures("crds")
def test_the_object_is_owned_by_the_nodepool_object_when_there_is_one(world: World) -> None:
    pool = world.client.create(
        NODE_POOLS,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [],
                    }
                }
            },
        },
    )
    world.pending(1)
    [claim] = world.provisioner().run_once().launched
    [owner] = nodeclaim(world, claim.id)["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("NodePool", "default", pool["metadata"]["uid"])


@pytest.mark.usefixtures("crds")
def test_a_claim_that_ends_loses_its_object(world: World, kubectl: Kubectl) -> None:
    world.pending(1)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    # The node never registers: the claim times out and its instance is terminated.
    world.wall.advance(provisioner.config.registration_timeout_seconds + 1)
    assert provisioner.reconcile().timed_out == [claim.id]
    assert world.state.nodeclaims.get(claim.id).status == ClaimStatus.TERMINATED  # type: ignore[union-attr]
    assert claim.id not in table(kubectl)


def test_objects_appear_once_the_crd_is_installed(
    world: World, apiserver: ApiServer, kubectl: Kubectl
) -> None:
    metrics = RecordingMetrics()
    world.pending(1)
    provisioner = world.provisioner(metrics=metrics)
    provisioner.lifecycle.nodeclaim_objects.check_seconds = 0  # look for the CRD on every pass
    [claim] = provisioner.run_once().launched
    assert metrics.total(SYNC_ERRORS) == 0  # without the CRD: nothing written, nothing wrong

    install_karpenter_crds(apiserver.store)
    provisioner.reconcile()
    assert claim.id in table(kubectl)
    assert metrics.total(SYNC_ERRORS) == 0


@pytest.mark.usefixtures("crds")
def test_an_event_about_a_claim_names_its_object_uid(world: World) -> None:
    world.pending(1)
    [claim] = world.provisioner().run_once().launched
    uid = nodeclaim(world, claim.id)["metadata"]["uid"]
    # What kubectl describe nodeclaim asks for: events naming the object's uid.
    blocked = reasons.disruption_blocked(
        reasons.nodeclaim_ref(claim.id), "pod a/b is annotated do-not-disrupt"
    )
    world.provisioner().events.publish(blocked)
    [event] = world.client.list(EVENTS, field_selector=f"involvedObject.name={claim.id}").items
    assert event["involvedObject"]["uid"] == uid
    assert event["involvedObject"]["apiVersion"] == "karpenter.sh/v1"


@pytest.mark.usefixtures("crds")
def test_a_resource_the_claim_no_longer_has_leaves_its_status(world: World) -> None:
    world.pending(1)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    provisioner.reconcile()
    expected = nodeclaim(world, claim.id)["status"]["capacity"]
    # As written while the claim was launching, from the largest of its candidates (one with a GPU).
    world.client.patch(
        NODE_CLAIMS, claim.id, {"status": {"capacity": {"nvidia.com/gpu": "1"}}}, subresource="status"
    )

    provisioner.reconcile()

    assert nodeclaim(world, claim.id)["status"]["capacity"] == expected
