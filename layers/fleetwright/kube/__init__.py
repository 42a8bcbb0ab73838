"""Fleetwright's Kubernetes adapter: JSON verbs on the official ``kubernetes`` client, EKS token
authentication, and the operations the controllers perform (list/watch pending pods, cordon and taint,
evict, delete, patch).

Importing it loads neither boto3/botocore (only EKS authentication does) nor the official client (only
building a ``KubeClient`` does), so a Lambda handler's import stays cheap.
"""

from __future__ import annotations

from fleetwright.kube.client import KubeClient, ObjectList, WatchEvent
from fleetwright.kube.cluster import (
    EvictionOutcome,
    EvictionResult,
    KubeCluster,
    is_unschedulable,
)
from fleetwright.kube.config import ClusterConfig, StaticToken, TokenSource, load_kubeconfig
from fleetwright.kube.errors import (
    KubeApiError,
    KubeconfigError,
    KubeConnectionError,
    KubeError,
    WatchExpiredError,
)
from fleetwright.kube.watch import Resync, list_then_watch

__all__ = [
    "ClusterConfig",
    "EvictionOutcome",
    "EvictionResult",
    "KubeApiError",
    "KubeClient",
    "KubeCluster",
    "KubeConnectionError",
    "KubeError",
    "KubeconfigError",
    "ObjectList",
    "Resync",
    "StaticToken",
    "TokenSource",
    "WatchEvent",
    "WatchExpiredError",
    "is_unschedulable",
    "list_then_watch",
    "load_kubeconfig",
]
