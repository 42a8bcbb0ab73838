"""The disruption function's own options, read from its environment (the rest — cluster, table, NodePool
documents, kubeconfig — is the provisioner's configuration, ``fleetwright.provisioning.config``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from fleetwright.disruption.types import DisruptionSettings
from fleetwright.provisioning.config import FALSE_VALUES, TRUE_VALUES, ConfigError

ENV_MIN_SAVING_FRACTION: Final = "FLEETWRIGHT_DISRUPTION_MIN_SAVING_FRACTION"
ENV_MIN_SAVING_DOLLARS: Final = "FLEETWRIGHT_DISRUPTION_MIN_SAVING_DOLLARS"
ENV_MIN_NODE_AGE_SECONDS: Final = "FLEETWRIGHT_DISRUPTION_MIN_NODE_AGE_SECONDS"
ENV_SPOT_TO_SPOT: Final = "FLEETWRIGHT_DISRUPTION_SPOT_TO_SPOT"
ENV_DRY_RUN: Final = "FLEETWRIGHT_DISRUPTION_DRY_RUN"


@dataclass(slots=True)
class DisruptionOptions:
    """The planner's settings and whether the controller only logs what it would do (``dry_run``)."""

    settings: DisruptionSettings = field(default_factory=DisruptionSettings)
    dry_run: bool = False


def _number(env: Mapping[str, str], variable: str, default: float, *, at_most: float | None = None) -> float:
    raw = env.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{variable}: expected a number, got {raw!r}") from None
    if not 0 <= value < float("inf") or (at_most is not None and value > at_most):
        bound = f" from 0 to {at_most:g}" if at_most is not None else " (non-negative)"
        raise ConfigError(f"{variable}: expected a number{bound}, got {raw!r}")
    return value


def _flag(env: Mapping[str, str], variable: str, default: bool) -> bool:
    raw = env.get(variable, "").strip().lower()
    if not raw:
        return default
    if raw in TRUE_VALUES:
        return True
    if raw in FALSE_VALUES:
        return False
    raise ConfigError(f"{variable}: expected true or false, got {raw!r}")


def options_from_env(environ: Mapping[str, str] | None = None) -> DisruptionOptions:
    """Read ``FLEETWRIGHT_DISRUPTION_*``; unset variables keep :class:`DisruptionSettings`' defaults.

    Raises :class:`~fleetwright.provisioning.config.ConfigError` naming the variable.
    """
    env = os.environ if environ is None else environ
    defaults = DisruptionSettings()
    settings = DisruptionSettings(
        min_saving_fraction=_number(env, ENV_MIN_SAVING_FRACTION, defaults.min_saving_fraction, at_most=1.0),
        min_saving_dollars=_number(env, ENV_MIN_SAVING_DOLLARS, defaults.min_saving_dollars),
        min_node_age_seconds=_number(env, ENV_MIN_NODE_AGE_SECONDS, defaults.min_node_age_seconds),
        spot_to_spot=_flag(env, ENV_SPOT_TO_SPOT, defaults.spot_to_spot),
    )
    return DisruptionOptions(settings=settings, dry_run=_flag(env, ENV_DRY_RUN, False))
