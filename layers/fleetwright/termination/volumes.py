"""Which VolumeAttachments still hold a drained node: the instance is terminated only once the
attach-detach controller has detached the volumes of the pods that left, so they can attach elsewhere.

The attachments of pods a drain leaves in place (DaemonSet and mirror pods) do not count: those pods go
with the node and their volumes with them. Neither do attachments of inline volumes (no PersistentVolume
name): nothing else waits to attach them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetwright.kube.cluster import KubeCluster


def attachment_name(attachment: Mapping[str, Any]) -> str:
    """``metadata.name``."""
    return str((attachment.get("metadata") or {}).get("name") or "")


def attached_pv(attachment: Mapping[str, Any]) -> str:
    """The PersistentVolume an attachment is for ("" for an inline volume)."""
    source = (attachment.get("spec") or {}).get("source") or {}
    return str(source.get("persistentVolumeName") or "")


def namespace_of(pod: Mapping[str, Any]) -> str:
    """The pod's namespace."""
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The PersistentVolumeClaims a pod mounts."""
    names = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = (volume or {}).get("persistentVolumeClaim") or {}
        if claim.get("claimName"):
            names.append(str(claim["claimName"]))
    return names


def pending_attachments(kube: KubeCluster, node: str, staying_pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of ``node``'s VolumeAttachments the termination waits for, sorted; ``staying_pods`` are the
    pods on the node a drain does not move (their volumes' attachments are left out)."""
    attachments = [a for a in kube.list_volume_attachments(node) if attached_pv(a)]
    if not attachments:
        return []
    claims = {(namespace_of(p), c) for p in staying_pods for c in claim_names(p)}
    kept: set[str] = set()
    if claims:
        for claim in kube.list_pvcs():
            meta = claim.get("metadata") or {}
            if (str(meta.get("namespace") or "default"), str(meta.get("name") or "")) in claims:
                kept.add(str((claim.get("spec") or {}).get("volumeName") or ""))
    return sorted(attachment_name(a) for a in attachments if attached_pv(a) not in kept)
