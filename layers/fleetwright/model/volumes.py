"""Where a pod's volumes let it run: zone requirements from PersistentVolumes and StorageClasses.

A claim bound to a volume with node affinity pins the pod to that volume's topology; an unbound claim
of a ``WaitForFirstConsumer`` StorageClass with ``allowedTopologies`` restricts it to those; a claim
that does not exist makes the pod unschedulable, as in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetwright.model.labels import ZONE
from fleetwright.model.requirements import Requirement, Requirements

# CSI drivers label nodes with their own zone key; it means the same as the well-known zone label.
ZONE_ALIASES = frozenset(
    {
        "topology.ebs.csi.aws.com/zone",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.k8s.aws/zone",  # never set by EBS for zones, but harmless
    }
)
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

VolumeRequirements = dict[str, Requirements | str]


def _key(key: str) -> str:
    return ZONE if key in ZONE_ALIASES else key


def _expressions(raw: Iterable[Mapping[str, Any]]) -> Requirements:
    items = []
    for expr in raw:
        values = [str(v) for v in expr.get("values") or []]
        items.append(
            Requirement.create(_key(str(expr.get("key", ""))), str(expr.get("operator", "In")), values)
        )
    return Requirements.of(items)


def _pv_requirements(pv: Mapping[str, Any]) -> Requirements:
    terms = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get(
        "nodeSelectorTerms"
    )
    if not terms:
        return Requirements()
    # Terms are ORed; a volume lives in one place, so the first term describes it.
    return _expressions(terms[0].get("matchExpressions") or [])


def _class_requirements(storage_class: Mapping[str, Any]) -> Requirements:
    if storage_class.get("volumeBindingMode") != "WaitForFirstConsumer":
        return Requirements()
    topologies = storage_class.get("allowedTopologies") or []
    items = []
    for topology in topologies:
        for expr in topology.get("matchLabelExpressions") or []:
            items.append(
                Requirement.create(
                    _key(str(expr.get("key", ""))), "In", [str(v) for v in expr.get("values") or []]
                )
            )
    return Requirements.of(items)


def volume_requirements(
    pvcs: Iterable[Mapping[str, Any]],
    pvs: Iterable[Mapping[str, Any]],
    storage_classes: Iterable[Mapping[str, Any]],
) -> VolumeRequirements:
    """``{"namespace/claim": requirements or the reason the claim cannot be used}`` for every claim."""
    volumes = {str((pv.get("metadata") or {}).get("name")): pv for pv in pvs}
    classes = {str((sc.get("metadata") or {}).get("name")): sc for sc in storage_classes}
    default_class = next(
        (
            name
            for name, sc in classes.items()
            if ((sc.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"
        ),
        None,
    )
    result: VolumeRequirements = {}
    for pvc in pvcs:
        meta = pvc.get("metadata") or {}
        spec = pvc.get("spec") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        volume_name = spec.get("volumeName")
        if volume_name:
            pv = volumes.get(str(volume_name))
            result[key] = (
                _pv_requirements(pv) if pv is not None else f'persistentvolume "{volume_name}" not found'
            )
            continue
        class_name = spec.get("storageClassName", default_class)
        if not class_name:
            result[key] = Requirements()
            continue
        storage_class = classes.get(str(class_name))
        if storage_class is None:
            result[key] = f'storageclass "{class_name}" not found'
            continue
        result[key] = _class_requirements(storage_class)
    return result


def pod_volume_requirements(
    namespace: str, claims: Iterable[str], volumes: Mapping[str, Requirements | str]
) -> Requirements | str:
    """The requirements all of a pod's claims impose, or why it cannot run."""
    combined = Requirements()
    for claim in claims:
        found = volumes.get(f"{namespace}/{claim}")
        if found is None:
            return f'persistentvolumeclaim "{claim}" not found'
        if isinstance(found, str):
            return f'persistentvolumeclaim "{claim}": {found}'
        combined = combined.intersect(found)
    return combined
