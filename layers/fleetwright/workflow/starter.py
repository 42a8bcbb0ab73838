"""Starting and looking up termination workflows.

Execution names start with ``<instance id>-`` (interruptions: ``<instance id>-<kind>-<attempt>``,
disruptions: ``<instance id>-<reason>-<time>``), so the executions working on an instance can be found
by prefix, continued executions included. Step Functions keeps a name for 90 days, so each attempt gets
its own; which attempt is current is kept in the state table (``fleetwright.state.interruptions``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, Protocol

from fleetwright.workflow.request import TerminationRequest

MAX_NAME_LENGTH = 80  # Step Functions' limit on execution names
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")

# Execution statuses (Step Functions' names); None stands for "no such execution".
RUNNING: Final = "RUNNING"
SUCCEEDED: Final = "SUCCEEDED"
FAILED: Final = "FAILED"
TIMED_OUT: Final = "TIMED_OUT"
ABORTED: Final = "ABORTED"
ENDED_UNSUCCESSFULLY: Final = frozenset({FAILED, TIMED_OUT, ABORTED})


def execution_name(instance_id: str, reason: str, attempt: int | None = None) -> str:
    """``<instance id>-<reason>[-<attempt>]``, limited to the characters and length Step Functions
    accepts (the reason is shortened, never the instance id or the attempt)."""
    suffix = f"-{attempt}" if attempt is not None else ""
    return _UNSAFE.sub("-", f"{instance_id}-{reason}")[: MAX_NAME_LENGTH - len(suffix)] + suffix


def instance_prefix(instance_id: str) -> str:
    """What every execution name about ``instance_id`` starts with."""
    return f"{instance_id}-"


@dataclass(frozen=True, slots=True)
class StartResult:
    """``started`` is False when an execution by that name already existed; ``execution`` is its id/ARN."""

    started: bool
    execution: str


class WorkflowStarter(Protocol):
    """Where termination workflows are started."""

    def status(self, name: str) -> str | None:
        """The status of the execution called ``name`` (RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED);
        None when there is none."""
        ...

    def start(self, name: str, request: TerminationRequest) -> StartResult:
        """Start an execution called ``name`` with ``request`` as its input."""
        ...


class ExecutionLister(Protocol):
    """What the disruption sweep needs: the executions still running."""

    def running(self) -> list[str]:
        """The names of the RUNNING executions."""
        ...


def _error_code(error: Exception) -> str:
    response: Any = getattr(error, "response", None)
    return str(((response or {}).get("Error") or {}).get("Code", "")) if isinstance(response, dict) else ""


class StepFunctionsStarter:
    """:class:`WorkflowStarter` on AWS Step Functions (``client`` is a boto3 ``stepfunctions`` client)."""

    def __init__(self, client: Any, state_machine_arn: str) -> None:
        self.client = client
        self.state_machine_arn = state_machine_arn

    def execution_arn(self, name: str) -> str:
        """The ARN an execution called ``name`` of this state machine has."""
        prefix, _, machine = self.state_machine_arn.partition(":stateMachine:")
        return f"{prefix}:execution:{machine}:{name}"

    def status(self, name: str) -> str | None:
        """``DescribeExecution``'s status; None when no execution has that name."""
        try:
            answer = self.client.describe_execution(executionArn=self.execution_arn(name))
        except Exception as error:
            if _error_code(error) == "ExecutionDoesNotExist":
                return None
            raise
        return str(answer["status"])

    def running(self) -> list[str]:
        """Names of the state machine's RUNNING executions (``ListExecutions``, every page)."""
        names: list[str] = []
        paginator = self.client.get_paginator("list_executions")
        for page in paginator.paginate(stateMachineArn=self.state_machine_arn, statusFilter=RUNNING):
            names.extend(str(e["name"]) for e in page.get("executions", []))
        return names

    def start(self, name: str, request: TerminationRequest) -> StartResult:
        """Start the execution; an existing one by that name is reported as ``started=False``."""
        try:
            answer = self.client.start_execution(
                stateMachineArn=self.state_machine_arn,
                name=name,
                input=json.dumps(request.to_json(), sort_keys=True),
            )
        except Exception as error:
            if _error_code(error) == "ExecutionAlreadyExists":
                return StartResult(False, self.execution_arn(name))
            raise
        return StartResult(True, str(answer["executionArn"]))
