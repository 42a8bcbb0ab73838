"""Instance profiles carry their region: IAM is global, so before they did, the stacks of two clusters of
the same name in two regions of one account used (and changed) the same profiles. Upgrading keeps the
profiles made before the region was in the name working: nothing running loses its profile, and nothing of
another region is touched (fleetwright.aws.instanceprofiles, docs/security.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from fleetwright.aws.clients import AwsClients
from fleetwright.aws.instanceprofiles import (
    REGION_TAG,
    ensure_instance_profile,
    instance_profile_name,
    legacy_instance_profile_name,
)
from fleetwright.aws.tags import CLUSTER_TAG, from_aws, to_aws
from fleetwright.aws.ttlcache import clear_all_caches

CLUSTER = "prod"
ROLE = "NodeRole"
EAST, WEST = "us-east-1", "eu-west-1"


@pytest.fixture
def regions(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, AwsClients]]:
    """moto's IAM (global, as AWS's is) seen from two regions' controllers, with the node role."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", EAST)
    with mock_aws():
        clear_all_caches()
        clients = {region: AwsClients(region) for region in (EAST, WEST)}
        clients[EAST].iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
        yield clients
        clear_all_caches()


def _profile(clients: AwsClients, name: str) -> dict[str, Any]:
    profile: dict[str, Any] = clients.iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    return profile


def _all_profiles(clients: AwsClients) -> dict[str, tuple[dict[str, str], list[str]]]:
    """name -> (tags, roles) of every instance profile of the account."""
    listed = clients.iam.list_instance_profiles()["InstanceProfiles"]
    return {
        p["InstanceProfileName"]: (
            from_aws(_profile(clients, p["InstanceProfileName"]).get("Tags")),
            [r["RoleName"] for r in p["Roles"]],
        )
        for p in listed
    }


def test_each_region_gets_its_own_profile_named_and_tagged_for_it(regions: dict[str, AwsClients]) -> None:
    east = ensure_instance_profile(regions[EAST], CLUSTER, ROLE)
    before = _all_profiles(regions[EAST])
    west = ensure_instance_profile(regions[WEST], CLUSTER, f"arn:aws:iam::123456789012:role/{ROLE}")

    assert (east, west) == (
        instance_profile_name(CLUSTER, EAST, ROLE),
        instance_profile_name(CLUSTER, WEST, ROLE),
    )
    assert east.startswith(f"{CLUSTER}_{EAST}_") and west.startswith(f"{CLUSTER}_{WEST}_")
    after = _all_profiles(regions[EAST])
    assert after == {
        east: ({CLUSTER_TAG: CLUSTER, REGION_TAG: EAST}, [ROLE]),
        west: ({CLUSTER_TAG: CLUSTER, REGION_TAG: WEST}, [ROLE]),
    }
    assert after[east] == before[east]  # the west stack left the east profile as it was


def test_upgrading_reuses_the_profile_made_before_regions_and_orphans_nothing(
    regions: dict[str, AwsClients],
) -> None:
    iam = regions[EAST].iam
    legacy = legacy_instance_profile_name(CLUSTER, ROLE)
    # What the controller made before: named without the region, tagged with the cluster only, in use by
    # the nodes of both regions' stacks.
    iam.create_instance_profile(InstanceProfileName=legacy, Tags=to_aws({CLUSTER_TAG: CLUSTER}))
    iam.add_role_to_instance_profile(InstanceProfileName=legacy, RoleName=ROLE)
    before = _all_profiles(regions[EAST])

    # After the upgrade each region keeps launching with it: no second profile, the old one unchanged.
    assert ensure_instance_profile(regions[EAST], CLUSTER, ROLE) == legacy
    assert ensure_instance_profile(regions[WEST], CLUSTER, ROLE) == legacy
    assert _all_profiles(regions[EAST]) == before == {legacy: ({CLUSTER_TAG: CLUSTER}, [ROLE])}

    # Once an operator deletes it (no instance in any region using it), the next launch makes the
    # region's own.
    clear_all_caches()
    iam.remove_role_from_instance_profile(InstanceProfileName=legacy, RoleName=ROLE)
    iam.delete_instance_profile(InstanceProfileName=legacy)
    assert ensure_instance_profile(regions[EAST], CLUSTER, ROLE) == instance_profile_name(CLUSTER, EAST, ROLE)


def test_a_legacy_named_profile_of_another_region_or_not_the_clusters_is_left_alone(
    regions: dict[str, AwsClients],
) -> None:
    iam = regions[EAST].iam
    iam.create_role(RoleName="Other", AssumeRolePolicyDocument="{}")
    west_owned = legacy_instance_profile_name(CLUSTER, ROLE)
    iam.create_instance_profile(
        InstanceProfileName=west_owned, Tags=to_aws({CLUSTER_TAG: CLUSTER, REGION_TAG: WEST})
    )
    iam.add_role_to_instance_profile(InstanceProfileName=west_owned, RoleName="Other")
    hand_made = legacy_instance_profile_name(CLUSTER, "Other")
    iam.create_instance_profile(InstanceProfileName=hand_made)  # untagged: not the controller's
    before = _all_profiles(regions[EAST])

    assert ensure_instance_profile(regions[EAST], CLUSTER, ROLE) == instance_profile_name(CLUSTER, EAST, ROLE)
    assert ensure_instance_profile(regions[EAST], CLUSTER, "Other") == instance_profile_name(
        CLUSTER, EAST, "Other"
    )
    after = _all_profiles(regions[EAST])
    assert {name: after[name] for name in before} == before  # neither used nor changed
    assert len(after) == len(before) + 2


def test_a_regional_name_taken_by_hand_or_tagged_for_another_region_is_refused(
    regions: dict[str, AwsClients],
) -> None:
    iam = regions[EAST].iam
    taken = instance_profile_name(CLUSTER, EAST, ROLE)
    iam.create_instance_profile(
        InstanceProfileName=taken, Tags=to_aws({CLUSTER_TAG: CLUSTER, REGION_TAG: WEST})
    )
    with pytest.raises(ValueError, match=f"{taken} exists but is not tagged"):
        ensure_instance_profile(regions[EAST], CLUSTER, ROLE)
    assert _profile(regions[EAST], taken)["Roles"] == []


@pytest.mark.parametrize("region", ["us-east-1", "ap-southeast-5", "us-isof-south-1"])
def test_names_fit_iam_for_the_longest_cluster_names_and_differ_by_region(region: str) -> None:
    cluster = "c" * 100
    name = instance_profile_name(cluster, region, ROLE)
    assert len(name) <= 128 and name.startswith(f"{cluster}_{region}_")
    assert len(name.rsplit("_", 1)[1]) >= 11
    assert name != instance_profile_name(cluster, "eu-west-1", ROLE)
    assert name != instance_profile_name(cluster, region, "Other")
    # The policy's resource pattern (<cluster>_*) covers both the regional and the legacy names.
    assert legacy_instance_profile_name(cluster, ROLE).startswith(f"{cluster}_")
