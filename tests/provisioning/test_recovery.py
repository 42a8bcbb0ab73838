"""Kubernetes and AWS errors mid-run leave consistent state, and the next run picks up."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.aws.provider import AwsProvider
from fleetwright.aws.tags import NODECLAIM_TAG
from fleetwright.cloud.launch import LaunchedInstance, LaunchRequest
from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.kube.config import ClusterConfig
from fleetwright.observability.metrics import REGISTRATION_TIMEOUTS, RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.state import ClaimStatus
from tests.support.provisioning import World, make_config, nodepool


class CrashAfterLaunch(AwsProvider):
    """Launches for real, then fails as if the process died before recording the result."""

    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        super().launch(request)
        raise TimeoutError("Lambda timed out after CreateFleet")


class FailBeforeLaunch(AwsProvider):
    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        raise ConnectionError("EC2 endpoint unreachable")


def _provider(world: World, cls: type[AwsProvider]) -> AwsProvider:
    return cls(world.aws.cluster, "us-east-1", clients=world.aws.clients, unavailable=world.state.unavailable)


@pytest.mark.parametrize(("pods", "cpu", "claims"), [(2, "0.5", 1), (3, "1.5", 3)])
def test_a_crash_after_create_fleet_does_not_launch_twice(
    world: World, pods: int, cpu: str, claims: int
) -> None:
    # On 2-CPU types, pods of 1.5 CPU need a node each: several claims launched in one pass.
    config = make_config(nodepool(instance_types=["c5.large", "m5.large"]))
    world.pending(pods, cpu=cpu)
    crashed = world.provisioner(config, holder="crashed")
    crashed.lifecycle.cloud = _provider(world, CrashAfterLaunch)
    report = crashed.run_once()
    orphans = world.state.nodeclaims.list()
    assert report.launched == [] and set(report.passes[0].failed) == {o.id for o in orphans}
    assert all("TimeoutError" in reason for reason in report.passes[0].failed.values())
    assert {o.status for o in orphans} == {ClaimStatus.LAUNCHING}  # recorded before the launch
    assert len(world.instances()) == len(orphans) == claims

    # Until the launches' deadline and the settle grace have passed, the claims are capacity in flight.
    world.wall.advance(30)
    waiting = world.provisioner(config, holder="next-run").run_once()
    assert waiting.launched == [] and waiting.reconciles[0].adopted == []
    world.wall.advance(30)
    recovered = world.provisioner(config, holder="later-run").run_once()
    assert sorted(recovered.reconciles[0].adopted) == sorted(o.id for o in orphans)
    assert recovered.launched == []  # the pods wait for the adopted instances
    claimed = {}
    for orphan in orphans:
        adopted = world.state.nodeclaims.get(orphan.id)
        assert adopted is not None and adopted.status == ClaimStatus.LAUNCHED
        claimed[adopted.instance_id] = orphan.id
    instances = world.instances()
    assert {i["InstanceId"]: world.instance_tags(i)[NODECLAIM_TAG] for i in instances} == claimed
    assert world.create_fleet_calls() == len(orphans)


def test_a_launch_that_never_reached_ec2_is_retried_after_its_deadline_and_grace(world: World) -> None:
    world.pending(2)
    failing = world.provisioner(holder="failing")
    failing.lifecycle.cloud = _provider(world, FailBeforeLaunch)
    first = failing.run_once()
    [orphan] = world.state.nodeclaims.list()
    assert "ConnectionError" in first.passes[0].failed[orphan.id]
    assert orphan.launch_deadline is not None

    # Until its launch deadline and the settle grace have passed, the claim still counts as launching.
    world.wall.advance(orphan.launch_deadline - world.wall() + 29)
    assert world.provisioner().run_once().launched == []
    # After it, the claim is failed and the pods get a new one.
    world.wall.advance(2)
    report = world.provisioner().run_once()
    assert report.reconciles[0].abandoned == [orphan.id]
    [claim] = report.launched
    assert claim.id != orphan.id
    gone = world.state.nodeclaims.get(orphan.id)
    assert gone is not None and gone.status == ClaimStatus.FAILED
    assert len(world.instances()) == 1
    assert world.create_fleet_calls() == 1


def test_a_claim_from_an_older_version_is_settled_after_the_orphan_grace(world: World) -> None:
    world.pending(2)
    failing = world.provisioner(holder="old-version")
    failing.lifecycle.cloud = _provider(world, FailBeforeLaunch)
    failing.run_once()
    [orphan] = world.state.nodeclaims.list()
    # Written without a launch deadline, as versions before launch deadlines did.
    world.state.table.update(world.state.nodeclaims.pk, orphan.id, remove=["launchDeadline"])
    world.state.nodeclaims.forget()  # that version's write moved no revision: read the table afresh
    world.wall.advance(29)
    assert world.provisioner().run_once().launched == []
    world.wall.advance(2)
    report = world.provisioner().run_once()
    assert report.reconciles[0].abandoned == [orphan.id]
    assert len(report.launched) == 1


def test_kubernetes_unreachable_changes_nothing_and_the_next_run_launches(world: World) -> None:
    world.pending(2)
    unreachable = KubeCluster(KubeClient(ClusterConfig(server="http://127.0.0.1:9"), sleep=lambda _s: None))
    broken = Provisioner(unreachable, world.cloud, world.state, make_config(), wall_clock=world.wall)
    report = broken.run_once()
    assert report.passes[0].error and report.reconciles[0].error == ""
    assert world.state.nodeclaims.list() == []
    assert world.create_fleet_calls() == 0
    assert len(world.provisioner().run_once().launched) == 1


def test_a_dynamodb_error_after_launch_is_settled_by_the_next_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.pending(1)
    store = world.state.nodeclaims
    original = store.transition

    def broken(*args: Any, **kwargs: Any) -> bool:
        raise ConnectionError("DynamoDB unreachable")

    monkeypatch.setattr(store, "transition", broken)
    first = world.provisioner().run_once()
    assert "ConnectionError" in first.passes[0].error
    monkeypatch.setattr(store, "transition", original)
    world.wall.advance(60)
    second = world.provisioner().run_once()
    assert len(second.reconciles[0].adopted) == 1
    assert second.launched == []
    assert len(world.instances()) == 1


def test_a_node_that_never_registers_is_terminated_after_15_minutes(world: World) -> None:
    world.pending(2)
    metrics = RecordingMetrics()
    provisioner = world.provisioner(metrics=metrics)
    [claim] = provisioner.run_once().launched
    world.wall.advance(14 * 60)
    world.strict.consistency.settle()  # minutes later, EC2 shows the instance everywhere
    assert provisioner.reconcile().timed_out == []
    world.wall.advance(61)
    assert provisioner.reconcile().timed_out == [claim.id]
    assert world.instances() == []
    assert [i["InstanceId"] for i in world.instances(("shutting-down", "terminated"))] == [claim.instance_id]
    terminated = world.state.nodeclaims.get(claim.id)
    assert terminated is not None and terminated.status == ClaimStatus.TERMINATED
    assert metrics.total(REGISTRATION_TIMEOUTS, NodePool="default") == 1
    # The pods are still pending: the next pass launches a replacement.
    [replacement] = provisioner.run_once().launched
    assert replacement.id != claim.id
