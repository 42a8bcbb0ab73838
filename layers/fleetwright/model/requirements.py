"""The requirement algebra: node selector requirements as sets of allowed label values.

A :class:`Requirement` is the set of label values a node may carry for one key, plus whether the node
may lack the label. ``In`` → exactly these values; ``NotIn`` → anything else or absent; ``Exists`` →
any value; ``DoesNotExist`` → absent; ``Gt``/``Lt``/``Gte``/``Lte`` → integer values within bounds.
Intersecting two requirements gives what satisfies both; an empty result means incompatible.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """Allowed values for one label key.

    ``complement=False``: the value must be one of ``values``. ``complement=True``: any value except
    ``values``. ``greater_than``/``less_than`` are exclusive integer bounds. ``absent_ok``: a node without
    the label satisfies it. ``min_values``: the minimum number of distinct values a claim must keep
    among its instance types (Karpenter's ``minValues``).
    """

    key: str
    complement: bool
    values: frozenset[str] = frozenset()
    absent_ok: bool = False
    greater_than: int | None = None
    less_than: int | None = None
    min_values: int | None = None

    @staticmethod
    def create(
        key: str, operator: str, values: Iterable[str] = (), min_values: int | None = None
    ) -> Requirement:
        """Build a requirement from a node selector term (``key``, ``operator``, ``values``)."""
        vals = frozenset(str(v) for v in values)
        if operator == "In":
            return Requirement(key, False, vals, min_values=min_values)
        if operator == "NotIn":
            return Requirement(key, True, vals, absent_ok=True, min_values=min_values)
        if operator == "Exists":
            return Requirement(key, True, min_values=min_values)
        if operator == "DoesNotExist":
            return Requirement(key, False, absent_ok=True, min_values=min_values)
        if operator in ("Gt", "Lt", "Gte", "Lte"):
            if len(vals) != 1 or _as_int(next(iter(vals))) is None:
                raise ValueError(f"operator {operator} needs exactly one integer value, got {sorted(vals)}")
            bound = int(next(iter(vals)))
            if operator == "Gt":
                return Requirement(key, True, greater_than=bound, min_values=min_values)
            if operator == "Gte":
                return Requirement(key, True, greater_than=bound - 1, min_values=min_values)
            if operator == "Lt":
                return Requirement(key, True, less_than=bound, min_values=min_values)
            return Requirement(key, True, less_than=bound + 1, min_values=min_values)
        raise ValueError(f"unknown operator {operator!r}; expected one of {', '.join(OPERATORS)}")

    @staticmethod
    def single(key: str, value: str) -> Requirement:
        """``key In [value]``."""
        return Requirement(key, False, frozenset((value,)))

    def _in_bounds(self, value: str) -> bool:
        if self.greater_than is None and self.less_than is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        if self.greater_than is not None and number <= self.greater_than:
            return False
        return not (self.less_than is not None and number >= self.less_than)

    def has(self, value: str) -> bool:
        """True when a node labelled ``key=value`` satisfies this requirement."""
        if self.complement:
            return value not in self.values and self._in_bounds(value)
        return value in self.values and self._in_bounds(value)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when a node with these labels satisfies this requirement."""
        value = labels.get(self.key)
        return self.absent_ok if value is None else self.has(value)

    def allows_some_value(self) -> bool:
        """True when at least one label value satisfies this requirement."""
        if not self.complement:
            return bool(self.values)
        if self.greater_than is not None and self.less_than is not None:
            low, high = self.greater_than + 1, self.less_than - 1
            if high - low + 1 <= len(self.values):
                return any(str(n) not in self.values for n in range(low, high + 1))
            return high >= low
        return True

    def is_empty(self) -> bool:
        """True when no node (labelled or not) can satisfy this requirement."""
        return not self.absent_ok and not self.allows_some_value()

    def intersect(self, other: Requirement) -> Requirement:
        """The requirement that both ``self`` and ``other`` express."""
        gt = _max_opt(self.greater_than, other.greater_than)
        lt = _min_opt(self.less_than, other.less_than)
        if self.complement and other.complement:
            complement, values = True, self.values | other.values
        elif self.complement:
            complement, values = False, other.values - self.values
        elif other.complement:
            complement, values = False, self.values - other.values
        else:
            complement, values = False, self.values & other.values
        if not complement and (gt is not None or lt is not None):
            probe = Requirement(self.key, True, greater_than=gt, less_than=lt)
            values = frozenset(v for v in values if probe._in_bounds(v))
            gt = lt = None
        return Requirement(
            self.key,
            complement,
            values,
            absent_ok=self.absent_ok and other.absent_ok,
            greater_than=gt,
            less_than=lt,
            min_values=_max_opt(self.min_values, other.min_values),
        )

    def single_value(self) -> str | None:
        """The only allowed value, when there is exactly one and the label must be present."""
        if not self.complement and len(self.values) == 1 and not self.absent_ok:
            return next(iter(self.values))
        return None

    def describe(self) -> str:
        """Human-readable form (``topology.kubernetes.io/zone In [us-east-1a]``).

        Two requirements describe alike only when they allow the same nodes: the scheduler keys its
        caches by this text, so whether the label may be absent is always spelled out
        (``team Exists NotIn [a]`` needs the label, ``team NotIn [a]`` does not).
        """
        parts: list[str] = []
        bounded = self.greater_than is not None or self.less_than is not None
        if not self.complement:
            if self.values:
                parts.append(f"In [{', '.join(sorted(self.values))}]")
                if self.absent_ok:
                    parts.append("or absent")
            else:
                parts.append("DoesNotExist" if self.absent_ok else "In []")
        else:
            if self.values and not self.absent_ok and not bounded:
                parts.append("Exists")
            if self.values:
                parts.append(f"NotIn [{', '.join(sorted(self.values))}]")
            if self.greater_than is not None:
                parts.append(f"Gt {self.greater_than}")
            if self.less_than is not None:
                parts.append(f"Lt {self.less_than}")
            if bounded and self.absent_ok:
                parts.append("or absent")
            if not parts:
                parts.append("Exists" if not self.absent_ok else "Any")
        return f"{self.key} {' '.join(parts)}"


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


@dataclass(frozen=True, slots=True)
class Requirements:
    """A conjunction of requirements, at most one per key (an AND of node selector expressions)."""

    by_key: Mapping[str, Requirement] = field(default_factory=dict)

    @staticmethod
    def of(items: Iterable[Requirement]) -> Requirements:
        """Combine requirements, intersecting those that share a key."""
        merged: dict[str, Requirement] = {}
        for item in items:
            existing = merged.get(item.key)
            merged[item.key] = item if existing is None else existing.intersect(item)
        return Requirements(merged)

    @staticmethod
    def from_labels(labels: Mapping[str, str]) -> Requirements:
        """``key In [value]`` for every label."""
        return Requirements({k: Requirement.single(k, v) for k, v in labels.items()})

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    def __contains__(self, key: object) -> bool:
        return key in self.by_key

    def get(self, key: str) -> Requirement | None:
        """The requirement on ``key``, if any."""
        return self.by_key.get(key)

    def keys(self) -> frozenset[str]:
        """The keys constrained here."""
        return frozenset(self.by_key)

    def intersect(self, other: Requirements) -> Requirements:
        """Requirements satisfying both sides."""
        if not other.by_key:
            return self
        if not self.by_key:
            return other
        merged = dict(self.by_key)
        for key, req in other.by_key.items():
            existing = merged.get(key)
            merged[key] = req if existing is None else existing.intersect(req)
        return Requirements(merged)

    def conflicts(self, other: Requirements) -> list[str]:
        """Descriptions of keys on which ``self`` and ``other`` cannot both hold (empty: compatible)."""
        problems: list[str] = []
        small, large = (self, other) if len(self.by_key) <= len(other.by_key) else (other, self)
        for key, req in small.by_key.items():
            counterpart = large.by_key.get(key)
            if counterpart is not None and req.intersect(counterpart).is_empty():
                mine = self.by_key[key]
                theirs = other.by_key[key]
                problems.append(f"{mine.describe()} conflicts with {theirs.describe()}")
        return problems

    def compatible(self, other: Requirements) -> bool:
        """True when some node can satisfy both sets of requirements."""
        small, large = (self, other) if len(self.by_key) <= len(other.by_key) else (other, self)
        for key, req in small.by_key.items():
            counterpart = large.by_key.get(key)
            if counterpart is not None and req.intersect(counterpart).is_empty():
                return False
        return True

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when a node with these labels satisfies every requirement."""
        return all(req.matches(labels) for req in self.by_key.values())

    def single_values(self) -> dict[str, str]:
        """Labels implied by requirements with exactly one allowed value."""
        labels: dict[str, str] = {}
        for key, req in self.by_key.items():
            value = req.single_value()
            if value is not None:
                labels[key] = value
        return labels

    def describe(self) -> str:
        """``a In [x], b Exists`` for messages."""
        return ", ".join(req.describe() for _, req in sorted(self.by_key.items()))


def requirements_from_expressions(expressions: Iterable[Mapping[str, object]]) -> Requirements:
    """Build requirements from node selector expressions (``key``/``operator``/``values``/``minValues``)."""
    items = []
    for expr in expressions:
        raw_values = expr.get("values") or []
        values = [str(v) for v in raw_values] if isinstance(raw_values, list) else []
        min_values = expr.get("minValues")
        items.append(
            Requirement.create(
                str(expr["key"]),
                str(expr["operator"]),
                values,
                min_values=int(min_values) if isinstance(min_values, int) else None,
            )
        )
    return Requirements.of(items)
