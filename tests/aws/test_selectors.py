"""Subnets and security groups from selector terms."""

from __future__ import annotations

from fleetwright.aws.securitygroups import resolve_security_groups
from fleetwright.aws.subnets import resolve_subnets, subnets_by_zone
from fleetwright.model.ec2nodeclass import SecurityGroupSelectorTerm, SubnetSelectorTerm
from tests.support.aws import Aws


def test_subnets_by_tag_with_wildcards_and_by_id(aws: Aws) -> None:
    tagged = {aws.subnets["a-small"], aws.subnets["a-large"], aws.subnets["b"]}
    exact = resolve_subnets(aws.clients, [SubnetSelectorTerm(tags={"karpenter.sh/discovery": "demo"})])
    assert {s.id for s in exact} == tagged
    any_value = resolve_subnets(aws.clients, [SubnetSelectorTerm(tags={"karpenter.sh/discovery": "*"})])
    assert {s.id for s in any_value} == tagged
    pattern = resolve_subnets(aws.clients, [SubnetSelectorTerm(tags={"karpenter.sh/discovery": "de*"})])
    assert {s.id for s in pattern} == tagged
    assert resolve_subnets(aws.clients, [SubnetSelectorTerm(tags={"karpenter.sh/discovery": "other"})]) == []
    by_id = resolve_subnets(
        aws.clients,
        [
            SubnetSelectorTerm(id=aws.subnets["c-untagged"]),
            SubnetSelectorTerm(tags={"karpenter.sh/discovery": "x*"}),
        ],
    )
    assert [s.id for s in by_id] == [aws.subnets["c-untagged"]]


def test_one_subnet_per_zone_with_the_most_free_addresses(aws: Aws) -> None:
    found = resolve_subnets(aws.clients, [SubnetSelectorTerm(tags={"karpenter.sh/discovery": "demo"})])
    chosen = subnets_by_zone(found)
    assert {zone: s.id for zone, s in chosen.items()} == {
        "us-east-1a": aws.subnets["a-large"],
        "us-east-1b": aws.subnets["b"],
    }
    assert (
        chosen["us-east-1a"].available_ips
        > next(s for s in found if s.id == aws.subnets["a-small"]).available_ips
    )


def test_security_groups_by_tags_name_and_id(aws: Aws) -> None:
    by_tags = resolve_security_groups(
        aws.clients, [SecurityGroupSelectorTerm(tags={"karpenter.sh/discovery": "demo"})]
    )
    assert by_tags == [aws.security_group]
    by_name = resolve_security_groups(aws.clients, [SecurityGroupSelectorTerm(name="demo-nodes")])
    assert by_name == [aws.security_group]
    by_id = resolve_security_groups(aws.clients, [SecurityGroupSelectorTerm(id=aws.security_group)])
    assert by_id == [aws.security_group]
    assert resolve_security_groups(aws.clients, [SecurityGroupSelectorTerm(name="nope")]) == []
