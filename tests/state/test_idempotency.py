"""Powertools idempotency records kept in the state table."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

from fleetwright.state import DynamoTable, StateStore


class FakeContext:
    function_name = "provisioner"
    aws_request_id = "request-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def test_a_repeated_event_runs_once_and_its_record_expires(table: DynamoTable, dynamodb: Any) -> None:
    store = StateStore(table, "demo")
    calls: list[str] = []

    config = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=3600)
    config.register_lambda_context(FakeContext())

    @idempotent_function(
        data_keyword_argument="event",
        persistence_store=store.idempotency_layer("provisioner"),
        config=config,
    )
    def run(*, event: dict[str, Any]) -> dict[str, Any]:
        calls.append(event["id"])
        return {"launched": len(calls)}

    first = run(event={"id": "event-1", "detail-type": "Scheduled Event"})
    again = run(event={"id": "event-1", "detail-type": "Scheduled Event"})
    other = run(event={"id": "event-2", "detail-type": "Scheduled Event"})
    assert calls == ["event-1", "event-2"]
    assert first == again == {"launched": 1}
    assert other == {"launched": 2}
    items = dynamodb.scan(TableName=table.name)["Items"]
    assert {i["pk"]["S"] for i in items} == {"IDEMPOTENCY#demo#provisioner"}
    assert all("expiresAt" in i and i["status"]["S"] == "COMPLETED" for i in items)
