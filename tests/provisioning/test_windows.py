"""Windows nodes end to end against moto: a Windows NodePool and a pod selecting ``kubernetes.io/os:
windows`` get an instance booted from the EKS-optimized Windows AMI with PowerShell bootstrap user data;
the kubelet registers it as Windows; Linux pods go to the Linux NodePool, never onto it."""

from __future__ import annotations

import base64
from typing import Any

from fleetwright.aws.amis import windows_alias_parameter
from fleetwright.config.settings import ProvisionerConfig
from fleetwright.kube.resources import NODES, PODS
from fleetwright.local.apiserver.store import Store
from fleetwright.local.aws_fakes import seed_windows_amis
from fleetwright.local.kubelet import KubeletSimulator
from fleetwright.model import labels as wk
from fleetwright.model.karpenter import NodePool
from tests.kube.objects import UNSCHEDULABLE_STATUS, pod_object
from tests.support.aws import CLUSTER, node_class
from tests.support.provisioning import World, nodepool

WINDOWS_TAINT = {"key": "os", "value": "windows", "effect": "NoSchedule"}


def windows_nodepool() -> NodePool:
    return NodePool.model_validate(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "windows"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "windows",
                        },
                        "requirements": [
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]},
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": ["m5.xlarge"],
                            },
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        ],
                    }
                }
            },
        }
    )


def windows_class() -> Any:
    nc = node_class(amiSelectorTerms=[{"alias": "windows2022@latest"}])
    return nc.model_copy(update={"metadata": nc.metadata.model_copy(update={"name": "windows"})})


def pending_pod(world: World, name: str, os_name: str) -> None:
    body = pod_object(name, cpu="500m")
    body["spec"]["nodeSelector"] = {"kubernetes.io/os": os_name}
    created = world.client.create(PODS, body)
    world.client.patch(
        PODS, name, UNSCHEDULABLE_STATUS, created["metadata"]["namespace"], subresource="status"
    )


def launch_template_data(world: World, image_id: str) -> dict[str, Any]:
    ec2 = world.aws.clients.ec2
    for template in ec2.describe_launch_templates()["LaunchTemplates"]:
        versions = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])
        for version in versions["LaunchTemplateVersions"]:
            data: dict[str, Any] = version["LaunchTemplateData"]
            if data.get("ImageId") == image_id:
                return data
    raise AssertionError(f"no launch template boots {image_id}")


def test_windows_pod_gets_a_windows_node_and_linux_pods_never_do(world: World) -> None:
    windows_ami = seed_windows_amis(world.aws.clients.ec2, world.aws.cluster.version)["windows2022"]
    config = ProvisionerConfig(
        cluster_name=CLUSTER,
        nodepools=[windows_nodepool(), nodepool("linux")],
        nodeclasses=[windows_class(), node_class()],
    )
    pending_pod(world, "iis", "windows")
    pending_pod(world, "nginx", "linux")
    provisioner = world.provisioner(config)

    launched = {claim.nodepool: claim for claim in provisioner.run_once().launched}
    assert set(launched) == {"windows", "linux"}
    by_id = {i["InstanceId"]: i for i in world.instances()}
    windows_instance = by_id[launched["windows"].provider_id.rsplit("/", 1)[-1]]
    linux_instance = by_id[launched["linux"].provider_id.rsplit("/", 1)[-1]]
    assert windows_instance["ImageId"] == windows_ami
    assert linux_instance["ImageId"] in set(world.amis.ids.values())
    assert world.state.nodeclaims.get(launched["windows"].id).labels[wk.OS] == "windows"

    data = launch_template_data(world, windows_ami)
    script = base64.b64decode(data["UserData"]).decode()
    assert script.startswith("<powershell>\n") and script.endswith("</powershell>")
    assert "Start-EKSBootstrap.ps1" in script
    assert f"-EKSClusterName '{CLUSTER}'" in script
    assert f"-APIServerEndpoint '{world.aws.cluster.endpoint}'" in script
    assert '--node-labels="karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=windows"' in script
    assert data["BlockDeviceMappings"][0]["DeviceName"] == "/dev/sda1"
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 50

    # The kubelet on that instance registers a Windows node; registration keeps it Windows.
    kubelet = KubeletSimulator(Store(), world.aws.clients.ec2, CLUSTER)
    node = kubelet.node_object(windows_instance)
    assert node["metadata"]["labels"][wk.OS] == "windows"
    assert node["metadata"]["labels"][wk.WINDOWS_BUILD] == "10.0.20348"
    assert node["status"]["allocatable"]["pods"] == "110"
    assert node["status"]["nodeInfo"]["operatingSystem"] == "windows"
    world.client.create(NODES, node)
    assert provisioner.reconcile().registered == [launched["windows"].id]
    labels = world.kube.get_node(node["metadata"]["name"])["metadata"]["labels"]
    assert labels[wk.OS] == "windows" and labels[wk.WINDOWS_BUILD] == "10.0.20348"
    assert labels[wk.NODEPOOL] == "windows"

    linux_node = kubelet.node_object(linux_instance)
    assert linux_node["metadata"]["labels"][wk.OS] == "linux"
    assert wk.WINDOWS_BUILD not in linux_node["metadata"]["labels"]


def test_windows2025_needs_kubernetes_1_35(world: World) -> None:
    assert world.aws.cluster.version < "1.35"
    nc = node_class(amiSelectorTerms=[{"alias": "windows2025@latest"}])
    config = ProvisionerConfig(cluster_name=CLUSTER, nodepools=[nodepool()], nodeclasses=[nc])
    pending_pod(world, "iis", "windows")
    report = world.provisioner(config).run_once()
    assert report.launched == []
    assert world.instances() == []
    assert "Windows Server 2025 requires EKS version 1.35 or higher" in report.passes[0].error
    assert windows_alias_parameter("windows2025", "1.35").endswith(
        "/Windows_Server-2025-English-Core-EKS_Optimized-1.35/image_id"
    )


def test_missing_windows_ami_launches_nothing_then_exactly_one_node_once_published(world: World) -> None:
    """Fault: the Windows AMI parameter is not there. Nothing launches (no Linux AMI stands in for it),
    the pass says why; once it is published the pod gets one node, not one per attempt."""
    config = ProvisionerConfig(
        cluster_name=CLUSTER, nodepools=[windows_nodepool()], nodeclasses=[windows_class()]
    )
    pending_pod(world, "iis", "windows")
    provisioner = world.provisioner(config)

    first = provisioner.run_once()
    assert first.launched == [] and world.instances() == []
    assert "windows2022@latest" in first.passes[0].error

    windows_ami = seed_windows_amis(world.aws.clients.ec2, world.aws.cluster.version)["windows2022"]
    second = provisioner.run_once()
    third = provisioner.run_once()
    assert len(second.launched) == 1 and third.launched == []
    [instance] = world.instances()
    assert instance["ImageId"] == windows_ami
    assert world.create_fleet_calls() == 1
