"""What a pending pod's events say after a provisioning pass, read with kubectl as a user would."""

from __future__ import annotations

import json
from typing import Any

from fleetwright.claims.consistency import shape_issues
from fleetwright.kube.events import EVENTS_NOT_RECORDED, EventCorrelator, EventRecorder
from fleetwright.kube.resources import NODES
from fleetwright.local.apiserver import ApiServer
from fleetwright.model.labels import INSTANCE_FAMILY
from fleetwright.model.requirements import requirements_from_expressions
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning.compatible import incompatible_pools
from fleetwright.scheduling.types import NodePoolTemplate
from tests.scheduling.builders import itype
from tests.support.local import Kubectl
from tests.support.provisioning import World, make_config, nodepool

JsonObject = dict[str, Any]


def pod_events(kubectl: Kubectl, pod: str) -> list[JsonObject]:
    """``kubectl get events --field-selector involvedObject.name=POD -o json``."""
    out = kubectl(
        "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={pod}", "-o", "json"
    )
    items: list[JsonObject] = json.loads(out)["items"]
    return items


def test_pending_pods_are_nominated_to_the_nodeclaim_launched_for_them(
    world: World, kubectl: Kubectl
) -> None:
    world.pending(2)
    [claim] = world.provisioner().run_once().launched
    for pod in ("app-0", "app-1"):
        [event] = pod_events(kubectl, pod)
        assert (event["type"], event["reason"]) == ("Normal", "Nominated")
        assert event["message"] == f"Pod should schedule on: nodeclaim/{claim.id}"
        assert event["involvedObject"]["kind"] == "Pod"


def test_a_pod_for_a_registered_node_is_nominated_to_node_and_claim(world: World, kubectl: Kubectl) -> None:
    world.pending(1, prefix="first")
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=True)
    provisioner.reconcile()
    world.pending(1, cpu="100m", prefix="second")
    provisioner.run_once()
    [event] = pod_events(kubectl, "second-0")
    assert event["message"] == f"Pod should schedule on: nodeclaim/{claim.id}, node/node-a"


def test_a_pod_no_nodepool_can_run_gets_failed_scheduling_with_the_reason(
    world: World, kubectl: Kubectl
) -> None:
    world.pending(1, cpu="64")  # larger than every allowed instance type
    report = world.provisioner().run_once()
    assert report.launched == []
    [event] = pod_events(kubectl, "app-0")
    assert (event["type"], event["reason"]) == ("Warning", "FailedScheduling")
    assert event["message"].startswith("Failed to schedule pod, ")
    assert "cpu" in event["message"]  # the scheduler's precise reason, not a generic one


def test_a_pod_that_stays_unschedulable_gets_one_event_with_a_count(world: World, kubectl: Kubectl) -> None:
    events = EventRecorder(world.client, correlator=EventCorrelator(clock=world.wall))
    provisioner = world.provisioner(events=events)
    world.pending(1, cpu="64")
    for _ in range(3):
        provisioner.run_once()
        world.wall.advance(301)  # past FailedScheduling's five-minute dedupe
    [event] = pod_events(kubectl, "app-0")
    assert event["reason"] == "FailedScheduling" and event["count"] == 3


def test_an_events_api_failure_does_not_stop_provisioning(world: World, apiserver: ApiServer) -> None:
    apiserver.faults.inject(500, verb="POST", resource="events", times=1000)
    metrics = RecordingMetrics()
    world.pending(3)
    report = world.provisioner(metrics=metrics).run_once()
    [claim] = report.launched
    assert claim.pod_count == 3 and len(world.instances()) == 1
    assert report.passes[0].error == ""
    assert metrics.total(EVENTS_NOT_RECORDED, Reason="Nominated") == 3


def test_kubectl_describe_pod_shows_why_no_nodepool_fits_and_where_a_pod_goes(
    world: World, kubectl: Kubectl
) -> None:
    world.pending(1, cpu="64", prefix="huge")
    world.pending(1, prefix="small")
    [claim] = world.provisioner().run_once().launched
    huge = kubectl("describe", "pod", "-n", "default", "huge-0")
    events = huge.split("Events:", 1)[1]
    assert "FailedScheduling" in events and "Failed to schedule pod" in events
    small = kubectl("describe", "pod", "-n", "default", "small-0").split("Events:", 1)[1]
    assert "Nominated" in small and f"nodeclaim/{claim.id}" in small


def test_kubectl_get_events_lists_them_as_the_api_server_prints_them(world: World, kubectl: Kubectl) -> None:
    world.pending(1)
    [claim] = world.provisioner().run_once().launched
    lines = kubectl("get", "events", "-n", "default").splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    row = next(line for line in lines[1:] if "pod/app-0" in line)
    assert row.split()[1:4] == ["Normal", "Nominated", "pod/app-0"]
    assert row.endswith(f"Pod should schedule on: nodeclaim/{claim.id}")


def test_a_nodepool_no_instance_type_fits_says_so_on_the_nodepool(world: World, kubectl: Kubectl) -> None:
    impossible = nodepool("gpu", instance_types=["p9.nonexistent"])
    world.pending(1)
    world.provisioner(make_config(nodepool(), impossible)).run_once()
    out = kubectl(
        "get", "events", "-n", "default", "--field-selector", "involvedObject.kind=NodePool", "-o", "json"
    )
    events = [
        (e["involvedObject"]["name"], e["type"], e["reason"], e["message"]) for e in json.loads(out)["items"]
    ]
    assert events == [
        (
            "gpu",
            "Warning",
            "NoCompatibleInstanceTypes",
            "NodePool requirements filtered out all compatible available instance types",
        )
    ]


def test_a_nodepool_whose_min_values_cannot_hold_says_so() -> None:
    catalog = [itype("m5.large", "2", "8Gi"), itype("m5.xlarge", "4", "16Gi")]
    wanted = requirements_from_expressions([{"key": INSTANCE_FAMILY, "operator": "Exists", "minValues": 2}])
    assert incompatible_pools([NodePoolTemplate("few", wanted)], catalog, {}) == [("few", True)]
    assert incompatible_pools([NodePoolTemplate("any")], catalog, {}) == []
    assert incompatible_pools([NodePoolTemplate("any", node_class="c")], catalog, {"c": set()}) == [
        ("any", False)
    ]


def test_a_node_smaller_than_its_instance_type_fails_the_consistency_check(
    world: World, kubectl: Kubectl
) -> None:
    world.pending(1)
    provisioner = world.provisioner()
    [claim] = provisioner.run_once().launched
    world.register_node(claim.provider_id, "node-a", ready=True)
    world.client.patch(
        NODES, "node-a", {"status": {"capacity": {"cpu": "1", "memory": "64Gi"}}}, subresource="status"
    )

    report = provisioner.reconcile()

    assert claim.id in report.initialized  # reported, not held back
    out = kubectl(
        "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={claim.id}", "-o", "json"
    )
    [event] = [e for e in json.loads(out)["items"] if e["reason"] == "FailedConsistencyCheck"]
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "NodeClaim"
    assert event["message"].startswith("expected ") and "of resource cpu, but found 1 (" in event["message"]


def test_the_shape_check_judges_cpu_and_memory_against_ninety_percent() -> None:
    expected = {"cpu": 4000, "memory": 16 * 2**30}
    node = {"status": {"capacity": {"cpu": "3600m", "memory": "8Gi"}}}
    assert shape_issues(node, expected) == [
        "expected 16Gi of resource memory, but found 8Gi (50.0% of expected)"
    ]
    assert shape_issues({"status": {"capacity": {"cpu": "3"}}}, expected) == [
        "expected 4 of resource cpu, but found 3 (75.0% of expected)"
    ]
    assert shape_issues({"status": {}}, expected) == []  # nothing reported, nothing judged


def test_a_claim_no_offering_has_capacity_for_says_so_on_its_nodeclaim(
    world: World, kubectl: Kubectl
) -> None:
    config = make_config(nodepool(instance_types=["m5.large"]))
    world.aws.fleet.exhausted = {("m5.large", zone) for zone in ("us-east-1a", "us-east-1b", "us-east-1c")}
    world.pending(1, cpu="1")
    [(claim_id, _)] = world.provisioner(config).run_once().passes[0].failed.items()
    out = kubectl(
        "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={claim_id}", "-o", "json"
    )
    [event] = json.loads(out)["items"]
    assert (event["type"], event["reason"], event["involvedObject"]["kind"]) == (
        "Warning",
        "InsufficientCapacityError",
        "NodeClaim",
    )
    assert event["message"].startswith(f"NodeClaim {claim_id} event: ")
