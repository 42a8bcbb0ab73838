"""The state table in memory: :class:`MemoryDynamoDB` answers the low-level DynamoDB calls
:class:`~fleetwright.state.table.DynamoTable` makes (GetItem, Query, PutItem, UpdateItem, DeleteItem,
TransactWriteItems), with the condition and update expressions the state package writes, so the claim
lifecycle, the lease and the disruption markers run unchanged without moto's request round trip (a replay
makes tens of thousands of these calls).

Items are kept in DynamoDB's typed JSON, as the client sends them. Expressions: conditions with
``attribute_exists``/``attribute_not_exists``, ``= <> < <= > >=``, ``IN (...)``, ``AND``/``OR``/``NOT`` and
parentheses; updates with ``SET`` (a value, ``if_not_exists(path, value)``, ``a + b``, ``a - b``),
``REMOVE`` and ``ADD`` on top-level attributes. Anything else raises ``ValueError``: a state change that
this stand-in does not understand fails loudly, never silently. TTL is not applied (DynamoDB deletes
expired items days later; readers already skip them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError  # type: ignore[import-untyped]

from fleetwright.local.apiserver.jsoncopy import json_copy

Typed = dict[str, Any]
Item = dict[str, Typed]

_TOKEN = re.compile(r"\s*(<>|<=|>=|[=<>(),+-]|[#:][A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*)")
_COMPARE = ("=", "<>", "<", "<=", ">", ">=")


def _tokens(text: str) -> list[str]:
    found: list[str] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"cannot read expression {text!r} at {position}")
        found.append(match.group(1))
        position = match.end()
    return found


def _plain(value: Typed | None) -> Any:
    """A typed value as something comparable (numbers as Decimal)."""
    if value is None:
        return None
    [(kind, raw)] = value.items()
    return Decimal(raw) if kind == "N" else raw


class _Condition:
    """A recursive-descent reader and evaluator of one condition expression over one item."""

    def __init__(self, text: str, names: Mapping[str, str], values: Mapping[str, Typed], item: Item | None):
        self.tokens = _tokens(text)
        self.at = 0
        self.names = names
        self.values = values
        self.item = item or {}

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise ValueError(f"expected {expected or 'a token'} at {self.at} in {' '.join(self.tokens)}")
        self.at += 1
        return token

    def evaluate(self) -> bool:
        result = self._or()
        if self._peek() is not None:
            raise ValueError(f"unexpected {self._peek()!r} in {' '.join(self.tokens)}")
        return result

    def _or(self) -> bool:
        result = self._and()
        while (self._peek() or "").upper() == "OR":
            self._take()
            right = self._and()
            result = result or right
        return result

    def _and(self) -> bool:
        result = self._not()
        while (self._peek() or "").upper() == "AND":
            self._take()
            right = self._not()
            result = result and right
        return result

    def _not(self) -> bool:
        if (self._peek() or "").upper() == "NOT":
            self._take()
            return not self._not()
        if self._peek() == "(":
            self._take("(")
            result = self._or()
            self._take(")")
            return result
        return self._predicate()

    def _predicate(self) -> bool:
        token = self._peek() or ""
        if token in ("attribute_exists", "attribute_not_exists"):
            self._take()
            self._take("(")
            name = self._name(self._take())
            self._take(")")
            return (name in self.item) == (token == "attribute_exists")
        left = self._operand()
        operator = self._take()
        if operator.upper() == "IN":
            self._take("(")
            options = [self._operand()]
            while self._peek() == ",":
                self._take(",")
                options.append(self._operand())
            self._take(")")
            return left is not None and left in options
        if operator not in _COMPARE:
            raise ValueError(f"unsupported operator {operator!r}")
        return _compare(left, operator, self._operand())

    def _name(self, token: str) -> str:
        if not token.startswith("#"):
            raise ValueError(f"expected an attribute name placeholder, got {token!r}")
        return self.names[token]

    def _operand(self) -> Any:
        token = self._take()
        if token.startswith(":"):
            return _plain(self.values[token])
        return _plain(self.item.get(self._name(token)))


def _compare(left: Any, operator: str, right: Any) -> bool:
    if operator == "=":
        return left is not None and bool(left == right)
    if operator == "<>":
        return bool(left != right)
    if left is None or right is None or type(left) is not type(right):
        return False
    return bool({"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[operator])


def _number(value: Decimal) -> Typed:
    return {"N": str(value.normalize()) if value == value.to_integral_value() else str(value)}


class _Update:
    """Applies one update expression (``SET``, ``REMOVE``, ``ADD`` clauses) to an item in place."""

    def __init__(self, text: str, names: Mapping[str, str], values: Mapping[str, Typed]):
        self.tokens = _tokens(text)
        self.at = 0
        self.names = names
        self.values = values

    def apply(self, item: Item) -> None:
        while self.at < len(self.tokens):
            clause = self.tokens[self.at].upper()
            self.at += 1
            if clause == "SET":
                self._clauses(item, self._set)
            elif clause == "REMOVE":
                self._clauses(item, lambda it: it.pop(self._name(), None))
            elif clause == "ADD":
                self._clauses(item, self._add)
            else:
                raise ValueError(f"unsupported update clause {clause!r}")

    def _clauses(self, item: Item, action: Any) -> None:
        while True:
            action(item)
            if self.at < len(self.tokens) and self.tokens[self.at] == ",":
                self.at += 1
                continue
            return

    def _name(self) -> str:
        token = self.tokens[self.at]
        self.at += 1
        if not token.startswith("#"):
            raise ValueError(f"expected an attribute name placeholder, got {token!r}")
        return self.names[token]

    def _set(self, item: Item) -> None:
        name = self._name()
        if self.tokens[self.at] != "=":
            raise ValueError("SET needs '='")
        self.at += 1
        value = self._value(item)
        while self.at < len(self.tokens) and self.tokens[self.at] in ("+", "-"):
            sign = self.tokens[self.at]
            self.at += 1
            other = Decimal(self._value(item)["N"])
            total = Decimal(value["N"]) + (other if sign == "+" else -other)
            value = _number(total)
        item[name] = value

    def _value(self, item: Item) -> Typed:
        token = self.tokens[self.at]
        self.at += 1
        if token.startswith(":"):
            return json_copy(self.values[token])
        if token.startswith("#"):
            return json_copy(item[self.names[token]])
        if token == "if_not_exists":
            self.at += 1  # "("
            name = self._name()
            self.at += 1  # ","
            fallback = self._value(item)
            self.at += 1  # ")"
            return json_copy(item[name]) if name in item else fallback
        raise ValueError(f"unsupported update value {token!r}")

    def _add(self, item: Item) -> None:
        name = self._name()
        amount = self._value(item)
        current = Decimal(item[name]["N"]) if name in item else Decimal(0)
        item[name] = _number(current + Decimal(amount["N"]))


def _failed(code: str, operation: str, reasons: Sequence[Mapping[str, str]] | None = None) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": code}}
    if reasons is not None:
        response["CancellationReasons"] = list(reasons)
    error: ClientError = ClientError(response, operation)
    return error


class _Table:
    """Items by partition key, then sort key."""

    def __init__(self) -> None:
        self.partitions: dict[str, dict[str, Item]] = {}

    def get(self, key: tuple[str, str]) -> Item | None:
        return self.partitions.get(key[0], {}).get(key[1])

    def __setitem__(self, key: tuple[str, str], item: Item) -> None:
        self.partitions.setdefault(key[0], {})[key[1]] = item

    def pop(self, key: tuple[str, str], default: None = None) -> Item | None:
        partition = self.partitions.get(key[0], {})
        return partition.pop(key[1], default)


class MemoryDynamoDB:
    """A DynamoDB client's item calls over tables with string keys ``pk`` and ``sk``, in memory."""

    def __init__(self) -> None:
        self.tables: dict[str, _Table] = {}
        self.calls = 0

    def create_table(self, TableName: str, **_: Any) -> dict[str, Any]:  # noqa: N803 - boto3's names
        self.tables.setdefault(TableName, _Table())
        return {}

    def update_time_to_live(self, **_: Any) -> dict[str, Any]:
        return {}

    @staticmethod
    def _key(key: Mapping[str, Typed]) -> tuple[str, str]:
        return str(key["pk"]["S"]), str(key["sk"]["S"])

    def _check(self, params: Mapping[str, Any], item: Item | None) -> bool:
        condition = params.get("ConditionExpression")
        if not condition:
            return True
        names = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues") or {}
        return _Condition(condition, names, values, item).evaluate()

    def get_item(self, TableName: str, Key: Mapping[str, Typed], **_: Any) -> dict[str, Any]:  # noqa: N803
        self.calls += 1
        found = self.tables[TableName].get(self._key(Key))
        return {"Item": json_copy(found)} if found is not None else {}

    def query(self, **params: Any) -> dict[str, Any]:
        self.calls += 1
        pk = str(params["ExpressionAttributeValues"][":pk"]["S"])
        partition = self.tables[params["TableName"]].partitions.get(pk, {})
        return {"Items": [json_copy(partition[sk]) for sk in sorted(partition)]}

    def _put(self, params: Mapping[str, Any], apply: bool) -> bool:
        table = self.tables[params["TableName"]]
        key = self._key(params["Item"])
        if not self._check(params, table.get(key)):
            return False
        if apply:
            table[key] = json_copy(dict(params["Item"]))
        return True

    def _update(self, params: Mapping[str, Any], apply: bool) -> Item | None:
        table = self.tables[params["TableName"]]
        key = self._key(params["Key"])
        current = table.get(key)
        if not self._check(params, current):
            return None
        updated = json_copy(current) if current is not None else {"pk": {"S": key[0]}, "sk": {"S": key[1]}}
        names = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues") or {}
        _Update(params["UpdateExpression"], names, values).apply(updated)
        if apply:
            table[key] = updated
        return updated

    def _delete(self, params: Mapping[str, Any], apply: bool) -> bool:
        table = self.tables[params["TableName"]]
        key = self._key(params["Key"])
        if not self._check(params, table.get(key)):
            return False
        if apply:
            table.pop(key, None)
        return True

    def put_item(self, **params: Any) -> dict[str, Any]:
        self.calls += 1
        if not self._put(params, True):
            raise _failed("ConditionalCheckFailedException", "PutItem")
        return {}

    def update_item(self, **params: Any) -> dict[str, Any]:
        self.calls += 1
        updated = self._update(params, True)
        if updated is None:
            raise _failed("ConditionalCheckFailedException", "UpdateItem")
        return {"Attributes": json_copy(updated)} if params.get("ReturnValues") == "ALL_NEW" else {}

    def delete_item(self, **params: Any) -> dict[str, Any]:
        self.calls += 1
        if not self._delete(params, True):
            raise _failed("ConditionalCheckFailedException", "DeleteItem")
        return {}

    def _holds(self, kind: str, params: Mapping[str, Any]) -> bool:
        if kind == "Put":
            return self._put(params, False)
        if kind == "Update":
            return self._update(params, False) is not None
        if kind == "Delete":
            return self._delete(params, False)
        if kind == "ConditionCheck":
            return self._check(params, self.tables[params["TableName"]].get(self._key(params["Key"])))
        raise ValueError(f"unsupported transaction operation {kind!r}")

    def transact_write_items(self, TransactItems: Sequence[Mapping[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.calls += 1
        operations = [next(iter(op.items())) for op in TransactItems]
        holds = [self._holds(kind, params) for kind, params in operations]
        if not all(holds):
            reasons = [{"Code": "None"} if ok else {"Code": "ConditionalCheckFailed"} for ok in holds]
            raise _failed("TransactionCanceledException", "TransactWriteItems", reasons)
        for kind, params in operations:
            if kind == "Put":
                self._put(params, True)
            elif kind == "Update":
                self._update(params, True)
            elif kind == "Delete":
                self._delete(params, True)
        return {}
