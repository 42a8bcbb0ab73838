"""``meta.k8s.io/v1`` Table responses, which ``kubectl get`` asks for to print its columns."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fleetwright.local.apiserver.jsonpath import JsonPathError, evaluate
from fleetwright.local.apiserver.store import parse_rfc3339

JsonObject = dict[str, Any]
Column = tuple[str, str, int, Callable[[JsonObject, float], Any]]  # name, type, priority, cell


def wants_table(accept: str) -> bool:
    """Whether ``Accept`` asks for a Table (kubectl: ``application/json;as=Table;v=v1;g=meta.k8s.io``)."""
    for media in accept.split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[-1].strip() for p in media.split(";")[1:]}
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return True
    return False


def age(obj: JsonObject, now: float) -> str:
    """Human age like kubectl prints: ``42s``, ``5m``, ``3h``, ``2d``."""
    created = obj.get("metadata", {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    seconds = max(0, int(now - parse_rfc3339(created)))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _name(obj: JsonObject, _: float) -> str:
    return str(obj["metadata"]["name"])


def _pod_ready(obj: JsonObject, _: float) -> str:
    statuses = obj.get("status", {}).get("containerStatuses") or []
    total = len(obj.get("spec", {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_status(obj: JsonObject, _: float) -> str:
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return str(obj.get("status", {}).get("reason") or obj.get("status", {}).get("phase") or "Unknown")


def _pod_restarts(obj: JsonObject, _: float) -> int:
    return sum(int(s.get("restartCount", 0)) for s in obj.get("status", {}).get("containerStatuses") or [])


def _node_status(obj: JsonObject, _: float) -> str:
    conditions = obj.get("status", {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    text = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if obj.get("spec", {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(obj: JsonObject, _: float) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in obj["metadata"].get("labels") or {} if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _node_address(kind: str) -> Callable[[JsonObject, float], str]:
    def cell(obj: JsonObject, _: float) -> str:
        for address in obj.get("status", {}).get("addresses") or []:
            if address.get("type") == kind:
                return str(address.get("address"))
        return "<none>"

    return cell


def _get(path: str, default: Any = "<none>") -> Callable[[JsonObject, float], Any]:
    def cell(obj: JsonObject, _: float) -> Any:
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return default if value is None else value

    return cell


def _ratio(ready: str, desired: str) -> Callable[[JsonObject, float], str]:
    def cell(obj: JsonObject, now: float) -> str:
        return f"{_get(ready, 0)(obj, now)}/{_get(desired, 0)(obj, now)}"

    return cell


def _containers(field: str) -> Callable[[JsonObject, float], str]:
    def cell(obj: JsonObject, _: float) -> str:
        containers = obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
        return ",".join(str(c.get(field, "")) for c in containers)

    return cell


def _since(*fields: str) -> Callable[[JsonObject, float], str]:
    """The age of the first timestamp set among ``fields`` (an Event's last or first sighting)."""

    def cell(obj: JsonObject, now: float) -> str:
        for name in fields:
            stamp = obj.get(name)
            if isinstance(stamp, str) and stamp:
                return age({"metadata": {"creationTimestamp": stamp}}, now)
        return age(obj, now)

    return cell


def _event_object(obj: JsonObject, _: float) -> str:
    involved = obj.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_source(obj: JsonObject, _: float) -> str:
    source = obj.get("source") or {}
    return ", ".join(str(source[k]) for k in ("component", "host") if source.get(k)) or str(
        obj.get("reportingComponent") or ""
    )


_AGE: Column = ("Age", "string", 0, age)
_NAME: Column = ("Name", "string", 0, _name)

COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        _NAME,
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "integer", 0, _pod_restarts),
        _AGE,
        ("IP", "string", 1, _get("status.podIP")),
        ("Node", "string", 1, _get("spec.nodeName")),
        ("Nominated Node", "string", 1, _get("status.nominatedNodeName")),
    ],
    "Node": [
        _NAME,
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        _AGE,
        ("Version", "string", 0, _get("status.nodeInfo.kubeletVersion", "")),
        ("Internal-IP", "string", 1, _node_address("InternalIP")),
        ("External-IP", "string", 1, _node_address("ExternalIP")),
        ("OS-Image", "string", 1, _get("status.nodeInfo.osImage", "<unknown>")),
        ("Kernel-Version", "string", 1, _get("status.nodeInfo.kernelVersion", "<unknown>")),
        ("Container-Runtime", "string", 1, _get("status.nodeInfo.containerRuntimeVersion", "<unknown>")),
    ],
    "Deployment": [
        _NAME,
        ("Ready", "string", 0, _ratio("status.readyReplicas", "spec.replicas")),
        ("Up-to-date", "integer", 0, _get("status.updatedReplicas", 0)),
        ("Available", "integer", 0, _get("status.availableReplicas", 0)),
        _AGE,
        ("Containers", "string", 1, _containers("name")),
        ("Images", "string", 1, _containers("image")),
    ],
    "ReplicaSet": [
        _NAME,
        ("Desired", "integer", 0, _get("spec.replicas", 0)),
        ("Current", "integer", 0, _get("status.replicas", 0)),
        ("Ready", "integer", 0, _get("status.readyReplicas", 0)),
        _AGE,
    ],
    "DaemonSet": [
        _NAME,
        ("Desired", "integer", 0, _get("status.desiredNumberScheduled", 0)),
        ("Current", "integer", 0, _get("status.currentNumberScheduled", 0)),
        ("Ready", "integer", 0, _get("status.numberReady", 0)),
        _AGE,
    ],
    "PodDisruptionBudget": [
        _NAME,
        ("Min Available", "string", 0, _get("spec.minAvailable", "N/A")),
        ("Max Unavailable", "string", 0, _get("spec.maxUnavailable", "N/A")),
        ("Allowed Disruptions", "integer", 0, _get("status.disruptionsAllowed", 0)),
        _AGE,
    ],
    "Namespace": [_NAME, ("Status", "string", 0, _get("status.phase", "")), _AGE],
    # As the API server prints Events (kubectl get events).
    "Event": [
        ("Last Seen", "string", 0, _since("lastTimestamp", "eventTime", "firstTimestamp")),
        ("Type", "string", 0, _get("type", "")),
        ("Reason", "string", 0, _get("reason", "")),
        ("Object", "string", 0, _event_object),
        ("Subobject", "string", 1, _get("involvedObject.fieldPath", "")),
        ("Source", "string", 1, _event_source),
        ("Message", "string", 0, _get("message", "")),
        ("First Seen", "string", 1, _since("firstTimestamp", "eventTime")),
        ("Count", "integer", 1, _get("count", 1)),
        ("Name", "string", 1, _name),
    ],
    "CustomResourceDefinition": [_NAME, ("Created At", "date", 0, _get("metadata.creationTimestamp"))],
}


def _printer_cell(column: JsonObject) -> Callable[[JsonObject, float], Any]:
    """A cell computed from a CRD printer column's ``jsonPath``: the first value it selects, ``date``
    columns as an age like the server prints them, nothing (kubectl shows ``<none>``) when absent."""
    path, kind = str(column.get("jsonPath", "")), column.get("type")

    def cell(obj: JsonObject, now: float) -> Any:
        try:
            found = evaluate(path, obj)
        except JsonPathError:
            return None
        if not found or found[0] is None:
            return None
        value = found[0]
        if kind == "date" and isinstance(value, str):
            try:
                return age({"metadata": {"creationTimestamp": value}}, now)
            except ValueError:
                return value
        if isinstance(value, dict | list):
            return json.dumps(value, separators=(",", ":"))
        return value

    return cell


def custom_columns(printer_columns: tuple[JsonObject, ...]) -> list[Column]:
    """The columns of a custom resource: Name, then its printer columns (Name and Age when it has none)."""
    if not printer_columns:
        return [_NAME, _AGE]
    return [
        _NAME,
        *(
            (str(c["name"]), str(c.get("type", "string")), int(c.get("priority", 0)), _printer_cell(c))
            for c in printer_columns
        ),
    ]


def _partial_metadata(obj: JsonObject) -> JsonObject:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def to_table(
    kind: str,
    items: list[JsonObject],
    resource_version: str,
    now: float,
    include: str,
    printer_columns: tuple[JsonObject, ...] | None = None,
) -> JsonObject:
    """A Table of ``items`` (all of ``kind``); ``include`` is the ``includeObject`` parameter;
    ``printer_columns`` (a CRD version's, for custom resources) replace the built-in columns."""
    if printer_columns is not None:
        columns = custom_columns(printer_columns)
    else:
        columns = COLUMNS.get(kind, [_NAME, _AGE])
    rows: list[JsonObject] = []
    for obj in items:
        row: JsonObject = {"cells": [cell(obj, now) for _, _, _, cell in columns]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = _partial_metadata(obj)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {
                "name": name,
                "type": typ,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": priority,
            }
            for name, typ, priority, _ in columns
        ],
        "rows": rows,
    }
