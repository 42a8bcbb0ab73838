"""Label and field selectors, parsed from query strings and from ``LabelSelector`` objects."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwright.local.apiserver.errors import ApiError, bad_request

JsonObject = dict[str, Any]

# One requirement of a label selector string: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a)`.
_SET_RE = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=(),]+)\s*$")


@dataclass(frozen=True)
class LabelRequirement:
    """``key op values``; op is one of In, NotIn, Exists, DoesNotExist."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (NotIn also matches a missing key)."""
        if self.op == "In":
            return labels.get(self.key) in self.values
        if self.op == "NotIn":
            return labels.get(self.key) not in self.values
        if self.op == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements; the empty selector matches everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether every requirement holds for ``labels``."""
        found = labels or {}
        return all(r.matches(found) for r in self.requirements)


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the ``labelSelector`` query parameter; raises a 400 ``ApiError`` on bad syntax."""
    requirements: list[LabelRequirement] = []
    for part in _split_top_level(text):
        if m := _SET_RE.match(part):
            values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
            op = "In" if m["op"] == "in" else "NotIn"
            requirements.append(LabelRequirement(m["key"], op, values))
        elif m := _EQ_RE.match(part):
            op = "NotIn" if m["op"] == "!=" else "In"
            requirements.append(LabelRequirement(m["key"], op, frozenset([m["value"]])))
        elif m := _EXISTS_RE.match(part):
            requirements.append(LabelRequirement(m["key"], "DoesNotExist" if m["neg"] else "Exists"))
        else:
            raise bad_request(f"unable to parse requirement: {part.strip()!r}")
    return LabelSelector(tuple(requirements))


def selector_from_object(selector: JsonObject | None) -> LabelSelector:
    """A selector from a ``LabelSelector`` object (``matchLabels`` + ``matchExpressions``)."""
    if not selector:
        return LabelSelector()
    requirements = [
        LabelRequirement(k, "In", frozenset([str(v)])) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expr in selector.get("matchExpressions") or []:
        requirements.append(
            LabelRequirement(str(expr["key"]), str(expr["operator"]), frozenset(expr.get("values") or []))
        )
    return LabelSelector(tuple(requirements))


# Fields a fieldSelector can name, per the resources a real server supports them for.
def _involved(field: str) -> Callable[[JsonObject], str]:
    """An Event's ``involvedObject.<field>``."""
    return lambda o: str(o.get("involvedObject", {}).get(field) or "")


_FIELDS: dict[str, Callable[[JsonObject], str]] = {
    "metadata.name": lambda o: str(o.get("metadata", {}).get("name", "")),
    "metadata.namespace": lambda o: str(o.get("metadata", {}).get("namespace", "")),
    "spec.nodeName": lambda o: str(o.get("spec", {}).get("nodeName") or ""),
    "status.phase": lambda o: str(o.get("status", {}).get("phase") or ""),
    "spec.unschedulable": lambda o: str(bool(o.get("spec", {}).get("unschedulable"))).lower(),
    "spec.schedulerName": lambda o: str(o.get("spec", {}).get("schedulerName") or ""),
    # Events (the fields kubectl describe and kubectl get events --field-selector use).
    **{
        f"involvedObject.{field}": _involved(field)
        for field in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    },
    "reason": lambda o: str(o.get("reason") or ""),
    "type": lambda o: str(o.get("type") or ""),
    "source": lambda o: str((o.get("source") or {}).get("component") or ""),
    "reportingComponent": lambda o: str(o.get("reportingComponent") or ""),
}


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of ``field=value`` / ``field!=value`` terms."""

    terms: tuple[tuple[str, bool, str], ...] = ()

    def matches(self, obj: JsonObject) -> bool:
        """Whether every term holds for ``obj``."""
        return all((_FIELDS[name](obj) == value) == equal for name, equal, value in self.terms)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse the ``fieldSelector`` query parameter; unknown fields are a 400 like on a real server."""
    terms: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        if not part.strip():
            continue
        m = _EQ_RE.match(part)
        if m is None:
            raise bad_request(f"invalid selector: {part.strip()!r}")
        if m["key"] not in _FIELDS:
            raise ApiError(400, "BadRequest", f"field label not supported: {m['key']}")
        terms.append((m["key"], m["op"] != "!=", m["value"]))
    return FieldSelector(tuple(terms))
