"""Termination workflows on the replay's virtual clock: each execution runs the in-process workflow
(:class:`~fleetwright.local.inprocess.termination.InProcessWorkflow`, the state machine's steps) unchanged,
on its own thread, but only while the engine hands it the turn: every Wait of the workflow hands the turn
back with the virtual time it wants to wake at, so drains, waits for replacements and instance polls
interleave with the rest of the cluster as Step Functions executions do, one step at a time and in a
fixed order (the replay stays deterministic).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetwright.local.inprocess.termination import InProcessWorkflow, LocalExecution
from fleetwright.termination.steps import TerminationSteps
from fleetwright.workflow.request import TerminationRequest
from fleetwright.workflow.starter import StartResult


class Cancelled(BaseException):
    """Raised in a task's thread when the replay ends before the task does (unwinds the workflow)."""


class Task:
    """A function run on its own thread, one turn at a time: :meth:`resume` runs it until it calls
    :meth:`sleep` (or returns); ``wake_at`` is when it wants the next turn."""

    def __init__(self, name: str, body: Callable[[Task], None], clock: Callable[[], float]) -> None:
        self.name = name
        self.clock = clock
        self.wake_at = clock()
        self.done = False
        self.error: BaseException | None = None
        self._body = body
        self._turn = threading.Event()
        self._yielded = threading.Event()
        self._cancelled = False
        self._thread: threading.Thread | None = None

    def sleep(self, seconds: float) -> None:
        """Called from the task: hand the turn back until ``seconds`` of virtual time have passed."""
        self.wake_at = self.clock() + max(0.0, seconds)
        self._yielded.set()
        self._turn.wait()
        self._turn.clear()
        if self._cancelled:
            raise Cancelled(self.name)

    def _main(self) -> None:
        try:
            self._body(self)
        except Cancelled:
            pass
        except BaseException as error:  # reported by the engine, never lost
            self.error = error
        finally:
            self.done = True
            self._yielded.set()

    def resume(self) -> None:
        """Give the task the turn and wait until it hands it back."""
        if self.done:
            return
        self._yielded.clear()
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=f"workflow-{self.name}", daemon=True)
            self._thread.start()
        else:
            self._turn.set()
        self._yielded.wait()

    def cancel(self) -> None:
        """End a task that is waiting (its thread unwinds)."""
        if self._thread is None or self.done:
            self.done = True
            return
        self._cancelled = True
        self.resume()
        self._thread.join(timeout=5)


@dataclass
class SimWorkflows:
    """The workflow starter of the replay's disruption controller: executions are queued when started
    (the pass finishes first, as with Step Functions) and become tasks the engine runs."""

    steps: TerminationSteps
    clock: Callable[[], float]
    queued: list[Task] = field(default_factory=list)
    tasks: dict[str, Task] = field(default_factory=dict)
    executions: dict[str, LocalExecution] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)  # workflows started, by request reason

    def status(self, name: str) -> str | None:
        """RUNNING until the execution ends, then its status; None when unknown."""
        task = self.tasks.get(name)
        if task is None:
            return None
        execution = self.executions.get(name)
        if not task.done or execution is None:
            return "RUNNING" if not task.done else "FAILED"
        return execution.status

    def already_started(self, name: str) -> bool:
        """True when an execution by that name was started."""
        return name in self.tasks

    def running(self) -> list[str]:
        """The executions not finished yet."""
        return [name for name, task in self.tasks.items() if not task.done]

    def start(self, name: str, request: TerminationRequest) -> StartResult:
        """Queue the execution (``started=False`` when the name is taken)."""
        if name in self.tasks:
            return StartResult(False, name)
        body: dict[str, Any] = json.loads(json.dumps(request.to_json()))
        self.reasons[request.reason] = self.reasons.get(request.reason, 0) + 1

        def run(task: Task) -> None:
            runner = InProcessWorkflow(self.steps, sleep=task.sleep)
            self.executions[name] = runner.run(name, body)

        task = Task(name, run, self.clock)
        self.tasks[name] = task
        self.queued.append(task)
        return StartResult(True, name)

    def take_queued(self) -> list[Task]:
        """The tasks started since the last call."""
        queued, self.queued = self.queued, []
        return queued

    def close(self) -> None:
        """Unwind every task still waiting."""
        for task in self.tasks.values():
            task.cancel()
