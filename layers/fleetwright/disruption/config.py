"""The disruption function's own options, read from its environment (the rest — cluster, table, NodePool
documents, kubeconfig — is the provisioner's configuration, ``fleetwright.config.settings``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleetwright.config.environment import FunctionEnvironment
from fleetwright.config.names import (
    ENV_DRY_RUN,
    ENV_MIN_NODE_AGE_SECONDS,
    ENV_MIN_SAVING_DOLLARS,
    ENV_MIN_SAVING_FRACTION,
    ENV_NODE_REPAIR,
    ENV_SPOT_TO_SPOT,
)
from fleetwright.disruption.types import DisruptionSettings

__all__ = [
    "ENV_DRY_RUN",
    "ENV_MIN_NODE_AGE_SECONDS",
    "ENV_MIN_SAVING_DOLLARS",
    "ENV_MIN_SAVING_FRACTION",
    "ENV_NODE_REPAIR",
    "ENV_SPOT_TO_SPOT",
    "DisruptionOptions",
    "options_from_env",
]


@dataclass(slots=True)
class DisruptionOptions:
    """The planner's settings and whether the controller only logs what it would do (``dry_run``)."""

    settings: DisruptionSettings = field(default_factory=DisruptionSettings)
    dry_run: bool = False


def options_from_env(environ: Mapping[str, str] | FunctionEnvironment | None = None) -> DisruptionOptions:
    """Read ``FLEETWRIGHT_DISRUPTION_*`` (default: ``os.environ``; or the environment already parsed);
    unset variables keep :class:`DisruptionSettings`' defaults.

    Raises :class:`~fleetwright.config.environment.ConfigError` naming the variable.
    """
    env = environ if isinstance(environ, FunctionEnvironment) else FunctionEnvironment.from_environ(environ)
    defaults = DisruptionSettings()

    def given(value: float | None, default: float) -> float:
        return default if value is None else value

    settings = DisruptionSettings(
        min_saving_fraction=given(env.min_saving_fraction, defaults.min_saving_fraction),
        min_saving_dollars=given(env.min_saving_dollars, defaults.min_saving_dollars),
        min_node_age_seconds=given(env.min_node_age_seconds, defaults.min_node_age_seconds),
        spot_to_spot=defaults.spot_to_spot if env.spot_to_spot is None else env.spot_to_spot,
        node_repair=defaults.node_repair if env.node_repair is None else env.node_repair,
    )
    return DisruptionOptions(settings=settings, dry_run=env.dry_run)
