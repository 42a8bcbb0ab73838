"""AMIs from EC2NodeClass ``amiSelectorTerms``: aliases through the public SSM parameters, the other
terms through DescribeImages (newest image per architecture wins)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwright.aws.clients import AwsClients, error_code
from fleetwright.aws.selectors import tag_filters
from fleetwright.aws.ttlcache import TtlCache
from fleetwright.aws.variants import (
    AMD64,
    ARM64,
    EC2_TO_KUBE_ARCH,
    FAMILY_VARIANTS,
    KUBE_TO_EC2_ARCH,
    NEURON,
    NVIDIA,
    STANDARD,
)
from fleetwright.catalog.os_family import WINDOWS_RELEASES, is_windows
from fleetwright.model.ec2nodeclass import AMISelectorTerm

_CACHE: TtlCache[list[Ami]] = TtlCache()
SSM_BATCH = 10  # GetParameters accepts at most ten names
DEFAULT_OWNERS = ("self", "amazon")
WINDOWS_VARIANT = "windows"  # in alias_parameters only: the AMI boots every amd64 type
WINDOWS_2025_MIN_MINOR = 35  # Windows Server 2025 EKS AMIs exist from Kubernetes 1.35


class AmiResolutionError(Exception):
    """No AMI matched the node class's amiSelectorTerms."""


@dataclass(frozen=True, slots=True)
class Ami:
    """An AMI and the instance types it boots: ``arch`` (amd64/arm64) and ``variant``.

    ``variant`` is ``standard``, ``nvidia`` or ``neuron`` for EKS-optimized AMIs from an alias, None
    for AMIs chosen otherwise (they are offered to every instance type of their architecture).
    """

    id: str
    arch: str
    variant: str | None = None
    name: str = ""
    created: str = ""
    source: str = ""  # the SSM parameter or the selector it was found by


def alias_parameter(family: str, arch: str, variant: str, k8s_version: str, version: str) -> str:
    """The public SSM parameter holding an EKS-optimized AMI id.

    ``version`` is ``latest`` or a pinned release (``v20240807`` for AL2/AL2023, ``v1.20.1`` for
    Bottlerocket).
    """
    ec2_arch = KUBE_TO_EC2_ARCH[arch]
    latest = version == "latest"
    family = family.lower()
    if family == "al2023":
        release = (
            "recommended"
            if latest
            else f"amazon-eks-node-al2023-{ec2_arch}-{variant}-{k8s_version}-{version}"
        )
        prefix = f"/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2023"
        return f"{prefix}/{ec2_arch}/{variant}/{release}/image_id"
    if family == "al2":
        # One "gpu" AMI serves NVIDIA and Neuron instances; arm64 has only the plain AMI.
        kind = "-gpu" if variant in (NVIDIA, NEURON) else ("-arm64" if arch == ARM64 else "")
        release = "recommended" if latest else f"amazon-eks{kind}-node-{k8s_version}-{version}"
        return f"/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2{kind}/{release}/image_id"
    if family == "bottlerocket":
        flavour = "-nvidia" if variant == NVIDIA else ""
        release = "latest" if latest else version.removeprefix("v")
        return f"/aws/service/bottlerocket/aws-k8s-{k8s_version}{flavour}/{ec2_arch}/{release}/image_id"
    raise AmiResolutionError(f"alias family {family!r} has no EKS-optimized AMI parameters")


def windows_alias_parameter(family: str, k8s_version: str) -> str:
    """The public SSM parameter of the EKS-optimized Windows Server Core AMI (amd64 only; Windows
    aliases have only ``latest``)."""
    release = WINDOWS_RELEASES[family.lower()][0]
    image = f"Windows_Server-{release}-English-Core-EKS_Optimized-{k8s_version}"
    return f"/aws/service/ami-windows-latest/{image}/image_id"


def _check_windows_version(family: str, k8s_version: str) -> None:
    minor = k8s_version.partition(".")[2]
    if family.lower() == "windows2025" and minor.isdigit() and int(minor) < WINDOWS_2025_MIN_MINOR:
        raise AmiResolutionError(
            f"Windows Server 2025 requires EKS version 1.{WINDOWS_2025_MIN_MINOR} or higher, "
            f"current version: {k8s_version}"
        )


def alias_parameters(alias: str, k8s_version: str) -> list[tuple[str, str, str]]:
    """``(parameter, arch, variant)`` for every AMI an alias (``al2023@latest``) stands for."""
    family, _, version = alias.partition("@")
    if is_windows(family):
        _check_windows_version(family, k8s_version)
        # One AMI for every amd64 type, GPU ones included (no variant).
        return [(windows_alias_parameter(family, k8s_version), AMD64, WINDOWS_VARIANT)]
    variants = FAMILY_VARIANTS.get(family.lower())
    if variants is None:
        raise AmiResolutionError(f"alias {alias!r}: family {family!r} is not supported")
    order = {AMD64: 0, ARM64: 1, STANDARD: 0, NVIDIA: 1, NEURON: 2}
    return [
        (alias_parameter(family, arch, variant, k8s_version, version), arch, variant)
        for arch, variant in sorted(variants, key=lambda v: (order[v[0]], order[v[1]]))
    ]


def _get_parameters(clients: AwsClients, names: Sequence[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    unique = list(dict.fromkeys(names))
    for start in range(0, len(unique), SSM_BATCH):
        response = clients.ssm.get_parameters(Names=unique[start : start + SSM_BATCH])
        values.update({str(p["Name"]): str(p["Value"]) for p in response.get("Parameters", [])})
    return values


def _resolve_alias(clients: AwsClients, alias: str, k8s_version: str) -> list[Ami]:
    wanted = alias_parameters(alias, k8s_version)
    values = _get_parameters(clients, [name for name, _, _ in wanted])
    amis = [
        Ami(id=values[name], arch=arch, variant=None if variant == WINDOWS_VARIANT else variant, source=name)
        for name, arch, variant in wanted
        if name in values
    ]
    if not amis:
        raise AmiResolutionError(
            f"alias {alias}: none of the SSM parameters exist for Kubernetes {k8s_version} "
            f"(looked for {wanted[0][0]} and {len(wanted) - 1} more)"
        )
    return amis


def _describe_images(clients: AwsClients, **params: Any) -> list[dict[str, Any]]:
    images: list[dict[str, Any]] = []
    for page in clients.ec2.get_paginator("describe_images").paginate(**params):
        images.extend(page.get("Images", []))
    return images


def _images_for_term(clients: AwsClients, term: AMISelectorTerm) -> list[dict[str, Any]]:
    if term.id:
        return _describe_images(clients, Filters=[{"Name": "image-id", "Values": [term.id]}])
    if term.ssm_parameter:
        try:
            image_id = clients.ssm.get_parameter(Name=term.ssm_parameter)["Parameter"]["Value"]
        except Exception as error:
            if error_code(error) == "ParameterNotFound":
                return []
            raise
        return _describe_images(clients, Filters=[{"Name": "image-id", "Values": [str(image_id)]}])
    filters = tag_filters(term.tags)
    if term.name:
        filters.append({"Name": "name", "Values": [term.name]})
    owners = [term.owner] if term.owner else list(DEFAULT_OWNERS) if term.name else []
    params: dict[str, Any] = {"Filters": filters}
    if owners:
        params["Owners"] = owners
    return _describe_images(clients, **params)


def newest_per_arch(images: Iterable[dict[str, Any]], source: str = "") -> list[Ami]:
    """The newest image (by CreationDate, then name) of each supported architecture."""
    best: dict[str, dict[str, Any]] = {}
    for image in images:
        arch = EC2_TO_KUBE_ARCH.get(str(image.get("Architecture", "")))
        if arch is None or image.get("State", "available") != "available":
            continue
        current = best.get(arch)
        rank = (str(image.get("CreationDate", "")), str(image.get("Name", "")))
        if current is None or rank > (str(current.get("CreationDate", "")), str(current.get("Name", ""))):
            best[arch] = image
    return [
        Ami(
            id=str(image["ImageId"]),
            arch=arch,
            name=str(image.get("Name", "")),
            created=str(image.get("CreationDate", "")),
            source=source,
        )
        for arch, image in sorted(best.items())
    ]


def resolve_amis(clients: AwsClients, terms: Sequence[AMISelectorTerm], k8s_version: str) -> list[Ami]:
    """The AMIs the selector terms choose, cached five minutes; raises AmiResolutionError when none.

    An alias yields one AMI per architecture × variant its family publishes for ``k8s_version``
    (``1.31``); other terms are ORed and the newest matching image per architecture wins.
    """
    key = (clients.region, k8s_version, tuple(term.model_dump_json() for term in terms))

    def compute() -> list[Ami]:
        alias = next((term.alias for term in terms if term.alias), None)
        if alias:
            return _resolve_alias(clients, alias, k8s_version)
        images: dict[str, dict[str, Any]] = {}
        for term in terms:
            images.update({str(i["ImageId"]): i for i in _images_for_term(clients, term)})
        amis = newest_per_arch(images.values(), source="amiSelectorTerms")
        if not amis:
            raise AmiResolutionError("no available amd64 or arm64 image matches the amiSelectorTerms")
        return amis

    return _CACHE.get_or_compute(key, compute)
