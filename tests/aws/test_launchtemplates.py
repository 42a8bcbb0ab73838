"""Launch template contents, naming and cleanup."""

from __future__ import annotations

from fleetwright.aws.amis import Ami
from fleetwright.aws.launchtemplates import (
    LaunchTemplates,
    delete_launch_template,
    describe_launch_templates,
    launch_template_data,
)
from fleetwright.aws.tags import CLUSTER_TAG, NODECLASS_TAG, merge_tags, ownership_tags
from tests.support.aws import CLUSTER, Aws, node_class

AMI = Ami("ami-0123456789abcdef0", "amd64", "standard")


def test_node_class_settings_reach_the_template() -> None:
    spec = node_class(
        blockDeviceMappings=[
            {
                "deviceName": "/dev/xvda",
                "rootVolume": True,
                "ebs": {"volumeSize": "100Gi", "volumeType": "io2", "iops": 4000},
            }
        ],
        metadataOptions={"httpPutResponseHopLimit": 2, "httpTokens": "required"},
        associatePublicIPAddress=False,
        detailedMonitoring=True,
    ).spec
    data = launch_template_data(spec, AMI, "", ["sg-1"], "profile")
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"VolumeSize": 100, "VolumeType": "io2", "Iops": 4000, "DeleteOnTermination": True},
        }
    ]
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
    assert data["NetworkInterfaces"] == [
        {"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": ["sg-1"]}
    ]
    assert "SecurityGroupIds" not in data
    assert data["Monitoring"] == {"Enabled": True}
    assert "UserData" not in data


def test_bottlerocket_gets_an_os_volume_and_a_data_volume() -> None:
    spec = node_class(amiSelectorTerms=[{"alias": "bottlerocket@latest"}]).spec
    devices = launch_template_data(spec, AMI, "x", ["sg-1"], "profile")["BlockDeviceMappings"]
    assert [(d["DeviceName"], d["Ebs"]["VolumeSize"]) for d in devices] == [
        ("/dev/xvda", 4),
        ("/dev/xvdb", 20),
    ]


def test_equal_settings_share_a_template_and_unused_ones_are_deleted(aws: Aws) -> None:
    spec = node_class().spec
    templates = LaunchTemplates(aws.clients, CLUSTER)
    tags = {CLUSTER_TAG: CLUSTER, NODECLASS_TAG: "default"}
    first = templates.ensure(launch_template_data(spec, AMI, "a", ["sg-1"], "p"), tags)
    # Another process (a fresh cache) finds the existing template instead of failing to create it.
    again = LaunchTemplates(aws.clients, CLUSTER).ensure(
        launch_template_data(spec, AMI, "a", ["sg-1"], "p"), tags
    )
    other = templates.ensure(launch_template_data(spec, AMI, "b", ["sg-1"], "p"), tags)
    assert first == again != other
    assert first.startswith(f"fleetwright/{CLUSTER}/")
    aws.clients.ec2.create_launch_template(
        LaunchTemplateName="someone-elses", LaunchTemplateData={"ImageId": AMI.id}
    )
    assert [t.name for t in describe_launch_templates(aws.clients, CLUSTER)] == sorted([first, other])

    assert delete_launch_template(aws.clients, CLUSTER, other)
    templates.forget([other])
    names = {t["LaunchTemplateName"] for t in aws.clients.ec2.describe_launch_templates()["LaunchTemplates"]}
    assert names == {first, "someone-elses"}
    assert templates.ensure(launch_template_data(spec, AMI, "b", ["sg-1"], "p"), tags) == other  # recreated
    assert other in [t.name for t in describe_launch_templates(aws.clients, CLUSTER)]


def test_user_tags_cannot_override_ownership_tags() -> None:
    merged = merge_tags(
        {"team": "a", CLUSTER_TAG: "evil", "Name": "mine"}, ownership_tags(CLUSTER, "pool", "claim-1")
    )
    assert merged[CLUSTER_TAG] == CLUSTER
    assert merged["team"] == "a"
    assert merged["Name"] == "mine"
    assert merged["fleetwright.io/nodeclaim"] == "claim-1"
