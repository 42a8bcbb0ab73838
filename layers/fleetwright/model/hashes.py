"""Drift hashes: a short, stable digest of what a NodePool or EC2NodeClass says a node should look like.

The hashes are recorded on the NodeClaim when it launches, with the version of the digest that made them
(:data:`HASH_VERSION`); a node whose recorded hash differs from the current one of the same version has
drifted. A claim recorded by an older version is compared with the current document digested the way that
version digested it, so upgrading Fleetwright drifts no node (as Karpenter, which re-stamps claims whose
hash version differs instead of drifting them).

Covered and left out, as Karpenter's ``hash`` tags do:

* NodePool: ``spec.template`` with ``expireAfter`` and ``terminationGracePeriod`` (each claim keeps the
  values it launched with, so editing them rolls the nodes as drift, within the budgets). Left out:
  ``requirements`` (the planner checks each node's labels against the current requirements instead, so
  widening them does not replace every node) and everything outside ``spec.template`` (``weight``,
  ``limits``, ``disruption``: behaviour, not the node).
* EC2NodeClass: ``spec`` with the AMI family as resolved (``amiFamily``, else the alias's family), so
  spelling out the family an alias already names changes nothing. Left out: ``amiSelectorTerms``,
  ``subnetSelectorTerms``, ``securityGroupSelectorTerms`` and ``capacityReservationSelectorTerms`` (what
  they resolve to is compared per node: its AMI, subnet, security groups, capacity reservation) and
  ``ipPrefixCount`` (more or fewer prefixes on new nodes do not replace old ones).

Fields left at their default are left out of the digest, so a Fleetwright upgrade that adds an optional
field does not drift every node.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Final

from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.nodepool import NodePool

# The digest's version, recorded with every claim's hashes. Bumped when what the digest covers changes on
# purpose; claims recorded before are compared with :func:`nodepool_hash` / :func:`nodeclass_hash` at their
# own version.
HASH_VERSION: Final = "v2"
# Claims recorded before hash versions were recorded hold hashes of this version.
UNVERSIONED: Final = "v1"
DIGEST_LENGTH: Final = 16

_NODECLASS_IGNORED: Final = {
    "v1": frozenset(
        {"ami_selector_terms", "subnet_selector_terms", "security_group_selector_terms", "ip_prefix_count"}
    ),
    "v2": frozenset(
        {
            "ami_selector_terms",
            "subnet_selector_terms",
            "security_group_selector_terms",
            "capacity_reservation_selector_terms",
            "ip_prefix_count",
            "ami_family",  # digested as resolved
        }
    ),
}
_TEMPLATE_SPEC_IGNORED: Final = {
    "v1": frozenset({"requirements", "expire_after", "termination_grace_period"}),
    "v2": frozenset({"requirements"}),
}
VERSIONS: Final = frozenset(_TEMPLATE_SPEC_IGNORED)


def _digest(document: Any, version: str) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{version}:{text}".encode()).hexdigest()[:DIGEST_LENGTH]


def _version(version: str) -> str:
    if version not in VERSIONS:
        raise ValueError(f"unknown drift hash version {version!r}")
    return version


def nodepool_hash(nodepool: NodePool, version: str = HASH_VERSION) -> str:
    """The drift hash of a NodePool's ``spec.template`` (see the module docstring for what it leaves out)."""
    version = _version(version)
    template = nodepool.spec.template
    spec = template.spec.model_dump(
        mode="json", by_alias=True, exclude_defaults=True, exclude=set(_TEMPLATE_SPEC_IGNORED[version])
    )
    if version != UNVERSIONED:
        # The default lifetime is what a claim copies too: digested whether spelled out or not.
        spec["expireAfter"] = template.spec.expire_after
    document: dict[str, Any] = {
        "metadata": template.metadata.model_dump(mode="json", by_alias=True, exclude_defaults=True),
        "spec": spec,
    }
    legacy = nodepool.legacy_kubelet()
    if legacy is not None:
        # Kubelet settings an older NodePool carried itself shape the node like the node class's do.
        document["kubelet"] = legacy.kubelet.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return _digest(document, version)


def nodeclass_hash(nodeclass: EC2NodeClass, version: str = HASH_VERSION) -> str:
    """The drift hash of an EC2NodeClass's ``spec`` without its selector terms, its AMI family resolved."""
    version = _version(version)
    document = nodeclass.spec.model_dump(
        mode="json", by_alias=True, exclude_defaults=True, exclude=set(_NODECLASS_IGNORED[version])
    )
    if version != UNVERSIONED:
        document["amiFamily"] = nodeclass.spec.resolved_ami_family()
    return _digest(document, version)


def nodepool_hashes(nodepools: Iterable[NodePool], version: str = HASH_VERSION) -> dict[str, str]:
    """NodePool name → its hash at ``version``."""
    return {np.name: nodepool_hash(np, version) for np in nodepools}


def nodeclass_hashes(nodeclasses: Iterable[EC2NodeClass], version: str = HASH_VERSION) -> dict[str, str]:
    """EC2NodeClass name → its hash at ``version``."""
    return {nc.name: nodeclass_hash(nc, version) for nc in nodeclasses}
