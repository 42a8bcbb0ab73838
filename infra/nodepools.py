"""The NodePool file, checked when the app is synthesized.

The check is the one ``fleetwright validate`` runs (:func:`fleetwright.validation.validate`), so a bad
file stops ``cdk synth`` with exactly the lines the command prints. A deployment may have no file
(``nodePoolsFile=none``) when its NodePools are applied to the cluster with kubectl, Helm or Argo CD.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwright.manifests import manifest_files, read_documents
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.karpenter import is_karpenter_document, parse_karpenter_document
from fleetwright.model.legacy import STACK_NODE_ROLE, stack_node_role
from fleetwright.model.nodepool import NodePool
from fleetwright.validation import validate

NO_FILE = "none"  # the nodePoolsFile value of a deployment whose NodePools live only in the cluster


def is_cluster_only(paths: Sequence[str]) -> bool:
    """True when ``paths`` name no NodePool file: none at all, or just :data:`NO_FILE`."""
    return not [p for p in paths if p.strip()] or [p.strip().lower() for p in paths] == [NO_FILE]


class NodePoolFileError(ValueError):
    """The NodePool file cannot be deployed; the message is what ``fleetwright validate`` prints."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


@dataclass(slots=True)
class NodePoolConfig:
    """The NodePools and EC2NodeClasses to deploy, with the raw documents they came from."""

    paths: list[str]
    nodepools: list[NodePool] = field(default_factory=list)
    nodeclasses: list[EC2NodeClass] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def cluster_only(self) -> bool:
        """No documents deployed: the functions read NodePools from the cluster only."""
        return not self.documents

    def node_roles(self) -> set[str]:
        """The IAM role names the EC2NodeClasses ask for (``spec.role``; ARNs reduced to the name), not
        counting converted AWSNodeTemplates that take whatever role the stack creates."""
        return {
            nc.spec.role.rpartition("/")[2]
            for nc in self.nodeclasses
            if nc.spec.role and nc.spec.role != STACK_NODE_ROLE
        }


def load_nodepool_config(paths: Sequence[str], node_role_name: str | None = None) -> NodePoolConfig:
    """Validate ``paths`` (files or directories) like ``fleetwright validate`` and read their NodePools.

    ``node_role_name`` (the ``nodeRoleName`` setting) is the role v1alpha5 AWSNodeTemplates without
    ``instanceProfile`` are converted with; unset, a stand-in that counts as no role (the functions
    convert them with the role the stack created).

    No path, or only :data:`NO_FILE` (``-c nodePoolsFile=none``), deploys no documents: the NodePools are
    managed in the cluster (kubectl, Helm, Argo CD) and the functions read them there only.

    Raises :class:`NodePoolFileError` when validation reports errors or no NodePool is found; other kinds
    of documents (Deployments next to the NodePools, say) are skipped.
    """
    if is_cluster_only(paths):
        return NodePoolConfig(paths=[])
    with stack_node_role(node_role_name or STACK_NODE_ROLE):
        return _load(paths)


def _load(paths: Sequence[str]) -> NodePoolConfig:
    _, warnings, errors = validate(list(paths))
    if errors:
        raise NodePoolFileError(errors)
    config = NodePoolConfig(paths=list(paths), warnings=warnings)
    for path in manifest_files(list(paths)):
        for ref, doc in read_documents(path):
            items = doc.get("items") if doc.get("kind") == "List" else [doc]
            for item in items if isinstance(items, list) else []:
                if not isinstance(item, dict) or not is_karpenter_document(item):
                    continue
                parsed = parse_karpenter_document(item, ref)
                config.nodepools += parsed.nodepools
                config.nodeclasses += parsed.nodeclasses
                config.documents.append(item)
    if not config.nodepools:
        raise NodePoolFileError([f"error: {', '.join(paths)}: no NodePool found; nothing would be scaled"])
    return config
