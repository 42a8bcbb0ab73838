"""Reading user data back: the kubelet simulator must see what a real kubelet would be told."""

from __future__ import annotations

import pytest

from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.userdata import BootstrapOptions, user_data_for
from fleetwright.local.userdata import parse_user_data
from fleetwright.model.ec2nodeclass import KubeletConfiguration
from fleetwright.model.taints import Taint

CLUSTER = ClusterInfo(
    name="demo",
    endpoint="https://example.eks",
    ca_bundle="Q0E=",
    version="1.31",
    service_cidr="10.100.0.0/16",
)
TAINTS = (Taint("nvidia.com/gpu", "NoSchedule", "true"), Taint("karpenter.sh/unregistered", "NoExecute"))


@pytest.mark.parametrize("family", ["AL2023", "AL2", "Bottlerocket"])
def test_round_trip_through_the_generator(family: str) -> None:
    options = BootstrapOptions(
        cluster=CLUSTER,
        labels={"team": "ml", "karpenter.sh/nodepool": "gpu", "topology.kubernetes.io/zone": "us-east-1a"},
        taints=TAINTS,
        kubelet=KubeletConfiguration.model_validate(
            {"maxPods": 42, "kubeReserved": {"cpu": "200m"}, "systemReserved": {"memory": "1Gi"}}
        ),
        custom_user_data=None if family == "Bottlerocket" else "#!/bin/bash\necho hello\n",
    )

    parsed = parse_user_data(user_data_for(family, options))

    assert parsed.family == family
    assert parsed.cluster_name == "demo"
    # The zone is not the kubelet's to register: the generator leaves it out.
    assert parsed.labels == {"team": "ml", "karpenter.sh/nodepool": "gpu"}
    assert sorted(parsed.taints, key=str) == sorted(TAINTS, key=str)
    assert parsed.kubelet.max_pods == 42
    assert parsed.kubelet.kube_reserved == {"cpu": 200}
    assert parsed.kubelet.system_reserved == {"memory": 1024**3}


def test_hand_written_bootstrap_script_with_continuation() -> None:
    script = (
        "#!/bin/bash\nset -e\n"
        "/etc/eks/bootstrap.sh my-cluster \\\n"
        "  --kubelet-extra-args '--node-labels=a=1,b=2 --register-with-taints=spot=true:PreferNoSchedule'\n"
    )
    parsed = parse_user_data(script)
    assert parsed.family == "AL2"
    assert parsed.cluster_name == "my-cluster"
    assert parsed.labels == {"a": "1", "b": "2"}
    assert parsed.taints == (Taint("spot", "PreferNoSchedule", "true"),)


def test_later_nodeconfig_overrides_earlier_one() -> None:
    user = (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n"
        "      maxPods: 17\n      registerWithTaints:\n      - key: early\n        effect: NoSchedule\n"
    )
    options = BootstrapOptions(cluster=CLUSTER, labels={"x": "y"}, taints=TAINTS, custom_user_data=user)
    parsed = parse_user_data(user_data_for("AL2023", options))
    assert parsed.taints == TAINTS
    assert parsed.kubelet.max_pods == 17  # Fleetwright's own document does not set it
    assert parsed.labels == {"x": "y"}


def test_unknown_user_data_gives_defaults() -> None:
    parsed = parse_user_data(b"#!/bin/bash\necho nothing to see\n")
    assert parsed.family == ""
    assert parsed.labels == {}
    assert parsed.taints == ()
    assert parsed.kubelet.max_pods is None


def test_windows_powershell_bootstrap_round_trip() -> None:
    options = BootstrapOptions(
        cluster=CLUSTER,
        labels={"team": "ml", "karpenter.sh/nodepool": "win", "kubernetes.io/os": "windows"},
        taints=TAINTS,
        kubelet=KubeletConfiguration.model_validate({"maxPods": 42, "systemReserved": {"memory": "1Gi"}}),
        custom_user_data="Write-Output 'it''s me'",
    )

    parsed = parse_user_data(user_data_for("Windows2022", options))

    assert parsed.family == "Windows"
    assert parsed.cluster_name == "demo"
    assert parsed.labels == {"team": "ml", "karpenter.sh/nodepool": "win"}  # the OS is the kubelet's own
    assert sorted(parsed.taints, key=str) == sorted(TAINTS, key=str)
    assert parsed.kubelet.max_pods == 42
    assert parsed.kubelet.system_reserved == {"memory": 1024**3}


def test_bottlerocket_soft_eviction_reaches_the_local_kubelet() -> None:
    # Bottlerocket applies settings.kubernetes.eviction-soft, which holds memory back from pods.
    kubelet = KubeletConfiguration.model_validate(
        {"evictionSoft": {"memory.available": "1Gi"}, "evictionSoftGracePeriod": {"memory.available": "1m"}}
    )
    parsed = parse_user_data(
        user_data_for("Bottlerocket", BootstrapOptions(cluster=CLUSTER, kubelet=kubelet))
    )
    assert parsed.kubelet.eviction_soft == {"memory.available": "1Gi"}
