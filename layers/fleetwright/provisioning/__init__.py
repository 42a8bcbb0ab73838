"""The provisioner: unschedulable pods → scheduling simulation → NodeClaims launched, recorded and followed
until their nodes are initialized (``docs/provisioner.md``).

Entry point: :class:`Provisioner` (``run_until(deadline)``, ``run_once()``, ``provision()``, ``reconcile()``).
"""

from __future__ import annotations

from fleetwright.provisioning.provisioner import Provisioner
from fleetwright.provisioning.reports import PassReport, ReconcileReport, RunReport

__all__ = [
    "PassReport",
    "Provisioner",
    "ReconcileReport",
    "RunReport",
]
