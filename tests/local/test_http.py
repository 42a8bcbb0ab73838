"""Raw HTTP: Status objects with the codes a real API server uses, discovery, tables, watch lines."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from fleetwright.local.apiserver import ApiServer
from tests.local.helpers import pod


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    with ApiServer(port=0) as server:
        yield server


def call(
    server: ApiServer,
    method: str,
    path: str,
    body: bytes | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    """(status code, decoded JSON body) of one request."""
    request = urllib.request.Request(
        server.url + path, data=body, method=method, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def assert_status(answer: tuple[int, dict[str, Any]], code: int, reason: str) -> dict[str, Any]:
    status, body = answer
    assert (status, body["kind"], body["status"], body["code"], body["reason"]) == (
        code,
        "Status",
        "Failure",
        code,
        reason,
    )
    return body


def test_malformed_json_is_bad_request(apiserver: ApiServer) -> None:
    assert_status(
        call(apiserver, "POST", "/api/v1/namespaces/default/pods", b'{"metadata": '), 400, "BadRequest"
    )


def test_unknown_resource_and_unknown_object_are_not_found(apiserver: ApiServer) -> None:
    assert_status(call(apiserver, "GET", "/api/v1/namespaces/default/widgets"), 404, "NotFound")
    assert_status(call(apiserver, "GET", "/apis/example.com/v1/things"), 404, "NotFound")
    body = assert_status(call(apiserver, "GET", "/api/v1/namespaces/default/pods/nope"), 404, "NotFound")
    assert body["message"] == 'pods "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "pods"}


def test_wrong_method_is_not_allowed(apiserver: ApiServer) -> None:
    assert_status(call(apiserver, "PUT", "/api/v1/namespaces/default/pods", b"{}"), 405, "MethodNotAllowed")


def test_duplicate_name_already_exists(apiserver: ApiServer) -> None:
    body = json.dumps(pod("twice")).encode()
    assert call(apiserver, "POST", "/api/v1/namespaces/default/pods", body)[0] == 201

    assert_status(call(apiserver, "POST", "/api/v1/namespaces/default/pods", body), 409, "AlreadyExists")


def test_stale_resource_version_in_a_patch_conflicts(apiserver: ApiServer) -> None:
    _, created = call(apiserver, "POST", "/api/v1/namespaces/default/pods", json.dumps(pod("cas")).encode())
    stale = created["metadata"]["resourceVersion"]
    first = {"metadata": {"labels": {"a": "1"}, "resourceVersion": stale}}
    status, _ = call(
        apiserver,
        "PATCH",
        "/api/v1/namespaces/default/pods/cas",
        json.dumps(first).encode(),
        "application/merge-patch+json",
    )
    assert status == 200

    again = {"metadata": {"labels": {"a": "2"}, "resourceVersion": stale}}
    assert_status(
        call(
            apiserver,
            "PATCH",
            "/api/v1/namespaces/default/pods/cas",
            json.dumps(again).encode(),
            "application/merge-patch+json",
        ),
        409,
        "Conflict",
    )


def test_missing_name_is_invalid(apiserver: ApiServer) -> None:
    nameless = pod("x")
    del nameless["metadata"]["name"]

    body = assert_status(
        call(apiserver, "POST", "/api/v1/namespaces/default/pods", json.dumps(nameless).encode()),
        422,
        "Invalid",
    )
    assert "metadata.name" in body["message"]


def test_generate_name_gets_a_suffix(apiserver: ApiServer) -> None:
    generated = pod("x")
    generated["metadata"] = {"generateName": "worker-"}

    status, body = call(apiserver, "POST", "/api/v1/namespaces/default/pods", json.dumps(generated).encode())

    assert status == 201
    assert (
        body["metadata"]["name"].startswith("worker-") and len(body["metadata"]["name"]) == len("worker-") + 5
    )


def test_unknown_field_selector_is_bad_request(apiserver: ApiServer) -> None:
    assert_status(call(apiserver, "GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx"), 400, "BadRequest")


def test_eviction_of_a_missing_pod_is_not_found(apiserver: ApiServer) -> None:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "ghost"}}
    assert_status(
        call(
            apiserver, "POST", "/api/v1/namespaces/default/pods/ghost/eviction", json.dumps(eviction).encode()
        ),
        404,
        "NotFound",
    )


def test_discovery_documents(apiserver: ApiServer) -> None:
    _, core = call(apiserver, "GET", "/api/v1")
    names = {r["name"] for r in core["resources"]}
    assert {
        "pods",
        "pods/eviction",
        "pods/binding",
        "pods/status",
        "nodes",
        "nodes/status",
        "events",
        "namespaces",
        "persistentvolumes",
        "persistentvolumeclaims",
    } <= names
    _, groups = call(apiserver, "GET", "/apis")
    assert {g["name"] for g in groups["groups"]} == {
        "apps",
        "policy",
        "storage.k8s.io",
        "apiextensions.k8s.io",
    }
    _, apps = call(apiserver, "GET", "/apis/apps/v1")
    assert {"deployments", "deployments/scale", "replicasets", "daemonsets", "statefulsets"} <= {
        r["name"] for r in apps["resources"]
    }
    _, version = call(apiserver, "GET", "/version")
    assert version["major"] == "1"


def test_table_for_kubectl_get(apiserver: ApiServer) -> None:
    call(apiserver, "POST", "/api/v1/namespaces/default/pods", json.dumps(pod("tabled")).encode())
    request = urllib.request.Request(
        apiserver.url + "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dtabled",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
    )
    with urllib.request.urlopen(request) as response:
        table = json.loads(response.read())

    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert table["rows"][0]["cells"][:4] == ["tabled", "0/1", "Pending", 0]
    assert table["rows"][0]["object"]["metadata"]["name"] == "tabled"


def test_watch_lines_end_with_a_bookmark(apiserver: ApiServer) -> None:
    _, listed = call(apiserver, "GET", "/api/v1/namespaces/default/pods")
    call(apiserver, "POST", "/api/v1/namespaces/default/pods", json.dumps(pod("streamed")).encode())
    url = (
        f"{apiserver.url}/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1"
        f"&allowWatchBookmarks=true&resourceVersion={listed['metadata']['resourceVersion']}"
    )

    with urllib.request.urlopen(url) as response:
        assert response.headers["Transfer-Encoding"] == "chunked"
        events = [json.loads(line) for line in response.read().splitlines()]

    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "streamed"),
        ("BOOKMARK", None),
    ]
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) >= int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )


# -- injected faults -----------------------------------------------------------------------------------


class Ticking:
    """A clock the outage tests move by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_resets_connections_until_its_clock_has_moved_on(apiserver: ApiServer) -> None:
    clock = Ticking()
    apiserver.faults.outage(60, clock=clock)
    try:
        for _ in range(2):
            with pytest.raises((ConnectionError, urllib.error.URLError)):
                call(apiserver, "GET", "/api/v1/nodes")
        clock.now = 59.0
        with pytest.raises((ConnectionError, urllib.error.URLError)):
            call(apiserver, "GET", "/healthz")
        clock.now = 60.0
        assert call(apiserver, "GET", "/api/v1/nodes")[0] == 200
        assert apiserver.faults.reset_connections == 3
    finally:
        apiserver.faults.clear()


def test_injected_conflicts_answer_the_chosen_verb_and_resource_n_times(apiserver: ApiServer) -> None:
    body = json.dumps({"metadata": {"name": "n-faults"}}).encode()
    assert call(apiserver, "POST", "/api/v1/nodes", body)[0] == 201
    patch = json.dumps({"spec": {"unschedulable": True}}).encode()
    injection = apiserver.faults.inject(409, verb="PATCH", resource="nodes", times=2)
    try:
        for _ in range(2):
            assert_status(
                call(apiserver, "PATCH", "/api/v1/nodes/n-faults", patch, "application/merge-patch+json"),
                409,
                "Conflict",
            )
        # Other verbs pass; the injected answers changed nothing.
        status, node = call(apiserver, "GET", "/api/v1/nodes/n-faults")
        assert status == 200 and not node.get("spec", {}).get("unschedulable")
        status, node = call(
            apiserver, "PATCH", "/api/v1/nodes/n-faults", patch, "application/merge-patch+json"
        )
        assert status == 200 and node["spec"]["unschedulable"] is True
        assert injection.hits == 2
    finally:
        apiserver.faults.clear()
        call(apiserver, "DELETE", "/api/v1/nodes/n-faults")


def test_injected_throttling_on_eviction_carries_retry_after_and_evicts_nothing(
    apiserver: ApiServer,
) -> None:
    assert (
        call(apiserver, "POST", "/api/v1/namespaces/default/pods", json.dumps(pod("p-faults")).encode())[0]
        == 201
    )
    apiserver.faults.inject(429, verb="POST", resource="pods", subresource="eviction", retry_after=3)
    eviction = json.dumps(
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p-faults"}}
    ).encode()
    path = "/api/v1/namespaces/default/pods/p-faults/eviction"
    request = urllib.request.Request(
        apiserver.url + path, data=eviction, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request)
        assert refused.value.code == 429 and refused.value.headers["Retry-After"] == "3"
        assert call(apiserver, "GET", "/api/v1/namespaces/default/pods/p-faults")[0] == 200
        assert call(apiserver, "POST", path, eviction)[0] == 201
    finally:
        apiserver.faults.clear()
