"""The emulator's RBAC: users by bearer token held to ClusterRoles/Roles, the verbs Kubernetes derives,
the real 403 Status, and the audit of what each user asked for."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.rbac import ADMIN_NAME
from fleetwright.local.apiserver.resources import NAMESPACES, NODES, PODS
from tests.local.helpers import node, pod

POLICY = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["list"]
  - apiGroups: [""]
    resources: ["pods/eviction"]
    verbs: ["create"]
  - apiGroups: [""]
    resources: ["nodes"]
    verbs: ["get"]
    resourceNames: ["allowed"]
  - apiGroups: ["apps"]
    resources: ["*"]
    verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: readers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-deleter, namespace: team}
rules: [{apiGroups: [""], resources: ["pods"], verbs: ["delete", "deletecollection"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pod-deleter, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-deleter}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: readers}]
"""
ADMIN_TOKEN = "admin-token"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    policy = tmp_path / "rbac.yaml"
    policy.write_text(POLICY)
    with ApiServer(port=0, token=ADMIN_TOKEN, rbac=policy) as server:
        yield server


def call(server: ApiServer, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        server.url + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_refused_request_gets_the_api_servers_403_status(server: ApiServer) -> None:
    token = server.add_user("alice", ("readers",))
    code, status = call(server, token, "GET", "/api/v1/namespaces/default/pods/web")
    assert code == 403
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'pods "web" is forbidden: User "alice" cannot get resource "pods" in API group "" '
        'in the namespace "default"'
    )
    assert status["details"] == {"name": "web", "kind": "pods"}
    code, status = call(server, token, "GET", "/apis/storage.k8s.io/v1/storageclasses")
    assert code == 403
    assert status["message"] == (
        'storageclasses.storage.k8s.io is forbidden: User "alice" cannot list resource "storageclasses" '
        'in API group "storage.k8s.io" at the cluster scope'
    )


def test_verbs_are_derived_as_kubernetes_derives_them(server: ApiServer) -> None:
    server.store.create(NODES, node("allowed"))
    server.store.create(NODES, node("other"))
    token = server.add_user("alice", ("readers",))
    assert call(server, token, "GET", "/api/v1/pods")[0] == 200  # list
    assert call(server, token, "GET", "/api/v1/pods?watch=true&timeoutSeconds=0")[0] == 403  # watch
    assert call(server, token, "GET", "/api/v1/nodes/allowed")[0] == 200  # resourceNames
    assert call(server, token, "GET", "/api/v1/nodes/other")[0] == 403
    assert call(server, token, "GET", "/api/v1/nodes")[0] == 403  # a list names no object
    assert call(server, token, "PATCH", "/api/v1/nodes/allowed", {"metadata": {}})[0] == 403
    assert call(server, token, "GET", "/apis/apps/v1/deployments")[0] == 200  # "*"
    # A Role binds only in its namespace; DELETE on a collection is deletecollection.
    assert call(server, token, "DELETE", "/api/v1/namespaces/default/pods")[0] == 403
    server.store.create(NAMESPACES, {"metadata": {"name": "team"}})
    assert call(server, token, "DELETE", "/api/v1/namespaces/team/pods")[0] == 200
    used = server.authorizer.used(user="alice") if server.authorizer else set()
    assert used == {
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "patch"),
        ("apps", "deployments", "list"),
        ("", "pods", "deletecollection"),
    }


def test_eviction_is_create_on_pods_eviction_and_the_admin_keeps_full_access(server: ApiServer) -> None:
    server.store.create(NODES, node("n1"))
    server.store.create(PODS, pod("web", node_name="n1"), "default")
    token = server.add_user("alice", ("readers",))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web"}}
    assert call(server, token, "POST", "/api/v1/namespaces/default/pods/web/eviction", eviction)[0] == 201
    assert call(server, token, "PATCH", "/api/v1/nodes/n1/status", {"status": {}})[0] == 403
    assert call(server, ADMIN_TOKEN, "PATCH", "/api/v1/nodes/n1/status", {"status": {}})[0] == 200
    assert call(server, "stranger", "GET", "/api/v1/pods")[0] == 401
    authorizer = server.authorizer
    assert authorizer is not None
    assert authorizer.used(user="alice") == {("", "pods/eviction", "create"), ("", "nodes/status", "patch")}
    assert [r.request.full_resource for r in authorizer.refused(group="readers")] == ["nodes/status"]
    assert authorizer.used(user=ADMIN_NAME) == {("", "nodes/status", "patch")}


def test_the_official_client_as_a_user_of_a_group(server: ApiServer) -> None:
    from kubernetes import client

    from fleetwright.kube import KubeClient
    from fleetwright.kube.errors import KubeApiError
    from fleetwright.kube.resources import NODES as NODE_RESOURCE
    from fleetwright.kube.resources import PODS as POD_RESOURCE

    token = server.add_user("alice", ("readers",))
    kube = KubeClient(server.cluster_config(token), sleep=lambda _s: None)
    try:
        assert kube.list(POD_RESOURCE).items == []
        with pytest.raises(KubeApiError) as refused:
            kube.list(NODE_RESOURCE)
        assert refused.value.status == 403
        assert 'User "alice" cannot list resource "nodes"' in refused.value.message
    finally:
        kube.close()
    config = client.Configuration(
        host=server.url, api_key={"authorization": token}, api_key_prefix={"authorization": "Bearer"}
    )
    with client.ApiClient(config) as api:
        assert client.CoreV1Api(api).list_pod_for_all_namespaces().items == []
