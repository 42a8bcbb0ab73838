"""Garbage collection against moto (EC2, DynamoDB) and the Kubernetes API emulator: leaked instances are
terminated, Nodes of vanished instances deleted, unused launch templates deleted — and nothing that is not
this cluster's, or still on its way up, is touched."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.aws.provider import AwsProvider
from fleetwright.aws.tags import CLUSTER_TAG, NODECLASS_TAG, ownership_tags, to_aws
from fleetwright.claims.registration import TERMINATION_FINALIZER
from fleetwright.disruption import metrics as m
from fleetwright.disruption.gc import ORPHANED_SINCE_ANNOTATION, GarbageCollector, GcReport
from fleetwright.kube.resources import NODES, PODS
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.aws.strict import StrictEc2
from tests.kube.objects import node_object, pod_object
from tests.support.aws import CLUSTER
from tests.support.provisioning import World

TIMEOUT = 900.0
TEMPLATE_GRACE = 3600.0


class Gc:
    """The world, a collector on it and helpers to leave garbage (and non-garbage) lying around."""

    def __init__(self, rig: World, strict: StrictEc2 | None = None) -> None:
        self.world = rig
        self.strict = strict
        self.ec2 = rig.aws.clients.ec2
        # moto stamps instances and templates with the real time; the collector's clock starts there.
        rig.wall.now = time.time()
        self.metrics = RecordingMetrics()
        self.collector = self.make(rig.cloud)

    def make(self, cloud: Any) -> GarbageCollector:
        return GarbageCollector(
            self.world.kube,
            cloud,
            self.world.state,
            registration_timeout_seconds=TIMEOUT,
            launch_template_grace_seconds=TEMPLATE_GRACE,
            metrics=self.metrics,
            clock=self.world.wall,
        )

    def collect(self) -> GcReport:
        return self.collector.collect()

    def advance(self, seconds: float) -> None:
        self.world.wall.advance(seconds)

    # -- EC2 ---------------------------------------------------------------------------------------------

    def instance(
        self, claim: str = "", *, tags: dict[str, str] | None = None, template: str = "", owned: bool = True
    ) -> str:
        """A running instance, tagged as this cluster's (with ``claim``) unless ``owned`` is False."""
        if tags is None:
            tags = (
                ownership_tags(CLUSTER, nodepool="default", nodeclaim=claim) if owned else {"Name": "other"}
            )
        params: dict[str, Any] = {
            "MinCount": 1,
            "MaxCount": 1,
            "InstanceType": "m5.large",
            "SubnetId": self.world.aws.subnets["a-small"],
            "TagSpecifications": [{"ResourceType": "instance", "Tags": to_aws(tags)}],
        }
        if template:
            params["LaunchTemplate"] = {"LaunchTemplateName": template}
        else:
            params["ImageId"] = next(iter(self.world.amis.ids.values()))
        instance_id = str(self.ec2.run_instances(**params)["Instances"][0]["InstanceId"])
        if self.strict is not None:  # left lying around a while: every EC2 call sees it by now
            self.strict.consistency.settle()
        return instance_id

    def state_of(self, instance_id: str) -> str:
        answer = self.ec2.describe_instances(InstanceIds=[instance_id])
        return str(answer["Reservations"][0]["Instances"][0]["State"]["Name"])

    def terminate(self, instance_id: str) -> None:
        self.ec2.terminate_instances(InstanceIds=[instance_id])

    def template(self, name: str, image: str = "", *, owner: str = CLUSTER) -> str:
        image = image or next(iter(self.world.amis.ids.values()))
        answer = self.ec2.create_launch_template(
            LaunchTemplateName=name,
            LaunchTemplateData={"ImageId": image, "InstanceType": "m5.large"},
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": to_aws({CLUSTER_TAG: owner, NODECLASS_TAG: "default"}),
                }
            ],
        )
        # moto stamps the template with the real time (whole seconds): the collector's clock must not lag
        # behind it, or a template a test ages by the grace plus a second is still young on a slow machine.
        self.world.wall.now = max(self.world.wall.now, time.time() + 1)
        return str(answer["LaunchTemplate"]["LaunchTemplateId"])

    def templates(self) -> list[str]:
        return sorted(
            t["LaunchTemplateName"] for t in self.ec2.describe_launch_templates()["LaunchTemplates"]
        )

    # -- Kubernetes --------------------------------------------------------------------------------------

    def node(
        self,
        name: str,
        instance_id: str = "",
        *,
        nodepool: str | None = "default",
        taints: list[dict[str, Any]] | None = None,
    ) -> str:
        labels = {"karpenter.sh/nodepool": nodepool} if nodepool else {}
        body = node_object(name, labels=labels, taints=taints)
        if instance_id:
            body["spec"]["providerID"] = f"aws:///us-east-1a/{instance_id}"
        self.world.client.create(NODES, body)
        return name

    def pod(self, name: str, node: str) -> None:
        self.world.client.create(PODS, pod_object(name, node=node))

    def nodes(self) -> list[str]:
        return sorted(n["metadata"]["name"] for n in self.world.kube.list_nodes())

    def pods_on(self, node: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.world.kube.list_pods_on_node(node))

    # -- state -------------------------------------------------------------------------------------------

    def claim(self, claim_id: str, status: ClaimStatus, instance_id: str = "") -> None:
        now = self.world.wall()
        self.world.state.nodeclaims.create(
            NodeClaimRecord(
                id=claim_id,
                nodepool="default",
                status=str(status),
                created_at=now,
                instance_id=instance_id,
                zone="us-east-1a" if instance_id else "",
                launched_at=now if instance_id else None,
            )
        )

    def claim_status(self, claim_id: str) -> str:
        record = self.world.state.nodeclaims.get(claim_id)
        assert record is not None
        return record.status

    def collected(self, kind: str) -> float:
        return self.metrics.total(m.GARBAGE_COLLECTED, Kind=kind)


@pytest.fixture
def gc(world: World, strict_ec2: StrictEc2 | None) -> Gc:
    return Gc(world, strict_ec2)


# -- instances ---------------------------------------------------------------------------------------------


def test_orphan_instance_past_the_registration_timeout_is_terminated(gc: Gc) -> None:
    untagged_claim = gc.instance()  # ours, but no nodeclaim tag and no record
    unknown_claim = gc.instance("default-gone0001")  # its claim record expired or was never written
    gc.advance(TIMEOUT + 1)

    report = gc.collect()

    assert sorted(report.terminated_instances) == sorted([untagged_claim, unknown_claim])
    assert gc.state_of(untagged_claim) == gc.state_of(unknown_claim) == "terminated"
    assert gc.collected("Instance") == 2
    assert report.ok


def test_instance_within_the_registration_timeout_is_kept(gc: Gc) -> None:
    young = gc.instance("default-young001")
    gc.advance(TIMEOUT - 60)

    report = gc.collect()

    assert report.terminated_instances == []
    assert gc.state_of(young) == "running"


def test_instance_with_an_active_claim_is_left_to_the_provisioner(gc: Gc) -> None:
    launching = gc.instance("default-launch01")
    gc.claim("default-launch01", ClaimStatus.LAUNCHING)  # CreateFleet returned, the claim not updated yet
    launched = gc.instance("default-launch02")
    gc.claim("default-launch02", ClaimStatus.LAUNCHED, launched)
    batched = gc.instance()  # launched in a batch; tagging it with its claim afterwards failed
    gc.claim("default-launch03", ClaimStatus.LAUNCHED, batched)
    gc.advance(TIMEOUT + 1)

    report = gc.collect()

    assert report.terminated_instances == []
    assert gc.state_of(launching) == gc.state_of(launched) == gc.state_of(batched) == "running"


def test_instance_with_a_node_is_kept(gc: Gc) -> None:
    serving = gc.instance("default-serve001")  # its claim record expired, but it is a Node
    gc.node("serving", serving)
    gc.advance(TIMEOUT + 1)

    assert gc.collect().terminated_instances == []
    assert gc.state_of(serving) == "running"


def test_duplicate_instance_of_a_claim_is_terminated_and_the_claim_kept(gc: Gc) -> None:
    kept = gc.instance("default-dup00001")
    gc.claim("default-dup00001", ClaimStatus.REGISTERED, kept)
    gc.node("kept", kept)
    duplicate = gc.instance("default-dup00001")  # a retried launch that also succeeded
    gc.advance(TIMEOUT + 1)

    report = gc.collect()

    assert report.terminated_instances == [duplicate]
    assert gc.state_of(kept) == "running"
    assert gc.claim_status("default-dup00001") == ClaimStatus.REGISTERED


def test_instance_of_a_failed_claim_is_terminated_and_the_claim_marked(gc: Gc) -> None:
    leaked = gc.instance("default-failed01")
    gc.claim("default-failed01", ClaimStatus.FAILED)  # the launch reported failure, yet the instance exists
    gc.advance(TIMEOUT + 1)

    report = gc.collect()

    assert report.terminated_instances == [leaked]
    assert report.finalized_claims == ["default-failed01"]
    record = gc.world.state.nodeclaims.get("default-failed01")
    assert record is not None
    assert record.status == ClaimStatus.TERMINATED
    assert record.instance_id == leaked
    assert "never became a node" in record.reason


def test_instances_not_ours_are_never_touched(gc: Gc) -> None:
    stranger = gc.instance(owned=False)
    other_cluster = gc.instance(tags=ownership_tags("other-cluster", nodepool="default", nodeclaim="x"))
    gc.advance(30 * 86400)

    report = gc.collect()

    assert report.terminated_instances == []
    assert gc.state_of(stranger) == gc.state_of(other_cluster) == "running"


# -- nodes -------------------------------------------------------------------------------------------------


def test_node_of_a_terminated_instance_is_deleted_with_its_pods_and_claim(gc: Gc) -> None:
    instance = gc.instance("default-node0001")
    gc.claim("default-node0001", ClaimStatus.INITIALIZED, instance)
    gc.node("gone", instance)
    gc.pod("web-1", "gone")
    gc.pod("web-2", "gone")
    gc.node("alive", gc.instance("default-alive001"))
    gc.pod("web-3", "alive")
    gc.terminate(instance)  # and the state-change event was lost

    report = gc.collect()

    assert report.deleted_nodes == ["gone"]
    assert gc.nodes() == ["alive"]
    assert gc.pods_on("gone") == []
    assert gc.pods_on("alive") == ["web-3"]
    assert gc.claim_status("default-node0001") == ClaimStatus.TERMINATED
    assert report.finalized_claims == ["default-node0001"]
    assert gc.collected("Node") == 1


def test_node_with_the_termination_finalizer_goes_rather_than_hanging_terminating(gc: Gc) -> None:
    instance = gc.instance("default-node0001")
    gc.claim("default-node0001", ClaimStatus.INITIALIZED, instance)
    gc.node("gone", instance)
    gc.world.client.patch(NODES, "gone", {"metadata": {"finalizers": [TERMINATION_FINALIZER]}})
    gc.terminate(instance)

    report = gc.collect()

    assert report.deleted_nodes == ["gone"]
    assert gc.nodes() == []


def test_node_whose_instance_ec2_forgot_is_deleted_when_a_claim_proves_it_was_ours(gc: Gc) -> None:
    gc.claim("default-forgot01", ClaimStatus.INITIALIZED, "i-0123456789abcdef0")
    gc.node("forgotten", "i-0123456789abcdef0")
    gc.node("unproven", "i-0fedcba9876543210")  # NodePool label, but neither EC2 nor a claim knows it

    report = gc.collect()

    assert report.deleted_nodes == ["forgotten"]
    assert gc.nodes() == ["unproven"]
    assert gc.claim_status("default-forgot01") == ClaimStatus.TERMINATED
    assert {"kind": "Node", "name": "unproven"}.items() <= report.kept[0].items()


def test_nodes_of_other_systems_are_kept(gc: Gc) -> None:
    foreign = gc.instance(owned=False)
    gc.node("foreign-instance", foreign)  # labelled like ours, but its instance is not ours
    ours = gc.instance("default-nolabel1")
    gc.node("no-nodepool", ours, nodepool=None)  # our instance, but the Node is not a NodePool's
    gc.node("no-provider-id")
    gc.terminate(foreign)
    gc.terminate(ours)
    gc.advance(TIMEOUT + 1)

    report = gc.collect()

    assert report.deleted_nodes == []
    assert gc.nodes() == ["foreign-instance", "no-nodepool", "no-provider-id"]


def test_node_held_by_a_termination_workflow_gets_a_grace_period(gc: Gc) -> None:
    instance = gc.instance("default-wflow001")
    gc.claim("default-wflow001", ClaimStatus.INITIALIZED, instance)
    gc.node("draining", instance)
    gc.world.kube.mark_disrupted("draining")  # the workflow cordoned it...
    gc.terminate(instance)  # ...and terminated the instance; it deletes the Node next

    first = gc.collect()
    assert first.deleted_nodes == []
    node = gc.world.kube.get_node("draining")
    assert node is not None and ORPHANED_SINCE_ANNOTATION in node["metadata"]["annotations"]

    gc.advance(300)
    assert gc.collect().deleted_nodes == []

    gc.advance(301)  # the workflow died: ten minutes after the collector first saw the node
    assert gc.collect().deleted_nodes == ["draining"]
    assert gc.claim_status("default-wflow001") == ClaimStatus.TERMINATED


def test_disrupted_taint_time_added_starts_the_grace_period(gc: Gc) -> None:
    instance = gc.instance("default-tadded01")
    added = datetime.fromtimestamp(gc.world.wall() - 120, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    taint = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule", "timeAdded": added}
    gc.node("tainted", instance, taints=[taint])
    gc.terminate(instance)

    assert gc.collect().deleted_nodes == []
    gc.advance(481)
    assert gc.collect().deleted_nodes == ["tainted"]


# -- launch templates --------------------------------------------------------------------------------------


def test_unused_launch_template_is_deleted_and_used_one_kept(gc: Gc) -> None:
    gc.template("fleetwright/demo/unused")
    gc.template("fleetwright/demo/used")
    used = gc.instance("default-tmpl0001", template="fleetwright/demo/used")  # EC2 tags it with the template
    gc.node("serving", used)
    gc.template("someone-elses", owner="other-cluster")
    gc.advance(TEMPLATE_GRACE + 1)

    report = gc.collect()

    assert report.deleted_launch_templates == ["fleetwright/demo/unused"]
    assert gc.templates() == ["fleetwright/demo/used", "someone-elses"]
    assert gc.collected("LaunchTemplate") == 1


def test_young_launch_template_is_kept_for_the_launch_that_created_it(gc: Gc) -> None:
    gc.template("fleetwright/demo/brand-new")
    gc.advance(TEMPLATE_GRACE - 60)

    assert gc.collect().deleted_launch_templates == []
    gc.advance(61)
    assert gc.collect().deleted_launch_templates == ["fleetwright/demo/brand-new"]


def test_template_whose_ami_an_untagged_live_instance_boots_is_kept(gc: Gc) -> None:
    images = list(gc.world.amis.ids.values())
    assert len(images) >= 2
    gc.template("fleetwright/demo/same-ami", images[0])
    gc.template("fleetwright/demo/other-ami", images[1])
    gc.instance("default-fleet001")  # as moto's CreateFleet leaves it: no aws:ec2launchtemplate:id tag
    gc.advance(TEMPLATE_GRACE + 1)

    report = gc.collect()

    assert report.deleted_launch_templates == ["fleetwright/demo/other-ami"]
    assert "fleetwright/demo/same-ami" in gc.templates()


# -- failures ----------------------------------------------------------------------------------------------


class FailingCloud:
    """The provider with some calls broken."""

    def __init__(self, cloud: AwsProvider, broken: Iterable[str]) -> None:
        self.cloud = cloud
        self.broken = set(broken)

    def __getattr__(self, name: str) -> Any:
        if name in self.broken:

            def fail(*_args: Any, **_kwargs: Any) -> Any:
                raise RuntimeError(f"{name} is down")

            return fail
        return getattr(self.cloud, name)


def test_a_failing_sweep_does_not_stop_the_others(gc: Gc) -> None:
    orphan = gc.instance("default-orphan01")
    gone = gc.instance("default-gone0002")
    gc.claim("default-gone0002", ClaimStatus.INITIALIZED, gone)
    gc.node("gone", gone)
    gc.terminate(gone)
    # Another AMI than the (untagged, as from moto's CreateFleet) instances boot: nothing live uses it.
    gc.template("fleetwright/demo/unused", list(gc.world.amis.ids.values())[1])
    gc.advance(TEMPLATE_GRACE + 1)

    report = gc.make(FailingCloud(gc.world.cloud, ["launch_templates"])).collect()

    assert report.terminated_instances == [orphan]
    assert report.deleted_nodes == ["gone"]
    assert report.deleted_launch_templates == []
    assert len(report.errors) == 1 and "launch_templates is down" in report.errors[0]
    assert gc.metrics.total(m.DISRUPTION_ERRORS, Stage="GarbageCollection") == 1

    second_orphan = gc.instance("default-orphan02")  # older than the timeout on the advanced clock
    second_gone = gc.instance("default-gone0003")
    gc.claim("default-gone0003", ClaimStatus.INITIALIZED, second_gone)
    gc.node("gone-too", second_gone)
    gc.terminate(second_gone)

    report = gc.make(FailingCloud(gc.world.cloud, ["terminate", "describe_any"])).collect()

    assert report.deleted_launch_templates == ["fleetwright/demo/unused"]
    assert report.terminated_instances == report.deleted_nodes == []
    assert len(report.errors) == 2
    assert gc.state_of(second_orphan) == "running"
    assert gc.nodes() == ["gone-too"]


def test_one_failing_instance_does_not_stop_the_rest(gc: Gc) -> None:
    first = gc.instance("default-first001")
    second = gc.instance("default-second01")
    gc.advance(TIMEOUT + 1)
    cloud = gc.world.cloud
    real_terminate = cloud.terminate

    def terminate(ids: Iterable[str]) -> Any:
        ids = list(ids)
        if first in ids:
            raise RuntimeError("throttled")
        return real_terminate(ids)

    cloud.terminate = terminate  # type: ignore[method-assign]

    report = gc.collect()

    assert report.terminated_instances == [second]
    assert gc.state_of(first) == "running"
    assert any(first in e and "throttled" in e for e in report.errors)


def test_a_kept_listing_delays_finding_an_orphan_but_never_terminates_twice(gc: Gc) -> None:
    gc.collector.list_every_seconds = 240.0
    assert gc.collect().terminated_instances == []  # nothing to collect; the listing is kept
    orphan = gc.instance()
    gc.advance(TIMEOUT - 60)
    assert gc.collect().terminated_instances == []  # the kept listing does not hold it yet
    gc.advance(120)
    assert gc.collect().terminated_instances == [orphan]  # listed again, and past the timeout
    assert gc.state_of(orphan) in ("shutting-down", "terminated")
    assert gc.collect().terminated_instances == []  # the kept listing no longer offers it
