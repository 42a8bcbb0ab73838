"""One world for the chaos scenarios: moto (EC2, DynamoDB, SQS with the production redrive policy, Step
Functions running the shipped termination workflow), the Kubernetes API emulator, the provisioner, the
interruption handler fed through SQS, the disruption pass and its garbage collector — all on one fake wall
clock that the workflow's waits and the clients' back-offs move — and the six figures measured on it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleetwright.aws.tags import CLUSTER_TAG, NODEPOOL_TAG, from_aws
from fleetwright.claims.reports import RunReport
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption.config import DisruptionOptions
from fleetwright.disruption.controller import DisruptionController, DisruptionReport
from fleetwright.disruption.types import DisruptionSettings
from fleetwright.kube.resources import POD_DISRUPTION_BUDGETS
from fleetwright.local.apiserver import ApiServer, WatchEvent
from fleetwright.local.apiserver.eviction import evaluate, is_ready, pdb_selector
from fleetwright.local.apiserver.resources import NODES as STORED_NODES
from fleetwright.local.apiserver.resources import POD_DISRUPTION_BUDGETS as PDBS
from fleetwright.local.apiserver.resources import PODS
from fleetwright.model.karpenter import NodePool
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.runtime.disruption import build_controller, garbage_collector
from fleetwright.state.nodeclaims import ACTIVE
from fleetwright.workflow.request import format_time
from fleetwright.workflow.starter import StepFunctionsStarter
from tests.chaos.faults import LambdaKilled
from tests.chaos.figures import Figures
from tests.support.clock import FakeClock
from tests.support.disruption import Rig
from tests.support.interruption import SPOT_WARNING, Interruptions, for_instance, received_event
from tests.support.provisioning import World, make_config
from tests.support.termination import FakeContext, Harness

CHAOS_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:chaos-interruption"

CLUSTER = "demo"
GC_WINDOW_SECONDS = 900 + 120  # the registration timeout, then a garbage collection after it
LIVE_STATES = ("pending", "running")


class VirtualSleep:
    """A ``sleep`` that moves the world's fake clock instead of waiting (clients' back-offs, the lease)."""

    def __init__(self) -> None:
        self.clock: FakeClock | None = None

    def __call__(self, seconds: float) -> None:
        if self.clock is not None and seconds > 0:
            self.clock.advance(seconds)


class PdbWatch:
    """Counts pods that left while a PodDisruptionBudget selecting them allowed no disruption, with the
    wall-clock moment of each and the pod's own grace period (a drain may do that from its explicit
    deadline less that grace period, so the pod is gone by the deadline; nothing else may)."""

    def __init__(self, server: ApiServer, clock: Callable[[], float]) -> None:
        self.store = server.store
        self.clock = clock
        self.violations: list[tuple[float, str, float]] = []
        self._lock = threading.Lock()
        self._subscription = self.store.subscribe(self._on_event, [PODS])

    def _leaving(self, event: WatchEvent) -> bool:
        meta = event.object.get("metadata", {})
        if event.type == "DELETED":
            return not meta.get("deletionTimestamp") and is_ready(event.object)
        if event.type == "MODIFIED" and event.old is not None:
            before = event.old.get("metadata", {})
            return (
                bool(meta.get("deletionTimestamp"))
                and not before.get("deletionTimestamp")
                and is_ready(event.old)
            )
        return False

    def _on_event(self, event: WatchEvent) -> None:
        if not self._leaving(event):
            return
        pod = event.object
        namespace = pod["metadata"].get("namespace", "default")
        labels = pod["metadata"].get("labels") or {}
        pdbs, _ = self.store.list(PDBS, namespace)
        for pdb in pdbs:
            selector = pdb_selector(pdb)
            if selector is None or not selector.matches(labels):
                continue
            budget = evaluate(self.store, pdb)
            if budget.current_healthy < budget.desired_healthy:
                grace = (event.old or pod).get("spec", {}).get("terminationGracePeriodSeconds")
                with self._lock:
                    self.violations.append(
                        (self.clock(), pod["metadata"]["name"], float(30 if grace is None else grace))
                    )

    def count(self, allowed_from: float | None = None) -> int:
        """Violations, leaving out those at or after ``allowed_from`` (an explicit deadline) less the pod's
        grace period."""
        with self._lock:
            return sum(
                1
                for when, _, grace in self.violations
                if allowed_from is None or when < allowed_from - grace - 1
            )

    def close(self) -> None:
        self._subscription.cancel()


@dataclass
class Message:
    body: str
    expect: Callable[[], bool] | None
    acked: bool = False


class InterruptionQueue:
    """The interruption queue with its dead-letter queue and the production redrive policy
    (``infra/interruption_queue.py``: maxReceiveCount, retention), polled the way Lambda's event source
    mapping does. The visibility timeout is 0 so a failed message is received again at once."""

    def __init__(self, chaos: Chaos) -> None:
        from infra.interruption_queue import MAX_RECEIVE_COUNT, RETENTION

        self.chaos = chaos
        self.sqs = chaos.world.aws.clients.client("sqs")
        self.dlq = self.sqs.create_queue(QueueName="chaos-interruption-dlq")["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=self.dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.url = self.sqs.create_queue(
            QueueName="chaos-interruption",
            Attributes={
                "VisibilityTimeout": "0",
                "MessageRetentionPeriod": str(int(RETENTION.to_seconds())),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
                ),
            },
        )["QueueUrl"]
        self.messages: dict[str, Message] = {}
        self.handled = threading.Event()  # set once an invocation has returned
        self.handler_errors = 0
        self._dead: set[str] | None = None

    def send(self, event: dict[str, Any] | str, expect: Callable[[], bool] | None = None) -> str:
        """Enqueue ``event``; ``expect`` says whether it was acted on (default: the handler took it)."""
        body = event if isinstance(event, str) else json.dumps(event)
        message_id = str(self.sqs.send_message(QueueUrl=self.url, MessageBody=body)["MessageId"])
        self.messages[message_id] = Message(body, expect)
        return message_id

    def receive(self, most: int = 10) -> list[dict[str, Any]]:
        answer = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=most, AttributeNames=["All"])
        return list(answer.get("Messages", []))

    def invoke(self, messages: list[dict[str, Any]]) -> None:
        """One Lambda invocation on ``messages``: delete what succeeded (a killed one deletes nothing)."""
        if not messages:
            return
        try:
            response = self.chaos.interruptions.module.handler(
                received_event(messages, CHAOS_QUEUE_ARN), FakeContext("fleetwright-interruption")
            )
        except LambdaKilled:
            return
        except Exception:
            self.handler_errors += 1
            return
        finally:
            self.handled.set()
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] in failed:
                continue
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
            if message["MessageId"] in self.messages:
                self.messages[message["MessageId"]].acked = True

    def drain(self, polls: int = 30) -> None:
        """Poll until the queue is empty (or ``polls`` polls), running the workflows each batch started."""
        for _ in range(polls):
            batch = self.receive()
            if not batch:
                return
            self.invoke(batch)
            self.chaos.wait_executions()

    def dead(self) -> set[str]:
        if self._dead is None:
            self._dead = set()
            for _ in range(10):
                batch = self.sqs.receive_message(
                    QueueUrl=self.dlq, MaxNumberOfMessages=10, VisibilityTimeout=600
                ).get("Messages", [])
                if not batch:
                    break
                self._dead.update(m["MessageId"] for m in batch)
        return self._dead

    def lost(self) -> int:
        """Messages neither acted on nor in the dead-letter queue."""
        dead = self.dead()
        lost = 0
        for message_id, message in self.messages.items():
            if message_id in dead:
                continue
            acted = message.acked and (message.expect is None or message.expect())
            lost += 0 if acted else 1
        return lost


@dataclass
class Chaos:
    """The world, the faults' switches and the figures. Build scenarios from the public entry points:
    :meth:`provision`, :meth:`queue` + :meth:`spot_warning`, :meth:`disrupt`, :meth:`settle`."""

    harness: Harness
    interruptions: Interruptions
    apiserver: ApiServer
    sleep: VirtualSleep
    pdbs: PdbWatch
    config: ProvisionerConfig = field(default_factory=make_config)
    baseline: set[str] = field(default_factory=set)
    overshoot: float = 0.0
    explicit_deadlines: bool = False  # the workflows' deadlines allow deleting pods past their PDB
    _queue: InterruptionQueue | None = None
    _rig: Rig | None = None
    _observer: Any = None

    @property
    def world(self) -> World:
        return self.harness.world

    @property
    def wall(self) -> FakeClock:
        return self.world.wall

    @property
    def ec2(self) -> Any:
        """The EC2 client Fleetwright's components use (where AWS faults are installed)."""
        return self.world.aws.clients.ec2

    @property
    def observer(self) -> Any:
        """A separate EC2 client for measuring, untouched by injected faults."""
        if self._observer is None:
            import boto3

            self._observer = boto3.client("ec2", region_name="us-east-1")
        return self._observer

    # -- the cluster before the fault ----------------------------------------------------------------

    def use(self, *pools: NodePool) -> None:
        """The NodePools the provisioner, the disruption pass and the node builders use."""
        self.config = make_config(*pools)
        self._rig = None

    def rig(self) -> Rig:
        if self._rig is None:
            self._rig = Rig(self.world, self.config)
        return self._rig

    def node(self, instance_type: str = "m5.large", **options: Any) -> str:
        """A node as a provisioning pass leaves it (instance, Initialized claim, Ready Node)."""
        name = self.rig().node(instance_type, **options)
        self.mark_baseline()
        return name

    def pod(self, name: str, node: str, **options: Any) -> None:
        self.rig().pod(name, node, **options)

    def pdb(self, name: str, min_available: int, labels: dict[str, str] | None = None) -> None:
        self.world.client.create(
            POD_DISRUPTION_BUDGETS,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "minAvailable": min_available,
                    "selector": {"matchLabels": labels or {"app": "web"}},
                },
            },
            namespace="default",
        )

    def mark_baseline(self) -> None:
        """Instances existing now were not launched by the scenario."""
        self.baseline = {i["InstanceId"] for i in self.instances(())}

    # -- the entry points ------------------------------------------------------------------------------

    def provisioner(self, holder: str = "provisioner", **kwargs: Any) -> Provisioner:
        kwargs.setdefault("metrics", RecordingMetrics())
        kwargs.setdefault("sleep", self.sleep)
        return Provisioner(
            self.world.kube,
            self.world.cloud,
            self.world.state,
            kwargs.pop("config", self.config),
            wall_clock=self.wall,
            holder=holder,
            **kwargs,
        )

    def provision(self, holder: str = "provisioner", **kwargs: Any) -> RunReport | None:
        """One provisioner invocation (``run_once``); None when the Lambda was killed."""
        try:
            return self.provisioner(holder, **kwargs).run_once()
        except LambdaKilled:
            return None
        finally:
            self.check_limits()

    def disruption(self, *, collect_garbage: bool = True) -> DisruptionController:
        return build_controller(
            self.world.kube,
            self.world.cloud,
            self.world.state,
            self.config,
            StepFunctionsStarter(self.harness.sfn, self.harness.machine_arn),
            options=DisruptionOptions(settings=DisruptionSettings(min_node_age_seconds=0)),
            metrics=RecordingMetrics(),
            clock=self.wall,
            monotonic=self.wall,
            collect_garbage=collect_garbage,
        )

    def disrupt(self, *, collect_garbage: bool = True) -> DisruptionReport:
        """One disruption pass, then the termination workflows it started, to their end."""
        report = self.disruption(collect_garbage=collect_garbage).run_once()
        self.wait_executions()
        self.check_limits()
        return report

    def queue(self) -> InterruptionQueue:
        if self._queue is None:
            self._queue = InterruptionQueue(self)
        return self._queue

    def instance_of(self, node: str) -> str:
        return self.rig().instance_id(node)

    def spot_warning(self, instance_id: str, **detail: Any) -> dict[str, Any]:
        """An EC2 Spot Instance Interruption Warning for ``instance_id``, stamped with the wall clock."""
        event = for_instance(SPOT_WARNING, instance_id, **detail)
        event["time"] = format_time(datetime.fromtimestamp(self.wall(), tz=UTC))
        event["id"] = f"spot-{instance_id}-{int(self.wall())}"
        return event

    def terminated(self, instance_id: str) -> Callable[[], bool]:
        """Whether ``instance_id`` has gone (what acting on an interruption must end in)."""
        return lambda: self.instance_state(instance_id) in ("shutting-down", "terminated")

    def instance_state(self, instance_id: str) -> str:
        answer = self.observer.describe_instances(InstanceIds=[instance_id])
        return str(answer["Reservations"][0]["Instances"][0]["State"]["Name"])

    def wait_executions(self) -> list[dict[str, Any]]:
        """Let every running termination workflow end; their descriptions."""
        sfn = self.harness.sfn
        ended = []
        for _ in range(3):
            listed = sfn.list_executions(stateMachineArn=self.harness.machine_arn)["executions"]
            running = [e for e in listed if e["status"] == "RUNNING"]
            if not running:
                return [dict(sfn.describe_execution(executionArn=e["executionArn"])) for e in listed]
            for execution in running:
                ended.append(self.harness.wait(execution["executionArn"], timeout=60))
        return ended

    # -- recovery ------------------------------------------------------------------------------------

    def register_nodes(self) -> None:
        """What booting instances do: each running instance of the cluster without a Node registers one."""
        known = {
            str(n.get("spec", {}).get("providerID", "")).rsplit("/", 1)[-1]
            for n in self.apiserver.store.list(STORED_NODES, None)[0]
        }
        for instance in self.instances():
            if instance["InstanceId"] in known:
                continue
            zone = instance["Placement"]["AvailabilityZone"]
            name = f"ip-{instance['InstanceId']}.ec2.internal"
            self.world.register_node(f"aws:///{zone}/{instance['InstanceId']}", name, ready=True)

    def settle(self, *, register: bool = True, disruption: bool = False) -> None:
        """The system's chance to recover: the API back, workflows ended, instances joined (unless
        ``register`` is False), the garbage collector's window passed, then the provisioner's
        reconciliation, garbage collection and (``disruption``) a disruption pass with its sweep."""
        self.apiserver.faults.clear()
        self.wait_executions()
        if self._queue is not None:
            self._queue.drain()
        if register:
            self.register_nodes()
        self.provisioner("settle").reconcile()
        self.wall.advance(GC_WINDOW_SECONDS)
        self.provisioner("settle").reconcile()
        if disruption:
            self.disrupt()
        garbage_collector(
            self.world.kube, self.world.cloud, self.world.state, self.config, clock=self.wall
        ).collect()
        self.wait_executions()
        self.check_limits()

    # -- figures ---------------------------------------------------------------------------------------

    def instances(self, states: tuple[str, ...] = LIVE_STATES) -> list[dict[str, Any]]:
        """This cluster's instances (in ``states``; all when empty)."""
        filters = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [CLUSTER]}]
        if states:
            filters.append({"Name": "instance-state-name", "Values": list(states)})
        reservations = self.observer.describe_instances(Filters=filters)["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def launched(self) -> int:
        return len({i["InstanceId"] for i in self.instances(())} - self.baseline)

    def check_limits(self) -> None:
        """Record how far the running instances go above each NodePool's cpu limit."""
        vcpus: dict[str, int] = {}
        per_pool: dict[str, float] = {}
        for instance in self.instances():
            pool = from_aws(instance.get("Tags")).get(NODEPOOL_TAG, "")
            kind = instance["InstanceType"]
            if kind not in vcpus:
                info = self.observer.describe_instance_types(InstanceTypes=[kind])["InstanceTypes"][0]
                vcpus[kind] = int(info["VCpuInfo"]["DefaultVCpus"])
            per_pool[pool] = per_pool.get(pool, 0.0) + vcpus[kind]
        for pool in self.config.nodepools:
            limits = pool.limits()
            if not limits or "cpu" not in limits:
                continue
            over = per_pool.get(pool.name, 0.0) - limits["cpu"] / 1000
            self.overshoot = max(self.overshoot, over)

    def workflow_deadline(self) -> float | None:
        """The earliest deadline a termination workflow was given (its input's ``deadline``)."""
        sfn = self.harness.sfn
        deadlines = []
        for execution in sfn.list_executions(stateMachineArn=self.harness.machine_arn)["executions"]:
            described = sfn.describe_execution(executionArn=execution["executionArn"])
            text = json.loads(described.get("input") or "{}").get("deadline")
            if text:
                deadlines.append(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp())
        return min(deadlines) if deadlines else None

    def cordoned(self) -> list[str]:
        return [
            n["metadata"]["name"]
            for n in self.apiserver.store.list(STORED_NODES, None)[0]
            if n.get("spec", {}).get("unschedulable")
        ]

    def orphans(self) -> list[str]:
        """Running instances of the cluster with no live claim."""
        live = {r.instance_id for r in self.world.state.nodeclaims.list() if r.status in ACTIVE}
        return sorted(i["InstanceId"] for i in self.instances() if i["InstanceId"] not in live)

    def figures(self, needed: int) -> Figures:
        return Figures(
            launched=self.launched(),
            needed=needed,
            limit_overshoot=max(0.0, self.overshoot),
            pdb_violations=self.pdbs.count(self.workflow_deadline() if self.explicit_deadlines else None),
            cordoned_left=len(self.cordoned()),
            messages_lost=self._queue.lost() if self._queue is not None else 0,
            orphans=len(self.orphans()),
        )
