"""Installing the Karpenter CRDs of ``docs/crds/`` (NodePool, NodeClaim, EC2NodeClass) into an emulator,
as ``kubectl apply -f docs/crds/`` would on a real cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.resources import CUSTOM_RESOURCE_DEFINITIONS
from fleetwright.local.apiserver.store import Store

# layers/fleetwright/local/apiserver/karpenter.py → the repository's docs/crds.
CRD_DIRECTORY = Path(__file__).resolve().parents[4] / "docs" / "crds"


def crd_documents(directory: Path = CRD_DIRECTORY) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions in ``directory``'s YAML files, in file order."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"no CRD manifests in {directory}")
    documents: list[dict[str, Any]] = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                documents.append(doc)
    return documents


def install_karpenter_crds(store: Store, directory: Path = CRD_DIRECTORY) -> list[str]:
    """Create (or replace) each CRD in ``store``; the names installed. Their kinds are served at once."""
    names: list[str] = []
    for doc in crd_documents(directory):
        name = str(doc["metadata"]["name"])
        try:
            store.create(CUSTOM_RESOURCE_DEFINITIONS, doc)
        except ApiError as exc:
            if exc.code != 409:
                raise
            current = store.get(CUSTOM_RESOURCE_DEFINITIONS, None, name)
            store.update(CUSTOM_RESOURCE_DEFINITIONS, {**doc, "metadata": current["metadata"]})
        names.append(name)
    return names
