"""The termination workflow harness's helpers: loading a handler file, the Lambda context Powertools reads,
and :class:`Harness` — what the ``harness`` fixture (``tests/fixtures/workflow.py``) returns: the shipped
state machine on moto's Step Functions, its Lambda tasks dispatched in-process to
``functions/termination/handler.py``, against the Kubernetes API emulator and moto's EC2 and DynamoDB."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from moto.core.exceptions import JsonRESTError

from fleetwright.aws.tags import ownership_tags, to_aws
from fleetwright.kube.resources import POD_DISRUPTION_BUDGETS, PODS
from fleetwright.local.apiserver import ApiServer
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.termination.steps import TerminationSteps
from tests.aws.strict import StrictEc2
from tests.kube.objects import pod_object
from tests.support.clock import FakeClock
from tests.support.provisioning import World

REPO_ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
REGION = "us-east-1"
STEP_FUNCTION_NAME = "fleetwright-termination"
STEP_FUNCTION_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{STEP_FUNCTION_NAME}"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}


def load_module(name: str, path: Path) -> ModuleType:
    """Import a handler file (``functions/*/handler.py`` are not packages)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def resolve(value: Any) -> Any:
    """A template value with ``Fn::Join`` and pseudo-parameter ``Ref`` resolved for the test account."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolve(p)) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}[value["Ref"]]
    raise AssertionError(f"unresolvable template value {value!r}")


class FakeContext:
    """The parts of a Lambda context Powertools reads."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        self.aws_request_id = "00000000-0000-4000-8000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


Hook = Callable[[str, dict[str, Any]], None]


class ThrottledError(JsonRESTError):
    """Lambda's answer when the function's concurrency is exhausted (HTTP 429)."""

    code = 429


@dataclass
class Harness:
    """Everything a workflow test touches: the world (moto, emulator, state), the state machine in moto,
    the step handler's metrics, and a record of every step invocation (name, input, output or error)."""

    world: World
    sfn: Any
    machine_arn: str
    metrics: RecordingMetrics
    clock: FakeClock
    steps: TerminationSteps
    handler: ModuleType
    apiserver: ApiServer
    calls: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)
    before_step: list[Hook] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    throttled: int = 0  # invocations Lambda still refuses with TooManyRequestsException
    strict: StrictEc2 | None = None

    # -- the cluster -------------------------------------------------------------------------------------

    def launch_instance(
        self,
        *,
        owned: bool = True,
        claim: str = "default-abcd1234",
        zone_subnet: str = "a-small",
        spot: bool = False,
    ) -> dict[str, Any]:
        """An instance in moto (tagged as this cluster's unless ``owned`` is False; spot when ``spot``)."""
        tags = ownership_tags("demo", nodepool="default", nodeclaim=claim) if owned else {"Name": "stranger"}
        image = next(iter(self.world.amis.ids.values()))
        reservation = self.world.aws.clients.ec2.run_instances(
            ImageId=image,
            InstanceType="m5.large",
            MinCount=1,
            MaxCount=1,
            SubnetId=self.world.aws.subnets[zone_subnet],
            TagSpecifications=[{"ResourceType": "instance", "Tags": to_aws(tags)}],
            **({"InstanceMarketOptions": {"MarketType": "spot"}} if spot else {}),
        )
        if self.strict is not None:  # long launched: visible to every EC2 call
            self.strict.consistency.settle()
        return dict(reservation["Instances"][0])

    def node_for(self, instance: dict[str, Any], name: str) -> str:
        """Register a Ready Node for ``instance`` (as its kubelet would)."""
        zone = instance["Placement"]["AvailabilityZone"]
        self.world.register_node(f"aws:///{zone}/{instance['InstanceId']}", name, ready=True)
        return name

    def pod(self, name: str, node: str, **extra: Any) -> dict[str, Any]:
        """A pod bound to ``node`` (the emulator makes it Running and Ready). ``extra``: ``labels``,
        ``annotations``, ``priority_class``, ``owner`` ((kind, name))."""
        body = pod_object(name, node=node, labels=extra.get("labels"))
        if extra.get("annotations"):
            body["metadata"]["annotations"] = extra["annotations"]
        if extra.get("priority_class"):
            body["spec"]["priorityClassName"] = extra["priority_class"]
        if extra.get("owner"):
            kind, owner = extra["owner"]
            body["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": kind,
                    "name": owner,
                    "uid": f"uid-{owner}",
                    "controller": True,
                }
            ]
        return dict(self.world.client.create(PODS, body))

    def pdb(self, name: str, selector: dict[str, str], min_available: int = 1) -> None:
        """A PodDisruptionBudget in ``default`` keeping ``min_available`` of the pods ``selector`` matches."""
        self.world.client.create(
            POD_DISRUPTION_BUDGETS,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"minAvailable": min_available, "selector": {"matchLabels": selector}},
            },
            "default",
        )

    def pods_on(self, node: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.world.kube.list_pods_on_node(node))

    def instance_state(self, instance_id: str) -> str:
        answer = self.world.aws.clients.ec2.describe_instances(InstanceIds=[instance_id])
        return str(answer["Reservations"][0]["Instances"][0]["State"]["Name"])

    # -- the workflow ------------------------------------------------------------------------------------

    def request(
        self, instance: dict[str, Any], node: str, *, seconds_to_deadline: float = 120, **extra: Any
    ) -> dict[str, Any]:
        """A workflow input with 0 s waits and a deadline on the harness clock."""
        deadline = datetime.fromtimestamp(self.clock() + seconds_to_deadline, tz=UTC)
        request = {
            "node": node,
            "instanceId": instance["InstanceId"],
            "claimId": "default-abcd1234",
            "reason": "SpotInterruption",
            "deadline": deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "drainIntervalSeconds": 0,
            "pollSeconds": 0,
        }
        request.update(extra)
        return request

    def start(self, request: dict[str, Any], name: str = "run") -> str:
        answer = self.sfn.start_execution(
            stateMachineArn=self.machine_arn, name=name, input=json.dumps(request)
        )
        return str(answer["executionArn"])

    def wait(self, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the execution ends; its description (``status``, ``output``, ``error``, ``cause``)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            description = dict(self.sfn.describe_execution(executionArn=execution_arn))
            if description["status"] != "RUNNING":
                return description
            time.sleep(0.05)
        raise AssertionError(f"execution still running after {timeout} s; steps: {self.step_names()}")

    def run(self, request: dict[str, Any], name: str = "run") -> dict[str, Any]:
        return self.wait(self.start(request, name))

    def step_names(self) -> list[str]:
        with self.lock:
            return [name for name, _, _ in self.calls]

    def outputs(self, step: str) -> list[Any]:
        with self.lock:
            return [out for name, _, out in self.calls if name == step]

    def executions(self) -> list[dict[str, Any]]:
        """Every execution of the state machine, oldest first."""
        found = self.sfn.list_executions(stateMachineArn=self.machine_arn)["executions"]
        return sorted(found, key=lambda e: (e["startDate"], e["name"]))

    def wait_for_chain(self, first_arn: str, timeout: float = 600.0) -> list[dict[str, Any]]:
        """Wait until no execution runs (a workflow that continued in new executions has ended); the
        descriptions of every execution, oldest first."""
        end = time.monotonic() + timeout
        self.wait(first_arn, timeout)
        while time.monotonic() < end:
            running = [e for e in self.executions() if e["status"] == "RUNNING"]
            if not running:
                return [
                    dict(self.sfn.describe_execution(executionArn=e["executionArn"]))
                    for e in self.executions()
                ]
            self.wait(running[0]["executionArn"], max(1.0, end - time.monotonic()))
        raise AssertionError(f"executions still running after {timeout} s")

    def invoke(self, payload: dict[str, Any]) -> tuple[bool, Any]:
        """Run the step handler as Lambda would; (ok, result or error payload)."""
        step = str(payload.get("step"))
        try:
            for hook in list(self.before_step):
                hook(step, payload)
            result = self.handler.handler(payload, FakeContext(STEP_FUNCTION_NAME))
        except Exception as error:
            failure = {"errorType": type(error).__name__, "errorMessage": str(error)}
            with self.lock:
                self.calls.append((step, payload, failure))
            return False, failure
        with self.lock:
            self.calls.append((step, payload, result))
        return True, result
