"""End to end in the emulator: a Deployment scaled up waits as Unschedulable, an instance launched through
Fleetwright's AWS provider (on moto) registers as a Node, the scheduler binds the pods, they run; the Node
and the pods on it go when the instance is terminated."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from fleetwright.aws.provider import AwsProvider
from fleetwright.cloud.launch import LaunchRequest
from fleetwright.kube.cluster import is_unschedulable
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.resources import DAEMON_SETS, NODES, PODS
from fleetwright.local.kubelet import KubeletOptions
from fleetwright.local.nodestart import NodeStart
from tests.local.helpers import deployment
from tests.support.aws import CLUSTER, REGION, Aws, SeededAmis, node_class
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


def web_pods(server: ApiServer) -> list[dict[str, Any]]:
    return [
        p
        for p in server.store.list(PODS, "default")[0]
        if p["metadata"]["labels"].get("app") == "web" and not p["metadata"].get("deletionTimestamp")
    ]


def agent() -> dict[str, Any]:
    return {
        "metadata": {"name": "node-agent", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "node-agent"}},
            "template": {
                "metadata": {"labels": {"app": "node-agent"}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1"}]},
            },
        },
    }


def test_scale_up_launch_register_bind_run_terminate(aws: Aws, amis: SeededAmis) -> None:
    provider = AwsProvider(aws.cluster, REGION, clients=aws.clients, unavailable=aws.unavailable)
    kubelet = KubeletOptions(aws.clients.ec2, CLUSTER, start=NodeStart.fast(0.05), poll_interval=0.05)
    with ApiServer(port=0, scheduler=True, daemonset_controller=True, kubelet=kubelet) as server:
        server.store.create(DAEMON_SETS, agent(), "kube-system")
        web = deployment("web", 0)
        web["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
        with client.ApiClient(client.Configuration(host=server.url)) as api:
            apps = client.AppsV1Api(api)
            apps.create_namespaced_deployment("default", web)
            apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})

        pending = wait_for(
            lambda: len(web_pods(server)) == 3 and all(is_unschedulable(p) for p in web_pods(server))
        )
        assert pending
        conditions = [c for p in web_pods(server) for c in p["status"]["conditions"]]
        assert {c["message"] for c in conditions} == {"no nodes available to schedule pods"}

        # The stand-in for Fleetwright's provisioner: one node for the three pods.
        m5_large = next(t for t in provider.instance_types(node_class()) if t.name == "m5.large")
        launched = provider.launch(
            LaunchRequest(
                nodeclaim="web-claim",
                nodepool="general",
                instance_types=(m5_large,),
                capacity_types=("on-demand",),
                labels={"team": "web"},
                node_class=node_class(),
                node_class_name="default",
            )
        )

        wait_for(
            lambda: [p for p in web_pods(server) if p["status"]["phase"] == "Running"] == web_pods(server)
        )
        node = server.store.list(NODES)[0][0]
        assert node["spec"]["providerID"] == launched.provider_id
        assert node["metadata"]["labels"]["karpenter.sh/nodepool"] == "general"
        assert node["metadata"]["labels"]["team"] == "web"
        assert {p["spec"]["nodeName"] for p in web_pods(server)} == {node["metadata"]["name"]}
        agents = wait_for(lambda: server.store.list(PODS, "kube-system")[0])
        assert [a["spec"]["nodeName"] for a in agents] == [node["metadata"]["name"]]
        assert wait_for(
            lambda: server.store.get(DAEMON_SETS, "kube-system", "node-agent")["status"].get("numberReady")
        )

        provider.terminate([launched.instance_id])

        wait_for(lambda: not server.store.list(NODES)[0])
        # The ReplicaSet replaces the pods that went with the node; they wait for capacity again.
        wait_for(lambda: len(web_pods(server)) == 3 and all(is_unschedulable(p) for p in web_pods(server)))
        assert server.store.list(PODS, "kube-system")[0] == []
