"""The provisioner: unschedulable pods → scheduling simulation → NodeClaims launched, recorded and followed
until their nodes are initialized (``docs/provisioner.md``).

Entry point: :class:`Provisioner` (``run_until(deadline)``, ``run_once()``, ``provision()``, ``reconcile()``);
the claim lifecycle it launches through is :mod:`fleetwright.claims`.
"""

from __future__ import annotations

from fleetwright.provisioning.provisioner import Provisioner

__all__ = ["Provisioner"]
