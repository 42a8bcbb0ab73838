"""Structural OpenAPI v3 schemas of custom resources: pruning, defaulting and the cheap validations.

What a real API server does to a custom resource before storing it, in its order: fields the schema does
not declare are dropped (unless ``x-kubernetes-preserve-unknown-fields``), ``default`` values fill absent
fields, then the object is checked against ``type`` (with ``x-kubernetes-int-or-string`` and ``anyOf``
types), ``required``, ``enum``, ``pattern``, ``minLength``/``maxLength``, ``minimum``/``maximum``
(``exclusive*``), ``minItems``/``maxItems`` and ``minProperties``/``maxProperties``. Not checked:
``x-kubernetes-validations`` (CEL), ``format``, ``oneOf``/``allOf``/``not``, list-type uniqueness. A
``null`` in a field that is not ``nullable`` is dropped rather than refused.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

JsonObject = dict[str, Any]

# Kept at the root whatever the schema says: the server owns them.
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


class Findings(list[str]):
    """The field errors found (worded like the real server's), and ``pruned``: the paths of the fields
    dropped because the schema does not declare them (``spec.junk``, ``spec.items[0].typo``)."""

    def __init__(self) -> None:
        super().__init__()
        self.pruned: list[str] = []


def admit(schema: JsonObject, obj: JsonObject) -> Findings:
    """Prune, default and validate ``obj`` in place against a version's ``openAPIV3Schema``."""
    errors = Findings()
    root = {k: v for k, v in obj.items() if k not in _ROOT_FIELDS}
    checked = _walk(schema, root, "", errors)
    for key in [k for k in obj if k not in _ROOT_FIELDS]:
        del obj[key]
    if isinstance(checked, dict):
        obj.update(checked)
    return errors


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _quote(value: Any) -> str:
    return (
        json.dumps(value)
        if isinstance(value, str)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _is(kind: str, value: Any) -> bool:
    actual = _type_name(value)
    if kind == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    if kind == "number":
        return actual in ("integer", "number")
    return actual == kind


def _allowed_types(schema: JsonObject) -> list[str] | None:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    if schema.get("type"):
        return [str(schema["type"])]
    branches = [b.get("type") for b in schema.get("anyOf") or [] if isinstance(b, dict)]
    if branches and all(branches):
        return [str(b) for b in branches]
    return None


def _walk(schema: JsonObject, value: Any, path: str, errors: Findings) -> Any:
    types = _allowed_types(schema)
    if types is not None and not any(_is(t, value) for t in types):
        shown = _type_name(value)
        errors.append(
            f'{path}: Invalid value: "{shown}": {path} in body must be of type '
            f'{" or ".join(types)}: "{shown}"'
        )
        return value
    if isinstance(value, dict):
        value = _object(schema, value, path, errors)
    elif isinstance(value, list):
        value = _array(schema, value, path, errors)
    else:
        _scalar(schema, value, path, errors)
    enum = schema.get("enum")
    if enum and value not in enum:
        allowed = ", ".join(_quote(e) for e in enum)
        errors.append(f"{path}: Unsupported value: {_quote(value)}: supported values: {allowed}")
    return value


def _object(schema: JsonObject, value: JsonObject, path: str, errors: Findings) -> JsonObject:
    properties: JsonObject = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    result: JsonObject = {}
    for key, child in value.items():
        child_schema = properties.get(key)
        if child_schema is None and isinstance(additional, dict):
            child_schema = additional
        if child_schema is None:
            if preserve or additional is True:
                result[key] = child
            else:
                errors.pruned.append(_join(path, key))  # the real server drops undeclared fields
            continue
        if child is None and not child_schema.get("nullable"):
            continue
        result[key] = _walk(child_schema, child, _join(path, key), errors)
    for key, child_schema in properties.items():
        if key not in result and isinstance(child_schema, dict) and "default" in child_schema:
            result[key] = _walk(
                child_schema, copy.deepcopy(child_schema["default"]), _join(path, key), errors
            )
    for key in schema.get("required") or []:
        if key not in result:
            errors.append(f"{_join(path, key)}: Required value")
    count = len(result)
    if "minProperties" in schema and count < int(schema["minProperties"]):
        errors.append(
            f"{path}: Invalid value: {count}: {path} in body should have at least "
            f"{schema['minProperties']} properties"
        )
    if "maxProperties" in schema and count > int(schema["maxProperties"]):
        errors.append(f"{path}: Too many: {count}: must have at most {schema['maxProperties']} items")
    return result


def _array(schema: JsonObject, value: list[Any], path: str, errors: Findings) -> list[Any]:
    items = schema.get("items")
    result = (
        [_walk(items, item, f"{path}[{i}]", errors) for i, item in enumerate(value)]
        if isinstance(items, dict)
        else value
    )
    if "minItems" in schema and len(result) < int(schema["minItems"]):
        errors.append(
            f"{path}: Invalid value: {len(result)}: {path} in body should have at least "
            f"{schema['minItems']} items"
        )
    if "maxItems" in schema and len(result) > int(schema["maxItems"]):
        errors.append(f"{path}: Too many: {len(result)}: must have at most {schema['maxItems']} items")
    return result


def _scalar(schema: JsonObject, value: Any, path: str, errors: Findings) -> None:
    if isinstance(value, str):
        pattern = schema.get("pattern")
        if pattern and not _matches(str(pattern), value):
            errors.append(f"{path}: Invalid value: {_quote(value)}: {path} in body should match '{pattern}'")
        if "maxLength" in schema and len(value) > int(schema["maxLength"]):
            errors.append(f"{path}: Too long: may not be longer than {schema['maxLength']}")
        if "minLength" in schema and len(value) < int(schema["minLength"]):
            errors.append(
                f"{path}: Invalid value: {_quote(value)}: {path} in body should be at least "
                f"{schema['minLength']} chars long"
            )
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema:
            low = schema["minimum"]
            if value < low or (schema.get("exclusiveMinimum") and value == low):
                relation = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
                errors.append(f"{path}: Invalid value: {value}: {path} in body should be {relation} {low}")
        if "maximum" in schema:
            high = schema["maximum"]
            if value > high or (schema.get("exclusiveMaximum") and value == high):
                relation = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
                errors.append(f"{path}: Invalid value: {value}: {path} in body should be {relation} {high}")


_PATTERNS: dict[str, re.Pattern[str] | None] = {}


def _matches(pattern: str, value: str) -> bool:
    """ECMA/RE2 ``pattern`` (unanchored, as OpenAPI defines it); one Python cannot compile is skipped."""
    if pattern not in _PATTERNS:
        try:
            _PATTERNS[pattern] = re.compile(pattern)
        except re.error:
            _PATTERNS[pattern] = None
    compiled = _PATTERNS[pattern]
    return compiled is None or compiled.search(value) is not None
