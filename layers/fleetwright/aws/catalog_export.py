"""Export a region's instance types, as EC2 describes and prices them now, in the catalog JSON format."""

from __future__ import annotations

from typing import Any

from fleetwright.aws.clients import clients_for
from fleetwright.aws.instancetypes import list_instance_types
from fleetwright.aws.nodeclass import family_filter
from fleetwright.catalog.loader import catalog_to_json, with_kubelet
from fleetwright.catalog.os_family import for_ami_family, is_windows
from fleetwright.model.ec2nodeclass import EC2NodeClass


def export_catalog(region: str, node_class: EC2NodeClass | None = None) -> dict[str, Any]:
    """The catalog document (``{"instanceTypes": [...]}``) for ``region``.

    With a node class: only the instance types its AMI family can boot (architecture and
    GPU/accelerator variant; no cluster needed), as that family's OS runs them (Windows: ``kubernetes.io/os``
    ``windows`` and the build label), and allocatable for its kubelet settings. Spot prices
    are the current ones; on-demand prices come from the Pricing API, or the shipped table offline.
    """
    clients = clients_for(region)
    if node_class is None:
        types = list_instance_types(clients)
    elif is_windows(family := node_class.spec.resolved_ami_family()):
        # As Windows nodes (os and build labels, 110 pods), then the node class's kubelet settings.
        types = list_instance_types(clients, accept=family_filter(node_class))
        types = with_kubelet(for_ami_family(types, family), node_class.kubelet_overrides())
    else:
        types = list_instance_types(
            clients, accept=family_filter(node_class), kubelet=node_class.kubelet_overrides()
        )
    return catalog_to_json(types)
