"""Deprecated node label keys read as their GA forms, as Kubernetes and Karpenter do.

Nodes carry both forms, so a NodePool requirement or a pod selector written with a ``beta`` key means the
same as one written with the GA key; reading it as the GA key lets it meet the instance types and offerings
that decide those labels.
"""

from __future__ import annotations

from dataclasses import replace

from fleetwright.model.labels import ARCH, INSTANCE_TYPE, OS, REGION, ZONE
from fleetwright.model.pod import Pod, PreferredTerm
from fleetwright.model.requirements import Requirements

# Karpenter's NormalizedLabels: deprecated key -> GA key.
NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
}


def normalize_requirements(requirements: Requirements) -> Requirements:
    """``requirements`` with deprecated keys renamed (intersected with the GA key's requirement, if any)."""
    if not any(r.key in NORMALIZED_LABELS for r in requirements):
        return requirements
    return Requirements.of(
        replace(r, key=NORMALIZED_LABELS[r.key]) if r.key in NORMALIZED_LABELS else r for r in requirements
    )


def normalize_labels(labels: dict[str, str]) -> dict[str, str]:
    """``labels`` with deprecated keys renamed (the GA key's own value wins when both are set)."""
    if not any(key in NORMALIZED_LABELS for key in labels):
        return labels
    renamed = {NORMALIZED_LABELS.get(k, k): v for k, v in labels.items() if k in NORMALIZED_LABELS}
    return {**renamed, **{k: v for k, v in labels.items() if k not in NORMALIZED_LABELS}}


def normalize_pod(pod: Pod) -> Pod:
    """``pod`` itself when its node selection uses GA keys only, else a copy that does."""
    selector = normalize_requirements(pod.node_selector)
    required = tuple(normalize_requirements(term) for term in pod.required_affinity)
    preferred = tuple(
        PreferredTerm(t.weight, normalize_requirements(t.requirements)) for t in pod.preferred_affinity
    )
    if (
        selector is pod.node_selector
        and all(a is b for a, b in zip(required, pod.required_affinity, strict=True))
        and all(
            a.requirements is b.requirements for a, b in zip(preferred, pod.preferred_affinity, strict=True)
        )
    ):
        return pod
    return replace(pod, node_selector=selector, required_affinity=required, preferred_affinity=preferred)
