"""What a provisioning pass, a reconciliation and a whole run did (returned to callers and tests)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.state.nodeclaims import NodeClaimRecord


@dataclass(slots=True)
class PassReport:
    """One scheduling pass: what was pending, what was launched or failed, how long scheduling took."""

    batch_size: int = 0
    pending: int = 0
    placed_on_existing: int = 0
    unschedulable: int = 0
    launched: list[NodeClaimRecord] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # claim id → reason
    # Claims not launched (nor recorded) by the bounds on a runaway (claims/admission.py), also in ``failed``.
    held: dict[str, str] = field(default_factory=dict)  # claim name → reason
    scheduling_seconds: float = 0.0
    error: str = ""

    @property
    def hourly_cost(self) -> float:
        """USD per hour of the instances launched."""
        return sum(r.price or 0.0 for r in self.launched)

    @property
    def needs_retry(self) -> bool:
        """Something went wrong that another pass may fix."""
        return bool(self.error or self.failed)


@dataclass(slots=True)
class ReconcileReport:
    """One look at launched claims."""

    registered: list[str] = field(default_factory=list)
    initialized: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)  # Launching claims whose instance was found by tag
    abandoned: list[str] = field(default_factory=list)  # Launching claims with no instance: failed
    error: str = ""

    @property
    def freed_pods(self) -> bool:
        """Claims went away, so their pods need another pass."""
        return bool(self.timed_out or self.abandoned)


@dataclass(slots=True)
class RunReport:
    """One invocation: whether it got the lease, and its passes and reconciliations."""

    lease_acquired: bool = False
    lease_lost: bool = False
    passes: list[PassReport] = field(default_factory=list)
    reconciles: list[ReconcileReport] = field(default_factory=list)
    error: str = ""

    @property
    def launched(self) -> list[NodeClaimRecord]:
        """Every claim launched in the run."""
        return [r for p in self.passes for r in p.launched]

    def summary(self) -> dict[str, object]:
        """A JSON-friendly summary (the handler's response)."""
        return {
            "leaseAcquired": self.lease_acquired,
            "leaseLost": self.lease_lost,
            "passes": len(self.passes),
            "launched": [r.id for r in self.launched],
            "failed": sorted({k for p in self.passes for k in p.failed}),
            "registered": [c for r in self.reconciles for c in r.registered],
            "initialized": [c for r in self.reconciles for c in r.initialized],
            "timedOut": [c for r in self.reconciles for c in r.timed_out],
            "hourlyCostLaunched": round(sum(p.hourly_cost for p in self.passes), 6),
            "errors": [p.error for p in self.passes if p.error]
            + [r.error for r in self.reconciles if r.error]
            + ([self.error] if self.error else []),
        }
