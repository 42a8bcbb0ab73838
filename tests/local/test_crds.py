"""CustomResourceDefinitions in the emulator: installed with kubectl, their objects served to kubectl and
to the official Python client like a real API server serves them."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from fleetwright.local.apiserver import ApiServer, Store
from fleetwright.local.apiserver.resources import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, ResourceType
from tests.support.local import TOKEN, Kubectl
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time

GROUP = "example.com"
WIDGETS = ResourceType(GROUP, "v1", "widgets", "Widget", False, subresources=("status",), custom=True)


def widget_crd(plural: str = "widgets", kind: str = "Widget", scope: str = "Cluster") -> dict[str, Any]:
    """A CRD with a status subresource, printer columns, a short name, a category and a schema with a
    required field, a minimum, an enum and a default; ``v1`` stored, ``v1beta1`` also served."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1},
                    "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "conditions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"type": {"type": "string"}, "status": {"type": "string"}},
                        },
                    }
                },
            },
        },
    }
    columns = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
    ]
    version = {"served": True, "schema": {"openAPIV3Schema": schema}, "subresources": {"status": {}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "shortNames": [plural[:2]],
                "categories": ["gadgets"],
            },
            "versions": [
                {**version, "name": "v1", "storage": True, "additionalPrinterColumns": columns},
                {**version, "name": "v1beta1", "storage": False},
            ],
        },
    }


def widget(name: str, size: int = 3, kind: str = "Widget", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"size": size, **spec},
    }


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    """No token: kubectl sends none over plain HTTP. The Python client below sends one, so it gets its
    own server."""
    with ApiServer(port=0) as server:
        yield server


@pytest.fixture(scope="module")
def token_server() -> Iterator[ApiServer]:
    with ApiServer(port=0, token=TOKEN) as server:
        yield server


@pytest.fixture(scope="module")
def api(token_server: ApiServer) -> Iterator[client.ApiClient]:
    config = client.Configuration(
        host=token_server.url, api_key={"authorization": TOKEN}, api_key_prefix={"authorization": "Bearer"}
    )
    with client.ApiClient(config) as api_client:
        extensions = client.ApiextensionsV1Api(api_client)
        extensions.create_custom_resource_definition(widget_crd())
        extensions.create_custom_resource_definition(widget_crd("gizmos", "Gizmo", "Namespaced"))
        yield api_client


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def write(tmp_path: Path, *docs: dict[str, Any]) -> str:
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def error_message(error: ApiException) -> str:
    return str(json.loads(error.body)["message"])


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()[1:]]


# -- kubectl -------------------------------------------------------------------------------------------


def test_kubectl_installs_a_crd_and_serves_its_objects(
    apiserver: ApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("apply", "-f", write(tmp_path, widget_crd()))

    established = kubectl(
        "get",
        "crd",
        f"widgets.{GROUP}",
        "-o",
        'jsonpath={.status.conditions[?(@.type=="Established")].status}',
    )
    assert established == "True"
    resources = rows(kubectl("api-resources", f"--api-group={GROUP}"))
    assert ["widgets", "wi", f"{GROUP}/v1", "false", "Widget"] in resources

    kubectl("apply", "-f", write(tmp_path, widget("small", 2), widget("large", 9, color="blue")))

    table = kubectl("get", "widgets")
    assert table.splitlines()[0].split() == ["NAME", "SIZE", "READY", "AGE"]
    assert {r[0]: r[1] for r in rows(table)} == {"large": "9", "small": "2"}
    apiserver.store.mutate(
        WIDGETS,
        None,
        "large",
        lambda o: {**o, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        "status",
    )
    assert {r[0]: r[2] for r in rows(kubectl("get", "widgets"))}["large"] == "True"
    wide = {r[0]: r for r in rows(kubectl("get", "wi", "-o", "wide"))}
    assert wide["large"][-1] == "blue"
    assert wide["small"][-1] == "red"  # the schema's default
    assert {r[0] for r in rows(kubectl("get", "gadgets"))} == {"large", "small"}


def test_kubectl_sees_validation_errors_and_edits(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("apply", "-f", write(tmp_path, widget_crd()))
    kubectl("apply", "-f", write(tmp_path, widget("edited", 4)))

    refused = kubectl.run(
        "patch", "widget", "edited", "--type=merge", "-p", '{"spec":{"size":0}}', check=False
    )
    assert refused.returncode != 0
    assert "spec.size in body should be greater than or equal to 1" in refused.stderr

    kubectl("patch", "widget", "edited", "--type=merge", "-p", '{"spec":{"size":7}}')
    assert rows(kubectl("get", "widget", "edited"))[0][1] == "7"


def test_kubectl_deleting_the_crd_deletes_its_objects(
    apiserver: ApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("apply", "-f", write(tmp_path, widget_crd("doomeds", "Doomed")))
    kubectl("apply", "-f", write(tmp_path, widget("gone", kind="Doomed") | {"apiVersion": f"{GROUP}/v1"}))

    kubectl("delete", "crd", f"doomeds.{GROUP}")

    missing = kubectl.run("get", "doomeds", check=False)
    assert missing.returncode != 0
    assert f"doomeds.{GROUP}" not in kubectl("get", "crd")


# -- the official Python client --------------------------------------------------------------------


def test_crd_reports_accepted_names_and_established(api: client.ApiClient) -> None:
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(f"widgets.{GROUP}")

    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd.status.accepted_names.list_kind == "WidgetList"
    assert crd.status.stored_versions == ["v1"]


def test_create_prunes_unknown_fields_applies_defaults_and_ignores_status(
    custom: client.CustomObjectsApi,
) -> None:
    body = widget("pruned", 2, junk=True) | {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    created = custom.create_cluster_custom_object(GROUP, "v1", "widgets", body)

    assert created["spec"] == {"size": 2, "color": "red"}
    assert "status" not in created
    assert created["metadata"]["generation"] == 1


def test_invalid_objects_are_refused_with_every_field_error(custom: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as refused:
        custom.create_cluster_custom_object(GROUP, "v1", "widgets", widget("bad", 0, color="green"))

    assert refused.value.status == 422
    assert "spec.size in body should be greater than or equal to 1" in error_message(refused.value)
    assert 'spec.color: Unsupported value: "green"' in error_message(refused.value)
    with pytest.raises(ApiException) as untyped:
        custom.create_cluster_custom_object(GROUP, "v1", "widgets", widget("typed", "three"))  # type: ignore[arg-type]
    assert "spec.size in body must be of type integer" in error_message(untyped.value)
    with pytest.raises(ApiException) as unnamed:
        custom.create_cluster_custom_object(GROUP, "v1", "widgets", widget("Not_A_Name"))
    assert "metadata.name" in error_message(unnamed.value)


def test_status_subresource_splits_spec_and_status(custom: client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(GROUP, "v1", "widgets", widget("split", 3))

    # The main resource ignores status ...
    main = custom.patch_cluster_custom_object(
        GROUP, "v1", "widgets", "split", {"spec": {"size": 4}, "status": {"conditions": [{"type": "Ready"}]}}
    )
    assert main["spec"]["size"] == 4 and "status" not in main
    # ... and /status changes only status.
    status = custom.patch_cluster_custom_object_status(
        GROUP,
        "v1",
        "widgets",
        "split",
        {"spec": {"size": 99}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
    )
    assert status["spec"]["size"] == 4
    assert status["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert status["metadata"]["generation"] == main["metadata"]["generation"] == 2
    read = custom.get_cluster_custom_object_status(GROUP, "v1", "widgets", "split")
    assert read["status"]["conditions"][0]["status"] == "True"


def test_served_versions_share_the_stored_objects(custom: client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(GROUP, "v1", "widgets", widget("versioned", 5))

    old = custom.get_cluster_custom_object(GROUP, "v1beta1", "widgets", "versioned")

    assert old["apiVersion"] == f"{GROUP}/v1beta1"
    assert old["spec"]["size"] == 5
    group = client.ApisApi(custom.api_client).get_api_versions()
    preferred = {g.name: g.preferred_version.version for g in group.groups}
    assert preferred[GROUP] == "v1"


def test_namespaced_custom_resources(custom: client.CustomObjectsApi, api: client.ApiClient) -> None:
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "shop"}})
    body = widget("ns-gizmo", kind="Gizmo")
    custom.create_namespaced_custom_object(GROUP, "v1", "shop", "gizmos", body)

    listed = custom.list_cluster_custom_object(GROUP, "v1", "gizmos")["items"]
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed] == [("shop", "ns-gizmo")]
    assert custom.list_namespaced_custom_object(GROUP, "v1", "default", "gizmos")["items"] == []
    with pytest.raises(ApiException) as wrong_scope:
        custom.get_cluster_custom_object(GROUP, "v1", "widgets", "ns-gizmo")
    assert wrong_scope.value.status == 404


def test_watch_sees_custom_objects_change(custom: client.CustomObjectsApi) -> None:
    since = custom.list_cluster_custom_object(GROUP, "v1", "widgets")["metadata"]["resourceVersion"]
    seen: list[tuple[str, int]] = []

    def follow() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            custom.list_cluster_custom_object,
            GROUP,
            "v1",
            "widgets",
            resource_version=since,
            timeout_seconds=5,
            field_selector="metadata.name=watched",
        ):
            seen.append((event["type"], event["object"]["spec"]["size"]))
            if event["type"] == "DELETED":
                stream.stop()

    custom.create_cluster_custom_object(GROUP, "v1", "widgets", widget("watched", 1))
    custom.patch_cluster_custom_object(GROUP, "v1", "widgets", "watched", {"spec": {"size": 2}})
    custom.delete_cluster_custom_object(GROUP, "v1", "widgets", "watched")
    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    thread.join(timeout=10)

    assert seen == [("ADDED", 1), ("MODIFIED", 2), ("DELETED", 2)]


def test_deleting_a_crd_waits_for_finalized_objects(
    api: client.ApiClient, custom: client.CustomObjectsApi
) -> None:
    extensions = client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(widget_crd("holds", "Hold"))
    held = widget("held", kind="Hold") | {"metadata": {"name": "held", "finalizers": ["example.com/keep"]}}
    custom.create_cluster_custom_object(GROUP, "v1", "holds", held)
    custom.create_cluster_custom_object(GROUP, "v1", "holds", widget("free", kind="Hold"))

    extensions.delete_custom_resource_definition(f"holds.{GROUP}")

    terminating = extensions.read_custom_resource_definition(f"holds.{GROUP}")
    assert terminating.metadata.deletion_timestamp is not None
    assert {c.type for c in terminating.status.conditions} >= {"Terminating"}
    left = custom.list_cluster_custom_object(GROUP, "v1", "holds")["items"]
    assert [o["metadata"]["name"] for o in left] == ["held"]
    assert left[0]["metadata"]["deletionTimestamp"]

    custom.patch_cluster_custom_object(GROUP, "v1", "holds", "held", {"metadata": {"finalizers": None}})

    with pytest.raises(ApiException) as gone:
        extensions.read_custom_resource_definition(f"holds.{GROUP}")
    assert gone.value.status == 404
    with pytest.raises(ApiException) as unserved:
        custom.list_cluster_custom_object(GROUP, "v1", "holds")
    assert unserved.value.status == 404


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda c: c["metadata"].update(name="wrong.example.com"),
            'must be spec.names.plural+"."+spec.group',
        ),
        (lambda c: c["spec"].update(group="nodots"), "should be a domain with at least one dot"),
        (lambda c: c["spec"]["versions"][1].update(storage=True), "exactly one version marked as storage"),
        (lambda c: c["spec"].update(scope="Galaxy"), 'spec.scope: Unsupported value: "Galaxy"'),
        (lambda c: c["spec"]["versions"][0].pop("schema"), "schemas are required"),
        (
            lambda c: c["spec"]["versions"][0]["additionalPrinterColumns"][0].update(type="color"),
            'type: Unsupported value: "color"',
        ),
    ],
)
def test_invalid_crds_are_refused(api: client.ApiClient, change: Any, message: str) -> None:
    crd = widget_crd("rejects", "Reject")
    change(crd)

    with pytest.raises(ApiException) as refused:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)

    assert refused.value.status == 422
    assert message in error_message(refused.value)


def test_scope_cannot_change(api: client.ApiClient) -> None:
    extensions = client.ApiextensionsV1Api(api)
    crd = extensions.read_custom_resource_definition(f"widgets.{GROUP}")
    crd.spec.scope = "Namespaced"

    with pytest.raises(ApiException) as refused:
        extensions.replace_custom_resource_definition(f"widgets.{GROUP}", crd)

    assert "field is immutable" in error_message(refused.value)
    wait_for(lambda: extensions.read_custom_resource_definition(f"widgets.{GROUP}").spec.scope == "Cluster")


def test_unknown_fields_are_refused_when_strict_and_warned_about_otherwise(
    custom: client.CustomObjectsApi, token_server: ApiServer
) -> None:
    with pytest.raises(ApiException) as refused:
        custom.create_cluster_custom_object(
            GROUP, "v1", "widgets", widget("strict", 2, typo=1), field_validation="Strict"
        )
    assert refused.value.status == 400
    assert error_message(refused.value).endswith('strict decoding error: unknown field "spec.typo"')

    request = urllib.request.Request(
        f"{token_server.url}/apis/{GROUP}/v1/widgets",
        data=json.dumps(widget("warned", 2, typo=1)).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(request) as response:
        assert response.headers.get_all("Warning") == ['299 - "unknown field \\"spec.typo\\""']
        assert json.loads(response.read())["spec"] == {"size": 2, "color": "red"}


def test_kubectl_prints_the_unknown_field_warning(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("apply", "-f", write(tmp_path, widget_crd()))

    applied = kubectl.run("apply", "-f", write(tmp_path, widget("typo", 2, colour="blue")))

    assert 'Warning: unknown field "spec.colour"' in applied.stderr


def test_changing_a_crd_changes_what_is_served() -> None:
    store = Store()
    crd = widget_crd("servings", "Serving")
    store.create(CUSTOM_RESOURCE_DEFINITIONS, crd)
    assert store.registry.lookup(GROUP, "v1beta1", "servings") is not None

    current = store.get(CUSTOM_RESOURCE_DEFINITIONS, None, f"servings.{GROUP}")
    current["spec"]["versions"][1]["served"] = False
    current["spec"]["versions"][0]["additionalPrinterColumns"] = []
    store.update(CUSTOM_RESOURCE_DEFINITIONS, current)

    assert store.registry.lookup(GROUP, "v1beta1", "servings") is None
    served = store.registry.lookup(GROUP, "v1", "servings")
    assert served is not None and served.printer_columns == ()
    assert store.registry.api_group(GROUP)["preferredVersion"]["version"] == "v1"


def test_deleting_a_namespace_deletes_its_custom_objects() -> None:
    store = Store()
    store.create(CUSTOM_RESOURCE_DEFINITIONS, widget_crd("gadgets", "Gadget", "Namespaced"))
    gadgets = store.registry.lookup(GROUP, "v1", "gadgets")
    assert gadgets is not None
    store.create(NAMESPACES, {"metadata": {"name": "team"}})
    store.create(gadgets, widget("g1", kind="Gadget"), "team")
    store.create(gadgets, widget("g2", kind="Gadget"), "default")

    store.delete(NAMESPACES, None, "team")

    assert [o["metadata"]["name"] for o in store.list(gadgets)[0]] == ["g2"]
