"""The event recorder against the emulator: what ``kubectl get events`` shows after Fleetwright records."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.kube import KubeClient
from fleetwright.kube import reasons as r
from fleetwright.kube.events import (
    AGGREGATE_PREFIX,
    EVENTS_NOT_RECORDED,
    Event,
    EventCorrelator,
    EventRecorder,
    ObjectRef,
)
from fleetwright.kube.resources import EVENTS, NODE_POOLS, NODES, PODS
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from fleetwright.model.pod import Pod
from fleetwright.observability.metrics import RecordingMetrics
from tests.kube.objects import node_object, pod_object
from tests.support.clock import FakeClock

JsonObject = dict[str, Any]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def recorder(client: KubeClient, clock: FakeClock) -> EventRecorder:
    return EventRecorder(client, correlator=EventCorrelator(clock=clock), metrics=RecordingMetrics())


def events_about(client: KubeClient, name: str) -> list[JsonObject]:
    items = client.list(EVENTS, field_selector=f"involvedObject.name={name}").items
    return sorted(items, key=lambda e: (e["reason"], e["message"]))


def as_pod(obj: JsonObject) -> Pod:
    meta = obj["metadata"]
    return Pod(namespace=meta["namespace"], name=meta["name"], requests={}, uid=meta["uid"])


def test_an_event_names_its_object_and_source(client: KubeClient, recorder: EventRecorder) -> None:
    node = client.create(NODES, node_object("n1"))
    recorder.publish(r.disruption_blocked(r.node_ref("n1", node["metadata"]["uid"]), "pod a/b is busy"))
    [event] = events_about(client, "n1")
    assert event["metadata"]["namespace"] == "default"  # cluster-scoped objects: the default namespace
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
        "uid": node["metadata"]["uid"],
    }
    assert (event["reason"], event["message"], event["type"]) == (
        "DisruptionBlocked",
        "Pod a/b is busy",
        "Normal",
    )
    assert event["source"] == {"component": "fleetwright"}
    assert event["count"] == 1 and event["firstTimestamp"] == event["lastTimestamp"]


def test_identical_events_become_one_with_a_growing_count(
    client: KubeClient, recorder: EventRecorder, clock: FakeClock
) -> None:
    pod = client.create(PODS, pod_object("web"))
    event = Event(ObjectRef.of(pod, kind="Pod"), "TerminationFailed", "cannot terminate", "Warning")
    first_seen = None
    for _ in range(3):
        recorder.publish(event)
        first_seen = first_seen or events_about(client, "web")[0]["firstTimestamp"]
        clock.advance(61)
    [stored] = events_about(client, "web")
    assert stored["count"] == 3
    assert stored["firstTimestamp"] == first_seen
    assert stored["lastTimestamp"] > first_seen


def test_dedupe_holds_an_event_back_for_its_window(
    client: KubeClient, recorder: EventRecorder, clock: FakeClock
) -> None:
    pod = as_pod(client.create(PODS, pod_object("web")))
    recorder.publish(r.failed_scheduling(pod, "no NodePool allows 64 CPUs"))
    clock.advance(200)  # FailedScheduling is deduped for five minutes
    recorder.publish(r.failed_scheduling(pod, "no NodePool allows 64 CPUs"))
    assert [e["count"] for e in events_about(client, "web")] == [1]
    clock.advance(101)
    recorder.publish(r.failed_scheduling(pod, "no NodePool allows 64 CPUs"))
    [stored] = events_about(client, "web")
    assert stored["count"] == 2
    assert stored["message"] == "Failed to schedule pod, no NodePool allows 64 CPUs"


def test_similar_events_are_combined_and_the_spam_filter_holds(
    client: KubeClient, recorder: EventRecorder, clock: FakeClock
) -> None:
    node = client.create(NODES, node_object("noisy"))
    ref = ObjectRef.of(node, kind="Node")
    for i in range(40):
        recorder.publish(Event(ref, "DisruptionBlocked", f"reason number {i}"))
    stored = events_about(client, "noisy")
    # Nine distinct events, then one combined event for the rest that got past the spam filter's burst.
    combined = [e for e in stored if e["message"].startswith(AGGREGATE_PREFIX)]
    assert len(stored) == 10 and len(combined) == 1
    assert combined[0]["count"] == 25 - 9
    # The bucket refills one event every five minutes; the count covers the occurrences filtered meanwhile.
    clock.advance(300)
    recorder.publish(Event(ref, "DisruptionBlocked", "one more"))
    recorder.publish(Event(ref, "DisruptionBlocked", "and another"))
    [after] = [e for e in events_about(client, "noisy") if e["message"].startswith(AGGREGATE_PREFIX)]
    assert after["count"] == 40 - 9 + 1
    assert after["message"] == AGGREGATE_PREFIX + "one more"


def test_the_spam_filter_is_per_object(client: KubeClient, recorder: EventRecorder) -> None:
    for name in ("a", "b"):
        client.create(NODES, node_object(name))
    for i in range(30):
        recorder.publish(Event(r.node_ref("a"), "Unconsolidatable", f"a {i}"))
    recorder.publish(Event(r.node_ref("b"), "Unconsolidatable", "b is fine"))
    assert [e["message"] for e in events_about(client, "b")] == ["b is fine"]


def test_nominations_are_rate_limited_across_pods(client: KubeClient, recorder: EventRecorder) -> None:
    pods = [as_pod(client.create(PODS, pod_object(f"p{i}"))) for i in range(15)]
    recorder.publish(*(r.nominated(p, nodeclaim="default-abc") for p in pods))
    nominated = client.list(EVENTS, field_selector="involvedObject.kind=Pod").items
    assert len(nominated) == 10  # Karpenter's limiter: bursts of 10, then 5 a second
    assert {e["message"] for e in nominated} == {"Pod should schedule on: nodeclaim/default-abc"}


def test_an_event_deleted_on_the_server_is_written_anew(
    client: KubeClient, recorder: EventRecorder, clock: FakeClock
) -> None:
    client.create(NODES, node_object("n1"))
    event = Event(r.node_ref("n1"), "DisruptionBlocked", "budget")
    recorder.publish(event)
    [first] = events_about(client, "n1")
    client.delete(EVENTS, first["metadata"]["name"], "default")  # events expire after an hour
    clock.advance(10)
    recorder.publish(event)
    [again] = events_about(client, "n1")
    assert again["count"] == 1 and again["metadata"]["name"] != first["metadata"]["name"]


def test_a_refused_write_is_counted_and_never_raised(
    apiserver: ApiServer, client: KubeClient, clock: FakeClock
) -> None:
    metrics = RecordingMetrics()
    recorder = EventRecorder(client, correlator=EventCorrelator(clock=clock), metrics=metrics)
    client.create(NODES, node_object("n1"))
    apiserver.faults.inject(403, verb="POST", resource="events", times=1)
    recorder.publish(Event(r.node_ref("n1"), "DisruptionBlocked", "first"))
    # Later events wait out the pause instead of each paying the failure again.
    recorder.publish(Event(r.node_ref("n1"), "DisruptionBlocked", "second"))
    assert metrics.total(EVENTS_NOT_RECORDED, Reason="DisruptionBlocked") == 2
    assert events_about(client, "n1") == []
    clock.advance(31)
    recorder.publish(Event(r.node_ref("n1"), "DisruptionBlocked", "third"))
    assert [e["message"] for e in events_about(client, "n1")] == ["third"]


def test_an_event_about_a_nodepool_names_its_uid_found_by_listing(
    apiserver: ApiServer, client: KubeClient, recorder: EventRecorder
) -> None:
    install_karpenter_crds(apiserver.store)
    pool = client.create(NODE_POOLS, _nodepool("general"))
    gets = apiserver.traffic.by_verb.get("get", 0)

    recorder.publish(r.no_compatible_instance_types(r.nodepool_ref("general"), min_values=False))

    [event] = events_about(client, "general")
    assert event["involvedObject"]["uid"] == pool["metadata"]["uid"]
    # Listed, not read: the functions' roles may list NodePools, not get them.
    assert apiserver.traffic.by_verb.get("get", 0) == gets
    assert event["involvedObject"]["kind"] == "NodePool" and event["reason"] == "NoCompatibleInstanceTypes"


def test_an_object_the_caller_may_not_read_still_gets_its_event(
    apiserver: ApiServer, client: KubeClient, recorder: EventRecorder
) -> None:
    install_karpenter_crds(apiserver.store)
    apiserver.faults.inject(403, verb="GET", resource="nodeclaims", times=100)

    recorder.publish(r.failed_consistency_check(r.nodeclaim_ref("default-abc"), "expected 4 of resource cpu"))

    [event] = events_about(client, "default-abc")
    assert event["reason"] == "FailedConsistencyCheck" and "uid" not in event["involvedObject"]
    assert recorder.metrics is not None
    assert recorder.metrics.total(EVENTS_NOT_RECORDED) == 0  # type: ignore[attr-defined]


def _nodepool(name: str) -> JsonObject:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [],
                }
            }
        },
    }
