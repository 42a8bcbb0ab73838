"""A thin layer over the DynamoDB client: Python values in and out, conditional writes that say whether
they applied.

The low-level client is used (not the boto3 resource) so the client is the one every other Fleetwright
AWS call shares, with its retry configuration. Floats are stored as DynamoDB numbers and come back as
``int`` when integral, else ``float``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from fleetwright.aws.clients import clients_for, error_code

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expiresAt"  # epoch seconds (a number); DynamoDB deletes the item some time after it
CONDITION_FAILED = "ConditionalCheckFailedException"
TRANSACTION_CANCELED = "TransactionCanceledException"
CONDITION_CHECK_FAILED = "ConditionalCheckFailed"  # a cancellation reason

Item = dict[str, Any]
TransactOp = dict[str, Any]  # one element of TransactWriteItems' TransactItems


@dataclass(frozen=True, slots=True)
class TransactResult:
    """What a transactional write did: applied, or cancelled because the conditions at ``failed``
    (indices into the operations) did not hold."""

    failed: tuple[int, ...] = ()

    @property
    def applied(self) -> bool:
        """True when every write applied."""
        return not self.failed


class TransactionConflictError(Exception):
    """A transaction was cancelled for a reason other than a failed condition (a concurrent transaction
    on the same item, throttling): nothing was written and the caller may retry."""


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {str(k): _to_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, set)):
        return [_from_dynamo(v) for v in value]
    return value


class DynamoTable:
    """One DynamoDB table with string keys ``pk`` and ``sk``.

    ``client`` defaults to the module-scope DynamoDB client of ``region`` (created on first use).
    """

    def __init__(self, name: str, *, region: str | None = None, client: Any = None) -> None:
        self.name = name
        self.region = region
        self._client = client
        self._serializer: Any = None
        self._deserializer: Any = None

    @property
    def client(self) -> Any:
        """The DynamoDB client (built on first use)."""
        if self._client is None:
            import os

            region = self.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            if not region:
                raise ValueError("no AWS region: pass region= or set AWS_REGION")
            self._client = clients_for(region).client("dynamodb")
        return self._client

    def _serialize(self, item: Mapping[str, Any]) -> dict[str, Any]:
        if self._serializer is None:
            from boto3.dynamodb.types import TypeSerializer  # type: ignore[import-untyped]

            self._serializer = TypeSerializer()
        return {k: self._serializer.serialize(_to_dynamo(v)) for k, v in item.items() if v is not None}

    def _deserialize(self, item: Mapping[str, Any]) -> Item:
        if self._deserializer is None:
            from boto3.dynamodb.types import TypeDeserializer

            self._deserializer = TypeDeserializer()
        return {k: _from_dynamo(self._deserializer.deserialize(v)) for k, v in item.items()}

    def _expression(
        self, params: dict[str, Any], names: Mapping[str, str] | None, values: Mapping[str, Any] | None
    ) -> None:
        if names:
            params["ExpressionAttributeNames"] = dict(names)
        if values:
            params["ExpressionAttributeValues"] = self._serialize(values)

    @staticmethod
    def key(pk: str, sk: str) -> dict[str, str]:
        """The primary key of an item."""
        return {PARTITION_KEY: pk, SORT_KEY: sk}

    def put(
        self,
        item: Mapping[str, Any],
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write ``item`` (None attributes are left out); False when ``condition`` did not hold."""
        return self.write(self.put_op(item, condition=condition, names=names, values=values))

    def get(self, pk: str, sk: str, *, consistent: bool = True) -> Item | None:
        """The item, or None."""
        response = self.client.get_item(
            TableName=self.name, Key=self._serialize(self.key(pk, sk)), ConsistentRead=consistent
        )
        found = response.get("Item")
        return self._deserialize(found) if found else None

    def query(self, pk: str, *, consistent: bool = True) -> list[Item]:
        """Every item of partition ``pk``, by sort key (all pages)."""
        items: list[Item] = []
        params: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY},
            "ExpressionAttributeValues": self._serialize({":pk": pk}),
            "ConsistentRead": consistent,
        }
        while True:
            response = self.client.query(**params)
            items.extend(self._deserialize(i) for i in response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last:
                return items
            params["ExclusiveStartKey"] = last

    def update(
        self,
        pk: str,
        sk: str,
        *,
        set_fields: Mapping[str, Any] | None = None,
        remove: Iterable[str] = (),
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> bool:
        """Set and remove attributes; False when ``condition`` did not hold (nothing changed then).

        Attributes set to None are removed.
        """
        params = self._update_params(pk, sk, set_fields, remove, condition, names, values)
        return self._conditional(self.client.update_item, params)

    def _update_params(
        self,
        pk: str,
        sk: str,
        set_fields: Mapping[str, Any] | None,
        remove: Iterable[str],
        condition: str | None,
        names: Mapping[str, str] | None,
        values: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        all_names = dict(names or {})
        all_values = dict(values or {})
        sets = []
        removes = []
        for i, (field, value) in enumerate((set_fields or {}).items()):
            all_names[f"#u{i}"] = field
            if value is None:
                removes.append(f"#u{i}")
            else:
                all_values[f":u{i}"] = value
                sets.append(f"#u{i} = :u{i}")
        for j, field in enumerate(remove):
            all_names[f"#r{j}"] = field
            removes.append(f"#r{j}")
        expression = []
        if sets:
            expression.append("SET " + ", ".join(sets))
        if removes:
            expression.append("REMOVE " + ", ".join(removes))
        if not expression:
            raise ValueError("update needs at least one attribute to set or remove")
        params: dict[str, Any] = {
            "TableName": self.name,
            "Key": self._serialize(self.key(pk, sk)),
            "UpdateExpression": " ".join(expression),
        }
        if condition:
            params["ConditionExpression"] = condition
        self._expression(params, all_names, all_values)
        return params

    def update_expression(
        self,
        pk: str,
        sk: str,
        *,
        expression: str,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> Item | None:
        """An UpdateItem with a hand-written ``expression`` (e.g. ``if_not_exists`` arithmetic); the item
        as it is afterwards, or None when ``condition`` did not hold."""
        params: dict[str, Any] = {
            "TableName": self.name,
            "Key": self._serialize(self.key(pk, sk)),
            "UpdateExpression": expression,
            "ReturnValues": "ALL_NEW",
        }
        if condition:
            params["ConditionExpression"] = condition
        self._expression(params, names, values)
        try:
            response = self.client.update_item(**params)
        except Exception as error:
            if error_code(error) == CONDITION_FAILED:
                return None
            raise
        return self._deserialize(response.get("Attributes") or {})

    # -- transactions: several writes that apply together or not at all -----------------------------------

    def put_op(
        self,
        item: Mapping[str, Any],
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> TransactOp:
        """A put for :meth:`transact` (as :meth:`put`)."""
        params: dict[str, Any] = {"TableName": self.name, "Item": self._serialize(item)}
        if condition:
            params["ConditionExpression"] = condition
        self._expression(params, names, values)
        return {"Put": params}

    def update_op(
        self,
        pk: str,
        sk: str,
        *,
        set_fields: Mapping[str, Any] | None = None,
        remove: Iterable[str] = (),
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> TransactOp:
        """An update for :meth:`transact` (as :meth:`update`)."""
        return {"Update": self._update_params(pk, sk, set_fields, remove, condition, names, values)}

    def check_op(
        self,
        pk: str,
        sk: str,
        *,
        condition: str,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> TransactOp:
        """A condition on another item that the transaction requires (a ConditionCheck)."""
        params: dict[str, Any] = {
            "TableName": self.name,
            "Key": self._serialize(self.key(pk, sk)),
            "ConditionExpression": condition,
        }
        self._expression(params, names, values)
        return {"ConditionCheck": params}

    def add_op(self, pk: str, sk: str, attribute: str, amount: int = 1) -> TransactOp:
        """An update adding ``amount`` to the number ``attribute`` (0 when absent) for :meth:`transact`."""
        params: dict[str, Any] = {
            "TableName": self.name,
            "Key": self._serialize(self.key(pk, sk)),
            "UpdateExpression": "ADD #n :amount",
        }
        self._expression(params, {"#n": attribute}, {":amount": amount})
        return {"Update": params}

    def delete_op(
        self,
        pk: str,
        sk: str,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> TransactOp:
        """A delete for :meth:`transact` (as :meth:`delete`)."""
        params: dict[str, Any] = {"TableName": self.name, "Key": self._serialize(self.key(pk, sk))}
        if condition:
            params["ConditionExpression"] = condition
        self._expression(params, names, values)
        return {"Delete": params}

    def write(self, op: TransactOp) -> bool:
        """One put, update or delete built for :meth:`transact`, on its own; False when its condition
        failed."""
        [(kind, params)] = op.items()
        calls = {
            "Put": self.client.put_item,
            "Update": self.client.update_item,
            "Delete": self.client.delete_item,
        }
        return self._conditional(calls[kind], params)

    def transact(self, ops: Sequence[TransactOp]) -> TransactResult:
        """Apply ``ops`` together (TransactWriteItems) or not at all.

        A cancelled transaction reports which conditions failed (from DynamoDB's CancellationReasons);
        raises :class:`TransactionConflictError` when it was cancelled for another reason.
        """
        try:
            self.client.transact_write_items(TransactItems=list(ops))
        except Exception as error:
            if error_code(error) != TRANSACTION_CANCELED:
                raise
            reasons = list(getattr(error, "response", {}).get("CancellationReasons") or [])
            failed = tuple(
                i for i, reason in enumerate(reasons) if reason.get("Code") == CONDITION_CHECK_FAILED
            )
            if not failed:
                codes = sorted({str(r.get("Code")) for r in reasons if r.get("Code") not in (None, "None")})
                raise TransactionConflictError(
                    f"transaction cancelled: {', '.join(codes) or 'no reason given'}"
                ) from error
            return TransactResult(failed)
        return TransactResult()

    def delete(
        self,
        pk: str,
        sk: str,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> bool:
        """Delete the item; False when ``condition`` did not hold."""
        return self.write(self.delete_op(pk, sk, condition=condition, names=names, values=values))

    @staticmethod
    def _conditional(call: Any, params: dict[str, Any]) -> bool:
        try:
            call(**params)
        except Exception as error:
            if error_code(error) == CONDITION_FAILED:
                return False
            raise
        return True


def create_state_table(client: Any, name: str) -> None:
    """Create the table as ``infra/state_table.py`` deploys it (pk/sk strings, on demand, TTL on
    ``expiresAt``) — for the local sandbox and tests; production tables come from CDK."""
    client.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": SORT_KEY, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )
