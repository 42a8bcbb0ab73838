"""The app's settings, read from CDK context (``cdk.json`` or ``-c key=value``)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fleetwright.config import (
    ENV_DRY_RUN,
    ENV_MIN_NODE_AGE_SECONDS,
    ENV_MIN_SAVING_DOLLARS,
    ENV_MIN_SAVING_FRACTION,
    ENV_NODE_REPAIR,
    ENV_SPOT_TO_SPOT,
)
from infra.function_network import VpcOptions

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
    "functionSizes",
    "economyMode",
    "vpcId",
    "vpcSubnetIds",
    "vpcSecurityGroupIds",
    "clusterSecurityGroupId",
    "createVpcEndpoints",
    "vpcRouteTableIds",
    "disruptionNodeRepair",
    "monitoring",
)
# The functions whose memory and timeout ``functionSizes`` sets (docs/performance.md, "Sizing").
SIZED_FUNCTIONS = ("provisioner", "disruption", "interruption", "termination")
MEMORY_RANGE = (128, 10240)  # MB, Lambda's limits
TIMEOUT_RANGE = (1, 900)  # seconds, Lambda's limits


class SettingsError(ValueError):
    """A context value is missing or malformed."""


class Monitoring(StrEnum):
    """What CloudWatch monitoring the stack deploys; each custom metric, alarm metric and dashboard past
    CloudWatch's free tier is billed every month (docs/cost.md). Every level deploys the dashboard's overview
    (within the 50 metrics of a free dashboard).

    ``FULL``: the overview and the detailed sections, every metric the functions write, every alarm.
    ``ALARMS`` (the default when watching): every alarm, and every metric but two diagnostics of the
    disruption pass. ``ESSENTIAL`` (the default in economy mode): the alarms that say nodes or pods are at
    risk (dead letters, function errors, failing provisioning and disruption passes, instances that never
    register, failed terminations, rejected interruption messages); no near-limit alarms; the functions
    leave out the series an idle cluster would pay for but the pending pods and the node count and cost
    totals (``infra.controller_metrics.WITHHELD``)."""

    FULL = "full"
    ALARMS = "alarms"
    ESSENTIAL = "essential"

    @classmethod
    def default(cls, economy_mode: bool) -> Monitoring:
        """``ESSENTIAL`` in economy mode, else ``ALARMS`` (both chosen for their bill; docs/cost.md)."""
        return cls.ESSENTIAL if economy_mode else cls.ALARMS


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
class FunctionSize:
    """A function's Lambda memory (MB) and timeout (seconds); ``None`` keeps the stack's default."""

    memory_mb: int | None = None
    timeout_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class AppSettings:
    """``clusterName`` (required), ``nodePoolsFile`` (files/directories, comma-separated), and the options
    ``nodeRoleName``, ``alarmTopicArn``, ``stackName`` (default ``Fleetwright-<clusterName>``) and
    ``provisionerReservedConcurrency`` (default 1; ``none`` for unreserved), ``disruption`` (``false``
    leaves the disruption function out) and its settings ``disruptionMinSavingFraction`` (0 to 1),
    ``disruptionMinSavingDollars``, ``disruptionMinNodeAgeSeconds``, ``disruptionSpotToSpot`` and
    ``disruptionDryRun`` (unset: the function's defaults), ``functionSizes`` (memory and timeout per
    function, see :func:`function_sizes_from_context`), ``economyMode`` (the provisioner makes one pass per
    scheduled invocation instead of watching; docs/cost.md), ``monitoring`` (``full``, ``alarms`` or
    ``essential``, see :class:`Monitoring`; default ``alarms``, ``essential`` in economy mode) and the VPC
    settings of :func:`vpc_from_context`."""

    cluster_name: str
    nodepool_paths: tuple[str, ...]
    node_role_name: str | None = None
    alarm_topic_arn: str | None = None
    stack_name: str = ""
    provisioner_reserved_concurrency: int | None = DEFAULT_PROVISIONER_CONCURRENCY
    disruption: bool = True
    disruption_options: DisruptionOptions = field(default_factory=DisruptionOptions)
    function_sizes: dict[str, FunctionSize] = field(default_factory=dict)
    economy_mode: bool = False
    monitoring: Monitoring = Monitoring.ALARMS
    vpc: VpcOptions | None = None


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


def _size_value(value: Any, where: str, bounds: tuple[int, int], unit: str) -> int:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise SettingsError(f"context {where} must be a whole number of {unit}, got {value!r}")
    number = int(str(value).strip())
    if not low <= number <= high:
        raise SettingsError(f"context {where} must be from {low} to {high} {unit}, got {number}")
    return number


def _suggest(name: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"


def function_sizes_from_context(context: dict[str, Any]) -> dict[str, FunctionSize]:
    """``functionSizes``: a mapping (in cdk.json) or its JSON text (``-c functionSizes='{...}'``) from a
    function (``provisioner``, ``disruption``, ``interruption``, ``termination``) to ``memoryMB`` (128 to
    10240) and/or ``timeoutSeconds`` (1 to 900); functions and fields left out keep the defaults."""
    raw = context.get("functionSizes")
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as err:
            raise SettingsError(f"context 'functionSizes' is not valid JSON: {err}") from None
    if not isinstance(raw, Mapping):
        raise SettingsError(f"context 'functionSizes' must map function names to sizes, got {raw!r}")
    sizes: dict[str, FunctionSize] = {}
    for name, size in raw.items():
        where = f"'functionSizes.{name}'"
        if name not in SIZED_FUNCTIONS:
            raise SettingsError(f"context {where}: unknown function{_suggest(str(name), SIZED_FUNCTIONS)}")
        if not isinstance(size, Mapping) or not size:
            raise SettingsError(
                f'context {where} must be {{"memoryMB": N, "timeoutSeconds": N}}, got {size!r}'
            )
        unknown = [key for key in size if key not in ("memoryMB", "timeoutSeconds")]
        if unknown:
            fields = ("memoryMB", "timeoutSeconds")
            raise SettingsError(
                f"context {where}: unknown field {unknown[0]!r}{_suggest(str(unknown[0]), fields)}"
            )
        sizes[name] = FunctionSize(
            memory_mb=_size_value(size["memoryMB"], f"{where[:-1]}.memoryMB'", MEMORY_RANGE, "MB")
            if "memoryMB" in size
            else None,
            timeout_seconds=_size_value(
                size["timeoutSeconds"], f"{where[:-1]}.timeoutSeconds'", TIMEOUT_RANGE, "seconds"
            )
            if "timeoutSeconds" in size
            else None,
        )
    return sizes


def _ids(context: dict[str, Any], key: str, prefix: str) -> tuple[str, ...]:
    value = context.get(key)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",") if item.strip()]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = [item.strip() for item in value]
    else:
        raise SettingsError(
            f"context {key!r} must be a comma-separated list of {prefix}... ids, got {value!r}"
        )
    wrong = [item for item in items if not item.startswith(prefix) or len(item) <= len(prefix)]
    if wrong:
        raise SettingsError(f"context {key!r}: {wrong[0]!r} is not a {prefix}... id")
    return tuple(items)


def vpc_from_context(context: dict[str, Any]) -> VpcOptions | None:
    """``vpcSubnetIds`` (functions in these subnets; unset: no VPC), ``vpcId``, ``vpcSecurityGroupIds``
    (default: a group the stack creates), ``clusterSecurityGroupId`` (gets an HTTPS ingress rule from the
    functions), ``createVpcEndpoints`` and ``vpcRouteTableIds`` (see docs/deploy.md, private clusters)."""
    subnets = _ids(context, "vpcSubnetIds", "subnet-")
    others = [
        k for k in ("vpcSecurityGroupIds", "clusterSecurityGroupId", "vpcRouteTableIds") if context.get(k)
    ]
    if not subnets:
        if others or _flag(context, "createVpcEndpoints"):
            raise SettingsError(
                f"context {others[0] if others else 'createVpcEndpoints'!r} needs vpcSubnetIds"
            )
        return None
    vpc_ids = _ids(context, "vpcId", "vpc-")
    cluster_groups = _ids(context, "clusterSecurityGroupId", "sg-")
    if len(vpc_ids) > 1 or len(cluster_groups) > 1:
        raise SettingsError("context 'vpcId' and 'clusterSecurityGroupId' take one id each")
    options = VpcOptions(
        subnet_ids=subnets,
        vpc_id=vpc_ids[0] if vpc_ids else None,
        security_group_ids=_ids(context, "vpcSecurityGroupIds", "sg-"),
        cluster_security_group_id=cluster_groups[0] if cluster_groups else None,
        create_endpoints=_flag(context, "createVpcEndpoints") is True,
        route_table_ids=_ids(context, "vpcRouteTableIds", "rtb-"),
    )
    problems = options.problems()
    if problems:
        raise SettingsError("context: " + "; ".join(problems))
    return options


def monitoring_from_context(context: dict[str, Any], economy_mode: bool) -> Monitoring:
    """``monitoring``: ``full``, ``alarms`` or ``essential``; unset, :meth:`Monitoring.default`."""
    value = context.get("monitoring")
    if value is None or value == "":
        return Monitoring.default(economy_mode)
    text = str(value).strip().lower()
    try:
        return Monitoring(text)
    except ValueError:
        known = tuple(level.value for level in Monitoring)
        raise SettingsError(
            f"context 'monitoring' must be one of {', '.join(known)}, got {value!r}"
        ) from None


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
    economy_mode = _flag(context, "economyMode") is True
    return AppSettings(
        cluster_name=cluster,
        nodepool_paths=paths,
        node_role_name=_text(context, "nodeRoleName"),
        alarm_topic_arn=_text(context, "alarmTopicArn"),
        stack_name=_text(context, "stackName") or f"Fleetwright-{cluster}",
        provisioner_reserved_concurrency=_concurrency(context),
        disruption=_flag(context, "disruption") is not False,
        disruption_options=disruption_options_from_context(context),
        function_sizes=function_sizes_from_context(context),
        economy_mode=economy_mode,
        monitoring=monitoring_from_context(context, economy_mode),
        vpc=vpc_from_context(context),
    )
