"""Continuing a long workflow in a fresh execution of the same state machine.

A Standard execution may hold 25,000 history events and must end before the state machine's timeout; a
drain held by a PodDisruptionBudget (or a scheduled change days away) outlives both. So after
``passesPerExecution`` loop passes, or once the execution is ``executionSeconds`` old, the ``continue``
step starts a new execution with the current state and a ``resume`` marker, and the old one ends in
``ContinuedInNewExecution``. The state machine ARN and the start time come from the Task payload's
``context`` (``$$.StateMachine.Id``, ``$$.Execution.StartTime``).

Execution names start with ``<instance id>-`` (a node's running workflow is found by that prefix):
``<first execution's name>-c<n>``, at most 80 characters of ``[A-Za-z0-9_-]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAX_NAME = 80
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """The parts of the Step Functions context object a step reads (all empty outside Step Functions)."""

    name: str = ""
    state_machine_arn: str = ""
    start_epoch: float | None = None

    @classmethod
    def from_payload(cls, raw: Any) -> ExecutionContext:
        """From the Task payload's ``context``: ``execution``, ``stateMachine``, ``startTime`` (ISO 8601)."""
        if not isinstance(raw, Mapping):
            return cls()
        return cls(
            name=str(raw.get("execution") or ""),
            state_machine_arn=str(raw.get("stateMachine") or ""),
            start_epoch=parse_time(raw.get("startTime")),
        )


def parse_time(value: Any) -> float | None:
    """Epoch seconds of an ISO 8601 time (``...Z`` or with an offset); None when absent or unreadable."""
    if not value:
        return None
    text = str(value).strip().replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def should_continue(
    passes: int, context: ExecutionContext, *, now: float, max_passes: int, max_seconds: float
) -> bool:
    """True when this execution has run ``max_passes`` loop passes or is ``max_seconds`` old (and there is
    a state machine to continue in)."""
    if not context.state_machine_arn:
        return False
    if passes >= max_passes:
        return True
    return context.start_epoch is not None and now - context.start_epoch >= max_seconds


def continuation_name(origin: str, instance_id: str, count: int) -> str:
    """``<origin>-c<count>``: valid characters only, at most 80, always starting with ``<instance id>-``."""
    base = _INVALID.sub("-", origin) or instance_id
    prefix = f"{instance_id}-"
    if instance_id and not base.startswith(prefix):
        base = prefix + base
    suffix = f"-c{count}"
    return base[: MAX_NAME - len(suffix)] + suffix


def origin_of(state: Mapping[str, Any], context: ExecutionContext) -> str:
    """The first execution's name (kept in ``resume.origin`` by every continuation)."""
    resume = state.get("resume")
    if isinstance(resume, Mapping) and resume.get("origin"):
        return str(resume["origin"])
    return context.name


def carried_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """What a continuation needs of the state: the request, the replacement wait and the drain's pacing
    and counters (not the pod lists, which the next pass finds again)."""
    carried: dict[str, Any] = {"request": dict(state.get("request") or {})}
    replacement = state.get("replacement")
    if isinstance(replacement, Mapping):
        carried["replacement"] = {**replacement, "continueInNewExecution": False}
    drain = state.get("drain")
    if isinstance(drain, Mapping):
        carried["drain"] = {
            k: drain[k]
            for k in ("passes", "remaining", "waitSeconds", "apiErrors", "done", "abandoned")
            if k in drain
        }
        carried["drain"]["continueInNewExecution"] = False
    return carried
