"""API errors, rendered as ``Status`` objects the way a real API server reports them."""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]


class ApiError(Exception):
    """A request failure: HTTP code, a machine-readable reason and a human message."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: JsonObject | None = None,
        list_meta: JsonObject | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_meta = list_meta

    def status(self) -> JsonObject:
        """The ``Status`` body sent to the client."""
        body: JsonObject = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta or {}),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(kind: str, name: str, group: str) -> JsonObject:
    details: JsonObject = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return details


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    """404 for a missing object (``pods "x" not found``)."""
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', _details(plural, name, group))


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    """409 for a create of an existing name."""
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409, "AlreadyExists", f'{qualified} "{name}" already exists', _details(plural, name, group)
    )


def conflict(plural: str, name: str, group: str = "") -> ApiError:
    """409 for an update carrying a stale ``metadata.resourceVersion``."""
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(plural, name, group),
    )


def invalid(kind: str, name: str, message: str) -> ApiError:
    """422 for an object that fails validation."""
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {message}', {"name": name, "kind": kind})


def invalid_fields(kind: str, group: str, name: str, problems: list[str]) -> ApiError:
    """422 for several field errors (``FIELD: what is wrong``), with the ``causes`` kubectl prints."""
    qualified = f"{kind}.{group}" if group else kind
    summary = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    causes = []
    for problem in problems:
        field, _, text = problem.partition(": ")
        causes.append({"reason": "FieldValueInvalid", "message": text or problem, "field": field})
    details: JsonObject = {"name": name, "kind": kind, "causes": causes}
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> ApiError:
    """400 for a request the server cannot parse."""
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    """410 for a watch whose resourceVersion has been compacted away."""
    return ApiError(410, "Expired", message)
