"""The node start model: EC2's pending phase shows in DescribeInstances (in-process moto and moto served
over HTTP alike) for ``boot_seconds`` on the injected clock, stopping or terminating a booting instance
holds, and no phase of a start can be skipped."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from fleetwright.local.aws_fakes import InstanceBoot
from fleetwright.local.nodestart import NodeStart
from tests.support.clock import FakeClock

REGION = "us-east-1"
IMAGE = "ami-12c6146b"  # one of moto's built-in images


def _state(ec2: Any, instance_id: str) -> tuple[str, int]:
    found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]
    return str(found["Name"]), int(found["Code"])


def _pending(ec2: Any) -> list[str]:
    found = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending"]}])
    return [i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]]


def _launch(ec2: Any) -> str:
    return str(
        ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1, InstanceType="c5.large")["Instances"][0][
            "InstanceId"
        ]
    )


def test_an_instance_is_pending_for_the_boot_then_running(fake_credentials: None) -> None:
    clock = FakeClock(50.0)
    with mock_aws(), InstanceBoot(10.0, clock):
        ec2 = boto3.client("ec2", region_name=REGION)
        instance = _launch(ec2)
        assert _state(ec2, instance) == ("pending", 0)
        assert _pending(ec2) == [instance]
        clock.now += 9.9
        assert _state(ec2, instance) == ("pending", 0)
        clock.now += 0.1
        assert _state(ec2, instance) == ("running", 16)
        assert _pending(ec2) == []


def test_a_booting_instance_terminated_stays_terminated(fake_credentials: None) -> None:
    clock = FakeClock(50.0)
    with mock_aws(), InstanceBoot(10.0, clock):
        ec2 = boto3.client("ec2", region_name=REGION)
        instance = _launch(ec2)
        [change] = ec2.terminate_instances(InstanceIds=[instance])["TerminatingInstances"]
        assert change["PreviousState"]["Name"] == "pending"
        clock.now += 60
        assert _state(ec2, instance) == ("terminated", 48)


def test_without_the_boot_installed_moto_starts_instances_running(fake_credentials: None) -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        with InstanceBoot(10.0, FakeClock(50.0)):
            booting = _launch(ec2)
        assert _state(ec2, _launch(ec2)) == ("running", 16)
        assert _state(ec2, booting) == ("pending", 0)  # launched while installed: it still boots


@pytest.fixture
def moto_server(fake_credentials: None) -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_the_pending_phase_shows_over_moto_served_by_http(moto_server: str) -> None:
    clock = FakeClock(50.0)
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_server)
    with InstanceBoot(5.0, clock):
        instance = _launch(ec2)
        assert _state(ec2, instance) == ("pending", 0)
        clock.now += 5
        assert _state(ec2, instance) == ("running", 16)


def test_no_phase_of_a_start_can_be_skipped() -> None:
    with pytest.raises(ValueError, match="register_seconds must be positive"):
        NodeStart(boot_seconds=1, register_seconds=0, ready_seconds=1, startup_taint_seconds=1)
    fast = NodeStart.fast(0.05)
    assert (fast.boot_seconds, fast.register_seconds, fast.ready_seconds, fast.startup_taint_seconds) == (
        0.05,
        0.05,
        0.05,
        0.05,
    )
    demo = NodeStart.default.scaled(0.1)
    assert demo.total == pytest.approx(NodeStart.default.total / 10)
    assert NodeStart.default.scaled(0).boot_seconds > 0
    assert NodeStart.default.to_ready == 45 and NodeStart.default.total == 50
