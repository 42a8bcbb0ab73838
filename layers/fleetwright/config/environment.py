"""Every environment variable the four functions read, declared once: a field of :class:`FunctionEnvironment`.

A field names its variable, type and default; pydantic-settings reads it from the environment. Adding a
setting is adding a field (a provisioner option also gets its ``ProvisionerConfig`` field, which takes its
default from here; ``docs/`` lists every variable, ``tests/config/test_environment.py`` checks both).
``names.py`` holds only the names other code needs: those the stack sets and those messages name.

The functions read ``os.environ`` only through :meth:`FunctionEnvironment.from_environ`, so a value is
parsed the same way wherever it is used and a bad one fails with a :class:`ConfigError` naming the variable
(``FLEETWRIGHT_BATCH_IDLE_SECONDS: expected a number, got 'soon'``). Values are trimmed; blank values count
as unset. Imported at a function's first invocation, never at its cold start (pydantic-settings costs
``docs/performance.md``'s figures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, Final

from pydantic import AliasChoices, BeforeValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from fleetwright.config.names import (
    ENV_ACCOUNT,
    ENV_CLUSTER,
    ENV_DRY_RUN,
    ENV_ECONOMY,
    ENV_MIN_NODE_AGE_SECONDS,
    ENV_MIN_SAVING_DOLLARS,
    ENV_MIN_SAVING_FRACTION,
    ENV_NODE_REPAIR,
    ENV_NODEPOOLS_FILE,
    ENV_NODEPOOLS_PARAMETER,
    ENV_REGION,
    ENV_REPLACE_ON_REBALANCE,
    ENV_SPOT_TO_SPOT,
    ENV_STATE_MACHINE,
    ENV_TABLE,
)
from fleetwright.model.legacy import ENV_NODE_ROLE

if TYPE_CHECKING:
    from pydantic.config import JsonDict

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


# Set while :meth:`FunctionEnvironment.from_environ` parses a mapping it was given instead of the process's.
_MAPPING_ONLY: ContextVar[bool] = ContextVar("mapping_only", default=False)
PROVISIONER: Final = "provisioner"  # the mark of the fields that are ``ProvisionerConfig`` options


def variable(name: str, default: Any, *more: str, provisioner: bool = False, **constraints: Any) -> Any:
    """A field read from the environment variable ``name`` (or the first of ``more`` that is set).
    ``provisioner`` marks a ``ProvisionerConfig`` option (:meth:`FunctionEnvironment.provisioner_options`)."""
    alias: str | AliasChoices = AliasChoices(name, *more) if more else name
    extra: JsonDict | None = {PROVISIONER: True} if provisioner else None
    return Field(default, validation_alias=alias, json_schema_extra=extra, **constraints)


class FunctionEnvironment(BaseSettings):
    """The functions' environment, parsed. Unset (or blank) variables take the defaults shown; the
    disruption settings stay ``None`` when unset so the planner's own defaults apply
    (``fleetwright.disruption.config``)."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="ignore",
        case_sensitive=True,
        enable_decoding=False,
        env_ignore_empty=True,
        validate_default=False,
    )

    # Where everything is.
    cluster_name: str = variable(ENV_CLUSTER, "")
    table_name: str = variable(ENV_TABLE, "")
    region: str = variable(ENV_REGION, "", "AWS_DEFAULT_REGION")  # AWS_REGION wins when both are set
    kubeconfig: str | None = variable("FLEETWRIGHT_KUBECONFIG", None)
    state_machine_arn: str = variable(ENV_STATE_MACHINE, "")
    task_root: str | None = variable("LAMBDA_TASK_ROOT", None)
    # NodePool documents.
    nodepools_files: Paths = variable(ENV_NODEPOOLS_FILE, ())
    nodepools_parameter: str = variable(ENV_NODEPOOLS_PARAMETER, "")
    node_role: str | None = variable(ENV_NODE_ROLE, None)
    # Provisioner options (``ProvisionerConfig`` takes its defaults from here).
    tracing: Flag = variable("FLEETWRIGHT_TRACING", False)
    economy: Flag = variable(ENV_ECONOMY, False, provisioner=True)
    batch_idle_seconds: Seconds = variable("FLEETWRIGHT_BATCH_IDLE_SECONDS", 1.0, provisioner=True)
    batch_max_seconds: Seconds = variable("FLEETWRIGHT_BATCH_MAX_SECONDS", 10.0, provisioner=True)
    registration_timeout_seconds: Seconds = variable(
        "FLEETWRIGHT_REGISTRATION_TIMEOUT_SECONDS", 900.0, provisioner=True
    )
    deadline_margin_seconds: Seconds = variable("FLEETWRIGHT_DEADLINE_MARGIN_SECONDS", 10.0, provisioner=True)
    lease_seconds: Seconds = variable("FLEETWRIGHT_LEASE_SECONDS", 30.0, provisioner=True)
    reconcile_interval_seconds: Seconds = variable(
        "FLEETWRIGHT_RECONCILE_INTERVAL_SECONDS", 5.0, provisioner=True
    )
    orphan_grace_seconds: Seconds = variable("FLEETWRIGHT_ORPHAN_GRACE_SECONDS", 30.0, provisioner=True)
    lease_wait_seconds: Seconds = variable("FLEETWRIGHT_LEASE_WAIT_SECONDS", 20.0, provisioner=True)
    launch_margin_seconds: Seconds = variable("FLEETWRIGHT_LAUNCH_MARGIN_SECONDS", 5.0, provisioner=True)
    settle_grace_seconds: Seconds = variable("FLEETWRIGHT_SETTLE_GRACE_SECONDS", 30.0, provisioner=True)
    launch_parallelism: Count = variable("FLEETWRIGHT_LAUNCH_PARALLELISM", 8, provisioner=True)
    # Blast radius: the cluster-wide launch-rate cap and the registration breaker per NodePool.
    launch_rate_limit: Count = variable("FLEETWRIGHT_LAUNCH_RATE_LIMIT", 1000, provisioner=True)
    launch_rate_window_seconds: Seconds = variable(
        "FLEETWRIGHT_LAUNCH_RATE_WINDOW_SECONDS", 600.0, provisioner=True
    )
    breaker_threshold: Count = variable("FLEETWRIGHT_REGISTRATION_BREAKER_THRESHOLD", 3, provisioner=True)
    breaker_window_seconds: Seconds = variable(
        "FLEETWRIGHT_REGISTRATION_BREAKER_WINDOW_SECONDS", 3600.0, provisioner=True
    )
    breaker_cool_off_seconds: Seconds = variable(
        "FLEETWRIGHT_REGISTRATION_BREAKER_COOL_OFF_SECONDS", 1800.0, provisioner=True
    )
    # Interruption handling.
    replace_on_rebalance: Flag = variable(ENV_REPLACE_ON_REBALANCE, False)
    account_id: str = variable(ENV_ACCOUNT, "", pattern=r"^\d{12}$")
    # Disruption.
    min_saving_fraction: Fraction | None = variable(ENV_MIN_SAVING_FRACTION, None)
    min_saving_dollars: Seconds | None = variable(ENV_MIN_SAVING_DOLLARS, None)
    min_node_age_seconds: Seconds | None = variable(ENV_MIN_NODE_AGE_SECONDS, None)
    spot_to_spot: Flag | None = variable(ENV_SPOT_TO_SPOT, None)
    dry_run: Flag = variable(ENV_DRY_RUN, False)
    node_repair: Flag | None = variable(ENV_NODE_REPAIR, None)

    @model_validator(mode="before")
    @classmethod
    def _trimmed(cls, values: Any) -> Any:
        """Values trimmed; blank ones dropped, so they take the default."""
        if not isinstance(values, Mapping):
            return values
        return {
            key: value.strip() if isinstance(value, str) else value
            for key, value in values.items()
            if not (isinstance(value, str) and not value.strip())
        }

    @model_validator(mode="after")
    def _batch_window(self) -> FunctionEnvironment:
        if self.batch_max_seconds < self.batch_idle_seconds:
            idle, most = (self.variable_of(name) for name in ("batch_idle_seconds", "batch_max_seconds"))
            raise ValueError(f"{most} must not be shorter than {idle}")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The process environment (no ``.env`` or secrets files); only the mapping, when one is given."""
        return (init_settings,) if _MAPPING_ONLY.get() else (init_settings, env_settings)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> FunctionEnvironment:
        """Parse ``environ`` (default: the process environment, read by pydantic-settings). Raises
        :class:`ConfigError`, one line per bad variable."""
        token = _MAPPING_ONLY.set(environ is not None)
        try:
            return cls() if environ is None else cls.model_validate(environ)
        except ValidationError as error:
            raise ConfigError("\n".join(_problem(e) for e in error.errors())) from None
        finally:
            _MAPPING_ONLY.reset(token)

    @classmethod
    def variable_of(cls, field: str) -> str:
        """The environment variable ``field`` is read from (the first, when there are several)."""
        alias = cls.model_fields[field].validation_alias
        first = alias.choices[0] if isinstance(alias, AliasChoices) else alias
        assert isinstance(first, str)
        return first

    @classmethod
    def variables(cls) -> dict[str, str]:
        """``field → environment variable`` for every setting."""
        return {name: cls.variable_of(name) for name in cls.model_fields}

    @classmethod
    def default_of(cls, field: str) -> Any:
        """The default of ``field`` (``ProvisionerConfig`` takes its defaults from here)."""
        return cls.model_fields[field].default

    def require(self, *variables: str) -> None:
        """Raise :class:`ConfigError` naming those of ``variables`` that are unset."""
        values = {variable: getattr(self, field) for field, variable in self.variables().items()}
        missing = [v for v in variables if not values.get(v)]
        if missing:
            raise ConfigError(f"missing environment variable(s): {', '.join(missing)}")

    def provisioner_options(self) -> dict[str, Any]:
        """The ``ProvisionerConfig`` fields set from the environment (the fields marked ``provisioner``)."""
        marked = {name for name, info in type(self).model_fields.items() if _marked(info.json_schema_extra)}
        return self.model_dump(include=marked)


def _marked(extra: object) -> bool:
    return isinstance(extra, dict) and extra.get(PROVISIONER) is True


def _problem(error: Any) -> str:
    """``VARIABLE: what is wrong`` (the message our validators give, not pydantic's wrapping)."""
    cause = (error.get("ctx") or {}).get("error")
    message = str(cause) if isinstance(cause, ValueError) else str(error.get("msg", ""))
    where = ".".join(str(part) for part in error.get("loc") or ())
    return f"{where}: {message}" if where else message
