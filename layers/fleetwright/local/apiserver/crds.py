"""CustomResourceDefinitions: what the emulator checks in one, the types it serves for it, and the
status it reports once its names are accepted.

A CRD is established as soon as it is stored (a real server takes a moment): its served versions appear in
discovery, its objects are stored under ``PLURAL.GROUP`` whatever the version they were written through,
and ``status`` reports ``NamesAccepted`` and ``Established``. Checked on write: the name is
``PLURAL.GROUP``, the group has a dot, the names are lower-case DNS labels, the scope is ``Cluster`` or
``Namespaced`` and does not change, exactly one version is the storage version, every version has an
object ``openAPIV3Schema``, and printer columns have a name, a known type and a JSON path that parses.
Objects of a custom resource are pruned, defaulted and validated by ``fleetwright.local.apiserver.schema``.
"""

from __future__ import annotations

import re
from typing import Any

from fleetwright.local.apiserver import errors
from fleetwright.local.apiserver.jsoncopy import json_copy
from fleetwright.local.apiserver.jsonpath import JsonPathError, compile_path
from fleetwright.local.apiserver.resources import ResourceType
from fleetwright.local.apiserver.schema import admit

JsonObject = dict[str, Any]

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
_COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def _names(spec: JsonObject) -> JsonObject:
    """``spec.names`` with the server's defaults: ``singular`` and ``listKind``."""
    names = dict(spec.get("names") or {})
    kind = str(names.get("kind") or "")
    names.setdefault("singular", kind.lower())
    names.setdefault("listKind", f"{kind}List")
    return names


def default_definition(crd: JsonObject) -> None:
    """Fill what the server defaults in a CRD's spec (names, column priorities, conversion)."""
    spec = crd.setdefault("spec", {})
    if isinstance(spec.get("names"), dict) and spec["names"].get("kind"):
        spec["names"] = _names(spec)
    spec.setdefault("conversion", {"strategy": "None"})
    for version in spec.get("versions") or []:
        if isinstance(version, dict):
            for column in version.get("additionalPrinterColumns") or []:
                if isinstance(column, dict):
                    column.setdefault("priority", 0)


def validate_definition(crd: JsonObject, current: JsonObject | None) -> None:
    """422 ``ApiError`` listing every problem in ``crd`` (``current`` is the stored one, on updates)."""
    problems: list[str] = []
    name = str(crd.get("metadata", {}).get("name") or "")
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        raise errors.invalid_fields(
            "CustomResourceDefinition", "apiextensions.k8s.io", name, ["spec: Required value"]
        )
    group = str(spec.get("group") or "")
    names: JsonObject = spec["names"] if isinstance(spec.get("names"), dict) else {}
    plural, kind = str(names.get("plural") or ""), str(names.get("kind") or "")
    if not group:
        problems.append("spec.group: Required value")
    elif "." not in group or not _DNS_SUBDOMAIN.fullmatch(group):
        problems.append(f'spec.group: Invalid value: "{group}": should be a domain with at least one dot')
    if not plural:
        problems.append("spec.names.plural: Required value")
    if not kind:
        problems.append("spec.names.kind: Required value")
    elif not _KIND.fullmatch(kind):
        problems.append(f'spec.names.kind: Invalid value: "{kind}": must be a valid kind name')
    for field in ("plural", "singular"):
        value = names.get(field)
        if value and not _DNS_LABEL.fullmatch(str(value)):
            problems.append(
                f'spec.names.{field}: Invalid value: "{value}": a lowercase RFC 1123 label must consist '
                "of lower case alphanumeric characters or '-'"
            )
    for i, short in enumerate(names.get("shortNames") or []):
        if not _DNS_LABEL.fullmatch(str(short)):
            problems.append(f'spec.names.shortNames[{i}]: Invalid value: "{short}": must be a DNS label')
    if plural and group and name != f"{plural}.{group}":
        problems.append(f'metadata.name: Invalid value: "{name}": must be spec.names.plural+"."+spec.group')
    scope = spec.get("scope")
    if not scope:
        problems.append("spec.scope: Required value")
    elif scope not in ("Cluster", "Namespaced"):
        problems.append(
            f'spec.scope: Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"'
        )
    if current is not None and scope != current.get("spec", {}).get("scope"):
        problems.append(f'spec.scope: Invalid value: "{scope}": field is immutable')
    problems.extend(_version_problems(spec.get("versions")))
    if problems:
        raise errors.invalid_fields("CustomResourceDefinition", "apiextensions.k8s.io", name, problems)


def _version_problems(versions: Any) -> list[str]:
    if not isinstance(versions, list) or not versions:
        return ["spec.versions: Invalid value: null: must have exactly one version marked as storage version"]
    problems: list[str] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        where = f"spec.versions[{i}]"
        if not isinstance(version, dict):
            problems.append(f"{where}: Invalid value: must be an object")
            continue
        vname = str(version.get("name") or "")
        if not vname or not _DNS_LABEL.fullmatch(vname):
            problems.append(f'{where}.name: Invalid value: "{vname}": must be a DNS-1035 label')
        elif vname in seen:
            problems.append(f'{where}.name: Duplicate value: "{vname}"')
        seen.add(vname)
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            problems.append(f"{where}.schema.openAPIV3Schema: Required value: schemas are required")
        elif schema.get("type") != "object":
            problems.append(f"{where}.schema.openAPIV3Schema.type: Invalid value: must be object at the root")
        for j, column in enumerate(version.get("additionalPrinterColumns") or []):
            problems.extend(_column_problems(f"{where}.additionalPrinterColumns[{j}]", column))
    if sum(1 for v in versions if isinstance(v, dict) and v.get("storage") is True) != 1:
        problems.append(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
        )
    return problems


def _column_problems(where: str, column: Any) -> list[str]:
    if not isinstance(column, dict):
        return [f"{where}: Invalid value: must be an object"]
    problems = [f"{where}.{f}: Required value" for f in ("name", "type", "jsonPath") if not column.get(f)]
    if column.get("type") and column["type"] not in _COLUMN_TYPES:
        allowed = ", ".join(f'"{t}"' for t in _COLUMN_TYPES)
        problems.append(f'{where}.type: Unsupported value: "{column["type"]}": supported values: {allowed}')
    if column.get("jsonPath"):
        try:
            compile_path(str(column["jsonPath"]))
        except JsonPathError as exc:
            problems.append(f'{where}.jsonPath: Invalid value: "{column["jsonPath"]}": {exc}')
    return problems


def served_types(crd: JsonObject) -> tuple[ResourceType, ...]:
    """One ``ResourceType`` per served version, the storage version first."""
    spec = crd["spec"]
    names = _names(spec)
    versions = sorted(spec["versions"], key=lambda v: not v.get("storage"))
    return tuple(
        ResourceType(
            group=spec["group"],
            version=v["name"],
            plural=names["plural"],
            kind=names["kind"],
            namespaced=spec["scope"] == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            subresources=("status",) if "status" in (v.get("subresources") or {}) else (),
            categories=tuple(names.get("categories") or ()),
            custom=True,
            printer_columns=tuple(v.get("additionalPrinterColumns") or ()),
            schema=(v.get("schema") or {}).get("openAPIV3Schema"),
        )
        for v in versions
        if v.get("served", True)
    )


def resource_key(crd: JsonObject) -> str:
    """Where the CRD's objects are stored: ``PLURAL.GROUP`` (its own name)."""
    return str(crd["metadata"]["name"])


def _condition(type_: str, reason: str, message: str, now: str, before: list[JsonObject]) -> JsonObject:
    old = next((c for c in before if c.get("type") == type_), None)
    since = old["lastTransitionTime"] if old and old.get("status") == "True" else now
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


def accepted_status(crd: JsonObject, now: str) -> JsonObject:
    """The status of an established CRD: accepted names, conditions, and every storage version used."""
    spec, status = crd["spec"], crd.get("status") or {}
    names = _names(spec)
    accepted = {
        k: names[k]
        for k in ("plural", "singular", "kind", "listKind", "shortNames", "categories")
        if names.get(k)
    }
    before = list(status.get("conditions") or [])
    conditions = [
        _condition("NamesAccepted", "NoConflicts", "no conflicts found", now, before),
        _condition(
            "Established", "InitialNamesAccepted", "the initial names have been accepted", now, before
        ),
    ]
    if crd["metadata"].get("deletionTimestamp"):
        conditions.append(
            _condition(
                "Terminating",
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
                now,
                before,
            )
        )
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    stored = list(status.get("storedVersions") or [])
    if storage not in stored:
        stored.append(storage)
    return {"acceptedNames": accepted, "conditions": conditions, "storedVersions": stored}


def unknown_fields(rt: ResourceType, obj: JsonObject) -> list[str]:
    """The fields of ``obj`` its schema does not declare (what ``admit_object`` would prune)."""
    if rt.schema is None:
        return []
    return admit(rt.schema, json_copy(obj)).pruned


def field_validation(rt: ResourceType, obj: JsonObject, directive: str) -> list[str]:
    """Apply the ``fieldValidation`` query parameter to a custom object about to be written: ``Strict``
    refuses unknown fields (400, as a real server's strict decoding does), ``Ignore`` drops them quietly,
    anything else (``Warn``, the default) returns one warning per field for the ``Warning`` header."""
    if not rt.custom or directive == "Ignore":
        return []
    unknown = unknown_fields(rt, obj)
    if unknown and directive == "Strict":
        listed = ", ".join(f'unknown field "{path}"' for path in unknown)
        raise errors.bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            f"strict decoding error: {listed}"
        )
    return [f'unknown field "{path}"' for path in unknown]


def admit_object(rt: ResourceType, obj: JsonObject) -> None:
    """Check a custom object's name and prune/default/validate it against its schema (422 on failure)."""
    name = str(obj.get("metadata", {}).get("name") or "")
    problems: list[str] = []
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        problems.append(
            f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
            "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    if rt.schema is not None:
        problems.extend(admit(rt.schema, obj))
    if problems:
        raise errors.invalid_fields(rt.kind, rt.group, name, problems)
