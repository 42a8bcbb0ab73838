"""Launch templates: one per distinct (node class settings, AMI, user data), named by a hash of their
content, created on first use, reused afterwards, deleted by :func:`delete_launch_template`.

A template is this cluster's when it carries the cluster tag and the node class tag the controller writes
(:data:`~fleetwright.aws.tags.LAUNCH_TEMPLATE_CONTROLLER_TAG`): one found under our name without them
(made by someone else, who chose its data) is never launched from, listed for collection or deleted."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from fleetwright.aws.amis import Ami
from fleetwright.aws.clients import AwsClients, error_code
from fleetwright.aws.networkinterfaces import network_interfaces
from fleetwright.aws.tags import (
    CLUSTER_TAG,
    LAUNCH_TEMPLATE_CONTROLLER_TAG,
    from_aws,
    ownership_problem,
    tag_specifications,
)
from fleetwright.cloud.instances import LaunchTemplateInfo
from fleetwright.model.ec2nodeclass import BlockDeviceMapping, CPUOptions, EC2NodeClassSpec
from fleetwright.model.quantity import parse_quantity

log = logging.getLogger(__name__)

NAME_PREFIX = "fleetwright"
GIB = 2**30
DEFAULT_ROOT_GIB = 20
BOTTLEROCKET_OS_GIB = 4
WINDOWS_ROOT_GIB = 50


def _default_ebs(size_gib: int) -> dict[str, Any]:
    return {"VolumeSize": size_gib, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}


def default_block_device_mappings(family: str) -> list[dict[str, Any]]:
    """20 GiB encrypted gp3 root volume; Bottlerocket adds its 4 GiB OS volume in front of the data one;
    Windows AMIs boot from a 50 GiB ``/dev/sda1``."""
    if family.lower().startswith("windows"):
        return [{"DeviceName": "/dev/sda1", "Ebs": _default_ebs(WINDOWS_ROOT_GIB)}]
    if family.lower() == "bottlerocket":
        return [
            {"DeviceName": "/dev/xvda", "Ebs": _default_ebs(BOTTLEROCKET_OS_GIB)},
            {"DeviceName": "/dev/xvdb", "Ebs": _default_ebs(DEFAULT_ROOT_GIB)},
        ]
    return [{"DeviceName": "/dev/xvda", "Ebs": _default_ebs(DEFAULT_ROOT_GIB)}]


def block_device_mapping(mapping: BlockDeviceMapping) -> dict[str, Any]:
    """One EC2 ``BlockDeviceMapping`` from the node class's (sizes rounded up to whole GiB)."""
    result: dict[str, Any] = {"DeviceName": mapping.device_name or "/dev/xvda"}
    ebs = mapping.ebs
    if ebs is not None:
        fields: dict[str, Any] = {}
        if ebs.volume_size:
            fields["VolumeSize"] = math.ceil(parse_quantity(ebs.volume_size) / GIB)
        for name, value in (
            ("VolumeType", ebs.volume_type),
            ("Iops", ebs.iops),
            ("Throughput", ebs.throughput),
            ("Encrypted", ebs.encrypted),
            ("KmsKeyId", ebs.kms_key_id),
            ("DeleteOnTermination", ebs.delete_on_termination),
            ("SnapshotId", ebs.snapshot_id),
            ("VolumeInitializationRate", ebs.volume_initialization_rate),
        ):
            if value is not None:
                fields[name] = value
        fields.setdefault("DeleteOnTermination", True)
        result["Ebs"] = fields
    return result


def cpu_options(options: CPUOptions | None) -> dict[str, str] | None:
    """``CpuOptions`` for ``cpuOptions`` (nested virtualization), or None when unset."""
    if options is None or options.nested_virtualization is None:
        return None
    return {"NestedVirtualization": options.nested_virtualization}


def placement(tenancy: str = "default", group_id: str = "", partition: int | None = None) -> dict[str, Any]:
    """``Placement``: the tenancy, and the placement group (and partition) to launch into.

    Empty for the EC2 defaults (shared tenancy, no group), so such templates keep their names.
    """
    fields: dict[str, Any] = {}
    if tenancy != "default":
        fields["Tenancy"] = tenancy
    if group_id:
        fields["GroupId"] = group_id
        if partition:
            fields["PartitionNumber"] = partition
    return fields


# What a launch creates besides the fleet and its instances; CreateFleet (instant) may tag only those two.
TEMPLATE_TAGGED_RESOURCES = ("volume", "network-interface", "spot-instances-request")


def launch_template_data(
    spec: EC2NodeClassSpec,
    ami: Ami,
    user_data: str,
    security_groups: Sequence[str],
    instance_profile: str,
    cluster_tags: Mapping[str, str] | None = None,
    *,
    placement_fields: Mapping[str, Any] | None = None,
    efa_count: int = 0,
) -> dict[str, Any]:
    """``LaunchTemplateData`` for one AMI of a node class.

    ``cluster_tags`` go onto the volumes, network interfaces and spot requests the launch creates: an
    ``instant`` CreateFleet tags only the fleet and its instances, so the IAM policy's requirement of this
    cluster's tag on every resource a launch creates is met through the template. ``placement_fields``
    (see :func:`placement`) become ``Placement``; ``efa_count`` EFA interfaces are described when the
    node class describes none itself.
    """
    family = spec.resolved_ami_family()
    metadata = spec.metadata_options
    data: dict[str, Any] = {
        "ImageId": ami.id,
        "IamInstanceProfile": {"Name": instance_profile},
        "MetadataOptions": {
            "HttpEndpoint": metadata.http_endpoint,
            "HttpTokens": metadata.http_tokens,
            "HttpPutResponseHopLimit": metadata.http_put_response_hop_limit,
            "HttpProtocolIpv6": metadata.http_protocol_ipv6,
        },
        "BlockDeviceMappings": (
            [block_device_mapping(m) for m in spec.block_device_mappings]
            if spec.block_device_mappings
            else default_block_device_mappings(family)
        ),
        "Monitoring": {"Enabled": bool(spec.detailed_monitoring)},
    }
    interfaces = network_interfaces(spec, security_groups, efa_count)
    if interfaces is not None:
        # EC2 refuses groups both here and on interfaces: described interfaces carry them.
        data["NetworkInterfaces"] = interfaces
    else:
        data["SecurityGroupIds"] = list(security_groups)
    cpu = cpu_options(spec.cpu_options)
    if cpu is not None:
        data["CpuOptions"] = cpu
    if placement_fields:
        data["Placement"] = dict(placement_fields)
    if user_data:
        data["UserData"] = base64.b64encode(user_data.encode()).decode()
    if cluster_tags:
        data["TagSpecifications"] = tag_specifications(TEMPLATE_TAGGED_RESOURCES, cluster_tags)
    return data


def template_name(cluster: str, data: Mapping[str, Any]) -> str:
    """``fleetwright/<cluster>/<hash of the template data>``: equal settings share one template."""
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:24]
    return f"{NAME_PREFIX}/{cluster}/{digest}"[:128]


class LaunchTemplates:
    """Creates launch templates on first use and remembers which exist (per process)."""

    def __init__(self, clients: AwsClients, cluster: str) -> None:
        self.clients = clients
        self.cluster = cluster
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def ensure(self, data: Mapping[str, Any], tags: Mapping[str, str]) -> str:
        """The name of a launch template with ``data``, creating it when it does not exist yet."""
        name = template_name(self.cluster, data)
        with self._lock:
            if name in self._known:
                return name
        if not self._exists(name):
            try:
                self.clients.ec2.create_launch_template(
                    LaunchTemplateName=name,
                    LaunchTemplateData=dict(data),
                    TagSpecifications=tag_specifications(("launch-template",), tags),
                )
                log.info("created launch template %s", name)
            except Exception as error:
                # Another Lambda created it between our check and our call: fine once its tags say so.
                if error_code(error) != "InvalidLaunchTemplateName.AlreadyExistsException":
                    raise
                self._exists(name)
        with self._lock:
            self._known.add(name)
        return name

    def _exists(self, name: str) -> bool:
        """True when the template exists and is this cluster's; raises ``ValueError`` (launching nothing
        from it) when it exists without our tags."""
        try:
            answer = self.clients.ec2.describe_launch_templates(LaunchTemplateNames=[name])
        except Exception as error:
            if error_code(error) in (
                "InvalidLaunchTemplateName.NotFoundException",
                "InvalidLaunchTemplateId.NotFound",
            ):
                return False
            raise
        for entry in answer.get("LaunchTemplates", []):
            why = template_ownership_problem(entry, self.cluster)
            if why:
                log.warning("refusing launch template %s: %s", name, why)
                raise ValueError(f"refusing to launch from launch template {name}: {why}")
        return True

    def forget(self, names: Iterable[str]) -> None:
        """Drop names from the known set (after they were deleted)."""
        with self._lock:
            self._known.difference_update(names)


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def template_ownership_problem(entry: Mapping[str, Any], cluster: str) -> str:
    """Why a ``DescribeLaunchTemplates`` entry is not ``cluster``'s ("" when it is)."""
    return ownership_problem(from_aws(entry.get("Tags")), cluster, LAUNCH_TEMPLATE_CONTROLLER_TAG)


def describe_launch_templates(clients: AwsClients, cluster: str) -> list[LaunchTemplateInfo]:
    """This cluster's launch templates (by the ownership tags), sorted by name; one carrying the cluster
    tag without the node class tag is left out, with a warning."""
    found: list[LaunchTemplateInfo] = []
    paginator = clients.ec2.get_paginator("describe_launch_templates")
    for page in paginator.paginate(Filters=[{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]}]):
        for entry in page.get("LaunchTemplates", []):
            why = template_ownership_problem(entry, cluster)
            if why:
                log.warning("launch template %s left alone: %s", entry.get("LaunchTemplateName"), why)
                continue
            found.append(
                LaunchTemplateInfo(
                    id=str(entry["LaunchTemplateId"]),
                    name=str(entry["LaunchTemplateName"]),
                    created_at=_epoch(entry.get("CreateTime", "")),
                )
            )
    return sorted(found, key=lambda t: t.name)


def launch_template_image(clients: AwsClients, template_id: str) -> str:
    """The ImageId of the template's latest version ("" when it names none)."""
    answer = clients.ec2.describe_launch_template_versions(LaunchTemplateId=template_id, Versions=["$Latest"])
    for version in answer.get("LaunchTemplateVersions", []):
        return str((version.get("LaunchTemplateData") or {}).get("ImageId", ""))
    return ""


def delete_launch_template(clients: AwsClients, cluster: str, name: str) -> bool:
    """Delete one launch template after checking it carries this cluster's ownership tags; False when it was
    already gone. Raises ``ValueError`` for a template that is not this cluster's."""
    try:
        answer = clients.ec2.describe_launch_templates(LaunchTemplateNames=[name])
    except Exception as error:
        if error_code(error) in (
            "InvalidLaunchTemplateName.NotFoundException",
            "InvalidLaunchTemplateId.NotFound",
        ):
            return False
        raise
    for entry in answer.get("LaunchTemplates", []):
        why = template_ownership_problem(entry, cluster)
        if why:
            raise ValueError(f"refusing to delete launch template {name}: {why}")
    try:
        clients.ec2.delete_launch_template(LaunchTemplateName=name)
    except Exception as error:
        if error_code(error) != "InvalidLaunchTemplateName.NotFoundException":
            raise
        return False
    return True
