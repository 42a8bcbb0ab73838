"""User data per AMI family, decoded the way the node decodes it."""

from __future__ import annotations

import email
import tomllib

import yaml

from fleetwright.aws.cluster import ClusterInfo
from fleetwright.aws.userdata import BootstrapOptions, kubelet_labels, user_data_for
from fleetwright.model.ec2nodeclass import KubeletConfiguration
from fleetwright.model.taints import Taint

CLUSTER = ClusterInfo("demo", "https://api.example", "Q0E=", "1.31", "172.20.0.0/16")
LABELS = {"team": "ml", "karpenter.sh/nodepool": "general", "topology.kubernetes.io/zone": "us-east-1a"}
TAINTS = (Taint("dedicated", "NoSchedule", "ml"), Taint("example.com/booting", "NoExecute"))
KUBELET = KubeletConfiguration.model_validate(
    {"maxPods": 30, "kubeReserved": {"cpu": "100m"}, "evictionHard": {"memory.available": "5%"}}
)


def _options(custom: str | None = None) -> BootstrapOptions:
    return BootstrapOptions(CLUSTER, LABELS, TAINTS, KUBELET, custom)


def test_al2023_nodeconfig_follows_the_users_parts() -> None:
    text = user_data_for("AL2023", _options("#!/bin/bash\necho hello\n"))
    message = email.message_from_string(text)
    assert message.is_multipart()
    parts = message.get_payload()
    assert [p.get_content_type() for p in parts] == ["text/x-shellscript", "application/node.eks.aws"]
    assert "echo hello" in parts[0].get_payload()
    config = yaml.safe_load(parts[1].get_payload())
    assert config["kind"] == "NodeConfig"
    assert config["spec"]["cluster"] == {
        "name": "demo",
        "apiServerEndpoint": "https://api.example",
        "certificateAuthority": "Q0E=",
        "cidr": "172.20.0.0/16",
    }
    kubelet = config["spec"]["kubelet"]
    assert kubelet["config"]["maxPods"] == 30
    assert kubelet["config"]["kubeReserved"] == {"cpu": "100m"}
    assert kubelet["config"]["evictionHard"] == {"memory.available": "5%"}
    assert kubelet["config"]["registerWithTaints"] == [
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
        {"key": "example.com/booting", "effect": "NoExecute"},
    ]
    # The zone label is the node's own to set; kubelet would be refused or wrong.
    assert kubelet["flags"] == ["--node-labels=karpenter.sh/nodepool=general,team=ml"]


def test_al2023_merges_a_users_mime_document_part_by_part() -> None:
    users = user_data_for("AL2023", _options("#!/bin/bash\necho one\n"))
    merged = email.message_from_string(user_data_for("AL2023", _options(users)))
    kinds = [p.get_content_type() for p in merged.get_payload()]
    assert kinds == ["text/x-shellscript", "application/node.eks.aws", "application/node.eks.aws"]


def test_user_data_is_deterministic() -> None:
    assert user_data_for("AL2023", _options()) == user_data_for("AL2023", _options())


def test_al2_runs_bootstrap_with_kubelet_flags_after_the_users_script() -> None:
    message = email.message_from_string(user_data_for("AL2", _options("#!/bin/bash\necho first\n")))
    first, bootstrap = (p.get_payload() for p in message.get_payload())
    assert "echo first" in first
    assert (
        "/etc/eks/bootstrap.sh demo --apiserver-endpoint https://api.example --b64-cluster-ca Q0E="
        in bootstrap
    )
    assert "--node-labels=karpenter.sh/nodepool=general,team=ml" in bootstrap
    assert "--register-with-taints=dedicated=ml:NoSchedule,example.com/booting:NoExecute" in bootstrap
    assert "--max-pods=30" in bootstrap
    assert "--use-max-pods false" in bootstrap
    assert "--eviction-hard=memory.available<5%" in bootstrap


def test_bottlerocket_toml_keeps_the_users_settings() -> None:
    custom = (
        '[settings.host-containers.admin]\nenabled = true\n[settings.kubernetes]\ncluster-name = "wrong"\n'
    )
    settings = tomllib.loads(user_data_for("Bottlerocket", _options(custom)))["settings"]
    assert settings["host-containers"]["admin"]["enabled"] is True
    kubernetes = settings["kubernetes"]
    assert kubernetes["cluster-name"] == "demo"
    assert kubernetes["api-server"] == "https://api.example"
    assert kubernetes["max-pods"] == 30
    assert kubernetes["node-labels"] == {"karpenter.sh/nodepool": "general", "team": "ml"}
    assert kubernetes["node-taints"] == {
        "dedicated": ["ml:NoSchedule"],
        "example.com/booting": [":NoExecute"],
    }
    assert kubernetes["eviction-hard"] == {"memory.available": "5%"}


def test_custom_family_passes_user_data_through() -> None:
    assert user_data_for("Custom", _options("anything")) == "anything"


def test_kubelet_labels_drop_what_node_restriction_forbids() -> None:
    labels = {
        "kubernetes.io/hostname": "x",
        "node-role.kubernetes.io/worker": "",
        "node.kubernetes.io/lifecycle": "spot",
        "example.k8s.io/thing": "a",
        "karpenter.k8s.aws/instance-family": "m5",
    }
    assert kubelet_labels(labels) == {
        "karpenter.k8s.aws/instance-family": "m5",
        "node.kubernetes.io/lifecycle": "spot",
    }


def test_windows_runs_start_eks_bootstrap_with_karpenters_kubelet_args() -> None:
    kubelet = KubeletConfiguration.model_validate(
        {"maxPods": 30, "clusterDNS": ["10.100.0.10"], "evictionHard": {"memory.available": "5%"}}
    )
    options = BootstrapOptions(
        CLUSTER, LABELS, TAINTS, kubelet, "<powershell>\nWrite-Output hi\n</powershell>"
    )
    text = user_data_for("Windows2022", options)
    lines = text.split("\n")
    assert lines[0] == "<powershell>"
    assert lines[1] == "Write-Output hi"  # the user's PowerShell first, its own tags dropped
    assert (
        lines[2] == r'[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"'
    )
    assert lines[3] == (
        "& $EKSBootstrapScriptFile -EKSClusterName 'demo' -APIServerEndpoint 'https://api.example'"
        " -Base64ClusterCA 'Q0E='"
        ' -KubeletExtraArgs \'--node-labels="karpenter.sh/nodepool=general,team=ml"'
        ' --register-with-taints="dedicated=ml:NoSchedule,example.com/booting:NoExecute"'
        ' --max-pods=30 --eviction-hard="memory.available<5%"\''
        " -DNSClusterIP '10.100.0.10'"
    )
    assert lines[4:] == ["</powershell>"]
    assert user_data_for("Windows2019", options) == text  # the release only changes the AMI


def test_windows_without_labels_or_taints_still_passes_empty_taints() -> None:
    text = user_data_for("Windows2025", BootstrapOptions(CLUSTER))
    assert "-KubeletExtraArgs '--register-with-taints=\"\"'" in text
    assert "-DNSClusterIP" not in text


def test_windows_cluster_dns_of_any_string_stays_one_powershell_argument() -> None:
    # Karpenter's CRD admits any clusterDNS string; a quote in it must not end PowerShell's string.
    kubelet = KubeletConfiguration.model_validate({"clusterDNS": ["dns'; Remove-Item C:\\ -Recurse; '"]})
    text = user_data_for("Windows2022", BootstrapOptions(CLUSTER, kubelet=kubelet))
    assert text.split("\n")[-2].endswith(" -DNSClusterIP 'dns''; Remove-Item C:\\ -Recurse; '''")


def _raid0(version: str = "") -> BootstrapOptions:
    return BootstrapOptions(
        CLUSTER, LABELS, TAINTS, KUBELET, None, instance_store_policy="RAID0", bottlerocket_version=version
    )


def test_raid0_al2023_asks_nodeadm_for_a_raid0_local_storage_strategy() -> None:
    message = email.message_from_string(user_data_for("AL2023", _raid0()))
    config = yaml.safe_load(message.get_payload()[-1].get_payload())
    assert config["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    plain = email.message_from_string(user_data_for("AL2023", _options()))
    assert "instance" not in yaml.safe_load(plain.get_payload()[-1].get_payload())["spec"]


def test_raid0_al2_passes_local_disks_to_bootstrap_sh() -> None:
    script = email.message_from_string(user_data_for("AL2", _raid0())).get_payload()[-1].get_payload()
    assert script.rstrip().endswith("--local-disks raid0")
    plain = email.message_from_string(user_data_for("AL2", _options())).get_payload()[-1].get_payload()
    assert "--local-disks" not in plain


def test_raid0_bottlerocket_mounts_the_instance_store_at_boot() -> None:
    older = tomllib.loads(user_data_for("Bottlerocket", _raid0("v1.45.0")))
    command = older["settings"]["bootstrap-commands"]["000-mount-instance-storage"]
    assert command == {
        "commands": [
            ["apiclient", "ephemeral-storage", "init"],
            [
                "apiclient",
                "ephemeral-storage",
                "bind",
                "--dirs",
                "/var/lib/containerd",
                "/var/lib/kubelet",
                "/var/log/pods",
            ],
        ],
        "essential": True,
        "mode": "always",
    }
    for version in ("latest", "v1.46.0", "v2.0.1"):
        newer = tomllib.loads(user_data_for("Bottlerocket", _raid0(version)))
        commands = newer["settings"]["bootstrap-commands"]["000-mount-instance-storage"]["commands"]
        assert commands[1] == ["apiclient", "ephemeral-storage", "bind"], version
    assert "bootstrap-commands" not in tomllib.loads(user_data_for("Bottlerocket", _options()))["settings"]


def test_bottlerocket_writes_soft_eviction_and_max_pod_grace_period_as_karpenter_does() -> None:
    # Karpenter's Bottlerocket bootstrap copies evictionSoft, evictionSoftGracePeriod (as Go prints a
    # duration) and evictionMaxPodGracePeriod into settings.kubernetes.
    kubelet = KubeletConfiguration.model_validate(
        {
            "evictionSoft": {"memory.available": "500Mi", "nodefs.available": "15%"},
            "evictionSoftGracePeriod": {"memory.available": "1m", "nodefs.available": "90s"},
            "evictionMaxPodGracePeriod": 60,
        }
    )
    text = user_data_for("Bottlerocket", BootstrapOptions(CLUSTER, kubelet=kubelet))
    kubernetes = tomllib.loads(text)["settings"]["kubernetes"]
    assert kubernetes["eviction-soft"] == {"memory.available": "500Mi", "nodefs.available": "15%"}
    assert kubernetes["eviction-soft-grace-period"] == {
        "memory.available": "1m0s",
        "nodefs.available": "1m30s",
    }
    assert kubernetes["eviction-max-pod-grace-period"] == 60


def test_bottlerocket_without_soft_eviction_writes_none_of_its_settings() -> None:
    kubernetes = tomllib.loads(user_data_for("Bottlerocket", _options()))["settings"]["kubernetes"]
    assert not {"eviction-soft", "eviction-soft-grace-period", "eviction-max-pod-grace-period"} & set(
        kubernetes
    )
