"""Object builders shared by the adapter tests."""

from __future__ import annotations

from typing import Any

from fleetwright.kube import KubeClient
from fleetwright.kube.resources import PODS

JsonObject = dict[str, Any]


def node_object(
    name: str, *, labels: dict[str, str] | None = None, taints: list[JsonObject] | None = None
) -> JsonObject:
    """A Ready node with 4 CPUs and 16Gi allocatable."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        },
    }


def pod_object(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = None,
    labels: dict[str, str] | None = None,
    cpu: str = "500m",
) -> JsonObject:
    """A one-container pod requesting ``cpu``, bound to ``node`` when given."""
    spec: JsonObject = {
        "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


UNSCHEDULABLE_STATUS = {
    "status": {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient cpu.",
            }
        ],
    }
}


def create_unschedulable_pod(client: KubeClient, name: str, **kwargs: Any) -> JsonObject:
    """Create a pod, then mark it unschedulable through the status subresource, as kube-scheduler does."""
    created = client.create(PODS, pod_object(name, **kwargs))
    return client.patch(
        PODS, name, UNSCHEDULABLE_STATUS, created["metadata"]["namespace"], subresource="status"
    )
