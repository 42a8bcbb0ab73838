"""The REST resources the adapter reads and writes, and how their paths are built."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Resource:
    """A REST resource: API group, version, plural name, kind and whether it lives in a namespace."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``apiVersion`` of its objects (``v1``, ``apps/v1``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """``/api/v1/namespaces/NS/pods/NAME/SUB``; without ``namespace`` a namespaced resource is listed
        across all namespaces."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [prefix]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        elif not self.namespaced and namespace:
            raise ValueError(f"{self.plural} are not namespaced")
        parts.append(self.plural)
        if name is not None:
            if not name:
                raise ValueError("empty object name")
            if self.namespaced and not namespace:
                raise ValueError(f"{self.plural} need a namespace")
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


PODS = Resource("", "v1", "pods", "Pod", True)
NODES = Resource("", "v1", "nodes", "Node", False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
EVENTS = Resource("", "v1", "events", "Event", True)
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", False)
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
DAEMON_SETS = Resource("apps", "v1", "daemonsets", "DaemonSet", True)
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
VOLUME_ATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False)
# Karpenter's kinds (served when Karpenter's v1 CRDs are installed).
NODE_POOLS = Resource("karpenter.sh", "v1", "nodepools", "NodePool", False)
NODE_CLAIMS = Resource("karpenter.sh", "v1", "nodeclaims", "NodeClaim", False)
EC2_NODE_CLASSES = Resource("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass", False)
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
