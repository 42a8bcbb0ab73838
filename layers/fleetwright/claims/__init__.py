"""The NodeClaim lifecycle every capability shares: claim records, the launch lease held for a pass, one
CreateFleet per claim (recorded and fenced), registration and reconciliation of launched claims, the
NodeClaim objects mirroring them, and the static pools' node limits (``docs/provisioner.md``).

Entry point: :class:`~fleetwright.claims.lifecycle.ClaimLifecycle`; capabilities type against
:mod:`fleetwright.claims.protocols`.
"""
