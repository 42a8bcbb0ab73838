"""Deadlines for AWS calls: no request is sent, and no retry is slept, past the caller's deadline.

A launch runs inside the cloud contract's deadline scope
(:func:`fleetwright.cloud.deadline.deadline_scope`); the botocore event handlers :func:`install` registers
on a client then refuse to send a request once the deadline has passed (``before-send``) and give up
instead of retrying when the next backoff could end after it (``needs-retry``), raising
:class:`DeadlineExceededError`.
Calls made outside any scope are not bounded (beyond the clients' connect and read timeouts).

A request that reached AWS without a clear answer (a read timeout, a 5xx other than throttling) may have
taken effect; the scope records it (``Deadline.uncertain``) so the caller does not conclude that
nothing was launched. So may a request refused by the second ``before-send`` check: the handlers that ran
before it may have answered it (a ``before-send`` handler's answer replaces sending; moto serves requests
this way) or held it past the deadline, and the check cannot tell which.
"""

from __future__ import annotations

from typing import Any

from fleetwright.aws.clients import THROTTLING_CODES
from fleetwright.cloud.deadline import current_deadline

# botocore's retry modes back off exponentially, at most this long between two attempts.
MAX_BACKOFF_SECONDS = 20.0
_HANDLER_ID = "fleetwright-deadline"
# Operations that change nothing: refusing one late leaves nothing uncertain.
_READ_ONLY_PREFIXES = ("Describe", "Get", "List")


class DeadlineExceededError(Exception):
    """The call was abandoned at its deadline. ``uncertain``: an earlier attempt may have taken effect."""

    def __init__(self, message: str, *, uncertain: bool = False) -> None:
        super().__init__(message)
        self.uncertain = uncertain


def install(client: Any) -> None:
    """Register the deadline handlers on a boto3 client (idempotent)."""
    events = client.meta.events
    events.register_first("before-send", _before_send, unique_id=f"{_HANDLER_ID}-send")
    # Again after the others: the adaptive retry mode's rate limiter may have waited in between.
    events.register_last("before-send", _before_send_late, unique_id=f"{_HANDLER_ID}-send-last")
    events.register_first("needs-retry", _needs_retry, unique_id=f"{_HANDLER_ID}-retry")


def _operation(event_name: str) -> str:
    return event_name.rsplit(".", 1)[-1]


def _before_send(event_name: str = "", **_: Any) -> None:
    deadline = current_deadline()
    if deadline is not None and deadline.remaining() <= 0:
        raise DeadlineExceededError(
            f"{_operation(event_name)} not sent: the launch deadline has passed",
            uncertain=deadline.uncertain,
        )


def _before_send_late(event_name: str = "", **_: Any) -> None:
    """The check after the other ``before-send`` handlers. One of them may already have answered the
    request (botocore then sends nothing more, but the request took effect), so refusing a call that
    changes something (CreateFleet) leaves the outcome uncertain: the launch is settled by its tag instead
    of being given up and launched again. Refused reads change nothing."""
    deadline = current_deadline()
    if deadline is None or deadline.remaining() > 0:
        return
    operation = _operation(event_name)
    changes = not operation.startswith(_READ_ONLY_PREFIXES)
    deadline.uncertain = deadline.uncertain or changes
    answered = " (it may have been answered)" if changes else ""
    raise DeadlineExceededError(
        f"{operation} refused at the launch deadline after the other request handlers ran{answered}",
        uncertain=deadline.uncertain,
    )


def _needs_retry(
    event_name: str = "",
    response: Any = None,
    attempts: int = 1,
    caught_exception: BaseException | None = None,
    **_: Any,
) -> None:
    deadline = current_deadline()
    if deadline is None:
        return
    if isinstance(caught_exception, DeadlineExceededError):
        raise caught_exception  # refused by _before_send: nothing was sent, nothing to retry
    if caught_exception is not None:
        retryable = True
        # The request may have been executed when the connection failed after sending it.
        deadline.uncertain = deadline.uncertain or not _never_sent(caught_exception)
    elif response is not None:
        status = getattr(response[0], "status_code", 200)
        code = str(((response[1] or {}).get("Error") or {}).get("Code", ""))
        if status < 400:
            return
        throttled = code in THROTTLING_CODES
        retryable = status >= 500 or throttled
        if status >= 500 and not throttled:
            deadline.uncertain = True  # an internal error says nothing about whether it happened
    else:
        return
    if retryable and deadline.remaining() < min(MAX_BACKOFF_SECONDS, 2.0**attempts):
        raise DeadlineExceededError(
            f"{_operation(event_name)} not retried: its next attempt could not end before the launch "
            f"deadline ({attempts} attempt{'s' if attempts != 1 else ''} made)",
            uncertain=deadline.uncertain,
        )


def _never_sent(error: BaseException) -> bool:
    """True for connection errors that happen before a request leaves this process."""
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError  # type: ignore[import-untyped]

    return isinstance(error, (ConnectTimeoutError, EndpointConnectionError))
