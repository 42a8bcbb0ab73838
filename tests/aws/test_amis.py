"""AMI resolution: aliases through the public SSM parameters, other terms through DescribeImages."""

from __future__ import annotations

import datetime

import pytest

from fleetwright.aws.amis import AmiResolutionError, alias_parameter, alias_parameters, resolve_amis
from fleetwright.model.ec2nodeclass import AMISelectorTerm
from tests.aws.fakes import seed_ssm_parameter
from tests.support.aws import Aws, SeededAmis


def test_al2023_alias_resolves_one_ami_per_architecture_and_variant(aws: Aws, amis: SeededAmis) -> None:
    found = resolve_amis(aws.clients, [AMISelectorTerm(alias="al2023@latest")], "1.31")
    assert {(a.arch, a.variant): a.id for a in found} == amis.ids
    assert {a.source for a in found} >= {
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id",
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/nvidia/recommended/image_id",
    }


def test_alias_with_only_some_parameters_published_resolves_those(aws: Aws) -> None:
    seed_ssm_parameter("/aws/service/bottlerocket/aws-k8s-1.30/arm64/latest/image_id", "ami-0000000000000arm")
    found = resolve_amis(aws.clients, [AMISelectorTerm(alias="bottlerocket@latest")], "1.30")
    assert [(a.id, a.arch, a.variant) for a in found] == [("ami-0000000000000arm", "arm64", "standard")]


def test_alias_without_any_parameter_is_an_error_naming_the_alias(aws: Aws) -> None:
    with pytest.raises(AmiResolutionError, match=r"al2023@latest.*Kubernetes 1\.29"):
        resolve_amis(aws.clients, [AMISelectorTerm(alias="al2023@latest")], "1.29")


def test_pinned_alias_versions_map_to_release_parameters() -> None:
    assert alias_parameter("al2023", "arm64", "standard", "1.31", "v20241011") == (
        "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/"
        "amazon-eks-node-al2023-arm64-standard-1.31-v20241011/image_id"
    )
    assert alias_parameter("bottlerocket", "amd64", "nvidia", "1.31", "v1.26.1") == (
        "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.26.1/image_id"
    )
    assert alias_parameter("al2", "amd64", "neuron", "1.29", "latest") == (
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-gpu/recommended/image_id"
    )
    # AL2 has no arm64 GPU AMI, so its alias asks for four parameters (the GPU one serves two variants).
    assert len(alias_parameters("al2@latest", "1.29")) == 4
    assert len({p for p, _, _ in alias_parameters("al2@latest", "1.29")}) == 3


def test_name_tag_and_ssm_terms_pick_the_newest_image_per_architecture(aws: Aws) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    ec2 = aws.clients.ec2
    ids = {}
    for name, arch, created in (
        ("team-node-2024", "x86_64", datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC)),
        ("team-node-2025", "x86_64", datetime.datetime(2025, 5, 1, tzinfo=datetime.UTC)),
        ("team-node-arm-2024", "arm64", datetime.datetime(2024, 6, 1, tzinfo=datetime.UTC)),
    ):
        image = ec2.register_image(Name=name, Architecture=arch, RootDeviceName="/dev/xvda")["ImageId"]
        ec2.create_tags(Resources=[image], Tags=[{"Key": "team", "Value": "nodes"}])
        stored = ec2_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].amis[image]
        stored.creation_date, stored.architecture = created, arch  # moto's RegisterImage drops both
        ids[name] = image

    by_name = resolve_amis(aws.clients, [AMISelectorTerm(name="team-node-*", owner="self")], "1.31")
    assert {(a.arch, a.id) for a in by_name} == {
        ("amd64", ids["team-node-2025"]),
        ("arm64", ids["team-node-arm-2024"]),
    }
    assert all(a.variant is None for a in by_name)
    by_tags = resolve_amis(aws.clients, [AMISelectorTerm(tags={"team": "nodes"})], "1.31")
    assert {a.id for a in by_tags} == {ids["team-node-2025"], ids["team-node-arm-2024"]}
    aws.clients.ssm.put_parameter(Name="/team/node-ami", Value=ids["team-node-2024"], Type="String")
    by_ssm = resolve_amis(aws.clients, [AMISelectorTerm(ssm_parameter="/team/node-ami")], "1.31")
    assert [(a.id, a.arch) for a in by_ssm] == [(ids["team-node-2024"], "amd64")]


def test_windows_alias_resolves_the_windows_server_core_parameter(aws: Aws) -> None:
    name = "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id"
    assert alias_parameters("windows2022@latest", "1.31") == [(name, "amd64", "windows")]
    seed_ssm_parameter(name, "ami-0000000000000win")
    found = resolve_amis(aws.clients, [AMISelectorTerm(alias="windows2022@latest")], "1.31")
    # One amd64 AMI with no variant: it boots every amd64 type, GPU ones too.
    assert [(a.id, a.arch, a.variant, a.source) for a in found] == [
        ("ami-0000000000000win", "amd64", None, name)
    ]
    assert alias_parameters("windows2019@latest", "1.31")[0][0] == name.replace("2022", "2019")


def test_windows2025_alias_needs_kubernetes_1_35(aws: Aws) -> None:
    with pytest.raises(AmiResolutionError, match=r"Windows Server 2025 requires EKS version 1\.35"):
        resolve_amis(aws.clients, [AMISelectorTerm(alias="windows2025@latest")], "1.34")
    assert alias_parameters("windows2025@latest", "1.35")[0][0] == (
        "/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.35/image_id"
    )


def test_alias_term_with_ssm_parameter_resolves_the_alias_alone_as_karpenter_does(
    aws: Aws, amis: SeededAmis
) -> None:
    # Karpenter's CRD admits ssmParameter beside alias, and its AMI provider then resolves the alias only.
    aws.clients.ssm.put_parameter(Name="/team/node-ami", Value="ami-0000000000000bad", Type="String")
    term = AMISelectorTerm.model_validate({"alias": "al2023@latest", "ssmParameter": "/team/node-ami"})
    found = resolve_amis(aws.clients, [term], "1.31")
    assert {(a.arch, a.variant): a.id for a in found} == amis.ids
