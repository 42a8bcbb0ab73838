"""The provisioner: unschedulable pods → scheduling simulation → NodeClaims launched, recorded and followed
until their nodes are initialized (``docs/provisioner.md``).

Entry point: :class:`Provisioner` (``run_until(deadline)``, ``run_once()``, ``provision()``, ``reconcile()``).
"""

from __future__ import annotations

from fleetwright.provisioning.cloud import Cloud
from fleetwright.provisioning.config import ConfigError, HandlerSettings, ProvisionerConfig, settings_from_env
from fleetwright.provisioning.provisioner import Provisioner
from fleetwright.provisioning.reports import PassReport, ReconcileReport, RunReport

__all__ = [
    "Cloud",
    "ConfigError",
    "HandlerSettings",
    "PassReport",
    "Provisioner",
    "ProvisionerConfig",
    "ReconcileReport",
    "RunReport",
    "settings_from_env",
]
