"""Pods whose required pod affinity points at other pods of the same batch (modelled on Karpenter's tests)."""

from __future__ import annotations

import itertools

from fleetwright.model.labels import HOSTNAME, ZONE
from fleetwright.model.pod import LabelSelector, Pod, PodAffinityTerm
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.types import Results, SchedulingInput
from tests.scheduling.builders import SMALL_CATALOG, node, nodepool, pod


def tier(
    name: str,
    kind: str,
    near: str | None = None,
    key: str = HOSTNAME,
    cpu: str = "100m",
    selector: dict[str, str] | None = None,
) -> Pod:
    """A pod labelled ``type=<kind>``, with required affinity to ``type=<near>`` pods when given."""
    p = pod(name, cpu=cpu, memory="128Mi", selector=selector)
    p.labels = {"type": kind}
    if near is not None:
        p.pod_affinity = (PodAffinityTerm(key, LabelSelector((("type", near),))),)
    return p


def run(pods: list[Pod], **extra: object) -> Results:
    return schedule(SchedulingInput(pods, [nodepool()], list(SMALL_CATALOG), **extra))  # type: ignore[arg-type]


def host_of(result: Results) -> dict[str, str]:
    where = {p.name: c.name for c in result.new_claims for p in c.pods}
    where.update({p.name: e.node for e in result.existing for p in e.pods})
    return where


def zone_of(result: Results) -> dict[str, str]:
    found = {}
    for claim in result.new_claims:
        assert len(claim.zones) == 1, f"{claim.name} holds zonal-affinity pods but has zones {claim.zones}"
        found.update({p.name: claim.zones[0] for p in claim.pods})
    return found


def test_a_chain_of_hostname_affinities_schedules_whatever_the_declaration_order() -> None:
    chain = [
        tier("db", "db"),
        tier("web", "web", near="db"),
        tier("cache", "cache", near="web"),
        tier("ui", "ui", near="cache"),
    ]
    for order in itertools.permutations(chain):
        result = run(list(order))
        assert not result.errors, [e.reason for e in result.errors]
        assert len(result.new_claims) == 1
        assert len(set(host_of(result).values())) == 1


def test_a_larger_follower_sorted_first_still_joins_its_target() -> None:
    # the follower is taken first (largest first) and must wait for the smaller pod it follows
    result = run([tier("web", "web", near="db", cpu="3"), tier("db", "db", cpu="100m")])
    assert not result.errors
    where = host_of(result)
    assert where["web"] == where["db"]


def test_zonal_followers_needing_several_new_nodes_all_land_in_the_targets_zone() -> None:
    target = tier("db", "db", selector={ZONE: "test-zone-b"})
    followers = [tier(f"web-{i}", "web", near="db", key=ZONE, cpu="6") for i in range(6)]
    result = run([*followers, target])
    assert not result.errors, [e.reason for e in result.errors]
    assert set(zone_of(result).values()) == {"test-zone-b"}
    assert len(result.new_claims) >= 3  # 36 CPUs of followers do not fit one 16-CPU node


def test_zonal_followers_join_a_target_on_an_existing_node() -> None:
    running = tier("db", "db")
    running.node_name = "n1"
    existing = node("n1", "1", "1Gi", labels={ZONE: "test-zone-c", HOSTNAME: "n1"}, pods=[running])
    followers = [tier(f"web-{i}", "web", near="db", key=ZONE, cpu="6") for i in range(4)]
    result = run(followers, nodes=[existing])
    assert not result.errors
    assert set(zone_of(result).values()) == {"test-zone-c"}


def test_affinity_to_a_pod_that_does_not_exist_is_reported_and_ends() -> None:
    lonely = [tier(f"web-{i}", "web", near="db", key=ZONE) for i in range(10)]
    result = run(lonely)
    assert not result.new_claims
    assert [e.reason for e in result.errors] == ["pod affinity on zone: no pod matches the selector"] * 10


def test_unsatisfiable_dependencies_end_with_a_reason_for_each_pod() -> None:
    # db follows web and web follows db: neither can go first
    result = run([tier("db", "db", near="web"), tier("web", "web", near="db"), tier("ok", "ok")])
    assert sorted(e.pod.name for e in result.errors) == ["db", "web"]
    assert all(e.reason == "pod affinity on hostname: no pod matches the selector" for e in result.errors)
    assert host_of(result).keys() == {"ok"}


def test_zonal_followers_of_a_target_whose_zone_is_not_decided_say_so() -> None:
    # As in Karpenter: the target's new node may still launch in any zone, so its zone is unknown in
    # this run; the followers are placed once the node exists.
    followers = [tier(f"web-{i}", "web", near="db", key=ZONE) for i in range(3)]
    result = run([*followers, tier("db", "db")])
    assert host_of(result).keys() == {"db"}
    assert {e.reason for e in result.errors} == {
        "pod affinity on zone: the matching pods are on new nodes whose zone is not decided yet"
    }


def test_a_follower_whose_targets_node_is_full_says_so() -> None:
    # hostname affinity can only join the target's node, and that node cannot grow past 16 CPUs
    result = run([tier("db", "db", cpu="15"), tier("web", "web", near="db", cpu="2")])
    assert host_of(result).keys() == {"db"}
    assert [e.reason for e in result.errors] == [
        "pod affinity on hostname: no node holding a matching pod can take it (1 matching pod)"
    ]
