"""Throttling is survived: botocore's retry modes retry RequestLimitExceeded."""

from __future__ import annotations

import pytest

from fleetwright.aws.clients import AwsClients
from fleetwright.aws.deadline import DeadlineExceededError
from fleetwright.aws.deadline import install as install_deadline
from fleetwright.aws.subnets import resolve_subnets
from fleetwright.cloud.deadline import Deadline, deadline_scope
from fleetwright.model.ec2nodeclass import SubnetSelectorTerm
from tests.aws.fakes import Throttle
from tests.support.aws import CLUSTER, REGION, Aws
from tests.support.clock import FakeClock


@pytest.fixture(autouse=True)
def no_backoff_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    # The backoff itself is botocore's business; the test only needs the retries.
    monkeypatch.setattr("botocore.endpoint.time.sleep", lambda seconds: None)


@pytest.mark.parametrize("mode", ["adaptive", "standard"])
def test_throttled_calls_are_retried_until_they_succeed(aws: Aws, mode: str) -> None:
    clients = AwsClients(REGION, retry_mode=mode)
    throttle = Throttle("DescribeSubnets", times=2)
    throttle.install(clients.ec2)
    terms = [SubnetSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})]
    found = resolve_subnets(clients, terms)
    assert {s.id for s in found} == {aws.subnets["a-small"], aws.subnets["a-large"], aws.subnets["b"]}
    assert throttle.attempts == 3


def test_throttling_beyond_the_attempt_budget_surfaces_the_error(aws: Aws) -> None:
    clients = AwsClients(REGION, retry_mode="standard", max_attempts=2)
    Throttle("DescribeSubnets", times=5).install(clients.ec2)
    with pytest.raises(Exception, match="RequestLimitExceeded"):
        resolve_subnets(clients, [SubnetSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})])


def test_retries_stop_at_the_deadline_of_the_calling_scope(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr("botocore.endpoint.time.sleep", clock.advance)  # backoff passes on the fake clock
    clients = AwsClients(REGION, retry_mode="standard", max_attempts=50)
    install_deadline(clients.ec2)
    throttle = Throttle("DescribeSubnets", times=1000)
    throttle.install(clients.ec2)
    terms = [SubnetSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})]
    deadline = Deadline(clock() + 10, clock)
    with deadline_scope(deadline), pytest.raises(DeadlineExceededError, match="DescribeSubnets not retried"):
        resolve_subnets(clients, terms)
    assert clock() <= deadline.at  # no backoff was slept past the deadline
    assert 1 < throttle.attempts < 50
    # Outside the scope the same client is not bounded.
    throttle.times = throttle.attempts + 1
    assert resolve_subnets(clients, terms)


def test_a_read_answered_after_the_deadline_leaves_nothing_uncertain(aws: Aws) -> None:
    clock = FakeClock()
    clients = AwsClients(REGION, retry_mode="standard")
    install_deadline(clients.ec2)

    def answered_late(event_name: str = "", **_: object) -> None:
        if event_name.endswith(".DescribeSubnets"):
            clock.advance(60)  # moto has answered (both ``before-send``): the answer took 60 s

    clients.ec2.meta.events.register("before-send", answered_late)
    deadline = Deadline(clock() + 30, clock)
    terms = [SubnetSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})]
    with deadline_scope(deadline), pytest.raises(DeadlineExceededError, match="DescribeSubnets") as refused:
        resolve_subnets(clients, terms)
    # A read changes nothing: the launch that made it launched nothing.
    assert not refused.value.uncertain and not deadline.uncertain
