"""Instance profiles for node classes that name an IAM role instead of an instance profile.

A profile is created tagged ``fleetwright.io/cluster=<cluster>``; one found under the cluster's name
without that tag (made by hand) is refused, not used: whoever made it chose what it holds."""

from __future__ import annotations

import hashlib
import threading

from fleetwright.aws.clients import AwsClients, error_code
from fleetwright.aws.tags import CLUSTER_TAG, from_aws, to_aws
from fleetwright.aws.ttlcache import TtlCache

_CACHE: TtlCache[str] = TtlCache(ttl=3600.0)
# Parallel launches of one node class would otherwise race to create the same profile.
_LOCK = threading.Lock()


def instance_profile_name(cluster: str, role: str) -> str:
    """A deterministic instance profile name for (cluster, role), within IAM's 128 characters."""
    digest = hashlib.sha256(f"{cluster}/{role}".encode()).hexdigest()[:16]
    return f"{cluster[:100]}_{digest}"


def ensure_instance_profile(clients: AwsClients, cluster: str, role: str) -> str:
    """The name of an instance profile holding ``role`` (a role name or ARN), created when missing."""
    role_name = role.rpartition("/")[2]
    name = instance_profile_name(cluster, role_name)

    def compute() -> str:
        iam = clients.iam
        try:
            profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
        except Exception as error:
            if error_code(error) != "NoSuchEntity":
                raise
            try:
                profile = iam.create_instance_profile(
                    InstanceProfileName=name, Tags=to_aws({CLUSTER_TAG: cluster})
                )["InstanceProfile"]
            except Exception as created_elsewhere:  # another process won the race: use its profile
                if error_code(created_elsewhere) != "EntityAlreadyExists":
                    raise
                profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
        if from_aws(profile.get("Tags")).get(CLUSTER_TAG) != cluster:
            raise ValueError(
                f"instance profile {name} exists but is not tagged {CLUSTER_TAG}={cluster}: "
                "it was not made by this cluster's controller; delete or rename it"
            )
        if not any(r.get("RoleName") == role_name for r in profile.get("Roles", [])):
            for existing in profile.get("Roles", []):
                iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=existing["RoleName"])
            iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role_name)
        return name

    with _LOCK:
        return _CACHE.get_or_compute((clients.region, name, role_name), compute)
