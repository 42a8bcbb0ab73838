"""Waiting for something done on another thread (the emulator's controllers, a workflow run, a watch), for
the tests marked ``real_time`` (``tests/conftest.py``): the one place a test polls the real clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.05) -> T:
    """Poll until ``condition`` returns something truthy; fail with the last value after ``timeout``."""
    deadline = time.monotonic() + timeout
    value = condition()
    while not value:
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value: {value!r})")
        time.sleep(interval)
        value = condition()
    return value
