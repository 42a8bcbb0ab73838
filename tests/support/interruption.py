"""Interruption events in the shapes AWS documents, the SQS batches Lambda delivers them in, and
:class:`Interruptions` — what the ``interruptions`` fixture (``tests/fixtures/interruption.py``) returns: the
interruption handler wired to the termination workflow harness."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from fleetwright.claims.registration import TERMINATION_FINALIZER
from fleetwright.interruption.controller import InterruptionController
from fleetwright.kube.resources import NODES
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.support.termination import FakeContext, Harness

REPO_ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
REGION = "us-east-1"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:fleetwright-interruption"
NOW = "2027-01-15T08:00:00Z"  # the harness clock (epoch 1,800,000,000)

# Shapes as in the EC2 and AWS Health documentation (EventBridge events for Spot interruptions, rebalance
# recommendations, instance state changes, and AWS Health scheduled changes).
SPOT_WARNING: dict[str, Any] = {
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "EC2 Spot Instance Interruption Warning",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": NOW,
    "region": "us-east-1",
    "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0"],
    "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"},
}
REBALANCE: dict[str, Any] = {
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789013",
    "detail-type": "EC2 Instance Rebalance Recommendation",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": NOW,
    "region": "us-east-1",
    "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0"],
    "detail": {"instance-id": "i-1234567890abcdef0"},
}
STATE_CHANGE: dict[str, Any] = {
    "version": "0",
    "id": "7bf73129-1428-4cd3-a780-95db273d1602",
    "detail-type": "EC2 Instance State-change Notification",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": NOW,
    "region": "us-east-1",
    "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0"],
    "detail": {"instance-id": "i-1234567890abcdef0", "state": "terminated"},
}
SCHEDULED_CHANGE: dict[str, Any] = {
    "version": "0",
    "id": "121345678-1234-1234-1234-123456789012",
    "detail-type": "AWS Health Event",
    "source": "aws.health",
    "account": "123456789012",
    "time": NOW,
    "region": "us-east-1",
    "resources": ["i-1234567890abcdef0"],
    "detail": {
        "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/"
        "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_ABC123-DEF456",
        "service": "EC2",
        "eventScopeCode": "ACCOUNT_SPECIFIC",
        "communicationId": "1234abc01232a4012345678-1",
        "lastUpdatedTime": "Fri, 15 Jan 2027 07:00:00 GMT",
        "statusCode": "upcoming",
        "eventRegion": "us-east-1",
        "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": "scheduledChange",
        "startTime": "Fri, 15 Jan 2027 09:00:00 GMT",
        "endTime": "Fri, 15 Jan 2027 10:00:00 GMT",
        "eventDescription": [
            {
                "language": "en_US",
                "latestDescription": "EC2 has detected degradation of the underlying hardware hosting "
                "your Amazon EC2 instance. The instance is scheduled for retirement.",
            }
        ],
        "affectedEntities": [{"entityValue": "i-1234567890abcdef0", "status": "IMPAIRED"}],
        "affectedAccount": "123456789012",
        "page": "1",
        "totalPages": "1",
    },
}


def for_instance(template: dict[str, Any], instance_id: str, **detail: Any) -> dict[str, Any]:
    """``template`` about ``instance_id`` (and with ``detail`` fields replaced)."""
    event = json.loads(json.dumps(template).replace("i-1234567890abcdef0", instance_id))
    event["detail"].update(detail)
    return copy.deepcopy(event)


def sqs_event(*bodies: str) -> dict[str, Any]:
    """The Lambda event of an SQS batch carrying ``bodies``."""
    return {
        "Records": [
            {
                "messageId": f"message-{i}",
                "receiptHandle": f"handle-{i}",
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1800000000000",
                    "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                    "ApproximateFirstReceiveTimestamp": "1800000000001",
                },
                "messageAttributes": {},
                "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
                "eventSource": "aws:sqs",
                "eventSourceARN": QUEUE_ARN,
                "awsRegion": "us-east-1",
            }
            for i, body in enumerate(bodies)
        ]
    }


def claimed_node(rig: Harness, claim: str, name: str = "node-a", *, spot: bool = True) -> dict[str, Any]:
    """An instance of the cluster launched for ``claim`` (Initialized; spot when ``spot``) with a Ready Node
    ``name`` holding the termination finalizer, as registration leaves it."""
    instance = rig.launch_instance(claim=claim, spot=spot)
    rig.world.state.nodeclaims.create(
        NodeClaimRecord(
            id=claim,
            nodepool="default",
            status=str(ClaimStatus.INITIALIZED),
            created_at=rig.clock(),
            instance_id=instance["InstanceId"],
        )
    )
    rig.node_for(instance, name)
    rig.world.client.patch(NODES, name, {"metadata": {"finalizers": [TERMINATION_FINALIZER]}})
    return instance


def received_event(messages: list[dict[str, Any]], source_arn: str = QUEUE_ARN) -> dict[str, Any]:
    """The event Lambda's SQS event source mapping passes for ``messages`` (ReceiveMessage entries)."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {k: str(v) for k, v in m.get("Attributes", {}).items()},
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": source_arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


class Interruptions:
    """The interruption handler module with a controller wired to the harness."""

    def __init__(self, rig: Harness, module: ModuleType, controller: InterruptionController) -> None:
        self.harness = rig
        self.module = module
        self.controller = controller
        self.metrics: RecordingMetrics = controller.metrics  # type: ignore[assignment]

    def deliver(self, *events: dict[str, Any] | str) -> dict[str, Any]:
        """Run the handler on one SQS batch; its response (``batchItemFailures``)."""
        bodies = [e if isinstance(e, str) else json.dumps(e) for e in events]
        return dict(self.module.handler(sqs_event(*bodies), FakeContext("fleetwright-interruption")))

    def executions(self) -> list[dict[str, Any]]:
        sfn = self.harness.sfn
        return list(sfn.list_executions(stateMachineArn=self.harness.machine_arn)["executions"])
