"""The resource types the emulator serves, and the discovery documents built from them."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One REST resource: where it lives (group/version/plural) and what it holds (kind, scope)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Custom resources only: the version's ``additionalPrinterColumns`` and ``openAPIV3Schema``.
    custom: bool = False
    printer_columns: tuple[JsonObject, ...] = field(default=(), compare=False)
    schema: JsonObject | None = field(default=None, compare=False)

    @property
    def api_version(self) -> str:
        """``apiVersion`` of objects of this type, e.g. ``apps/v1`` or ``v1``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Store key: ``plural.group`` (``pods`` for the core group)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular(self) -> str:
        """Lower-case kind, as discovery reports ``singularName``."""
        return self.kind.lower()


def _core(plural: str, kind: str, namespaced: bool, *rest: Any, **kw: Any) -> ResourceType:
    return ResourceType("", "v1", plural, kind, namespaced, *rest, **kw)


PODS = _core("pods", "Pod", True, ("po",), ("status", "binding", "eviction"))
NODES = _core("nodes", "Node", False, ("no",), ("status",))
NAMESPACES = _core("namespaces", "Namespace", False, ("ns",), ("status",))
PERSISTENT_VOLUMES = _core("persistentvolumes", "PersistentVolume", False, ("pv",), ("status",))
PERSISTENT_VOLUME_CLAIMS = _core(
    "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), ("status",)
)
EVENTS = _core("events", "Event", True, ("ev",))
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", True, ("deploy",), ("scale", "status"))
REPLICA_SETS = ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), ("scale", "status"))
DAEMON_SETS = ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",))
STATEFUL_SETS = ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), ("scale", "status"))
POD_DISRUPTION_BUDGETS = ResourceType(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), ("status",)
)
STORAGE_CLASSES = ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",))
VOLUME_ATTACHMENTS = ResourceType(
    "storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, (), ("status",)
)
CUSTOM_RESOURCE_DEFINITIONS = ResourceType(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    False,
    ("crd", "crds"),
    ("status",),
    ("api-extensions",),
)

ALL_TYPES: tuple[ResourceType, ...] = (
    PODS,
    NODES,
    NAMESPACES,
    PERSISTENT_VOLUMES,
    PERSISTENT_VOLUME_CLAIMS,
    EVENTS,
    DEPLOYMENTS,
    REPLICA_SETS,
    DAEMON_SETS,
    STATEFUL_SETS,
    POD_DISRUPTION_BUDGETS,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
    CUSTOM_RESOURCE_DEFINITIONS,
)

# Workloads appear in `kubectl get all` like on a real cluster.
_ALL_CATEGORY = {"deployments", "replicasets", "daemonsets", "statefulsets", "pods"}

SERVER_VERSION: JsonObject = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-fleetwright",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


class Registry:
    """Looks resource types up by URL coordinates and by kind; custom resource types come and go with
    their CustomResourceDefinitions (``add`` / ``remove``)."""

    def __init__(self, types: tuple[ResourceType, ...] = ALL_TYPES) -> None:
        self._lock = threading.Lock()
        self._types: tuple[ResourceType, ...] = ()
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_key: dict[str, ResourceType] = {}
        self._set(types)

    def _set(self, types: tuple[ResourceType, ...]) -> None:
        self._types = types
        self._by_path = {(t.group, t.version, t.plural): t for t in types}
        # Several versions of one custom resource share a key; the first listed is the stored one.
        by_key: dict[str, ResourceType] = {}
        for t in types:
            by_key.setdefault(t.key, t)
        self._by_key = by_key

    @property
    def types(self) -> tuple[ResourceType, ...]:
        """Every served type (one entry per served version)."""
        return self._types

    def add(self, key: str, versions: tuple[ResourceType, ...]) -> None:
        """Serve ``versions`` (all of one custom resource, stored version first) under ``key``,
        replacing what was served under it before."""
        with self._lock:
            kept = tuple(t for t in self._types if not (t.custom and t.key == key))
            self._set(kept + versions)

    def remove(self, key: str) -> None:
        """Stop serving the custom resource stored under ``key``."""
        with self._lock:
            self._set(tuple(t for t in self._types if not (t.custom and t.key == key)))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at ``/apis/GROUP/VERSION/PLURAL`` (group ``""`` for ``/api/v1``)."""
        return self._by_path.get((group, version, plural))

    def by_key(self, key: str) -> ResourceType:
        """The type stored under ``key`` (``ResourceType.key``)."""
        return self._by_key[key]

    def find(self, key: str) -> ResourceType | None:
        """The type stored under ``key``, or None when nothing is served there."""
        return self._by_key.get(key)

    def group_versions(self) -> dict[str, list[str]]:
        """Every non-core group and its versions, preferred first."""
        groups: dict[str, list[str]] = {}
        for t in self._types:
            if t.group and t.version not in groups.setdefault(t.group, []):
                groups[t.group].append(t.version)
        return {g: sorted(vs, key=version_priority) for g, vs in groups.items()}

    def has_group_version(self, group: str, version: str) -> bool:
        """Whether any resource is served under GROUP/VERSION."""
        return any(t.group == group and t.version == version for t in self._types)

    def api_versions(self) -> JsonObject:
        """The ``/api`` document."""
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }

    def api_group_list(self) -> JsonObject:
        """The ``/apis`` document."""
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [self.api_group(g) for g in self.group_versions()],
        }

    def api_group(self, group: str) -> JsonObject:
        """The ``/apis/GROUP`` document."""
        versions = [
            {"groupVersion": f"{group}/{v}", "version": v} for v in self.group_versions().get(group, [])
        ]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": versions,
            "preferredVersion": versions[0] if versions else {},
        }

    def resource_list(self, group: str, version: str) -> JsonObject:
        """The ``/api/v1`` or ``/apis/GROUP/VERSION`` document, subresources included."""
        resources: list[JsonObject] = []
        for t in self._types:
            if t.group != group or t.version != version:
                continue
            entry: JsonObject = {
                "name": t.plural,
                "singularName": t.singular,
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": list(ALL_VERBS),
            }
            if t.short_names:
                entry["shortNames"] = list(t.short_names)
            categories = [*t.categories, *(["all"] if t.plural in _ALL_CATEGORY else [])]
            if categories:
                entry["categories"] = categories
            resources.append(entry)
            for sub in t.subresources:
                resources.append(_subresource_entry(t, sub))
        if not group:
            resources.append(
                {
                    "name": "bindings",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "Binding",
                    "verbs": ["create"],
                }
            )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting Kubernetes versions in preference order: GA, then beta, then alpha, each newest
    first (``v2``, ``v1``, ``v1beta2``, ``v1beta1``, ``v1alpha1``), then anything else by name."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)


def _subresource_entry(t: ResourceType, sub: str) -> JsonObject:
    entry: JsonObject = {"name": f"{t.plural}/{sub}", "singularName": "", "namespaced": t.namespaced}
    if sub == "eviction":
        entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
    elif sub == "binding":
        entry.update(kind="Binding", verbs=["create"])
    elif sub == "scale":
        entry.update(group="autoscaling", version="v1", kind="Scale", verbs=["get", "patch", "update"])
    else:
        entry.update(kind=t.kind, verbs=["get", "patch", "update"])
    return entry
