"""Launch deadlines: a launch ends by its deadline, whatever EC2 does, with a typed failure; a claim whose
CreateFleet was never sent is failed at once and its pods launched by the next pass."""

from __future__ import annotations

import pytest

from fleetwright.observability.metrics import LAUNCH_ERRORS, RecordingMetrics
from fleetwright.state import ClaimStatus
from tests.provisioning.faults import ThrottleEveryAttempt
from tests.support.provisioning import World


@pytest.fixture(autouse=True)
def backoff_on_the_test_clock(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's retry backoff passes on the test's clock instead of real time."""
    monkeypatch.setattr("botocore.endpoint.time.sleep", world.wall.advance)


def test_create_fleet_throttled_past_the_deadline_fails_the_claim_by_its_deadline(world: World) -> None:
    world.pending(1)
    ec2 = world.aws.clients.ec2
    throttle = ThrottleEveryAttempt("CreateFleet", world.wall.advance, seconds=4).install(ec2)
    metrics = RecordingMetrics()
    report = world.provisioner(metrics=metrics).run_once()

    [claim] = world.state.nodeclaims.list()
    assert claim.launch_deadline is not None
    assert world.wall() <= claim.launch_deadline  # it gave up before its deadline, not after
    assert len(throttle.attempts) >= 2  # throttling was retried while there was time
    assert claim.status == ClaimStatus.FAILED and "DeadlineExceeded" in claim.reason
    assert "DeadlineExceeded" in report.passes[0].failed[claim.id]
    assert metrics.total(LAUNCH_ERRORS, ErrorCode="DeadlineExceeded") == 1
    assert world.instances() == []

    # Never sent successfully: nothing to wait for. The next pass launches the pod's node at once.
    throttle.uninstall(ec2)
    [relaunched] = world.provisioner().run_once().launched
    assert relaunched.id != claim.id
    assert len(world.instances()) == 1


def test_no_create_fleet_is_sent_once_the_deadline_has_passed(world: World) -> None:
    world.pending(1)
    ec2 = world.aws.clients.ec2
    # Preparing the launch (finding the claim's instance by tag) takes longer than the launch may.
    slow = ThrottleEveryAttempt("DescribeInstances", world.wall.advance, seconds=40).install(ec2)
    report = world.provisioner().run_once()
    slow.uninstall(ec2)

    [claim] = world.state.nodeclaims.list()
    assert world.create_fleet_calls() == 0
    assert claim.status == ClaimStatus.FAILED, report.passes[0].failed
    assert "DeadlineExceeded" in report.passes[0].failed[claim.id]
    assert len(world.provisioner().run_once().launched) == 1
    assert len(world.instances()) == 1
