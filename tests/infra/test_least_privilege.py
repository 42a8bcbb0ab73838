"""Each function is allowed what it calls, and granted nothing it does not call: in AWS (its role's
statements, as synthesized) and in Kubernetes (the ClusterRole its group is bound to in docs/rbac.yaml).

How the calls are found: the functions' flows run against moto and the Kubernetes API emulator, one
function at a time, and every request is recorded under the function making it (``tests/security/calls.py``:
botocore's ``_make_api_call``, which every client call and paginator page goes through, and a bearer token
per function). The flows are those of the deployed functions, wired as their runtime modules wire them,
each function with connections of its own and starting cold after another function ran (nothing one
function cached serves another): provisioning passes (pending pods, one with a volume, one fitting nowhere;
watching; a warm pass on the cluster cache; the Powertools idempotency record of a scheduled run, and of
one that failed), the EC2NodeClass's instance profile made for its role, registration, consolidation of an
empty node, an interruption (two events) whose drain a PodDisruptionBudget blocks until its deadline, with
a replacement, drift replacing a node, an interruption for a stopped instance, a node given back by the
sweep, ``kubectl delete node``, a launch that never registers, garbage collection of a Node whose instance
is gone, of an instance nobody knows and of launch templates, NodeClaim objects deleted at the end. The
termination workflow's steps run in-process and are attributed to the termination steps.

Recording the calls the code makes, rather than walking its source for ``client.<operation>(`` statically,
is what makes the check honest: a static walk cannot tell which function reaches a shared module (the
state table, the cloud provider) or which item actions a transaction holds, and it would list calls no
function makes. What the dynamic record cannot see is declared below, each with its reason:
:data:`ON_THE_FUNCTIONS_BEHALF` (what Lambda itself calls with the function's role),
:data:`NOT_REACHED_HERE` (AWS calls of paths these flows do not take, each named by the module and boto3
method that make it, which the test checks are still there) and :data:`KUBERNETES_NOT_REACHED_HERE`. A
declared call that the flows do make fails the test, so the declarations cannot outgrow what is unseen.
Step Functions runs in-process here, so its three operations are recorded from the stand-in's methods
(``calls.Acting.standing_in``), one for one with ``workflow/starter.py``'s ``StepFunctionsStarter``.
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.aws import instancetypes
from fleetwright.aws.instances import ClusterInstances
from fleetwright.aws.provider import AwsProvider
from fleetwright.aws.tags import ownership_tags, to_aws
from fleetwright.aws.ttlcache import clear_all_caches
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption.config import DisruptionOptions
from fleetwright.disruption.types import DisruptionSettings
from fleetwright.interruption import samples
from fleetwright.interruption.controller import InterruptionController, InterruptionSettings
from fleetwright.interruption.events import parse_message
from fleetwright.interruption.replacement import ReplacementLauncher
from fleetwright.interruption.trust import EventOrigin
from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.kube.cache import ClusterCache
from fleetwright.kube.cluster import DISRUPTED_AT_ANNOTATION, DISRUPTED_TAINT
from fleetwright.kube.config import ClusterConfig
from fleetwright.kube.events import EventCorrelator, EventRecorder
from fleetwright.kube.resources import EC2_NODE_CLASSES, NODE_CLAIMS, NODE_POOLS, NODES, PODS, Resource
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.rbac import Policy
from fleetwright.local.inprocess.interruption import DeferredWorkflows, demo_event
from fleetwright.local.inprocess.termination import InProcessWorkflow
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.provisioning.nodepool_source import NodePoolSource
from fleetwright.provisioning.nodepool_status import NodePoolStatus
from fleetwright.runtime.disruption import build_controller
from fleetwright.state import StateStore
from fleetwright.state.interruptions import InterruptionRecords
from fleetwright.termination.steps import TerminationSteps
from fleetwright.workflow.claimbook import StoreClaimBook
from infra.kubernetes_access import KUBERNETES_GROUPS, RBAC_MANIFEST
from tests.kube.objects import node_object, pod_object
from tests.local.test_rbac import pending_with_volume
from tests.provisioning.test_nodepools_from_cluster import NODECLASS, nodepool_doc
from tests.security.calls import (
    DISRUPTION,
    FUNCTIONS,
    INTERRUPTION,
    PROVISIONER,
    TERMINATION,
    Acting,
    iam_actions,
)
from tests.support.aws import CLUSTER, REGION, RegionListing
from tests.support.infra import REPO_ROOT, Synthesis, function_by_description, logical_id, render
from tests.support.provisioning import World, make_config
from tests.support.state import TABLE

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time

NODE_ROLE = "KarpenterNodeRole-test"
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
# What Lambda itself calls with a function's role: its log stream (every function) and, for the function
# consuming the interruption queue, the event source mapping's poller.
ON_THE_FUNCTIONS_BEHALF = {
    PROVISIONER: LOGS,
    DISRUPTION: LOGS,
    INTERRUPTION: LOGS | {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
    TERMINATION: LOGS,
}
# Calls of paths these flows do not take: (module, boto3 method) making each, and why it is not here.
LAUNCH_PATHS = {
    # listed once per test session (seconds in moto) and put back at every cold start
    "ec2:DescribeInstanceTypes": ("aws/instancetypes.py", "describe_instance_types"),
    "ec2:DescribeInstanceTypeOfferings": ("aws/instancetypes.py", "describe_instance_type_offerings"),
    # amiSelectorTerms by id, name or tags; capacityReservationSelectorTerms; placementGroupSelector
    "ec2:DescribeImages": ("aws/amis.py", "describe_images"),
    "ec2:DescribeCapacityReservations": ("aws/capacityreservations.py", "describe_capacity_reservations"),
    "ec2:DescribePlacementGroups": ("aws/placementgroups.py", "describe_placement_groups"),
    # an instance profile that holds another role (changed by hand) is given the EC2NodeClass's role
    "iam:RemoveRoleFromInstanceProfile": ("aws/instanceprofiles.py", "remove_role_from_instance_profile"),
    # the NodePools parameter (read when the function starts) and AMI parameters read one at a time
    "ssm:GetParameter": ("config/settings.py", "get_parameter"),
    # the connection made when the function starts (runtime/connections.py)
    "eks:DescribeCluster": ("aws/cluster.py", "describe_cluster"),
}
# The first launch made the instance profile of the EC2NodeClass's role; the others find it.
PROFILE_MADE = {
    "iam:CreateInstanceProfile": ("aws/instanceprofiles.py", "create_instance_profile"),
    "iam:TagInstanceProfile": ("aws/instanceprofiles.py", "create_instance_profile"),
    "iam:AddRoleToInstanceProfile": ("aws/instanceprofiles.py", "add_role_to_instance_profile"),
}
NOT_REACHED_HERE: dict[str, dict[str, tuple[str, str]]] = {
    PROVISIONER: LAUNCH_PATHS,
    INTERRUPTION: {
        **LAUNCH_PATHS,
        **PROFILE_MADE,
        # a replacement whose launch template the provisioner has not made yet (a new AMI, another pool)
        "ec2:CreateLaunchTemplate": ("aws/launchtemplates.py", "create_launch_template"),
    },
    DISRUPTION: {**LAUNCH_PATHS, **PROFILE_MADE},
    TERMINATION: {
        "eks:DescribeCluster": ("aws/cluster.py", "describe_cluster"),
        # a drain longer than one execution continues in a new one
        "states:StartExecution": ("termination/steps.py", "start_execution"),
    },
}
# Kubernetes requests of paths these flows do not take, and why.
REPEATED_EVENT = "a repeated Event is counted with a patch (kube/events.py); these flows repeat none"
KUBERNETES_NOT_REACHED_HERE: dict[str, dict[tuple[str, str, str], str]] = {
    PROVISIONER: {},
    DISRUPTION: {("", "events", "patch"): REPEATED_EVENT},
    INTERRUPTION: {("", "events", "patch"): REPEATED_EVENT},
    TERMINATION: {("", "events", "patch"): REPEATED_EVENT},
}
# Each function's description in the stack.
DESCRIPTIONS = {
    PROVISIONER: "Fleetwright provisioner",
    DISRUPTION: "Fleetwright disruption",
    INTERRUPTION: "Fleetwright interruption handler",
    TERMINATION: "Fleetwright termination workflow steps",
}


@pytest.fixture
def acting(monkeypatch: pytest.MonkeyPatch) -> Acting:
    """The recorder: every botocore request, the workflow's steps as the termination steps' and the Step
    Functions stand-in's methods as the requests ``StepFunctionsStarter`` makes for them."""
    import botocore.client

    acting = Acting()
    original = botocore.client.BaseClient._make_api_call

    def recorded(client: Any, operation: str, params: dict[str, Any]) -> Any:
        acting.record(client.meta.service_model.signing_name, operation, params)
        return original(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recorded)
    monkeypatch.setattr(InProcessWorkflow, "run", acting.wrap(TERMINATION, InProcessWorkflow.run))
    stand_in = {"start": "StartExecution", "status": "DescribeExecution", "running": "ListExecutions"}
    for method, operation in stand_in.items():
        original_method = getattr(DeferredWorkflows, method)
        monkeypatch.setattr(
            DeferredWorkflows, method, acting.standing_in("states", operation, original_method)
        )

    def already_started(workflows: DeferredWorkflows, name: str) -> bool:
        # StartExecution itself refuses a name taken: the real starter looks nothing up before it.
        return name in workflows.queued or name in workflows.runner.executions

    monkeypatch.setattr(DeferredWorkflows, "already_started", already_started)
    return acting


@pytest.fixture
def apiserver(rbac_apiserver: ApiServer) -> ApiServer:
    """The emulator enforcing docs/rbac.yaml (one per test); ``client`` is its administrator."""
    return rbac_apiserver


@pytest.fixture
def cluster(apiserver: ApiServer, acting: Acting) -> Iterator[KubeCluster]:
    """The functions: each request sent as the user of the function running, in that function's group."""
    for name in FUNCTIONS:
        acting.tokens[name] = apiserver.add_user(f"fleetwright-{name}", (KUBERNETES_GROUPS[name],))
    kube = KubeClient(ClusterConfig(server=apiserver.url, token=acting), sleep=lambda _s: None)
    yield KubeCluster(kube)
    kube.close()


def provisioner_failed(*, event: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("a pass that failed")


class Functions:
    """The four functions over one cluster, one state table and moto, run one at a time by
    :class:`Acting`, each wired as its runtime module wires it and with connections of its own (cloud
    provider, state store): nothing one function cached serves another. Every switch from one function
    to another empties the process's AWS caches, as each function runs in a process of its own (the
    instance types are put back as listed once per session: listing them takes seconds in moto)."""

    def __init__(self, world: World, acting: Acting, listing: RegionListing) -> None:
        self.world = world
        self.acting = acting
        self.listing = listing
        self.last = ""
        self.metrics = RecordingMetrics()
        self.config: ProvisionerConfig = make_config()
        dynamodb = world.aws.clients.client("dynamodb")
        self.states = {
            name: StateStore(TABLE, CLUSTER, client=dynamodb, clock=world.wall) for name in FUNCTIONS
        }
        self.clouds = {
            name: AwsProvider(
                world.aws.cluster,
                REGION,
                clients=world.aws.clients,
                unavailable=self.states[name].unavailable,
            )
            for name in FUNCTIONS
        }
        with self.running(PROVISIONER):
            cloud = self.clouds[PROVISIONER]
            status = NodePoolStatus(world.kube, cloud=cloud, clock=world.wall)
            self.source = NodePoolSource(world.kube, self.config, metrics=self.metrics, status=status)
            self.events = EventRecorder(world.kube.client, correlator=EventCorrelator(clock=world.wall))
            self.provisioner = self._provisioner()

    @contextmanager
    def running(self, name: str) -> Iterator[None]:
        """Run the block as function ``name``, starting cold when another function ran last."""
        if name != self.last:
            clear_all_caches()
            instancetypes.prime_cache(REGION, self.listing.types, self.listing.zone_offerings)
            self.last = name
        with self.acting.as_function(name):
            yield

    def _provisioner(self, cache: ClusterCache | None = None) -> Provisioner:
        return Provisioner(
            self.world.kube,
            self.clouds[PROVISIONER],
            self.states[PROVISIONER],
            self.config,
            wall_clock=self.world.wall,
            metrics=self.metrics,
            sleep=lambda _s: None,
            nodepool_source=self.source,
            events=self.events,
            cache=cache,
        )

    def provision(self) -> list[Any]:
        """Passes as the schedule runs them: one, one minutes later, watching, one under Powertools
        idempotency (the scheduled event's record; a failed run's record is deleted so that the event's
        redelivery runs again) and a warm one on the cluster cache."""
        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

        provisioner = self.provisioner
        idempotent = idempotent_function(
            data_keyword_argument="event",
            persistence_store=self.states[PROVISIONER].idempotency_layer("provisioner"),
            config=IdempotencyConfig(event_key_jmespath="id"),
        )
        with self.running(PROVISIONER):
            claims = sorted(provisioner.run_once().launched, key=lambda c: c.id)
            self.world.wall.advance(360)
            assert provisioner.run_once().launched == []
            assert provisioner.run_until(time.monotonic() + 2.0).error == ""
            idempotent(lambda *, event: provisioner.run_once().summary())(event={"id": "scheduled-event-1"})
            with pytest.raises(RuntimeError):
                idempotent(provisioner_failed)(event={"id": "scheduled-event-2"})
            self.warm_pass()
        return claims

    def warm_pass(self) -> None:
        """A pass reading the cluster from the watch-fed cache, its watches opened."""
        cache = ClusterCache(self.world.kube.client, watch_seconds=2)
        try:
            self._provisioner(cache).run_once()
            deadline = time.monotonic() + 10
            while not all(i.connected for i in cache.informers.values()) and time.monotonic() < deadline:
                time.sleep(0.05)  # the watches open in their threads
        finally:
            cache.stop()

    def launch(self) -> list[Any]:
        """One provisioning pass; the claims it launched."""
        with self.running(PROVISIONER):
            return list(self.provisioner.run_once().launched)

    def reconcile(self) -> None:
        with self.running(PROVISIONER):
            self.provisioner.reconcile()

    def workflows(self, meanwhile: Callable[[], None] = lambda: None) -> DeferredWorkflows:
        """The termination workflow, in-process: the steps as ``runtime/termination.py`` wires them
        (``ClusterInstances``, the claim book), ``meanwhile`` called at each of its waits."""
        wall = self.world.wall
        claims = StoreClaimBook(self.states[TERMINATION].nodeclaims, clock=wall)
        steps = TerminationSteps(
            self.world.kube, ClusterInstances(self.world.aws.clients, CLUSTER), claims, clock=wall
        )

        def wait(seconds: float) -> None:
            wall.advance(seconds)
            meanwhile()

        return DeferredWorkflows(InProcessWorkflow(steps, sleep=wait))

    def disruption_pass(
        self, options: DisruptionOptions | None = None, meanwhile: Callable[[], None] = lambda: None
    ) -> list[Any]:
        """A pass of the deployed disruption function (the NodePools re-read, the cluster cache), then the
        termination workflows it started."""
        world = self.world
        workflows = self.workflows(meanwhile)
        with self.running(DISRUPTION):
            NodePoolSource(world.kube, self.config, metrics=self.metrics).refresh()
            cache = ClusterCache(world.kube.client, watch_seconds=2)
            try:
                build_controller(
                    world.kube,
                    self.clouds[DISRUPTION],
                    self.states[DISRUPTION],
                    self.config,
                    workflows,
                    options=options,
                    clock=world.wall,
                    drain_interval_seconds=1,
                    poll_seconds=1,
                    cache=cache,
                ).run_once()
            finally:
                cache.stop()
        return workflows.run_queued()

    def interruption(self, instance_id: str, reason: str, events: int = 1) -> list[Any]:
        """The interruption handler as ``runtime/interruption.py`` wires it, given ``events`` events of
        ``reason`` for the instance, then the termination workflows it started."""
        world, cloud, state = self.world, self.clouds[INTERRUPTION], self.states[INTERRUPTION]
        workflows = self.workflows()
        with self.running(INTERRUPTION):
            controller = InterruptionController(
                kube=world.kube,
                cloud=cloud,
                origin=EventOrigin(account=samples.ACCOUNT, region=REGION),
                unavailable=state.unavailable,
                workflow=workflows,
                records=InterruptionRecords(state.table, state.cluster),
                claims=StoreClaimBook(state.nodeclaims, clock=world.wall),
                replacements=ReplacementLauncher(
                    Provisioner(
                        world.kube, cloud, state, self.config, wall_clock=world.wall, metrics=self.metrics
                    )
                ),
                settings=InterruptionSettings(drain_interval_seconds=1, poll_seconds=1),
                metrics=self.metrics,
                clock=world.wall,
            )
            for _ in range(events):
                event = demo_event(instance_id, reason, REGION, datetime.fromtimestamp(world.wall(), tz=UTC))
                controller.handle(parse_message(json.dumps(event)))
        return workflows.run_queued()


def kubelet_registers(world: World, provider_id: str, name: str, **labels: str) -> None:
    """A Ready Node for an instance, as its kubelet creates it."""
    node = node_object(name, labels={"kubernetes.io/hostname": name, **labels})
    node["spec"]["providerID"] = provider_id
    world.client.create(NODES, node)


def replica(world: World, name: str, node: str, claim: str = "") -> None:
    """A ReplicaSet's pod running on ``node`` (with the PersistentVolumeClaim ``claim``, if any)."""
    pod = pod_object(name, node=node, labels={"app": name}, cpu="1500m")
    if claim:
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": name,
            "uid": f"uid-{name}",
            "controller": True,
        }
    ]
    world.client.create(PODS, pod)


def held_by_a_budget(world: World, node: str) -> None:
    """A ReplicaSet's pod on ``node``, with a volume, that a PodDisruptionBudget keeps from being
    evicted."""
    replica(world, "web", node, claim="data")
    world.client.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
        "default",
    )


def launch_tagged(world: World) -> dict[str, Any]:
    """An instance tagged for this cluster, launched by hand."""
    return dict(
        world.aws.clients.ec2.run_instances(
            ImageId=next(iter(world.amis.ids.values())),
            InstanceType="c5.large",
            MinCount=1,
            MaxCount=1,
            SubnetId=next(iter(world.aws.subnets.values())),
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": to_aws(ownership_tags(CLUSTER, nodepool="default"))}
            ],
        )["Instances"][0]
    )


def ghost(world: World) -> None:
    """A Node (with Fleetwright's finalizer and a pod) whose instance, this cluster's, was terminated
    behind Fleetwright's back."""
    instance = launch_tagged(world)
    zone = instance["Placement"]["AvailabilityZone"]
    kubelet_registers(
        world, f"aws:///{zone}/{instance['InstanceId']}", "node-ghost", **{"karpenter.sh/nodepool": "default"}
    )
    world.client.patch(NODES, "node-ghost", {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    replica(world, "orphan", "node-ghost")
    world.aws.clients.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])


def instances(world: World) -> list[dict[str, Any]]:
    """The account's pending and running instances (as the administrator sees them)."""
    reservations = world.aws.clients.ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]
    return [i for r in reservations for i in r["Instances"]]


def live_instances(world: World) -> set[str]:
    return {str(i["InstanceId"]) for i in instances(world)}


def node_names(world: World) -> set[str]:
    return {n["metadata"]["name"] for n in world.client.list(NODES).items}


def nodeclass_naming_a_role(world: World) -> dict[str, Any]:
    """The EC2NodeClass naming an IAM role (its instance profile is made by the first launch)."""
    trust = {
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ]
    }
    world.aws.clients.iam.create_role(RoleName=NODE_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
    spec = {k: v for k, v in NODECLASS["spec"].items() if k != "instanceProfile"}
    return {**NODECLASS, "spec": {**spec, "role": NODE_ROLE}}


def run_every_function(world: World, acting: Acting, listing: RegionListing) -> None:
    """The flows of the module docstring, checked as they go (a flow that did nothing would prove
    nothing)."""
    world.wall.now = time.time()
    world.client.create(EC2_NODE_CLASSES, nodeclass_naming_a_role(world))
    empty_at_once = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}
    world.client.create(NODE_POOLS, nodepool_doc("default", "c5.large", disruption=empty_at_once))
    functions = Functions(world, acting, listing)
    world.pending(1, cpu="1500m")
    pending_with_volume(world, "app-1")
    world.pending(1, cpu="64", prefix="huge")  # fits no NodePool: FailedScheduling
    claims = functions.provision()
    assert len(claims) == 2
    for i, claim in enumerate(claims):
        kubelet_registers(world, claim.provider_id, f"node-{i}")
    functions.reconcile()
    for pod in ("app-0", "app-1", "huge-0"):
        world.client.delete(PODS, pod, "default")
    held_by_a_budget(world, "node-0")
    functions.reconcile()
    young_nodes_too = DisruptionOptions(settings=DisruptionSettings(min_node_age_seconds=0))
    assert [e.status for e in functions.disruption_pass(young_nodes_too)] == ["SUCCEEDED"]
    assert "node-1" not in node_names(world)
    # node-0 retires (two events announce it: the second finds its workflow started); its replacement
    # registers as node-2.
    before = live_instances(world)
    retired = functions.interruption(claims[0].instance_id, "scheduled-change", events=2)
    assert [e.status for e in retired] == ["SUCCEEDED"]
    node_2 = registers_new_instance(world, functions, before, "node-2")
    drifts_and_is_replaced(world, functions, node_2, young_nodes_too)
    deleted_by_the_user(world, functions)
    # A launch that never registers is terminated at its registration timeout.
    world.pending(1, cpu="1500m", prefix="late")
    [late] = functions.launch()
    world.client.delete(PODS, "late-0", "default")
    world.wall.advance(3600)
    functions.reconcile()
    assert late.instance_id not in live_instances(world)
    # Garbage: a Node whose instance is gone, an instance of this cluster nobody knows.
    ghost(world)
    leaked = leak(world)
    world.wall.advance(3600)
    functions.disruption_pass()
    assert "node-ghost" not in node_names(world) and leaked not in live_instances(world)
    # A pass later, with no instance left, the cluster's launch templates are deleted.
    functions.disruption_pass()
    assert world.aws.clients.ec2.describe_launch_templates()["LaunchTemplates"] == []
    functions.reconcile()
    assert world.client.list(NODE_CLAIMS).items == []


def drifts_and_is_replaced(
    world: World,
    functions: Functions,
    instance_id: str,
    options: DisruptionOptions,
) -> None:
    """The NodePool changes: node-2 (running a pod) drifts and is replaced by node-3, which then stops: its
    Node and pods go, the instance is terminated."""
    before = live_instances(world)
    replica(world, "api", "node-2", claim="data")
    world.client.patch(NODE_POOLS, "default", {"spec": {"template": {"metadata": {"labels": {"team": "a"}}}}})
    registered: list[str] = []

    def replacement_registers() -> None:
        if not registered and len(live_instances(world)) > len(before):
            registered.append(registers_new_instance(world, functions, before, "node-3"))

    assert [e.status for e in functions.disruption_pass(options, replacement_registers)] == ["SUCCEEDED"]
    assert "node-2" not in node_names(world) and instance_id not in live_instances(world)
    [node_3] = registered
    replica(world, "api-2", "node-3")
    world.aws.clients.ec2.stop_instances(InstanceIds=[node_3])
    functions.interruption(node_3, "stopped")
    assert "node-3" not in node_names(world) and node_3 not in live_instances(world)


def deleted_by_the_user(world: World, functions: Functions) -> None:
    """node-4, left marked by a workflow that never started, is given back by the sweep; then ``kubectl
    delete node``: the Node, kept by its finalizer, is retired through the workflow."""
    before = live_instances(world)
    world.pending(1, cpu="1500m", prefix="batch")
    assert len(functions.launch()) == 1
    instance_id = registers_new_instance(world, functions, before, "node-4")
    world.client.delete(PODS, "batch-0", "default")
    replica(world, "batch", "node-4")  # not empty: not consolidated
    marked = {
        "metadata": {"annotations": {DISRUPTED_AT_ANNOTATION: "2020-01-01T00:00:00Z"}},
        "spec": {"unschedulable": True, "taints": [DISRUPTED_TAINT]},
    }
    world.client.patch(NODES, "node-4", marked)
    functions.disruption_pass()
    assert not world.client.get(NODES, "node-4")["spec"].get("unschedulable")
    world.client.delete(NODES, "node-4")
    assert [e.status for e in functions.disruption_pass()] == ["SUCCEEDED"]
    assert "node-4" not in node_names(world) and instance_id not in live_instances(world)


def leak(world: World) -> str:
    """A running instance tagged for this cluster that no claim or Node knows."""
    return str(launch_tagged(world)["InstanceId"])


def registers_new_instance(world: World, functions: Functions, before: set[str], name: str) -> str:
    """The kubelet of the one instance launched since ``before`` registers as ``name``; its id."""
    [instance] = [i for i in instances(world) if i["InstanceId"] not in before]
    zone = instance["Placement"]["AvailabilityZone"]
    kubelet_registers(world, f"aws:///{zone}/{instance['InstanceId']}", name)
    functions.reconcile()
    return str(instance["InstanceId"])


def role_statements(synthesis: Synthesis, function: str) -> list[dict[str, Any]]:
    """Every statement of the function's role: its managed policies and the policies attached to it."""
    stack = synthesis.fleetwright
    _, body = function_by_description(stack, DESCRIPTIONS[function])
    role_id = logical_id(render(body["Properties"]["Role"]))
    resources = stack.raw["Resources"]
    managed = [
        logical_id(ref) for ref in render(resources[role_id]["Properties"].get("ManagedPolicyArns", []))
    ]
    attached = [
        k
        for k, r in stack.resources("AWS::IAM::Policy").items()
        if {"Ref": role_id} in r["Properties"]["Roles"]
    ]
    documents = [resources[k]["Properties"]["PolicyDocument"] for k in [*managed, *attached]]
    return [render(s) for d in documents for s in d["Statement"]]


def _as_list(value: Any) -> list[str]:
    return value if isinstance(value, list) else [value]


def granted_actions(statements: list[dict[str, Any]]) -> set[str]:
    """The action patterns the statements allow (none denies anything)."""
    assert all(s["Effect"] == "Allow" for s in statements)
    return {a for s in statements for a in _as_list(s["Action"])}


def allowed(action: str, patterns: set[str]) -> bool:
    """IAM's action match: case-insensitive, ``*`` and ``?`` wildcards."""
    return any(fnmatch.fnmatchcase(action.lower(), p.lower()) for p in patterns)


def kubernetes_grants(group: str) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) the ClusterRoles bound to ``group`` in docs/rbac.yaml grant."""
    policy = Policy.load(RBAC_MANIFEST)
    bound = [b for b in policy.bindings if group in b.groups and b.role_kind == "ClusterRole"]
    return {t for b in bound for rule in policy.cluster_roles[b.role_name] for t in rule.grants()}


def aws_findings(synthesis: Synthesis, acting: Acting, function: str) -> dict[str, list[str]]:
    """What ``function`` calls and may not, what it may and never calls, and stale declarations."""
    recorded = {a for call in acting.calls[function] for a in iam_actions(call)}
    declared = NOT_REACHED_HERE[function]
    uses = recorded | ON_THE_FUNCTIONS_BEHALF[function] | set(declared)
    granted = granted_actions(role_statements(synthesis, function))
    layer = REPO_ROOT / "layers" / "fleetwright"
    return {
        "called but not allowed": sorted(
            a for a in recorded | ON_THE_FUNCTIONS_BEHALF[function] if not allowed(a, granted)
        ),
        "allowed but never called": sorted(p for p in granted if not any(allowed(a, {p}) for a in uses)),
        "declared unreached but recorded": sorted(set(declared) & recorded),
        "declared unreached and not allowed": sorted(a for a in declared if not allowed(a, granted)),
        "declared call gone from its module": sorted(
            a
            for a, (module, method) in declared.items()
            if f".{method}(" not in (text := (layer / module).read_text()) and f'"{method}"' not in text
        ),
    }


def kubernetes_findings(apiserver: ApiServer, function: str) -> dict[str, list[tuple[str, str, str]]]:
    """What ``function`` asked for and its group may not do, and what its group may do and it never did."""
    authorizer = apiserver.authorizer
    assert authorizer is not None
    user = f"fleetwright-{function}"
    used = authorizer.used(user=user)
    grants = kubernetes_grants(KUBERNETES_GROUPS[function])
    declared = set(KUBERNETES_NOT_REACHED_HERE[function])
    return {
        "refused": sorted(
            (r.request.full_resource, r.request.verb, r.request.name) for r in authorizer.refused(user=user)
        ),
        "used but not granted": sorted(used - grants),
        "granted but never used": sorted(grants - used - declared),
        "declared unreached but used": sorted(declared & used),
        "declared unreached and not granted": sorted(declared - grants),
    }


def test_each_function_is_allowed_what_it_calls_and_nothing_else(
    synthesis: Synthesis,
    world: World,
    apiserver: ApiServer,
    acting: Acting,
    listing: RegionListing,
) -> None:
    run_every_function(world, acting, listing)
    assert sorted(acting.calls) == sorted(FUNCTIONS)  # every function made AWS calls
    findings = {}
    for function in FUNCTIONS:
        problems = {**aws_findings(synthesis, acting, function), **kubernetes_findings(apiserver, function)}
        findings[function] = {k: v for k, v in problems.items() if v}
    assert findings == {f: {} for f in FUNCTIONS}
