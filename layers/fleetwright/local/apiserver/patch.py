"""The three PATCH flavours: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge.

Strategic merge is approximated: maps merge like a merge patch, lists named in ``MERGE_KEYS`` merge element
by element on their merge key (``containers`` by ``name``, ...), ``finalizers`` merge as a set, every other
list is replaced. The ``$patch``, ``$retainKeys``, ``$setElementOrder/`` and ``$deleteFromPrimitiveList/``
directives kubectl sends are honoured well enough for its cordon, label, annotate, scale and apply patches.
"""

from __future__ import annotations

from typing import Any

from fleetwright.local.apiserver.errors import ApiError, bad_request
from fleetwright.local.apiserver.jsoncopy import json_copy

JsonObject = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# List field name → the key that identifies an element, as the Kubernetes API declares patchMergeKey.
# Matched on the field name alone, whatever the path; that is right for every field the emulator serves.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "conditions": "type",
    "addresses": "type",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
# Lists of scalars that merge as sets.
MERGE_SETS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: JsonObject, operations: Any) -> JsonObject:
    """RFC 6902; a failed ``test`` or a bad path is a 422 like on a real server."""
    # Imported here so the rest of the emulator (and the CLI that registers it) loads without it.
    import jsonpatch
    import jsonpointer

    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    try:
        result = jsonpatch.apply_patch(target, operations)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "json patch did not produce an object")
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch, approximated as described in the module docstring."""
    return _merge_map(target if isinstance(target, dict) else {}, patch)


def _merge_map(target: JsonObject, patch: JsonObject) -> JsonObject:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    result = dict(target)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            result[key] = _merge_map(current if isinstance(current, dict) else {}, value)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = json_copy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    existing = list(current) if isinstance(current, list) else []
    if field in MERGE_SETS:
        return existing + [v for v in patch if v not in existing]
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in patch):
        return [_strip_directives(v) for v in patch]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_strip_directives(v) for v in patch if v.get("$patch") != "replace"]
    result = list(existing)
    for item in patch:
        index = next(
            (i for i, e in enumerate(result) if isinstance(e, dict) and e.get(key) == item.get(key)), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(_strip_directives(item))
        else:
            result[index] = _merge_map(result[index], item)
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not (k.startswith("$setElementOrder/") or k in ("$patch", "$retainKeys"))
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def apply_patch(content_type: str, target: JsonObject, patch: Any) -> JsonObject:
    """Apply ``patch`` of the given ``Content-Type`` to a copy of ``target``."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == JSON_PATCH:
        return json_patch(json_copy(target), patch)
    if not isinstance(patch, dict):
        raise bad_request(f"{media} body must be a JSON object")
    if media == MERGE_PATCH:
        result = merge_patch(target, patch)
    elif media in (STRATEGIC_MERGE_PATCH, APPLY_PATCH):
        result = strategic_merge_patch(target, patch)
    else:
        raise ApiError(
            415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {media}"
        )
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "patch did not produce an object")
    return result
