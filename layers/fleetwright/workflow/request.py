"""The termination workflow's input and the state its steps pass along.

The state machine's input is a flat :class:`TerminationRequest` (camelCase JSON). The first step validates
it and fills in defaults; from then on the state is ``{"request": {...}, "<step>": {...}}``: each step
returns the whole state with its own section updated, so the Choice and Wait states read
``$.request.drainIntervalSeconds``, ``$.drain.done`` and so on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_DRAIN_INTERVAL_SECONDS = 5
DEFAULT_POLL_SECONDS = 5
DEFAULT_DRAIN_RESERVE_SECONDS = 60
DEFAULT_TERMINATE_TIMEOUT_SECONDS = 600
# Growing waits between drain passes: up to this many seconds while no pod leaves.
DEFAULT_MAX_DRAIN_INTERVAL_SECONDS = 60
# Continue in a new execution after this many loop passes or this execution age, well inside Step
# Functions' 25,000 history events (a drain pass costs ~9) and the state machine's 24 h timeout.
DEFAULT_PASSES_PER_EXECUTION = 500
DEFAULT_EXECUTION_SECONDS = 20 * 3600
# What happens to pods still on the node at the deadline.
DELETE_AT_DEADLINE = (
    "delete"  # delete them (an explicit deadline: interruption notice, terminationGracePeriod)
)
ABANDON_AT_DEADLINE = "abandon"  # call the disruption off: uncordon the node and keep the instance


class TerminationRequest(BaseModel):
    """What to terminate, why, and by when.

    ``node`` is the Node's name ("" when the instance never registered); ``claim_id`` the NodeClaim to
    finalize ("" when unknown). Pods still on the node at ``deadline`` are deleted, or, with ``on_deadline``
    ``abandon`` (a graceful disruption whose NodePool sets no ``terminationGracePeriod``), left alone: the
    node is uncordoned and the instance kept. ``uncordon_on_failure`` is accepted for older callers: a
    workflow that fails before terminating a still running instance now gives the node back whatever the
    reason. With
    ``wait_for_replacement`` the drain starts once the nodes of ``replacement_claims`` are Ready, or when
    only ``drain_reserve_seconds`` remain before the deadline. ``drain_interval_seconds`` is the Wait between
    drain passes (growing up to ``max_drain_interval_seconds`` while no pod leaves) and ``poll_seconds``
    between instance state checks; a terminated instance that has not reached shutting-down after
    ``terminate_timeout_seconds`` fails the workflow. After ``passes_per_execution`` loop passes, or once an
    execution is ``execution_seconds`` old, the workflow continues in a new execution.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    node: str = ""
    instance_id: str = Field(alias="instanceId", pattern=r"^i-[0-9a-zA-Z]+$")
    claim_id: str = Field(alias="claimId", default="")
    reason: str = Field(min_length=1)
    deadline: datetime
    wait_for_replacement: bool = Field(alias="waitForReplacement", default=False)
    replacement_claims: list[str] = Field(alias="replacementClaims", default_factory=list)
    drain_interval_seconds: int = Field(
        alias="drainIntervalSeconds", default=DEFAULT_DRAIN_INTERVAL_SECONDS, ge=0
    )
    poll_seconds: int = Field(alias="pollSeconds", default=DEFAULT_POLL_SECONDS, ge=0)
    drain_reserve_seconds: int = Field(
        alias="drainReserveSeconds", default=DEFAULT_DRAIN_RESERVE_SECONDS, ge=0
    )
    terminate_timeout_seconds: int = Field(
        alias="terminateTimeoutSeconds", default=DEFAULT_TERMINATE_TIMEOUT_SECONDS, ge=0
    )
    max_drain_interval_seconds: int = Field(
        alias="maxDrainIntervalSeconds", default=DEFAULT_MAX_DRAIN_INTERVAL_SECONDS, ge=0
    )
    passes_per_execution: int = Field(
        alias="passesPerExecution", default=DEFAULT_PASSES_PER_EXECUTION, ge=1, le=2000
    )
    execution_seconds: int = Field(
        alias="executionSeconds", default=DEFAULT_EXECUTION_SECONDS, ge=60, le=23 * 3600
    )
    uncordon_on_failure: bool = Field(alias="uncordonOnFailure", default=False)
    on_deadline: str = Field(
        alias="onDeadline",
        default=DELETE_AT_DEADLINE,
        pattern=f"^({DELETE_AT_DEADLINE}|{ABANDON_AT_DEADLINE})$",
    )

    @field_validator("deadline")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    def to_json(self) -> dict[str, Any]:
        """The request as the workflow's JSON (camelCase, ISO 8601 deadline in UTC)."""
        data = self.model_dump(by_alias=True)
        data["deadline"] = format_time(self.deadline)
        return data

    @property
    def deadline_epoch(self) -> float:
        """The deadline in epoch seconds."""
        return self.deadline.timestamp()


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` (what the workflow's input and events carry)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_to_iso(seconds: float) -> str:
    """Epoch seconds as ISO 8601 UTC."""
    return format_time(datetime.fromtimestamp(seconds, tz=UTC))
