"""Drift hashes: a short, stable digest of what a NodePool or EC2NodeClass says a node should look like.

The hashes are recorded on the NodeClaim when it launches; a node whose recorded hash differs from the
current one has drifted. Left out, because they are checked another way or do not describe the node:

* NodePool: ``spec.template.spec.requirements`` (the planner checks the node's labels against the
  current requirements instead, so widening them does not replace every node), ``expireAfter`` and
  ``terminationGracePeriod`` (Fleetwright reads them from the current NodePool when it acts, so a change
  applies to existing nodes without replacing them), and everything outside ``spec.template``
  (``weight``, ``limits``, ``disruption``: behaviour, not the node).
* EC2NodeClass: ``amiSelectorTerms``, ``subnetSelectorTerms``, ``securityGroupSelectorTerms`` (what they
  resolve to is what matters: the planner compares the node's AMI with the AMIs the terms select now),
  and ``ipPrefixCount`` (as Karpenter: more or fewer prefixes on new nodes do not replace old ones). The
  other launch fields (``networkInterfaces``, ``connectionTracking``, ``cpuOptions``,
  ``placementGroupSelector``, ``context``, ``instanceStorePolicy``, block device settings) are covered.

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

# Bumped when what the digest covers changes on purpose (a bump drifts every node once).
HASH_VERSION: Final = "v1"
DIGEST_LENGTH: Final = 16

NODECLASS_IGNORED: Final = frozenset(
    {"ami_selector_terms", "subnet_selector_terms", "security_group_selector_terms", "ip_prefix_count"}
)
TEMPLATE_SPEC_IGNORED: Final = frozenset({"requirements", "expire_after", "termination_grace_period"})


def _digest(document: Any) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{HASH_VERSION}:{text}".encode()).hexdigest()[:DIGEST_LENGTH]


def nodepool_hash(nodepool: NodePool) -> str:
    """The drift hash of a NodePool's ``spec.template`` (see the module docstring for what it leaves out)."""
    template = nodepool.spec.template
    document: dict[str, Any] = {
        "metadata": template.metadata.model_dump(mode="json", by_alias=True, exclude_defaults=True),
        "spec": template.spec.model_dump(
            mode="json", by_alias=True, exclude_defaults=True, exclude=set(TEMPLATE_SPEC_IGNORED)
        ),
    }
    legacy = nodepool.legacy_kubelet()
    if legacy is not None:
        # Kubelet settings an older NodePool carried itself shape the node like the node class's do.
        document["kubelet"] = legacy.kubelet.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return _digest(document)


def nodeclass_hash(nodeclass: EC2NodeClass) -> str:
    """The drift hash of an EC2NodeClass's ``spec`` without its selector terms."""
    return _digest(
        nodeclass.spec.model_dump(
            mode="json", by_alias=True, exclude_defaults=True, exclude=set(NODECLASS_IGNORED)
        )
    )


def nodepool_hashes(nodepools: Iterable[NodePool]) -> dict[str, str]:
    """NodePool name → its current hash."""
    return {np.name: nodepool_hash(np) for np in nodepools}


def nodeclass_hashes(nodeclasses: Iterable[EC2NodeClass]) -> dict[str, str]:
    """EC2NodeClass name → its current hash."""
    return {nc.name: nodeclass_hash(nc) for nc in nodeclasses}
