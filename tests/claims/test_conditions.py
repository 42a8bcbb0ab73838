"""NodeClaim conditions as Karpenter's condition set writes them: the three lifecycle conditions always
there, the root ``Ready`` following them (what ``kubectl get nodeclaims`` shows as READY), reasons and
messages as Karpenter's controllers set them, transition times that move only with the status, every
condition at the object's generation, and nothing new when nothing changed."""

from __future__ import annotations

from typing import Any

from fleetwright.claims.conditions import (
    CONSOLIDATABLE,
    DRIFTED,
    Condition,
    lifecycle,
    merged,
    stamp,
    true,
)
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

CREATED = 1_700_000_000.0


def record(status: ClaimStatus, **fields: Any) -> NodeClaimRecord:
    launched = status != ClaimStatus.LAUNCHING
    registered = status in (ClaimStatus.REGISTERED, ClaimStatus.INITIALIZED)
    return NodeClaimRecord(
        id="default-abc",
        nodepool="default",
        status=str(status),
        created_at=CREATED,
        instance_id="i-0123" if launched else "",
        zone="us-east-1a",
        launched_at=CREATED + 5 if launched else None,
        registered_at=CREATED + 40 if registered else None,
        initialized_at=CREATED + 60 if status == ClaimStatus.INITIALIZED else None,
        **fields,
    )


def written(
    status: ClaimStatus, before: list[dict[str, Any]] | None = None, **kw: Any
) -> list[dict[str, Any]]:
    waiting = kw.pop("waiting", None)
    return merged(
        before or [], lifecycle(record(status), waiting), generation=1, now=CREATED + 999, created=CREATED
    )


def by_type(conditions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in conditions}


def test_a_launched_claim_reads_as_karpenters_launch_and_registration_controllers_leave_it() -> None:
    conditions = written(ClaimStatus.LAUNCHED)
    found = by_type(conditions)
    assert (found["Launched"]["status"], found["Launched"]["reason"], found["Launched"]["message"]) == (
        "True",
        "Launched",
        "",
    )
    assert found["Launched"]["lastTransitionTime"] == stamp(CREATED + 5)
    assert (found["Registered"]["status"], found["Registered"]["reason"]) == ("Unknown", "NodeNotFound")
    assert found["Registered"]["message"] == "Node not registered with cluster"
    assert found["Registered"]["lastTransitionTime"] == stamp(CREATED)  # Unknown since the creation
    assert (found["Initialized"]["status"], found["Initialized"]["reason"]) == (
        "Unknown",
        "AwaitingReconciliation",
    )
    ready = found["Ready"]
    assert (ready["status"], ready["reason"]) == ("Unknown", "ReconcilingDependents")
    assert ready["message"] == "Registered=Unknown, Initialized=Unknown"
    assert conditions[-1]["type"] == "Ready"  # the root last, as kubectl describe shows it
    assert {c["observedGeneration"] for c in conditions} == {1}


def test_a_registered_node_not_initialized_says_why() -> None:
    waiting = ("ResourceNotRegistered", 'Resource "nvidia.com/gpu" was requested but not registered')
    found = by_type(written(ClaimStatus.REGISTERED, waiting=waiting))
    assert found["Registered"]["status"] == "True"
    assert found["Registered"]["lastTransitionTime"] == stamp(CREATED + 40)
    assert (found["Initialized"]["status"], found["Initialized"]["reason"]) == ("Unknown", waiting[0])
    assert found["Initialized"]["message"] == waiting[1]
    assert found["Ready"]["message"] == "Initialized=Unknown"


def test_ready_is_true_once_launched_registered_and_initialized() -> None:
    found = by_type(written(ClaimStatus.INITIALIZED))
    assert all(found[k]["status"] == "True" for k in ("Launched", "Registered", "Initialized", "Ready"))
    assert (found["Ready"]["reason"], found["Ready"]["message"]) == ("Ready", "")
    assert found["Ready"]["lastTransitionTime"] == stamp(CREATED + 60)  # when the last of them became True


def test_writing_again_changes_nothing_and_a_reason_change_keeps_the_transition_time() -> None:
    first = written(ClaimStatus.REGISTERED, waiting=("NodeNotReady", "Node status is NotReady"))
    assert (
        written(ClaimStatus.REGISTERED, first, waiting=("NodeNotReady", "Node status is NotReady")) == first
    )

    later = written(
        ClaimStatus.REGISTERED,
        first,
        waiting=("StartupTaintsExist", 'StartupTaint "a:NoSchedule" still exists'),
    )
    assert by_type(later)["Initialized"]["reason"] == "StartupTaintsExist"
    assert (
        by_type(later)["Initialized"]["lastTransitionTime"]
        == by_type(first)["Initialized"]["lastTransitionTime"]
    )

    done = by_type(written(ClaimStatus.INITIALIZED, later))
    assert done["Initialized"]["lastTransitionTime"] == stamp(CREATED + 60)
    assert done["Ready"]["status"] == "True"


def test_disruption_conditions_come_and_go_without_touching_the_lifecycle() -> None:
    base = written(ClaimStatus.INITIALIZED)
    drifted = merged(
        base,
        {
            DRIFTED: true(DRIFTED, reason="AMIDrift", message="AMI ami-1 is no longer selected"),
            CONSOLIDATABLE: None,
        },
        generation=1,
        now=CREATED + 500,
        created=CREATED,
    )
    found = by_type(drifted)
    assert (found["Drifted"]["reason"], found["Drifted"]["lastTransitionTime"]) == (
        "AMIDrift",
        stamp(CREATED + 500),
    )
    assert {k: v for k, v in found.items() if k != "Drifted"} == by_type(base)
    assert drifted[-1]["type"] == "Ready"

    cleared = merged(drifted, {DRIFTED: None}, generation=1, now=CREATED + 900, created=CREATED)
    assert cleared == base


def test_a_false_dependent_makes_ready_false() -> None:
    base = written(ClaimStatus.LAUNCHED)
    refused = merged(
        base,
        {
            "Registered": Condition(
                "False", "MultipleNodesFound", "Invariant violated, matched multiple nodes"
            )
        },
        generation=1,
        now=CREATED + 100,
        created=CREATED,
    )
    ready = by_type(refused)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "UnhealthyDependents")
    assert ready["message"] == "Registered=False, Initialized=Unknown"  # latest first


def test_a_new_generation_is_carried_by_every_condition() -> None:
    base = written(ClaimStatus.INITIALIZED)
    again = merged(base, {}, generation=2, now=CREATED + 100, created=CREATED)
    assert {c["observedGeneration"] for c in again} == {2}
    assert [c["lastTransitionTime"] for c in again] == [c["lastTransitionTime"] for c in base]


def test_a_write_that_does_not_know_the_node_keeps_the_reason_the_object_gives() -> None:
    from fleetwright.claims.nodeclaim_objects import status_of

    waiting = ("StartupTaintsExist", 'StartupTaint "a:NoSchedule" still exists')
    current = {
        "metadata": {"generation": 1},
        "status": {"conditions": written(ClaimStatus.REGISTERED, waiting=waiting)},
    }
    kept = by_type(status_of(record(ClaimStatus.REGISTERED), current=current)["conditions"])
    assert (kept["Initialized"]["reason"], kept["Initialized"]["message"]) == waiting
    done = by_type(status_of(record(ClaimStatus.INITIALIZED), current=current)["conditions"])
    assert done["Initialized"]["status"] == "True"
