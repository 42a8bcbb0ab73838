"""Every environment variable the four functions read, parsed in one place by one pydantic model.

The functions read ``os.environ`` only through :meth:`FunctionEnvironment.from_environ`, so a value is
parsed the same way wherever it is used and a bad one fails with a :class:`ConfigError` naming the variable
(``FLEETWRIGHT_BATCH_IDLE_SECONDS: expected a number, got 'soon'``). Blank values count as unset.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from fleetwright.config.names import (
    ENV_ACCOUNT,
    ENV_BATCH_IDLE_SECONDS,
    ENV_BATCH_MAX_SECONDS,
    ENV_BREAKER_COOL_OFF_SECONDS,
    ENV_BREAKER_THRESHOLD,
    ENV_BREAKER_WINDOW_SECONDS,
    ENV_CLUSTER,
    ENV_DEADLINE_MARGIN_SECONDS,
    ENV_DEFAULT_REGION,
    ENV_DRY_RUN,
    ENV_ECONOMY,
    ENV_KUBECONFIG,
    ENV_LAUNCH_MARGIN_SECONDS,
    ENV_LAUNCH_PARALLELISM,
    ENV_LAUNCH_RATE_LIMIT,
    ENV_LAUNCH_RATE_WINDOW_SECONDS,
    ENV_LEASE_SECONDS,
    ENV_LEASE_WAIT_SECONDS,
    ENV_MIN_NODE_AGE_SECONDS,
    ENV_MIN_SAVING_DOLLARS,
    ENV_MIN_SAVING_FRACTION,
    ENV_NODE_REPAIR,
    ENV_NODEPOOLS_FILE,
    ENV_NODEPOOLS_PARAMETER,
    ENV_ORPHAN_GRACE_SECONDS,
    ENV_RECONCILE_INTERVAL_SECONDS,
    ENV_REGION,
    ENV_REGISTRATION_TIMEOUT_SECONDS,
    ENV_REPLACE_ON_REBALANCE,
    ENV_SETTLE_GRACE_SECONDS,
    ENV_SPOT_TO_SPOT,
    ENV_STATE_MACHINE,
    ENV_TABLE,
    ENV_TASK_ROOT,
    ENV_TRACING,
)
from fleetwright.model.legacy import ENV_NODE_ROLE

TRUE_VALUES: Final = ("1", "true", "yes", "on")
FALSE_VALUES: Final = ("0", "false", "no", "off")


class ConfigError(ValueError):
    """A function cannot start with this configuration; the message says what to fix."""


def _flag(raw: object) -> object:
    """true/false, also 1/0, yes/no, on/off."""
    if not isinstance(raw, str):
        return raw
    text = raw.strip().lower()
    if text in TRUE_VALUES:
        return True
    if text in FALSE_VALUES:
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _parse_number(raw: str, at_most: float | None = None) -> float:
    """A non-negative finite number, at most ``at_most``."""
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"expected a number, got {raw!r}") from None
    if not 0 <= value < math.inf or (at_most is not None and value > at_most):
        bound = f"a number from 0 to {at_most:g}" if at_most is not None else "a non-negative number"
        raise ValueError(f"expected {bound}, got {raw!r}")
    return value


def _number(at_most: float | None = None) -> BeforeValidator:
    """A validator for :func:`_parse_number`."""
    return BeforeValidator(lambda raw: _parse_number(raw, at_most) if isinstance(raw, str) else raw)


def _count(raw: object) -> object:
    """A whole number of at least 1 (written as a number: ``8`` or ``8.0``)."""
    if not isinstance(raw, str):
        return raw
    number = int(_parse_number(raw))
    if number < 1:
        raise ValueError("must be at least 1")
    return number


def _paths(raw: object) -> object:
    """A comma-separated list."""
    if not isinstance(raw, str):
        return raw
    return tuple(p.strip() for p in raw.split(",") if p.strip())


Flag = Annotated[bool, BeforeValidator(_flag)]
Seconds = Annotated[float, _number()]
Fraction = Annotated[float, _number(at_most=1.0)]
Count = Annotated[int, BeforeValidator(_count)]
Paths = Annotated[tuple[str, ...], BeforeValidator(_paths)]


class FunctionEnvironment(BaseModel):
    """The functions' environment, parsed. Unset (or blank) variables take the defaults shown; the
    disruption settings stay ``None`` when unset so the planner's own defaults apply
    (``fleetwright.disruption.config``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    # Where everything is.
    cluster_name: str = Field("", alias=ENV_CLUSTER)
    table_name: str = Field("", alias=ENV_TABLE)
    region: str = Field("", alias=ENV_REGION)  # else AWS_DEFAULT_REGION
    kubeconfig: str | None = Field(None, alias=ENV_KUBECONFIG)
    state_machine_arn: str = Field("", alias=ENV_STATE_MACHINE)
    task_root: str | None = Field(None, alias=ENV_TASK_ROOT)
    # NodePool documents.
    nodepools_files: Paths = Field((), alias=ENV_NODEPOOLS_FILE)
    nodepools_parameter: str = Field("", alias=ENV_NODEPOOLS_PARAMETER)
    node_role: str | None = Field(None, alias=ENV_NODE_ROLE)
    # Provisioner options (the defaults of ``ProvisionerConfig``).
    tracing: Flag = Field(False, alias=ENV_TRACING)
    economy: Flag = Field(False, alias=ENV_ECONOMY)
    batch_idle_seconds: Seconds = Field(1.0, alias=ENV_BATCH_IDLE_SECONDS)
    batch_max_seconds: Seconds = Field(10.0, alias=ENV_BATCH_MAX_SECONDS)
    registration_timeout_seconds: Seconds = Field(900.0, alias=ENV_REGISTRATION_TIMEOUT_SECONDS)
    deadline_margin_seconds: Seconds = Field(10.0, alias=ENV_DEADLINE_MARGIN_SECONDS)
    lease_seconds: Seconds = Field(30.0, alias=ENV_LEASE_SECONDS)
    reconcile_interval_seconds: Seconds = Field(5.0, alias=ENV_RECONCILE_INTERVAL_SECONDS)
    orphan_grace_seconds: Seconds = Field(30.0, alias=ENV_ORPHAN_GRACE_SECONDS)
    lease_wait_seconds: Seconds = Field(20.0, alias=ENV_LEASE_WAIT_SECONDS)
    launch_margin_seconds: Seconds = Field(5.0, alias=ENV_LAUNCH_MARGIN_SECONDS)
    settle_grace_seconds: Seconds = Field(30.0, alias=ENV_SETTLE_GRACE_SECONDS)
    launch_parallelism: Count = Field(8, alias=ENV_LAUNCH_PARALLELISM)
    launch_rate_limit: Count = Field(1000, alias=ENV_LAUNCH_RATE_LIMIT)
    launch_rate_window_seconds: Seconds = Field(600.0, alias=ENV_LAUNCH_RATE_WINDOW_SECONDS)
    breaker_threshold: Count = Field(3, alias=ENV_BREAKER_THRESHOLD)
    breaker_window_seconds: Seconds = Field(3600.0, alias=ENV_BREAKER_WINDOW_SECONDS)
    breaker_cool_off_seconds: Seconds = Field(1800.0, alias=ENV_BREAKER_COOL_OFF_SECONDS)
    # Interruption handling.
    replace_on_rebalance: Flag = Field(False, alias=ENV_REPLACE_ON_REBALANCE)
    account_id: str = Field("", alias=ENV_ACCOUNT, pattern=r"^\d{12}$")
    # Disruption.
    min_saving_fraction: Fraction | None = Field(None, alias=ENV_MIN_SAVING_FRACTION)
    min_saving_dollars: Seconds | None = Field(None, alias=ENV_MIN_SAVING_DOLLARS)
    min_node_age_seconds: Seconds | None = Field(None, alias=ENV_MIN_NODE_AGE_SECONDS)
    spot_to_spot: Flag | None = Field(None, alias=ENV_SPOT_TO_SPOT)
    dry_run: Flag = Field(False, alias=ENV_DRY_RUN)
    node_repair: Flag | None = Field(None, alias=ENV_NODE_REPAIR)

    @model_validator(mode="after")
    def _batch_window(self) -> FunctionEnvironment:
        if self.batch_max_seconds < self.batch_idle_seconds:
            raise ValueError(f"{ENV_BATCH_MAX_SECONDS} must not be shorter than {ENV_BATCH_IDLE_SECONDS}")
        return self

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> FunctionEnvironment:
        """Parse ``environ`` (default: ``os.environ``). Raises :class:`ConfigError`, one line per bad
        variable."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in cls.model_fields.values():
            name = field.alias
            assert name is not None
            raw = env.get(name, "").strip()
            if raw:
                values[name] = raw
        if ENV_REGION not in values and env.get(ENV_DEFAULT_REGION, "").strip():
            values[ENV_REGION] = env[ENV_DEFAULT_REGION].strip()
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            raise ConfigError("\n".join(_problem(e) for e in error.errors())) from None

    def require(self, *variables: str) -> None:
        """Raise :class:`ConfigError` naming those of ``variables`` that are unset."""
        values = self.model_dump(by_alias=True)
        missing = [v for v in variables if not values.get(v)]
        if missing:
            raise ConfigError(f"missing environment variable(s): {', '.join(missing)}")

    def provisioner_options(self) -> dict[str, Any]:
        """The ``ProvisionerConfig`` fields set from the environment."""
        return self.model_dump(
            include={
                "batch_idle_seconds",
                "batch_max_seconds",
                "registration_timeout_seconds",
                "deadline_margin_seconds",
                "lease_seconds",
                "reconcile_interval_seconds",
                "orphan_grace_seconds",
                "lease_wait_seconds",
                "launch_margin_seconds",
                "settle_grace_seconds",
                "launch_parallelism",
                "launch_rate_limit",
                "launch_rate_window_seconds",
                "breaker_threshold",
                "breaker_window_seconds",
                "breaker_cool_off_seconds",
                "economy",
            }
        )


def _problem(error: Any) -> str:
    """``VARIABLE: what is wrong`` (the message our validators give, not pydantic's wrapping)."""
    cause = (error.get("ctx") or {}).get("error")
    message = str(cause) if isinstance(cause, ValueError) else str(error.get("msg", ""))
    where = ".".join(str(part) for part in error.get("loc") or ())
    return f"{where}: {message}" if where else message
