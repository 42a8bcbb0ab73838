"""The disruption function's own options, read from its environment (the rest — cluster, table, NodePool
documents, kubeconfig — is the provisioner's configuration, ``fleetwright.config.settings``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from fleetwright.config.settings import env_flag, env_number
from fleetwright.disruption.types import DisruptionSettings

ENV_MIN_SAVING_FRACTION: Final = "FLEETWRIGHT_DISRUPTION_MIN_SAVING_FRACTION"
ENV_MIN_SAVING_DOLLARS: Final = "FLEETWRIGHT_DISRUPTION_MIN_SAVING_DOLLARS"
ENV_MIN_NODE_AGE_SECONDS: Final = "FLEETWRIGHT_DISRUPTION_MIN_NODE_AGE_SECONDS"
ENV_SPOT_TO_SPOT: Final = "FLEETWRIGHT_DISRUPTION_SPOT_TO_SPOT"
ENV_DRY_RUN: Final = "FLEETWRIGHT_DISRUPTION_DRY_RUN"
ENV_NODE_REPAIR: Final = "FLEETWRIGHT_DISRUPTION_NODE_REPAIR"


@dataclass(slots=True)
class DisruptionOptions:
    """The planner's settings and whether the controller only logs what it would do (``dry_run``)."""

    settings: DisruptionSettings = field(default_factory=DisruptionSettings)
    dry_run: bool = False


def options_from_env(environ: Mapping[str, str] | None = None) -> DisruptionOptions:
    """Read ``FLEETWRIGHT_DISRUPTION_*``; unset variables keep :class:`DisruptionSettings`' defaults.

    Raises :class:`~fleetwright.config.settings.ConfigError` naming the variable.
    """
    env = os.environ if environ is None else environ
    defaults = DisruptionSettings()
    settings = DisruptionSettings(
        min_saving_fraction=env_number(
            env, ENV_MIN_SAVING_FRACTION, defaults.min_saving_fraction, at_most=1.0
        ),
        min_saving_dollars=env_number(env, ENV_MIN_SAVING_DOLLARS, defaults.min_saving_dollars),
        min_node_age_seconds=env_number(env, ENV_MIN_NODE_AGE_SECONDS, defaults.min_node_age_seconds),
        spot_to_spot=env_flag(env, ENV_SPOT_TO_SPOT, defaults.spot_to_spot),
        node_repair=env_flag(env, ENV_NODE_REPAIR, defaults.node_repair),
    )
    return DisruptionOptions(settings=settings, dry_run=env_flag(env, ENV_DRY_RUN, False))
