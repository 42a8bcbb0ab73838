"""The state table of the tests: its name and how to create it in moto as the CDK app deploys it."""

from __future__ import annotations

from typing import Any

from fleetwright.state.table import create_state_table as create_table

TABLE = "fleetwright-state"


def create_state_table(client: Any, name: str = TABLE) -> None:
    """The table as infra/state_table.py defines it."""
    create_table(client, name)
