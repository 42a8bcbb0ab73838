"""EC2NodeClass (karpenter.k8s.aws/v1): what a valid document means, and the CRD rules enforced."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.errors import DocumentError, DocumentRef
from fleetwright.model.karpenter import parse_karpenter_document
from fleetwright.model.kubelet import KubeletOverrides
from tests.model.karpenter_docs import parse_fixture


def documented() -> EC2NodeClass:
    return parse_fixture("ec2nodeclasses-v1.yaml", 0).nodeclasses[0]


def pinned() -> EC2NodeClass:
    return parse_fixture("ec2nodeclasses-v1.yaml", 1).nodeclasses[0]


def test_alias_gives_the_ami_family() -> None:
    nodeclass = documented()
    assert nodeclass.name == "default"
    assert nodeclass.spec.ami_family is None
    assert nodeclass.spec.resolved_ami_family() == "AL2023"
    assert nodeclass.spec.role == "KarpenterNodeRole-demo"


def test_kubelet_overrides_are_parsed_to_integer_units() -> None:
    assert documented().kubelet_overrides() == KubeletOverrides(
        max_pods=20,
        pods_per_core=2,
        kube_reserved={"cpu": 200, "memory": 100 * 2**20, "ephemeral-storage": 3 * 2**30},
        system_reserved={"cpu": 100, "memory": 100 * 2**20, "ephemeral-storage": 2**30},
        eviction_hard={"memory.available": "5%", "nodefs.available": "10%"},
        eviction_soft={"memory.available": "500Mi"},
        instance_store_raid0=True,  # the documented class sets instanceStorePolicy: RAID0
    )


def test_no_kubelet_means_eks_defaults() -> None:
    assert pinned().kubelet_overrides() == KubeletOverrides()


def test_selector_terms_block_devices_and_flags() -> None:
    spec = documented().spec
    assert [t.id for t in spec.subnet_selector_terms] == [None, "subnet-09fa4a0a8f233a921"]
    assert spec.subnet_selector_terms[0].tags == {"karpenter.sh/discovery": "demo", "environment": "test"}
    assert [t.name for t in spec.security_group_selector_terms] == [None, "my-security-group", None]
    root = spec.block_device_mappings[0] if spec.block_device_mappings else None
    assert root is not None and root.root_volume and root.ebs is not None
    assert root.ebs.volume_size_bytes() == 100 * 2**30
    assert root.ebs.kms_key_id is not None and root.ebs.kms_key_id.startswith("arn:aws:kms:")
    assert spec.detailed_monitoring is True
    assert spec.associate_public_ip_address is False
    assert spec.instance_store_policy == "RAID0"
    assert spec.kubelet is not None and spec.kubelet.cluster_dns == ["10.0.1.100"]


def test_metadata_options_default_to_imdsv2_with_hop_limit_one() -> None:
    options = documented().spec.metadata_options
    assert (options.http_endpoint, options.http_protocol_ipv6) == ("enabled", "disabled")
    assert (options.http_put_response_hop_limit, options.http_tokens) == (1, "required")
    assert pinned().spec.metadata_options.http_tokens == "optional"
    assert pinned().spec.metadata_options.http_put_response_hop_limit == 1


def test_explicit_amis_with_family_and_instance_profile() -> None:
    spec = pinned().spec
    assert spec.resolved_ami_family() == "Bottlerocket"
    assert spec.instance_profile == "KarpenterNodeInstanceProfile"
    assert [(t.id, t.name, t.owner, t.ssm_parameter) for t in spec.ami_selector_terms] == [
        ("ami-0123456789abcdef0", None, None, None),
        (None, "my-bottlerocket-*", "123456789012", None),
        (None, None, None, "/my/ami/parameter"),
    ]
    assert spec.block_device_mappings is not None
    assert spec.block_device_mappings[0].ebs is not None
    assert spec.block_device_mappings[0].ebs.volume_size_bytes() is None


def base_spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": "KarpenterNodeRole",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    }
    spec.update(changes)
    return spec


def problems_of(spec: dict[str, Any]) -> dict[str, str]:
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "nc"},
        "spec": spec,
    }
    with pytest.raises(DocumentError) as caught:
        parse_karpenter_document(doc, DocumentRef("nc.yaml"))
    return dict(caught.value.problems)


@pytest.mark.parametrize(
    ("changes", "path", "text"),
    [
        ({"amiSelectorTerms": [{"alias": "al2023"}]}, "spec.amiSelectorTerms[0].alias", "family@version"),
        ({"amiSelectorTerms": [{"alias": "ubuntu@latest"}]}, "spec.amiSelectorTerms[0].alias", "not one of"),
        (
            {"amiSelectorTerms": [{"alias": "windows2022@v1"}]},
            "spec.amiSelectorTerms[0].alias",
            "only support",
        ),
        ({"amiSelectorTerms": [{"owner": "self"}]}, "spec.amiSelectorTerms[0]", "needs one of alias, id"),
        (
            {"amiSelectorTerms": [{"id": "ami-1", "name": "x"}]},
            "spec.amiSelectorTerms[0]",
            "id cannot be combined",
        ),
        ({"amiSelectorTerms": [{"id": "i-123"}]}, "spec.amiSelectorTerms[0].id", "invalid AMI id"),
        ({"amiSelectorTerms": []}, "spec.amiSelectorTerms", "at least 1 item"),
        ({"subnetSelectorTerms": [{}]}, "spec.subnetSelectorTerms[0]", "needs tags or id"),
        (
            {"subnetSelectorTerms": [{"id": "subnet-1", "tags": {"a": "b"}}]},
            "spec.subnetSelectorTerms",
            "id and tags cannot be combined in every term",
        ),
        (
            {"subnetSelectorTerms": [{"tags": {"a": ""}}]},
            "spec.subnetSelectorTerms[0].tags",
            "empty tag keys or values",
        ),
        (
            {"securityGroupSelectorTerms": [{"id": "sg-1", "name": "web"}]},
            "spec.securityGroupSelectorTerms",
            "id and other fields cannot be combined in every term",
        ),
        ({"tags": {"kubernetes.io/cluster/demo": "owned"}}, "spec.tags", "restricted"),
        ({"tags": {"karpenter.sh/nodepool": "x"}}, "spec.tags", "restricted"),
        ({"amiFamily": "Ubuntu"}, "spec.amiFamily", "(got 'Ubuntu')"),
        ({"role": ""}, "spec.role", "may not be empty"),
        ({"instanceStorePolicy": "RAID1"}, "spec.instanceStorePolicy", "(got 'RAID1')"),
        (
            {"metadataOptions": {"httpPutResponseHopLimit": 65}},
            "spec.metadataOptions.httpPutResponseHopLimit",
            "64",
        ),
        ({"metadataOptions": {"httpTokens": "maybe"}}, "spec.metadataOptions.httpTokens", "(got 'maybe')"),
        (
            {"blockDeviceMappings": [{"rootVolume": True, "ebs": {"volumeSize": "20Gi"}}] * 2},
            "spec.blockDeviceMappings",
            "at most one blockDeviceMapping may set rootVolume",
        ),
        (
            {"blockDeviceMappings": [{"ebs": {"volumeType": "gp3"}}]},
            "spec.blockDeviceMappings[0].ebs",
            "volumeSize or",
        ),
        (
            {"blockDeviceMappings": [{"ebs": {"volumeSize": "100TB"}}]},
            "spec.blockDeviceMappings[0].ebs.volumeSize",
            "Gi",
        ),
        (
            {"kubelet": {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}},
            "spec.kubelet",
            "must be greater than imageGCLowThresholdPercent",
        ),
        (
            {"kubelet": {"evictionSoft": {"memory.available": "1Gi"}}},
            "spec.kubelet",
            "need a matching evictionSoftGrace",
        ),
        (
            {"kubelet": {"kubeReserved": {"gpu": "1"}}},
            "spec.kubelet.kubeReserved",
            "unsupported keys ['gpu']",
        ),
        ({"kubelet": {"systemReserved": {"cpu": "-1"}}}, "spec.kubelet.systemReserved", "cannot be negative"),
        (
            {"kubelet": {"evictionHard": {"memory.available": "lots"}}},
            "spec.kubelet.evictionHard",
            "neither a percentage",
        ),
        ({"kubelet": {"maxPods": -1}}, "spec.kubelet.maxPods", "greater than or equal to 0"),
        ({"kubelet": {"maxPods": "110"}}, "spec.kubelet.maxPods", "valid integer (got '110')"),
        ({"userdata": "#!/bin/bash"}, "spec.userdata", "did you mean 'userData'?"),
    ],
)
def test_node_class_rules(changes: dict[str, Any], path: str, text: str) -> None:
    problems = problems_of(base_spec(**changes))
    assert path in problems, problems
    assert text in problems[path]


def test_custom_family_may_use_an_alias_for_discovery() -> None:
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "custom"},
        "spec": base_spec(amiFamily="Custom", amiSelectorTerms=[{"alias": "bottlerocket@v1.20.3"}]),
    }
    nodeclass = parse_karpenter_document(doc, DocumentRef("nc.yaml")).nodeclasses[0]
    assert nodeclass.spec.resolved_ami_family() == "Custom"
    assert nodeclass.spec.ami_selector_terms[0].alias_family() == "Bottlerocket"


def test_round_trip_through_yaml_names() -> None:
    nodeclass = documented()
    text = yaml.safe_dump(nodeclass.model_dump(by_alias=True, exclude_none=True, mode="json"))
    assert "kmsKeyID" in text and "associatePublicIPAddress" in text and "imageGCHighThresholdPercent" in text
    assert EC2NodeClass.model_validate(yaml.safe_load(text)) == nodeclass


def test_alias_with_ssm_parameter_is_admitted_as_karpenters_crd_admits_it() -> None:
    spec = base_spec(amiSelectorTerms=[{"alias": "al2023@latest", "ssmParameter": "/team/node-ami"}])
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "nc"},
        "spec": spec,
    }
    nodeclass = parse_karpenter_document(doc, DocumentRef("nc.yaml")).nodeclasses[0]
    assert nodeclass.spec.resolved_ami_family() == "AL2023"


@pytest.mark.parametrize(
    "other", [{"id": "ami-0123456789abcdef0"}, {"name": "x-*"}, {"owner": "self"}, {"tags": {"a": "b"}}]
)
def test_alias_with_id_name_owner_or_tags_is_refused_as_karpenters_crd_refuses_it(
    other: dict[str, Any],
) -> None:
    problems = problems_of(base_spec(amiSelectorTerms=[{"alias": "al2023@latest", **other}]))
    assert "alias cannot be combined with id, name, owner or tags" in problems["spec.amiSelectorTerms[0]"]


def test_cluster_dns_takes_any_string_as_karpenters_crd_does() -> None:
    spec = base_spec(kubelet={"clusterDNS": ["kube-dns.kube-system.svc", "10.100.0.10"]})
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "nc"},
        "spec": spec,
    }
    nodeclass = parse_karpenter_document(doc, DocumentRef("nc.yaml")).nodeclasses[0]
    assert nodeclass.spec.kubelet is not None
    assert nodeclass.spec.kubelet.cluster_dns == ["kube-dns.kube-system.svc", "10.100.0.10"]


@pytest.mark.parametrize(
    ("term", "path"),
    [
        (
            {"capacityReservationSelectorTerms": [{"tags": {"a": "b"}, "ownerID": 123456789012}]},
            "spec.capacityReservationSelectorTerms[0].ownerID",
        ),
        (
            {"amiFamily": "AL2023", "amiSelectorTerms": [{"name": "x-*", "owner": 123456789012}]},
            "spec.amiSelectorTerms[0].owner",
        ),
    ],
)
def test_unquoted_numeric_owner_is_refused_as_the_api_server_refuses_an_integer_for_a_string(
    term: dict[str, Any], path: str
) -> None:
    problems = problems_of(base_spec(**term))
    assert problems[path] == "expected a string, got 123456789012 (quote it in YAML)"
