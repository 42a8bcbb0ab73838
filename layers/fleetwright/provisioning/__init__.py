"""The provisioner: unschedulable pods → scheduling simulation → NodeClaims launched, recorded and followed
until their nodes are initialized (``docs/provisioner.md``).

Entry point: :class:`Provisioner` (``run_until(deadline)``, ``run_once()``, ``provision()``, ``reconcile()``);
the claim lifecycle it launches through is :mod:`fleetwright.claims`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetwright.provisioning.config import ConfigError, HandlerSettings, ProvisionerConfig, settings_from_env

if TYPE_CHECKING:
    from fleetwright.provisioning.provisioner import Provisioner

__all__ = [
    "ConfigError",
    "HandlerSettings",
    "Provisioner",
    "ProvisionerConfig",
    "settings_from_env",
]


def __getattr__(name: str) -> Any:
    """:class:`Provisioner`, imported on first use: the claim lifecycle it builds on imports this package's
    observability and configuration, so importing it with the package would be circular."""
    if name == "Provisioner":
        from fleetwright.provisioning.provisioner import Provisioner

        return Provisioner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
