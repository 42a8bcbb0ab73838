"""The launch template's ``NetworkInterfaces``: EC2NodeClass ``networkInterfaces``, ``ipPrefixCount``,
``connectionTracking`` and ``associatePublicIPAddress``, and EFA interfaces for pods that request
``vpc.amazonaws.com/efa``.

EC2 refuses a launch template that names security groups both at the top level and on an interface, so
once any interface is described the groups move onto every interface. Without any of these settings no
interface is described and the groups stay at the top level (``SecurityGroupIds``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleetwright.model.ec2nodeclass import ConnectionTracking, EC2NodeClassSpec

EFA_ONLY = "efa-only"


def connection_tracking(tracking: ConnectionTracking | None) -> dict[str, int] | None:
    """``ConnectionTrackingSpecification`` (only the timeouts that are set), or None."""
    if tracking is None:
        return None
    fields = {
        "TcpEstablishedTimeout": tracking.tcp_established_timeout,
        "UdpStreamTimeout": tracking.udp_stream_timeout,
        "UdpTimeout": tracking.udp_timeout,
    }
    chosen = {name: value for name, value in fields.items() if value is not None}
    return chosen or None


def _addressing(spec: EC2NodeClassSpec) -> dict[str, Any]:
    """Prefixes, public IP and connection tracking: what an IP-carrying interface gets."""
    fields: dict[str, Any] = {}
    if spec.ip_prefix_count is not None:
        fields["Ipv4PrefixCount"] = spec.ip_prefix_count
    if spec.associate_public_ip_address is not None:
        fields["AssociatePublicIpAddress"] = spec.associate_public_ip_address
    tracking = connection_tracking(spec.connection_tracking)
    if tracking is not None:
        fields["ConnectionTrackingSpecification"] = tracking
    return fields


def network_interfaces(
    spec: EC2NodeClassSpec, security_groups: Sequence[str], efa_count: int = 0
) -> list[dict[str, Any]] | None:
    """The interfaces to describe in the launch template, or None when the defaults do.

    In the order Karpenter chooses: the node class's ``networkInterfaces`` (``efa-only`` interfaces get
    no addresses, public IP or connection tracking: EC2 refuses them there); else ``efa_count`` EFA
    interfaces, one per network card, the first at device index 0 and the others at 1; else the
    primary interface alone when an addressing setting needs it.
    """
    groups = list(security_groups)
    addressing = _addressing(spec)
    if spec.network_interfaces:
        described = []
        for interface in spec.network_interfaces:
            entry: dict[str, Any] = {
                "NetworkCardIndex": interface.network_card_index,
                "DeviceIndex": interface.device_index,
                "InterfaceType": interface.interface_type,
                "Groups": groups,
            }
            if interface.interface_type != EFA_ONLY:
                entry.update(addressing)
            described.append(entry)
        return described
    if efa_count > 0:
        return [
            {
                "NetworkCardIndex": card,
                "DeviceIndex": 0 if card == 0 else 1,
                "InterfaceType": "efa",
                "Groups": groups,
                **addressing,
            }
            for card in range(efa_count)
        ]
    if addressing:
        return [{"DeviceIndex": 0, "Groups": groups, **addressing}]
    return None
