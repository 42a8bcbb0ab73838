"""EC2NodeClass launch fields in the launch template and CreateFleet request: network interfaces, IP
prefixes, connection tracking, CPU options, volume initialization rate, tenancy, placement groups and
``context``."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.aws.amis import Ami
from fleetwright.aws.clients import error_code
from fleetwright.aws.fleet import FleetLauncher
from fleetwright.aws.instancetypes import list_instance_types
from fleetwright.aws.launchtemplates import launch_template_data, placement, template_name
from fleetwright.aws.nodeclass import NodeClassResolver, UnresolvedNodeClassError
from fleetwright.aws.provider import AwsProvider
from fleetwright.cloud.launch import LaunchRequest
from fleetwright.local.aws_fakes import PlacementGroups
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import EC2NodeClass
from tests.aws.strict import LaunchTemplateFieldRules
from tests.support.aws import CLUSTER, Aws, SeededAmis, node_class

AMI = Ami("ami-0123456789abcdef0", "amd64", "standard")
TYPES = ("m5.large", "m5.xlarge")


def _data(**spec: Any) -> dict[str, Any]:
    return launch_template_data(node_class(**spec).spec, AMI, "", ["sg-1", "sg-2"], "profile")


def test_node_class_interfaces_carry_the_groups_and_efa_only_ones_carry_no_addresses() -> None:
    data = _data(
        networkInterfaces=[
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
            {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
        ],
        ipPrefixCount=2,
        associatePublicIPAddress=False,
        connectionTracking={"tcpEstablishedTimeout": 3600, "udpTimeout": 45},
    )
    assert "SecurityGroupIds" not in data
    assert data["NetworkInterfaces"] == [
        {
            "NetworkCardIndex": 0,
            "DeviceIndex": 0,
            "InterfaceType": "interface",
            "Groups": ["sg-1", "sg-2"],
            "Ipv4PrefixCount": 2,
            "AssociatePublicIpAddress": False,
            "ConnectionTrackingSpecification": {"TcpEstablishedTimeout": 3600, "UdpTimeout": 45},
        },
        {"NetworkCardIndex": 1, "DeviceIndex": 0, "InterfaceType": "efa-only", "Groups": ["sg-1", "sg-2"]},
    ]


def test_prefixes_and_connection_tracking_alone_describe_the_primary_interface() -> None:
    data = _data(ipPrefixCount=1, connectionTracking={"udpStreamTimeout": 120})
    assert data["NetworkInterfaces"] == [
        {
            "DeviceIndex": 0,
            "Groups": ["sg-1", "sg-2"],
            "Ipv4PrefixCount": 1,
            "ConnectionTrackingSpecification": {"UdpStreamTimeout": 120},
        }
    ]
    assert "SecurityGroupIds" not in data
    plain = _data()
    assert plain["SecurityGroupIds"] == ["sg-1", "sg-2"]
    assert "NetworkInterfaces" not in plain


def test_efa_interfaces_one_per_card_when_asked_for() -> None:
    spec = node_class(ipPrefixCount=3).spec
    data = launch_template_data(spec, AMI, "", ["sg-1"], "profile", efa_count=2)
    assert data["NetworkInterfaces"] == [
        {
            "NetworkCardIndex": 0,
            "DeviceIndex": 0,
            "InterfaceType": "efa",
            "Groups": ["sg-1"],
            "Ipv4PrefixCount": 3,
        },
        {
            "NetworkCardIndex": 1,
            "DeviceIndex": 1,
            "InterfaceType": "efa",
            "Groups": ["sg-1"],
            "Ipv4PrefixCount": 3,
        },
    ]


def test_cpu_options_volume_initialization_rate_and_placement() -> None:
    spec = node_class(
        cpuOptions={"nestedVirtualization": "enabled"},
        blockDeviceMappings=[
            {
                "deviceName": "/dev/xvdb",
                "ebs": {"snapshotID": "snap-0123456789abcdef0", "volumeInitializationRate": 200},
            }
        ],
    ).spec
    data = launch_template_data(
        spec, AMI, "", ["sg-1"], "profile", placement_fields=placement("dedicated", "pg-0abc", 3)
    )
    assert data["CpuOptions"] == {"NestedVirtualization": "enabled"}
    assert data["BlockDeviceMappings"][0]["Ebs"] == {
        "SnapshotId": "snap-0123456789abcdef0",
        "VolumeInitializationRate": 200,
        "DeleteOnTermination": True,
    }
    assert data["Placement"] == {"Tenancy": "dedicated", "GroupId": "pg-0abc", "PartitionNumber": 3}
    assert placement() == {}
    assert placement("default", "pg-0abc", None) == {"GroupId": "pg-0abc"}


def test_each_launch_field_changes_the_template_name() -> None:
    base = template_name(CLUSTER, _data())
    variants = [
        _data(ipPrefixCount=1),
        _data(connectionTracking={"udpTimeout": 30}),
        _data(cpuOptions={"nestedVirtualization": "enabled"}),
        _data(networkInterfaces=[{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]),
        _data(
            blockDeviceMappings=[
                {"ebs": {"snapshotID": "snap-0123456789abcdef0", "volumeInitializationRate": 100}}
            ]
        ),
        launch_template_data(
            node_class().spec, AMI, "", ["sg-1", "sg-2"], "profile", placement_fields=placement("dedicated")
        ),
    ]
    names = {template_name(CLUSTER, v) for v in variants}
    assert base not in names and len(names) == len(variants)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (
            {"SecurityGroupIds": ["sg-1"], "NetworkInterfaces": [{"DeviceIndex": 0, "Groups": ["sg-1"]}]},
            "InvalidParameterCombination",
        ),
        ({"NetworkInterfaces": [{"DeviceIndex": 0}, {"DeviceIndex": 0}]}, "InvalidParameterValue"),
        (
            {
                "NetworkInterfaces": [
                    {
                        "DeviceIndex": 0,
                        "NetworkCardIndex": 1,
                        "InterfaceType": "efa-only",
                        "Ipv4PrefixCount": 1,
                    }
                ]
            },
            "InvalidParameterCombination",
        ),
        (
            {
                "NetworkInterfaces": [
                    {"DeviceIndex": 0, "ConnectionTrackingSpecification": {"UdpTimeout": 90}}
                ]
            },
            "InvalidParameterValue",
        ),
        ({"CpuOptions": {"NestedVirtualization": "on"}}, "InvalidParameterValue"),
        ({"Placement": {"PartitionNumber": 2}}, "InvalidParameterCombination"),
        (
            {
                "BlockDeviceMappings": [
                    {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeInitializationRate": 150}}
                ]
            },
            "InvalidParameterCombination",
        ),
    ],
)
def test_ec2_refuses_launch_template_field_mistakes(aws: Aws, data: dict[str, Any], code: str) -> None:
    rule = LaunchTemplateFieldRules()
    rule.install(aws.clients.ec2)
    try:
        with pytest.raises(Exception) as refused:
            aws.clients.ec2.create_launch_template(
                LaunchTemplateName="refused", LaunchTemplateData={"ImageId": AMI.id, **data}
            )
        assert error_code(refused.value) == code
    finally:
        rule.uninstall()


# ------------------------------------------------------------------------------------------ launches


def _request(aws: Aws, nc: EC2NodeClass, labels: dict[str, str] | None = None) -> LaunchRequest:
    catalog = {t.name: t for t in list_instance_types(aws.clients, unavailable=aws.unavailable)}
    return LaunchRequest(
        nodeclaim="claim-1",
        nodepool="general",
        instance_types=tuple(catalog[n] for n in TYPES),
        capacity_types=("on-demand",),
        labels=dict(labels or {}),
        node_class=nc,
        node_class_name=nc.name,
    )


def _launcher(aws: Aws) -> FleetLauncher:
    return FleetLauncher(
        aws.clients, CLUSTER, NodeClassResolver(aws.clients, aws.cluster), unavailable=aws.unavailable
    )


def _template_data(aws: Aws, name: str) -> dict[str, Any]:
    versions = aws.clients.ec2.describe_launch_template_versions(
        LaunchTemplateName=name, Versions=["$Latest"]
    )
    return dict(versions["LaunchTemplateVersions"][0]["LaunchTemplateData"])


def _groups(aws: Aws) -> PlacementGroups:
    groups = PlacementGroups([])
    groups.install(aws.clients.ec2)
    return groups


def test_context_goes_on_the_create_fleet_request(aws: Aws, amis: SeededAmis) -> None:
    _launcher(aws).launch(_request(aws, node_class(context="ctx-0123")))
    [sent] = aws.fleet.requests
    assert sent["Context"] == "ctx-0123"


def test_without_context_the_request_has_none(aws: Aws, amis: SeededAmis) -> None:
    _launcher(aws).launch(_request(aws, node_class()))
    [sent] = aws.fleet.requests
    assert "Context" not in sent


def test_dedicated_tenancy_reaches_the_template_and_the_node_labels(aws: Aws, amis: SeededAmis) -> None:
    launched = _launcher(aws).launch(_request(aws, node_class(), {wk.INSTANCE_TENANCY: "dedicated"}))
    assert _template_data(aws, launched.launch_template)["Placement"] == {"Tenancy": "dedicated"}
    assert launched.labels == {wk.INSTANCE_TENANCY: "dedicated"}


def test_shared_tenancy_is_the_default_label(aws: Aws, amis: SeededAmis) -> None:
    launched = _launcher(aws).launch(_request(aws, node_class()))
    assert "Placement" not in _template_data(aws, launched.launch_template)
    assert launched.labels == {wk.INSTANCE_TENANCY: "default"}


def test_a_partition_placement_group_by_name_reaches_the_template_and_labels(
    aws: Aws, amis: SeededAmis
) -> None:
    groups = _groups(aws)
    group_id = groups.add("kafka", "partition", partitions=3)
    nc = node_class(placementGroupSelector={"name": "kafka"})
    launched = _launcher(aws).launch(_request(aws, nc, {wk.PLACEMENT_GROUP_PARTITION: "2"}))
    assert _template_data(aws, launched.launch_template)["Placement"] == {
        "GroupId": group_id,
        "PartitionNumber": 2,
    }
    assert launched.labels == {
        wk.INSTANCE_TENANCY: "default",
        wk.PLACEMENT_GROUP_ID: group_id,
        wk.PLACEMENT_GROUP_PARTITION: "2",
    }


def test_a_cluster_placement_group_by_id_has_no_partition(aws: Aws, amis: SeededAmis) -> None:
    groups = _groups(aws)
    group_id = groups.add("training", "cluster")
    nc = node_class(placementGroupSelector={"id": group_id})
    launched = _launcher(aws).launch(_request(aws, nc, {wk.PLACEMENT_GROUP_PARTITION: "1"}))
    assert _template_data(aws, launched.launch_template)["Placement"] == {"GroupId": group_id}
    assert launched.labels == {wk.INSTANCE_TENANCY: "default", wk.PLACEMENT_GROUP_ID: group_id}


def test_a_missing_or_unavailable_placement_group_launches_nothing(aws: Aws, amis: SeededAmis) -> None:
    groups = _groups(aws)
    groups.add("draining", "spread", state="deleting")
    resolver = NodeClassResolver(aws.clients, aws.cluster)
    for selector in ({"name": "draining"}, {"name": "nope"}, {"id": "pg-0000000000000dead"}):
        with pytest.raises(UnresolvedNodeClassError, match="placement group"):
            resolver.resolve(node_class(placementGroupSelector=selector))
    assert aws.fleet.requests == []


def test_placement_group_lookups_are_cached(aws: Aws, amis: SeededAmis) -> None:
    groups = _groups(aws)
    groups.add("kafka", "partition", partitions=2)
    resolver = NodeClassResolver(aws.clients, aws.cluster)
    nc = node_class(placementGroupSelector={"name": "kafka"})
    for _ in range(3):
        resolver.resolve(nc)
    assert groups.calls == 1


def test_a_cluster_placement_group_pinned_to_a_zone_lands_there(aws: Aws, amis: SeededAmis) -> None:
    """EC2 refuses offerings outside the zone a cluster group already uses; the launch lands in it."""
    groups = _groups(aws)
    group_id = groups.add("training", "cluster")
    aws.fleet.exhausted.update({(name, "us-east-1b") for name in TYPES})
    nc = node_class(placementGroupSelector={"id": group_id})
    launched = _launcher(aws).launch(_request(aws, nc))
    assert launched.zone == "us-east-1a"
    assert launched.labels[wk.PLACEMENT_GROUP_ID] == group_id


def test_pods_requesting_efa_get_a_template_per_efa_count(aws: Aws, amis: SeededAmis) -> None:
    catalog = {t.name: t for t in list_instance_types(aws.clients, unavailable=aws.unavailable)}
    by_count: dict[int, str] = {}
    for name in ("c5n.18xlarge", "c6in.32xlarge", "m5.large"):
        by_count.setdefault(int(catalog[name].capacity.get("vpc.amazonaws.com/efa", 0)), name)
    assert len(by_count) == 3  # 1, 2 and no EFA interfaces
    request = LaunchRequest(
        nodeclaim="claim-efa",
        nodepool="general",
        instance_types=tuple(catalog[n] for n in sorted(by_count.values())),
        capacity_types=("on-demand",),
        node_class=node_class(),
        node_class_name="default",
        efa=True,
    )
    _launcher(aws).launch(request)
    [sent] = aws.fleet.requests
    interfaces_by_type = {}
    for config in sent["LaunchTemplateConfigs"]:
        data = _template_data(aws, config["LaunchTemplateSpecification"]["LaunchTemplateName"])
        interfaces = data.get("NetworkInterfaces") or []
        for override in config["Overrides"]:
            interfaces_by_type[override["InstanceType"]] = [
                (i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces
            ]
    assert interfaces_by_type[by_count[1]] == [(0, 0, "efa")]
    assert interfaces_by_type[by_count[2]] == [(0, 0, "efa"), (1, 1, "efa")]
    assert interfaces_by_type[by_count[0]] == []


def test_without_efa_requests_one_template_serves_every_type(aws: Aws, amis: SeededAmis) -> None:
    catalog = {t.name: t for t in list_instance_types(aws.clients, unavailable=aws.unavailable)}
    request = LaunchRequest(
        nodeclaim="claim-plain",
        nodepool="general",
        instance_types=(catalog["c5n.18xlarge"], catalog["m5.large"]),
        capacity_types=("on-demand",),
        node_class=node_class(),
        node_class_name="default",
    )
    _launcher(aws).launch(request)
    [sent] = aws.fleet.requests
    [config] = sent["LaunchTemplateConfigs"]
    data = _template_data(aws, config["LaunchTemplateSpecification"]["LaunchTemplateName"])
    assert "NetworkInterfaces" not in data


def test_nested_virtualization_narrows_the_instance_types(aws: Aws, amis: SeededAmis) -> None:
    provider = AwsProvider(aws.cluster, "us-east-1", clients=aws.clients, unavailable=aws.unavailable)
    every = {t.name for t in provider.instance_types(node_class())}
    nested = {
        t.name for t in provider.instance_types(node_class(cpuOptions={"nestedVirtualization": "enabled"}))
    }
    disabled = {
        t.name for t in provider.instance_types(node_class(cpuOptions={"nestedVirtualization": "disabled"}))
    }
    supporting = {
        str(e["InstanceType"])
        for e in aws.clients.ec2.describe_instance_types(InstanceTypes=sorted(every)[:100])["InstanceTypes"]
        if "nested-virtualization" in (e.get("ProcessorInfo") or {}).get("SupportedFeatures", [])
    }
    assert nested and nested < every and disabled == every
    assert supporting & set(sorted(every)[:100]) == nested & set(sorted(every)[:100])


def test_a_cluster_placement_group_offers_only_types_supporting_the_strategy(
    aws: Aws, amis: SeededAmis
) -> None:
    groups = _groups(aws)
    cluster_id = groups.add("training", "cluster")
    groups.add("kafka", "partition", partitions=2)
    provider = AwsProvider(aws.cluster, "us-east-1", clients=aws.clients, unavailable=aws.unavailable)
    every = {t.name for t in provider.instance_types(node_class())}
    clustered = {
        t.name for t in provider.instance_types(node_class(placementGroupSelector={"id": cluster_id}))
    }
    partitioned = {
        t.name for t in provider.instance_types(node_class(placementGroupSelector={"name": "kafka"}))
    }
    # EC2 lists t3 types with partition and spread placement only.
    assert "t3.micro" in every and "t3.micro" not in clustered and "t3.micro" in partitioned
    assert "m5.large" in clustered and clustered < every


def test_an_unresolvable_placement_group_does_not_narrow_the_catalog(aws: Aws, amis: SeededAmis) -> None:
    _groups(aws)
    provider = AwsProvider(aws.cluster, "us-east-1", clients=aws.clients, unavailable=aws.unavailable)
    every = {t.name for t in provider.instance_types(node_class())}
    missing = {t.name for t in provider.instance_types(node_class(placementGroupSelector={"name": "nope"}))}
    assert missing == every
