"""The app's settings, read from CDK context (``cdk.json`` or ``-c key=value``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_NODEPOOLS = "examples/inflate"
DEFAULT_PROVISIONER_CONCURRENCY = 1


class SettingsError(ValueError):
    """A context value is missing or malformed."""


@dataclass(frozen=True, slots=True)
class AppSettings:
    """``clusterName`` (required), ``nodePoolsFile`` (files/directories, comma-separated), and the options
    ``nodeRoleName``, ``alarmTopicArn``, ``stackName`` (default ``Fleetwright-<clusterName>``) and
    ``provisionerReservedConcurrency`` (default 1; ``none`` for unreserved)."""

    cluster_name: str
    nodepool_paths: tuple[str, ...]
    node_role_name: str | None = None
    alarm_topic_arn: str | None = None
    stack_name: str = ""
    provisioner_reserved_concurrency: int | None = DEFAULT_PROVISIONER_CONCURRENCY


def _text(context: dict[str, Any], key: str) -> str | None:
    value = context.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise SettingsError(f"context {key!r} must be a string, got {value!r}")
    return value.strip()


def _concurrency(context: dict[str, Any]) -> int | None:
    value = context.get("provisionerReservedConcurrency")
    if value is None or value == "":
        return DEFAULT_PROVISIONER_CONCURRENCY
    text = str(value).strip().lower()
    if text == "none":
        return None
    if not text.isdigit() or int(text) < 1:
        raise SettingsError(
            f"context 'provisionerReservedConcurrency' must be a positive number or 'none', got {value!r}"
        )
    return int(text)


def settings_from_context(context: dict[str, Any]) -> AppSettings:
    """Build the settings from a context mapping; raises :class:`SettingsError` with what to pass."""
    cluster = _text(context, "clusterName")
    if not cluster:
        raise SettingsError("context 'clusterName' is required: cdk deploy -c clusterName=<EKS cluster name>")
    raw_paths = context.get("nodePoolsFile") or DEFAULT_NODEPOOLS
    if isinstance(raw_paths, str):
        paths = tuple(p.strip() for p in raw_paths.split(",") if p.strip())
    elif isinstance(raw_paths, list) and all(isinstance(p, str) for p in raw_paths):
        paths = tuple(raw_paths)
    else:
        raise SettingsError(f"context 'nodePoolsFile' must be a path or a list of paths, got {raw_paths!r}")
    return AppSettings(
        cluster_name=cluster,
        nodepool_paths=paths,
        node_role_name=_text(context, "nodeRoleName"),
        alarm_topic_arn=_text(context, "alarmTopicArn"),
        stack_name=_text(context, "stackName") or f"Fleetwright-{cluster}",
        provisioner_reserved_concurrency=_concurrency(context),
    )
