"""The termination workflow run in-process, step by step, for the local demo (no Step Functions).

It follows the state machine in ``infra/termination_workflow.py`` state for state: cordon, optional wait
for replacement, drain passes with a wait between them, terminate, wait for shutdown, delete the Node,
finalize the claim; ``TransientError`` is retried with backoff and any other error takes the failure path
(``record_failure``). The deployed workflow is the state machine; tests run that definition on moto's
interpreter and check this runner reaches the same end state.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetwright.termination.errors import is_transient
from fleetwright.termination.steps import State, TerminationSteps

RETRY_ATTEMPTS = 5
RETRY_INTERVAL_SECONDS = 2.0
RETRY_BACKOFF = 2.0


@dataclass(slots=True)
class LocalExecution:
    """An in-process run: ``status`` SUCCEEDED or FAILED, the final ``state``, the steps run in order."""

    name: str
    status: str = "RUNNING"
    state: State = field(default_factory=dict)
    history: list[str] = field(default_factory=list)


class InProcessWorkflow:
    """Runs termination workflows synchronously with :class:`TerminationSteps`.

    ``sleep`` is called for every Wait (pass ``lambda s: None`` to skip waiting) and ``max_passes`` bounds
    each loop so a stuck drain cannot hang the demo (the deadline normally ends it first).
    """

    def __init__(
        self,
        steps: TerminationSteps,
        *,
        sleep: Callable[[float], None] = time.sleep,
        max_passes: int = 1000,
    ) -> None:
        self.steps = steps
        self.sleep = sleep
        self.max_passes = max_passes
        self.executions: dict[str, LocalExecution] = {}

    def run(self, name: str, request: dict[str, Any]) -> LocalExecution:
        """Run one execution to its end."""
        execution = LocalExecution(name)
        self.executions[name] = execution
        state: State = dict(request)
        try:
            state = self._step(execution, "cordon", state)
            if state["request"].get("waitForReplacement"):
                state = self._loop(
                    execution, "await_replacement", state, ("replacement", "ready"), "drainIntervalSeconds"
                )
            state = self._loop(execution, "drain", state, ("drain", "done"), "drainIntervalSeconds")
            if state["drain"].get("abandoned"):
                execution.history.append("called_off")
                execution.state = state
                execution.status = "SUCCEEDED"
                return execution
            state = self._step(execution, "terminate", state)
            if not state["instance"].get("gone"):
                state = self._loop(execution, "check_instance", state, ("instance", "gone"), "pollSeconds")
            state = self._step(execution, "delete_node", state)
            state = self._step(execution, "finalize_claim", state)
        except Exception as error:
            failed = {
                **state,
                "error": {
                    "Error": type(error).__name__,
                    "Cause": json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)}),
                },
            }
            try:
                failed = self._step(execution, "record_failure", failed)
                while (failed.get("failure") or {}).get("pending"):  # the API was away: try again
                    self.sleep(float(failed["failure"].get("retrySeconds") or 0))
                    failed = self._step(execution, "record_failure", failed)
            except Exception:  # the failure path must end in FAILED whatever happens
                execution.history.append("record_failure:error")
            execution.state = failed
            execution.status = "FAILED"
            return execution
        execution.state = state
        execution.status = "SUCCEEDED"
        return execution

    def _loop(
        self, execution: LocalExecution, step: str, state: State, flag: tuple[str, str], wait_key: str
    ) -> State:
        for _ in range(self.max_passes):
            state = self._step(execution, step, state)
            section = state.get(flag[0]) or {}
            if section.get(flag[1]) or section.get("abandoned"):
                return state
            # the drain step paces itself (drain.waitSeconds); the other loops wait a fixed interval
            paced = section.get("waitSeconds")
            self.sleep(float(paced if paced is not None else state["request"].get(wait_key) or 0))
        raise TimeoutError(f"{step} did not finish after {self.max_passes} passes")

    def _step(self, execution: LocalExecution, step: str, state: State) -> State:
        delay = RETRY_INTERVAL_SECONDS
        for attempt in range(1, RETRY_ATTEMPTS + 2):
            try:
                result = self.steps.run(step, state)
            except Exception as error:
                if not is_transient(error) or attempt > RETRY_ATTEMPTS:
                    raise
                self.sleep(delay)
                delay *= RETRY_BACKOFF
                continue
            execution.history.append(step)
            return result
        raise AssertionError("unreachable")  # pragma: no cover
