"""A Windows node in the emulator: the provisioner launches it from the Windows AMI (on moto), the simulated
kubelet registers it as Windows from its image and PowerShell user data, the scheduler binds the Windows pod
there and the Linux pod on the Linux node."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.aws.provider import AwsProvider
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.kube import KubeClient, KubeCluster
from fleetwright.kube.config import ClusterConfig
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.resources import NODES, PODS
from fleetwright.local.aws_fakes import seed_windows_amis
from fleetwright.local.kubelet import KubeletOptions
from fleetwright.local.nodestart import NodeStart
from fleetwright.model import labels as wk
from fleetwright.observability.metrics import RecordingMetrics
from fleetwright.provisioning import Provisioner
from fleetwright.state import StateStore
from tests.local.helpers import pod
from tests.provisioning.test_windows import windows_class, windows_nodepool
from tests.support.aws import CLUSTER, REGION, Aws, SeededAmis, node_class
from tests.support.provisioning import nodepool
from tests.support.state import TABLE, create_state_table
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


def os_pod(name: str, os_name: str) -> dict[str, Any]:
    body = pod(name)
    body["spec"]["nodeSelector"] = {"kubernetes.io/os": os_name}
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    return body


def test_windows_and_linux_pods_run_on_nodes_of_their_os(aws: Aws, amis: SeededAmis) -> None:
    windows_ami = seed_windows_amis(aws.clients.ec2, aws.cluster.version)["windows2022"]
    dynamodb = aws.clients.client("dynamodb")
    create_state_table(dynamodb)
    state = StateStore(TABLE, CLUSTER, client=dynamodb)
    cloud = AwsProvider(aws.cluster, REGION, clients=aws.clients, unavailable=state.unavailable)
    config = ProvisionerConfig(
        cluster_name=CLUSTER,
        nodepools=[windows_nodepool(), nodepool("linux")],
        nodeclasses=[windows_class(), node_class()],
    )
    kubelet = KubeletOptions(aws.clients.ec2, CLUSTER, start=NodeStart.fast(0.05), poll_interval=0.05)
    with ApiServer(port=0, scheduler=True, kubelet=kubelet) as server:
        server.store.create(PODS, os_pod("iis", "windows"), "default")
        server.store.create(PODS, os_pod("nginx", "linux"), "default")
        kube = KubeClient(ClusterConfig(server=server.url), sleep=lambda _s: None)
        try:
            provisioner = Provisioner(
                KubeCluster(kube), cloud, state, config, metrics=RecordingMetrics(), sleep=lambda _s: None
            )
            wait_for(
                lambda: all(p["status"].get("conditions") for p in server.store.list(PODS, "default")[0])
            )
            launched = provisioner.run_once().launched
            assert sorted(c.nodepool for c in launched) == ["linux", "windows"]

            def running() -> dict[str, str]:
                pods = server.store.list(PODS, "default")[0]
                return {
                    p["metadata"]["name"]: p["spec"].get("nodeName", "")
                    for p in pods
                    if p["status"].get("phase") == "Running"
                }

            placed = wait_for(lambda: running() if len(running()) == 2 else None)
            nodes = {n["metadata"]["name"]: n for n in server.store.list(NODES)[0]}
            windows = nodes[placed["iis"]]
            linux = nodes[placed["nginx"]]
            assert windows["metadata"]["labels"][wk.OS] == "windows"
            assert windows["metadata"]["labels"][wk.WINDOWS_BUILD] == "10.0.20348"
            assert windows["status"]["nodeInfo"]["operatingSystem"] == "windows"
            assert linux["metadata"]["labels"][wk.OS] == "linux"
            images = {
                i["InstanceId"]: i["ImageId"]
                for r in aws.clients.ec2.describe_instances()["Reservations"]
                for i in r["Instances"]
            }
            assert images[windows["spec"]["providerID"].rsplit("/", 1)[-1]] == windows_ami
            assert images[linux["spec"]["providerID"].rsplit("/", 1)[-1]] in set(amis.ids.values())
            assert wk.WINDOWS_BUILD not in linux["metadata"]["labels"]

            provisioner.reconcile()
            registered = server.store.get(NODES, "", windows["metadata"]["name"])
            assert registered["metadata"]["labels"][wk.NODEPOOL] == "windows"
            assert registered["metadata"]["labels"][wk.OS] == "windows"  # registration keeps the kubelet's OS
        finally:
            kube.close()
