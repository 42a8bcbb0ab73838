"""Fixtures local to the state tests: a hand-moved clock (moto DynamoDB comes from ``tests/fixtures``)."""

from __future__ import annotations

import pytest

from tests.support.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
