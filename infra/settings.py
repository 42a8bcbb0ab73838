"""The app's settings, read from CDK context (``cdk.json`` or ``-c key=value``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetwright.disruption.config import (
    ENV_DRY_RUN,
    ENV_MIN_NODE_AGE_SECONDS,
    ENV_MIN_SAVING_DOLLARS,
    ENV_MIN_SAVING_FRACTION,
    ENV_NODE_REPAIR,
    ENV_SPOT_TO_SPOT,
)

DEFAULT_NODEPOOLS = "examples/inflate"
DEFAULT_PROVISIONER_CONCURRENCY = 1
# Every context key the app reads.
CONTEXT_KEYS = (
    "clusterName",
    "nodePoolsFile",
    "nodeRoleName",
    "alarmTopicArn",
    "stackName",
    "provisionerReservedConcurrency",
    "disruption",
    "disruptionMinSavingFraction",
    "disruptionMinSavingDollars",
    "disruptionMinNodeAgeSeconds",
    "disruptionSpotToSpot",
    "disruptionDryRun",
    "disruptionNodeRepair",
)


class SettingsError(ValueError):
    """A context value is missing or malformed."""


@dataclass(frozen=True, slots=True)
class DisruptionOptions:
    """Settings of the disruption function; ``None`` leaves the function's own default
    (docs/disruption.md): the minimum saving of a consolidation as a fraction of the price replaced and in
    dollars per hour, the minimum node age, consolidating spot to spot, dry-run (decide and log only), and
    node repair (replace nodes unhealthy past their condition's toleration)."""

    min_saving_fraction: float | None = None
    min_saving_dollars: float | None = None
    min_node_age_seconds: float | None = None
    spot_to_spot: bool | None = None
    dry_run: bool | None = None
    node_repair: bool | None = None

    def environment(self) -> dict[str, str]:
        """The function's environment variables for the settings that are set."""
        values: dict[str, float | bool | None] = {
            ENV_MIN_SAVING_FRACTION: self.min_saving_fraction,
            ENV_MIN_SAVING_DOLLARS: self.min_saving_dollars,
            ENV_MIN_NODE_AGE_SECONDS: self.min_node_age_seconds,
            ENV_SPOT_TO_SPOT: self.spot_to_spot,
            ENV_DRY_RUN: self.dry_run,
            ENV_NODE_REPAIR: self.node_repair,
        }
        return {
            name: ("true" if value else "false") if isinstance(value, bool) else f"{value:.15g}"
            for name, value in values.items()
            if value is not None
        }


@dataclass(frozen=True, slots=True)
class AppSettings:
    """``clusterName`` (required), ``nodePoolsFile`` (files/directories, comma-separated), and the options
    ``nodeRoleName``, ``alarmTopicArn``, ``stackName`` (default ``Fleetwright-<clusterName>``) and
    ``provisionerReservedConcurrency`` (default 1; ``none`` for unreserved), ``disruption`` (``false``
    leaves the disruption function out) and its settings ``disruptionMinSavingFraction`` (0 to 1),
    ``disruptionMinSavingDollars``, ``disruptionMinNodeAgeSeconds``, ``disruptionSpotToSpot`` and
    ``disruptionDryRun`` (unset: the function's defaults)."""

    cluster_name: str
    nodepool_paths: tuple[str, ...]
    node_role_name: str | None = None
    alarm_topic_arn: str | None = None
    stack_name: str = ""
    provisioner_reserved_concurrency: int | None = DEFAULT_PROVISIONER_CONCURRENCY
    disruption: bool = True
    disruption_options: DisruptionOptions = field(default_factory=DisruptionOptions)


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


def _flag(context: dict[str, Any], key: str) -> bool | None:
    value = context.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise SettingsError(f"context {key!r} must be true or false, got {value!r}")


def _number(context: dict[str, Any], key: str, *, at_most: float | None = None) -> float | None:
    value = context.get(key)
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if (
        isinstance(value, bool)
        or not 0 <= number < float("inf")
        or (at_most is not None and number > at_most)
    ):
        bound = f"from 0 to {at_most:g}" if at_most is not None else "not negative"
        raise SettingsError(f"context {key!r} must be a number {bound}, got {value!r}")
    return number


def disruption_options_from_context(context: dict[str, Any]) -> DisruptionOptions:
    """The ``disruption*`` settings; raises :class:`SettingsError` naming a malformed one."""
    return DisruptionOptions(
        min_saving_fraction=_number(context, "disruptionMinSavingFraction", at_most=1.0),
        min_saving_dollars=_number(context, "disruptionMinSavingDollars"),
        min_node_age_seconds=_number(context, "disruptionMinNodeAgeSeconds"),
        spot_to_spot=_flag(context, "disruptionSpotToSpot"),
        dry_run=_flag(context, "disruptionDryRun"),
        node_repair=_flag(context, "disruptionNodeRepair"),
    )


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
        disruption=_flag(context, "disruption") is not False,
        disruption_options=disruption_options_from_context(context),
    )
