"""Pods selecting labels no NodePool defines, as Karpenter treats them.

Karpenter's suite: a pod requiring ``In`` or ``Exists`` on a label no NodePool sets stays pending;
``NotIn`` and ``DoesNotExist`` schedule (the node simply lacks the label). Well-known labels are
defined by every NodePool through its instance types and offerings.
"""

from __future__ import annotations

import pytest

from fleetwright.model.labels import ARCH, CAPACITY_TYPE, INSTANCE_TYPE, OS, ZONE
from fleetwright.model.requirements import Requirement, Requirements
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, nodepool, pod, req


def run(*pods, pools=None) -> Results:  # type: ignore[no-untyped-def]
    return schedule(
        SchedulingInput(
            pods=list(pods), nodepools=list(pools or [nodepool()]), instance_types=list(SMALL_CATALOG)
        )
    )


def test_exists_on_a_label_no_nodepool_defines_is_not_scheduled() -> None:
    result = run(pod("a", cpu="1", required=[req("test-key", "Exists")]))
    assert result.new_claims == []
    assert [e.pod.name for e in result.errors] == ["a"]
    assert 'label "test-key" is not set by the NodePool' in result.errors[0].reason


def test_in_on_a_label_no_nodepool_defines_is_not_scheduled() -> None:
    result = run(pod("a", cpu="1", required=[req("test-key", "In", "test-value")]))
    assert result.new_claims == []
    assert 'label "test-key" is not set by the NodePool' in result.errors[0].reason


@pytest.mark.parametrize("operator,values", [("NotIn", ("test-value",)), ("DoesNotExist", ())])
def test_notin_and_doesnotexist_on_an_undefined_label_schedule_without_the_label(
    operator: str, values: tuple[str, ...]
) -> None:
    result = run(pod("a", cpu="1", required=[req("test-key", operator, *values)]))
    assert result.errors == []
    assert [p.name for p in result.new_claims[0].pods] == ["a"]
    assert "test-key" not in result.new_claims[0].labels


def test_exists_on_a_label_the_nodepool_sets_is_scheduled() -> None:
    result = run(pod("a", cpu="1", required=[req("team", "Exists")]), pools=[nodepool(labels={"team": "a"})])
    assert result.errors == []
    assert result.new_claims[0].labels["team"] == "a"


@pytest.mark.parametrize("key", [ZONE, INSTANCE_TYPE, CAPACITY_TYPE, ARCH, OS])
def test_exists_on_a_well_known_label_is_scheduled_though_the_nodepool_never_names_it(key: str) -> None:
    result = run(pod("a", cpu="1", required=[req(key, "Exists")]))
    assert result.errors == []
    assert [p.name for p in result.new_claims[0].pods] == ["a"]


EXISTS_AND_NOT_X = Requirements.of(
    [Requirement.create("test-key", "Exists"), Requirement.create("test-key", "NotIn", ["x"])]
)


@pytest.mark.parametrize("names", [("a", "b"), ("b", "a")])
def test_exists_pod_does_not_join_a_claim_whose_pod_merely_excludes_a_value(names: tuple[str, str]) -> None:
    # The claim carries the first pod's "test-key NotIn [x]", yet its node will not have the label.
    lenient = pod(names[0], cpu="1", required=[req("test-key", "NotIn", "x")])
    exists = pod(names[1], cpu="1", required=[req("test-key", "Exists")])
    result = run(lenient, exists)
    assert [p.name for c in result.new_claims for p in c.pods] == [lenient.name]
    assert [e.pod.name for e in result.errors] == [exists.name]
    assert 'label "test-key" is not set by the NodePool' in result.errors[0].reason


def test_a_pod_needing_the_label_is_refused_after_one_that_may_lack_it_in_the_same_batch() -> None:
    lenient = pod("lenient", cpu="2", required=[req("test-key", "NotIn", "x")])
    strict = pod("strict", cpu="1", required=[EXISTS_AND_NOT_X])
    result = run(lenient, strict)
    assert [p.name for c in result.new_claims for p in c.pods] == ["lenient"]
    assert [e.pod.name for e in result.errors] == ["strict"]


def test_a_pod_needing_the_label_is_refused_after_an_earlier_run_placed_one_that_may_lack_it() -> None:
    # Prepared NodePools are shared between runs in one process: what one run learnt about a pod that
    # may lack the label must not answer for a pod that needs it.
    assert run(pod("lenient", cpu="1", required=[req("test-key", "NotIn", "x")])).errors == []
    result = run(pod("strict", cpu="1", required=[EXISTS_AND_NOT_X]))
    assert result.new_claims == []
    assert 'label "test-key" is not set by the NodePool' in result.errors[0].reason


def test_requirements_that_allow_different_nodes_describe_differently() -> None:
    may_lack = Requirement.create("k", "NotIn", ["x"])
    needs = may_lack.intersect(Requirement.create("k", "Exists"))
    assert may_lack.describe() == "k NotIn [x]"
    assert needs.describe() == "k Exists NotIn [x]"
    assert Requirement.create("k", "Exists").describe() == "k Exists"
    assert Requirement.create("k", "DoesNotExist").describe() == "k DoesNotExist"
