"""Instance profiles for node classes that name an IAM role instead of an instance profile.

IAM is global, so a profile is named for its region too: ``<cluster>_<region>_<digest>``, created tagged
``fleetwright.io/cluster=<cluster>`` and ``fleetwright.io/region=<region>``. Two stacks for clusters of
the same name in two regions of one account therefore never share or change each other's profiles.

A profile found under the name without those tags (made by hand, or by someone else in another region) is
refused, not used: whoever made it chose what it holds.

Profiles created before the region was part of the name (``<cluster>_<digest>``, the cluster tag and no
region tag; :func:`legacy_instance_profile_name`) are still the controller's: when one exists for the role
and this region has no regional profile yet, it is used as before, so upgrading neither orphans it nor
leaves running nodes with a profile nobody keeps. It may be shared with a same-named cluster in another
region (it was before), which is why nothing deletes it: deleting it would take the credentials of that
region's nodes. A legacy profile tagged for another region is not used.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Final

from fleetwright.aws.clients import AwsClients, error_code
from fleetwright.aws.tags import CLUSTER_TAG, from_aws, to_aws
from fleetwright.aws.ttlcache import TtlCache

# The region a profile was created for (covered, like every fleetwright.io/ key, by the SCP of docs/iam.md).
REGION_TAG: Final = "fleetwright.io/region"
# IAM's limit on instance profile names; EKS cluster names have at most 100 characters.
MAX_NAME_LENGTH: Final = 128
_DIGEST_LENGTH: Final = 16

_CACHE: TtlCache[str] = TtlCache(ttl=3600.0)
# Parallel launches of one node class would otherwise race to create the same profile.
_LOCK = threading.Lock()


def instance_profile_name(cluster: str, region: str, role: str) -> str:
    """The instance profile name for (cluster, region, role): ``<cluster>_<region>_<digest>`` within IAM's
    128 characters (the digest, of all three, is shortened to fit; at least 11 hex digits for the longest
    cluster and region names)."""
    prefix = f"{cluster[:100]}_{region}_"
    digest = hashlib.sha256(f"{region}/{cluster}/{role}".encode()).hexdigest()
    return prefix + digest[: min(_DIGEST_LENGTH, MAX_NAME_LENGTH - len(prefix))]


def legacy_instance_profile_name(cluster: str, role: str) -> str:
    """The name profiles had before the region was part of it, shared by every region's stack."""
    digest = hashlib.sha256(f"{cluster}/{role}".encode()).hexdigest()[:_DIGEST_LENGTH]
    return f"{cluster[:100]}_{digest}"


def ensure_instance_profile(clients: AwsClients, cluster: str, role: str) -> str:
    """The name of an instance profile holding ``role`` (a role name or ARN) for this region: the regional
    one, else a legacy one of this cluster, else a regional one created now."""
    role_name = role.rpartition("/")[2]
    region = clients.region
    name = instance_profile_name(cluster, region, role_name)

    def compute() -> str:
        profile = _get(clients, name)
        if profile is None:
            legacy = _usable_legacy(clients, cluster, region, role_name)
            if legacy is not None:
                return _holding(clients, legacy, role_name)
            profile = _create(clients, name, cluster, region)
        tags = from_aws(profile.get("Tags"))
        if tags.get(CLUSTER_TAG) != cluster or tags.get(REGION_TAG) != region:
            raise ValueError(
                f"instance profile {name} exists but is not tagged {CLUSTER_TAG}={cluster} and "
                f"{REGION_TAG}={region}: it was not made by this cluster's controller; delete or rename it"
            )
        return _holding(clients, profile, role_name)

    with _LOCK:
        return _CACHE.get_or_compute((region, name, role_name), compute)


def _get(clients: AwsClients, name: str) -> dict[str, Any] | None:
    """The profile called ``name``, or None when there is none."""
    try:
        profile: dict[str, Any] = clients.iam.get_instance_profile(InstanceProfileName=name)[
            "InstanceProfile"
        ]
    except Exception as error:
        if error_code(error) != "NoSuchEntity":
            raise
        return None
    return profile


def _create(clients: AwsClients, name: str, cluster: str, region: str) -> dict[str, Any]:
    """Create the regional profile, tagged; another process that won the race leaves its profile."""
    try:
        profile: dict[str, Any] = clients.iam.create_instance_profile(
            InstanceProfileName=name, Tags=to_aws({CLUSTER_TAG: cluster, REGION_TAG: region})
        )["InstanceProfile"]
    except Exception as created_elsewhere:
        if error_code(created_elsewhere) != "EntityAlreadyExists":
            raise
        profile = clients.iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    return profile


def _usable_legacy(clients: AwsClients, cluster: str, region: str, role_name: str) -> dict[str, Any] | None:
    """The legacy profile of (cluster, role) when it is this cluster's and not another region's."""
    profile = _get(clients, legacy_instance_profile_name(cluster, role_name))
    if profile is None:
        return None
    tags = from_aws(profile.get("Tags"))
    if tags.get(CLUSTER_TAG) != cluster or tags.get(REGION_TAG, region) != region:
        return None
    return profile


def _holding(clients: AwsClients, profile: dict[str, Any], role_name: str) -> str:
    """Put ``role_name`` into ``profile`` when it holds another role (or none); its name."""
    name: str = profile["InstanceProfileName"]
    if not any(r.get("RoleName") == role_name for r in profile.get("Roles", [])):
        for existing in profile.get("Roles", []):
            clients.iam.remove_role_from_instance_profile(
                InstanceProfileName=name, RoleName=existing["RoleName"]
            )
        clients.iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role_name)
    return name
