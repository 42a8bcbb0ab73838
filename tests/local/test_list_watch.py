"""LIST paging at one resourceVersion, the spec.nodeName index, bulk seeding, watch bookmarks and the
traffic counters, through the official client and plain HTTP as a user would see them."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.resources import NAMESPACES, PODS
from fleetwright.local.apiserver.store import Store
from tests.local.helpers import pod


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    # Two snapshots at most, so a third paged LIST expires the first one's tokens.
    store = Store(list_snapshots=2)
    with ApiServer(port=0, store=store, bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def core(apiserver: ApiServer) -> Iterator[client.CoreV1Api]:
    with client.ApiClient(client.Configuration(host=apiserver.url)) as api:
        yield client.CoreV1Api(api)


def _seed_pods(server: ApiServer, count: int, namespace: str = "pages", nodes: int = 3) -> None:
    server.store.create(NAMESPACES, {"metadata": {"name": namespace}})
    server.seed(
        PODS, [pod(f"p{i:03d}", namespace, {"n": str(i % 2)}, f"node-{i % nodes}") for i in range(count)]
    )


def _names(pods: Any) -> list[str]:
    return [p.metadata.name for p in pods.items]


def test_pages_read_the_state_of_the_first_page(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    _seed_pods(apiserver, 6)
    first = core.list_namespaced_pod("pages", limit=3)
    core.delete_namespaced_pod("p004", "pages", grace_period_seconds=0)
    core.create_namespaced_pod("pages", pod("p999", "pages"))
    second = core.list_namespaced_pod("pages", limit=3, _continue=first.metadata._continue)

    assert _names(first) + _names(second) == [f"p{i:03d}" for i in range(6)]
    assert second.metadata.resource_version == first.metadata.resource_version
    assert first.metadata.remaining_item_count == 3
    assert second.metadata._continue is None
    assert "p999" in _names(core.list_namespaced_pod("pages"))
    assert "p004" not in _names(core.list_namespaced_pod("pages"))


def test_selector_pages_carry_no_remaining_count(core: client.CoreV1Api, apiserver: ApiServer) -> None:
    _seed_pods(apiserver, 8)
    pages, token = [], None
    while True:
        page = core.list_namespaced_pod("pages", label_selector="n=1", limit=2, _continue=token)
        assert page.metadata.remaining_item_count is None
        pages.append(_names(page))
        token = page.metadata._continue
        if not token:
            break

    assert [name for page in pages for name in page] == ["p001", "p003", "p005", "p007"]


def test_expired_continue_token_is_gone_with_a_token_for_the_rest(
    apiserver: ApiServer, core: client.CoreV1Api
) -> None:
    _seed_pods(apiserver, 6)
    first = core.list_namespaced_pod("pages", limit=2)
    for name in ("x1", "x2"):  # two more paged LISTs at newer resourceVersions push its snapshot out
        core.create_namespaced_pod("pages", pod(name, "pages"))
        core.list_namespaced_pod("pages", limit=2)

    with pytest.raises(ApiException) as gone:
        core.list_namespaced_pod("pages", limit=2, _continue=first.metadata._continue)
    status = json.loads(gone.value.body)
    rest = core.list_namespaced_pod("pages", _continue=status["metadata"]["continue"])

    assert (gone.value.status, status["reason"]) == (410, "Expired")
    assert _names(rest) == ["p002", "p003", "p004", "p005", "x1", "x2"]


def test_continue_after_compaction_is_gone(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    _seed_pods(apiserver, 4)
    first = core.list_namespaced_pod("pages", limit=2)
    core.create_namespaced_pod("pages", pod("later", "pages"))
    apiserver.store.compact()

    with pytest.raises(ApiException) as gone:
        core.list_namespaced_pod("pages", limit=2, _continue=first.metadata._continue)
    assert gone.value.status == 410


def test_node_name_selector_follows_binding_and_deletion(
    apiserver: ApiServer, core: client.CoreV1Api
) -> None:
    _seed_pods(apiserver, 9)
    core.create_namespaced_pod("pages", pod("loose", "pages"))
    binding = {"metadata": {"name": "loose"}, "target": {"name": "node-1"}}
    core.create_namespaced_binding("pages", binding, _preload_content=False)  # the client cannot read Status
    core.delete_namespaced_pod("p004", "pages", grace_period_seconds=0)

    on_node = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-1")
    off_node = core.list_pod_for_all_namespaces(field_selector="spec.nodeName!=node-1")

    assert _names(on_node) == ["loose", "p001", "p007"]
    assert "loose" not in _names(off_node) and len(off_node.items) == 6
    assert _names(core.list_namespaced_pod("pages", field_selector="spec.nodeName=node-9")) == []


def test_seeded_objects_look_created(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    _seed_pods(apiserver, 3)
    core.create_namespaced_pod("pages", pod("p001a", "pages"))

    listed = core.list_namespaced_pod("pages")
    assert _names(listed) == ["p000", "p001", "p001a", "p002"]
    assert all(p.metadata.uid and p.metadata.resource_version for p in listed.items)
    assert [p.status.phase for p in listed.items] == ["Pending"] * 4
    with pytest.raises(ApiException) as duplicate:
        core.create_namespaced_pod("pages", pod("p002", "pages"))
    assert duplicate.value.status == 409


def test_list_after_a_change_shows_the_new_version(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    _seed_pods(apiserver, 2)
    core.list_namespaced_pod("pages")
    core.patch_namespaced_pod("p001", "pages", {"metadata": {"labels": {"n": "changed"}}})

    labels = {p.metadata.name: p.metadata.labels["n"] for p in core.list_namespaced_pod("pages").items}
    assert labels == {"p000": "0", "p001": "changed"}


def _watch_lines(server: ApiServer, query: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{server.url}/api/v1/namespaces/pages/pods?watch=true&{query}") as answer:
        return [json.loads(line) for line in answer.read().splitlines()]


def test_initial_events_end_with_an_annotated_bookmark(apiserver: ApiServer) -> None:
    _seed_pods(apiserver, 3)
    events = _watch_lines(
        apiserver,
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    )

    assert [e["type"] for e in events[:4]] == ["ADDED", "ADDED", "ADDED", "BOOKMARK"]
    assert events[3]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(events[3]["object"]["metadata"]["resourceVersion"]) >= max(
        int(e["object"]["metadata"]["resourceVersion"]) for e in events[:3]
    )


def test_send_initial_events_needs_bookmarks(apiserver: ApiServer) -> None:
    _seed_pods(apiserver, 1)
    with pytest.raises(urllib.error.HTTPError) as refused:
        _watch_lines(apiserver, "sendInitialEvents=true&timeoutSeconds=1")
    assert refused.value.code == 422


def test_idle_watch_gets_periodic_bookmarks_it_can_resume_from(
    apiserver: ApiServer, core: client.CoreV1Api
) -> None:
    _seed_pods(apiserver, 2)
    rv = core.list_namespaced_pod("pages").metadata.resource_version
    core.create_namespaced_pod("pages", pod("during", "pages"))

    events = _watch_lines(apiserver, f"resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1")
    bookmarks = [int(e["object"]["metadata"]["resourceVersion"]) for e in events if e["type"] == "BOOKMARK"]

    assert (events[0]["type"], events[0]["object"]["metadata"]["name"]) == ("ADDED", "during")
    assert len(bookmarks) >= 3  # every 0.2 s over one second, and one at the end
    core.create_namespaced_pod("pages", pod("after", "pages"))
    resumed = _watch_lines(apiserver, f"resourceVersion={bookmarks[0]}&timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in resumed] == [("ADDED", "after")]


def test_many_watchers_each_get_every_event_in_order(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    _seed_pods(apiserver, 300)
    rv = core.list_namespaced_pod("pages", limit=1).metadata.resource_version
    for i in range(300):
        core.patch_namespaced_pod(f"p{i:03d}", "pages", {"metadata": {"labels": {"v": "2"}}})

    streams = [_watch_lines(apiserver, f"resourceVersion={rv}&timeoutSeconds=1") for _ in range(3)]

    for events in streams:
        assert [e["object"]["metadata"]["name"] for e in events] == [f"p{i:03d}" for i in range(300)]
        assert {e["object"]["metadata"]["labels"]["v"] for e in events} == {"2"}


def test_traffic_counts_requests_and_bytes(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    _seed_pods(apiserver, 5)
    before = apiserver.traffic.snapshot()
    listed = core.api_client.call_api(
        "/api/v1/namespaces/pages/pods", "GET", _preload_content=False, _return_http_data_only=True
    ).data
    core.read_namespaced_pod("p000", "pages")
    after = apiserver.traffic.snapshot()

    assert after.requests - before.requests == 2
    assert after.by_verb.get("list", 0) - before.by_verb.get("list", 0) == 1
    assert after.bytes_out - before.bytes_out > len(listed)
