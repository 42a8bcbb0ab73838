"""Every Event reason Karpenter v1.14 emits is accounted for: emitted by Fleetwright (with a constant in
``kube/reasons.py``, a row in docs/kubernetes.md and a behaviour test asserting it), or listed in both with
why it is not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleetwright.kube import reasons

REPO = Path(__file__).resolve().parents[2]

# The reasons Karpenter v1.14.1 emits: kubernetes-sigs/karpenter pkg/events/reason.go, pkg/utils/pod/events.go
# and the terminator's AwaitingVolumeDetachment, and aws/karpenter-provider-aws
# pkg/controllers/interruption/events, pkg/cloudprovider/events and pkg/controllers/nodeclass/events.go
# (events without a reason left out).
KARPENTER_V1_14 = (
    # core: disruption
    "DisruptionBlocked",
    "DisruptionLaunching",
    "DisruptionTerminating",
    "DisruptionWaitingReadiness",
    "Unconsolidatable",
    "ConsolidationCandidate",
    "ConsolidationRejected",
    "ConsolidationApproved",
    # core: provisioning
    "FailedScheduling",
    "NoCompatibleInstanceTypes",
    "Nominated",
    # core: node health, termination, NodeClaims, pods
    "NodeRepairBlocked",
    "Disrupted",
    "Evicted",
    "FailedDraining",
    "TerminationGracePeriodExpiring",
    "FailedTermination",
    "AwaitingVolumeDetachment",
    "FailedConsistencyCheck",
    "InsufficientCapacityError",
    "UnregisteredTaintMissing",
    "NodeClassNotReady",
    "InvalidDoNotDisruptAnnotation",
    "DoNotDisruptUntil",
    "DoNotDisruptGracePeriodElapsed",
    # AWS provider
    "SpotInterrupted",
    "CapacityReservationInstanceInterrupted",
    "SpotRebalanceRecommendation",
    "InstanceStopping",
    "InstanceTerminating",
    "InstanceUnhealthy",
    "TerminatingOnInterruption",
    "ZonalShiftActive",
    "ZonalShiftCleared",
    "WaitingOnNodeClaimTermination",
)


def _events_rows() -> dict[str, str]:
    """docs/kubernetes.md's Events table: reason → the rest of its row (every reason of a shared row)."""
    text = (REPO / "docs" / "kubernetes.md").read_text()
    section = text[text.index("## Events\n") : text.index("**How they are written**")]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        head, _, rest = line[2:].partition(" | ")
        for reason in re.findall(r"`([A-Za-z]+)`", head):
            rows[reason] = rest
    return rows


def _behaviour_tests() -> str:
    """The text of every test module but this one."""
    here = Path(__file__).resolve()
    return "\n".join(p.read_text() for p in (REPO / "tests").rglob("test_*.py") if p.resolve() != here)


def test_every_karpenter_reason_is_accounted_for_and_nothing_else() -> None:
    assert sorted(reasons.KARPENTER_REASONS) == sorted(KARPENTER_V1_14)


@pytest.mark.parametrize("reason", KARPENTER_V1_14)
def test_each_reason_is_in_the_docs_table_as_emitted_or_why_not(reason: str) -> None:
    row = _events_rows().get(reason)
    assert row is not None, f"docs/kubernetes.md's Events table has no row for {reason}"
    why = reasons.KARPENTER_REASONS[reason]
    if why == reasons.EMITTED:
        assert "not emitted" not in row
    else:
        assert why.strip() and "not emitted" in row


def test_each_emitted_reason_has_a_constant_and_a_behaviour_test() -> None:
    constants = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)}
    tests = _behaviour_tests()
    emitted = [r for r, why in reasons.KARPENTER_REASONS.items() if why == reasons.EMITTED]
    assert len(emitted) >= 29
    assert [r for r in emitted if r not in constants] == []
    assert [r for r in emitted if f'"{r}"' not in tests] == []
