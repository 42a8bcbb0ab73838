"""Starting the termination workflow, once per instance and reason.

The execution name is derived from the instance and the reason, so a duplicate delivery of the same event
(SQS is at-least-once, EventBridge too) finds the execution the first delivery started: Step Functions
answers ``ExecutionAlreadyExists`` (or returns the running execution for an identical input), and both mean
"already started".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from fleetwright.termination.request import TerminationRequest

MAX_NAME_LENGTH = 80  # Step Functions' limit on execution names
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def execution_name(instance_id: str, reason: str) -> str:
    """``<instance id>-<reason>``, limited to the characters and length Step Functions accepts."""
    return _UNSAFE.sub("-", f"{instance_id}-{reason}")[:MAX_NAME_LENGTH]


@dataclass(frozen=True, slots=True)
class StartResult:
    """``started`` is False when an execution by that name already existed; ``execution`` is its id/ARN."""

    started: bool
    execution: str


class WorkflowStarter(Protocol):
    """Where termination workflows are started."""

    def already_started(self, name: str) -> bool:
        """True when an execution called ``name`` exists (running or finished)."""
        ...

    def start(self, name: str, request: TerminationRequest) -> StartResult:
        """Start an execution called ``name`` with ``request`` as its input."""
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

    def already_started(self, name: str) -> bool:
        """True when an execution called ``name`` exists (running or finished)."""
        try:
            self.client.describe_execution(executionArn=self.execution_arn(name))
        except Exception as error:
            if _error_code(error) == "ExecutionDoesNotExist":
                return False
            raise
        return True

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
