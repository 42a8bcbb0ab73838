"""Object builders and polling shared by the emulator tests."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def node(name: str, labels: dict[str, str] | None = None, ready: bool = True) -> dict[str, Any]:
    """A Node manifest with a Ready condition and an internal IP, like a kubelet would report."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.10"}],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"boot-{name}",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kernelVersion": "6.1.0",
                "kubeProxyVersion": "v1.30.0",
                "kubeletVersion": "v1.30.0",
                "machineID": f"machine-{name}",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023",
                "systemUUID": f"uuid-{name}",
            },
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        },
    }


def pod(
    name: str, namespace: str = "default", labels: dict[str, str] | None = None, node_name: str | None = None
) -> dict[str, Any]:
    """A one-container pod manifest, optionally already bound to ``node_name``."""
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def deployment(name: str, replicas: int, namespace: str = "default") -> dict[str, Any]:
    """A Deployment whose pods carry ``app: NAME``."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    }
