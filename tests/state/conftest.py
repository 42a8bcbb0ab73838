"""Fixtures: fake credentials and a moto DynamoDB table shaped like the one the CDK app deploys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from fleetwright.aws.clients import AwsClients
from fleetwright.state import DynamoTable
from fleetwright.state.table import create_state_table as create_table

REGION = "us-east-1"
TABLE = "fleetwright-state"
_FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in _FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)


def create_state_table(client: Any, name: str = TABLE) -> None:
    """The table as infra/state_table.py defines it."""
    create_table(client, name)


@pytest.fixture
def dynamodb(fake_credentials: None) -> Iterator[Any]:
    with mock_aws():
        client = AwsClients(REGION).client("dynamodb")
        create_state_table(client)
        yield client


@pytest.fixture
def table(dynamodb: Any) -> DynamoTable:
    return DynamoTable(TABLE, client=dynamodb)


class FakeClock:
    """Epoch seconds that tests move forward by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
