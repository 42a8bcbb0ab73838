"""Conversion of older Karpenter documents to v1.

Handled: ``karpenter.sh/v1beta1`` NodePool, ``karpenter.k8s.aws/v1beta1`` EC2NodeClass,
``karpenter.sh/v1alpha5`` Provisioner and ``karpenter.k8s.aws/v1alpha1`` AWSNodeTemplate. Conversion works
on plain mappings: the result is validated by the v1 models like any v1 document, and problems found there
are reported at the field's place in the *original* document (see :meth:`Conversion.legacy_path`).

Kubelet settings that older versions kept on the NodePool/Provisioner belong to the node class in v1; they
are returned separately (:attr:`Conversion.kubelet`) so the NodePool can carry them for its own nodes.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwright.model.ec2nodeclass import ALIAS_FAMILIES, EC2NODECLASS_API_VERSION, EC2NODECLASS_KIND
from fleetwright.model.nodepool import NODECLASS_GROUP, NODECLASS_KIND, NODEPOOL_API_VERSION, NODEPOOL_KIND
from fleetwright.model.quantity import format_duration

NODEPOOL_V1BETA1 = ("karpenter.sh/v1beta1", "NodePool")
EC2NODECLASS_V1BETA1 = ("karpenter.k8s.aws/v1beta1", "EC2NodeClass")
PROVISIONER_V1ALPHA5 = ("karpenter.sh/v1alpha5", "Provisioner")
AWSNODETEMPLATE_V1ALPHA1 = ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate")
LEGACY_KINDS = frozenset(
    {NODEPOOL_V1BETA1, EC2NODECLASS_V1BETA1, PROVISIONER_V1ALPHA5, AWSNODETEMPLATE_V1ALPHA1}
)

# v1beta1 and older defaulted the IMDS hop limit to 2 (v1: 1); keeping 2 keeps pods' IMDS access working.
LEGACY_HOP_LIMIT = 2
_ID_KEYS = ("aws-ids", "aws::ids")

# v1alpha5 AWSNodeTemplates could leave out instanceProfile: Karpenter then used its global setting
# aws.defaultInstanceProfile. v1 has no such default, so they get the node role of the Fleetwright
# deployment: the one the CDK stack creates, named to every function in this variable.
ENV_NODE_ROLE = "FLEETWRIGHT_NODE_ROLE_NAME"
# The role written where no deployment is known (``fleetwright plan``/``validate`` without
# FLEETWRIGHT_NODE_ROLE_NAME, ``cdk synth`` without nodeRoleName): a stand-in, never a real role name
# (IAM names have no spaces), replaced by the real one where the functions convert the document.
STACK_NODE_ROLE = "<node role of the Fleetwright stack>"
_NODE_ROLE: ContextVar[str | None] = ContextVar("fleetwright_legacy_node_role", default=None)


@contextlib.contextmanager
def stack_node_role(name: str | None) -> Iterator[None]:
    """Within the block, AWSNodeTemplates without instanceProfile get ``name`` (None: the default)."""
    token = _NODE_ROLE.set(name)
    try:
        yield
    finally:
        _NODE_ROLE.reset(token)


def node_role_for_legacy() -> str:
    """The role given to AWSNodeTemplates without instanceProfile: :func:`stack_node_role`'s, else
    ``FLEETWRIGHT_NODE_ROLE_NAME``, else :data:`STACK_NODE_ROLE`."""
    return _NODE_ROLE.get() or os.environ.get(ENV_NODE_ROLE, "").strip() or STACK_NODE_ROLE


_METADATA_KEYS = ("name", "namespace", "labels", "annotations")


@dataclass
class Conversion:
    """An older document rewritten as v1, with what changed and where each v1 field came from."""

    api_version: str
    kind: str
    document: dict[str, Any]
    changes: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    # (v1 path prefix, legacy path, keep the rest of the path) — longest prefix wins.
    paths: list[tuple[str, str, bool]] = field(default_factory=list)
    kubelet: Any = None
    kubelet_path: str = ""

    @property
    def v1_kind(self) -> str:
        """The kind of the converted document."""
        return str(self.document.get("kind", ""))

    def legacy_path(self, v1_path: str) -> str:
        """Where a field of the converted document was in the original one."""
        best: tuple[str, str, bool] | None = None
        for prefix, legacy, keep in self.paths:
            matches = v1_path == prefix or v1_path.startswith((prefix + ".", prefix + "["))
            if matches and (best is None or len(prefix) > len(best[0])):
                best = (prefix, legacy, keep)
        if best is None:
            return v1_path
        prefix, legacy, keep = best
        return legacy + v1_path[len(prefix) :] if keep else legacy

    def render(self) -> str:
        """The warning text: what changed, then the equivalent v1 document as YAML."""
        target = str(self.document.get("apiVersion", ""))
        lines = [f"{self.api_version} {self.kind} is deprecated; converted to {target} {self.v1_kind}:"]
        lines += [f"  - {change}" for change in self.changes]
        lines.append("  the equivalent v1 document:")
        lines += ["    " + line for line in _yaml(self.document).splitlines()]
        if self.kubelet is not None:
            lines.append("  and in the referenced EC2NodeClass:")
            lines += ["    " + line for line in _yaml({"spec": {"kubelet": self.kubelet}}).splitlines()]
        return "\n".join(lines)


class _PlainDumper(yaml.SafeDumper):
    """Writes shared sub-objects out in full rather than as ``&id001`` anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _yaml(data: Any) -> str:
    try:
        return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False)
    except yaml.YAMLError:
        return repr(data)


def convert_legacy(doc: Mapping[str, Any]) -> Conversion:
    """Rewrite a legacy Karpenter document as v1; ``problems`` lists what cannot be converted."""
    key = (str(doc.get("apiVersion", "")), str(doc.get("kind", "")))
    if key not in LEGACY_KINDS:
        raise ValueError(f"not a legacy Karpenter document: {key}")
    conversion = Conversion(api_version=key[0], kind=key[1], document={})
    if key == NODEPOOL_V1BETA1:
        _nodepool_v1beta1(doc, conversion)
    elif key == EC2NODECLASS_V1BETA1:
        _ec2nodeclass_v1beta1(doc, conversion)
    elif key == PROVISIONER_V1ALPHA5:
        _provisioner(doc, conversion)
    else:
        _awsnodetemplate(doc, conversion)
    return conversion


# --- helpers -----------------------------------------------------------------------------------------


def _mapping(value: Any, path: str, conversion: Conversion, *, required: bool = False) -> dict[str, Any]:
    """``value`` as a (copied) dict; records a problem and gives {} when it is not a mapping."""
    if value is None:
        if required:
            conversion.problems.append((path, "required field is missing"))
        return {}
    if not isinstance(value, Mapping):
        conversion.problems.append((path, f"expected a mapping, got {type(value).__name__}"))
        return {}
    return copy.deepcopy(dict(value))


def _unknown_fields(
    spec: Mapping[str, Any], known: tuple[str, ...], path: str, conversion: Conversion
) -> None:
    for key in spec:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; expected one of {', '.join(known)}"
            conversion.problems.append((f"{path}.{key}", f"unknown field {key!r}{hint}"))


def _seconds(value: Any, path: str, conversion: Conversion) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        conversion.problems.append((path, f"expected a non-negative number of seconds, got {value!r}"))
        return None
    return value


def _metadata(doc: Mapping[str, Any]) -> Any:
    metadata = doc.get("metadata")
    if isinstance(metadata, Mapping):
        return {key: copy.deepcopy(metadata[key]) for key in _METADATA_KEYS if key in metadata}
    return copy.deepcopy(metadata)


def _hop_limit(spec: dict[str, Any], conversion: Conversion) -> None:
    options = spec.get("metadataOptions")
    if options is None:
        spec["metadataOptions"] = {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": LEGACY_HOP_LIMIT,
            "httpTokens": "required",
        }
    elif isinstance(options, dict) and "httpPutResponseHopLimit" not in options:
        options["httpPutResponseHopLimit"] = LEGACY_HOP_LIMIT
    else:
        return
    conversion.changes.append(
        f"metadataOptions.httpPutResponseHopLimit set to {LEGACY_HOP_LIMIT}, "
        "the old default (v1 defaults to 1)"
    )


def _alias_for(family: Any, spec: dict[str, Any], conversion: Conversion, path: str) -> None:
    """Older versions picked the EKS-optimized AMI of ``amiFamily`` when no AMI selector was given."""
    alias_family = str(family).lower()
    if alias_family not in ALIAS_FAMILIES:
        conversion.problems.append(
            (path, f"amiFamily {family} has no EKS-optimized AMI alias; select AMIs explicitly")
        )
        return
    spec["amiSelectorTerms"] = [{"alias": f"{alias_family}@latest"}]
    conversion.changes.append(f"no AMI selector: amiSelectorTerms set to alias {alias_family}@latest")


def _family(spec: dict[str, Any], has_selector: bool, selector_path: str, conversion: Conversion) -> Any:
    family = spec.get("amiFamily")
    if family is None:
        family = spec["amiFamily"] = "AL2"
        conversion.changes.append("amiFamily defaulted to AL2, the old default")
    if family == "Ubuntu":
        if has_selector:
            spec["amiFamily"] = "AL2"
            conversion.changes.append(
                "amiFamily Ubuntu (removed in v1) became AL2, which uses the same user data"
            )
        else:
            spec["amiFamily"] = "AL2"  # reported below; keeps v1 validation from repeating it
            conversion.problems.append(
                (
                    selector_path,
                    "amiFamily Ubuntu was removed in v1: select your Ubuntu AMIs here explicitly "
                    "(they are then launched with amiFamily AL2)",
                )
            )
    return family


# --- karpenter.sh/v1beta1 NodePool -------------------------------------------------------------------


def _nodepool_v1beta1(doc: Mapping[str, Any], conversion: Conversion) -> None:
    document = {key: copy.deepcopy(value) for key, value in doc.items() if key != "status"}
    document["apiVersion"] = NODEPOOL_API_VERSION
    document["metadata"] = _metadata(doc)
    conversion.document = document
    conversion.changes.append(f"apiVersion became {NODEPOOL_API_VERSION}")
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return
    template = spec.get("template")
    template_spec = template.get("spec") if isinstance(template, dict) else None
    if isinstance(template_spec, dict):
        ref = template_spec.get("nodeClassRef")
        if isinstance(ref, dict) and "group" not in ref:
            api_version = ref.pop("apiVersion", None)
            group = api_version.partition("/")[0] if isinstance(api_version, str) else NODECLASS_GROUP
            template_spec["nodeClassRef"] = {"group": group, "kind": ref.pop("kind", NODECLASS_KIND), **ref}
            conversion.changes.append(f"nodeClassRef.apiVersion became nodeClassRef.group: {group}")
            conversion.paths.append(
                ("spec.template.spec.nodeClassRef.group", "spec.template.spec.nodeClassRef", False)
            )
        if "kubelet" in template_spec:
            conversion.kubelet = template_spec.pop("kubelet")
            conversion.kubelet_path = "spec.template.spec.kubelet"
            conversion.changes.append(
                "spec.template.spec.kubelet moved to the EC2NodeClass (spec.kubelet); "
                "Fleetwright applies it to this NodePool's nodes"
            )
        if "resources" in template_spec:
            template_spec.pop("resources")
            conversion.changes.append("spec.template.spec.resources was dropped (not part of v1)")
    disruption = spec.get("disruption")
    if isinstance(disruption, dict):
        if "expireAfter" in disruption:
            expire_after = disruption.pop("expireAfter")
            if isinstance(template_spec, dict):
                template_spec["expireAfter"] = expire_after
            conversion.changes.append("spec.disruption.expireAfter moved to spec.template.spec.expireAfter")
            conversion.paths.append(("spec.template.spec.expireAfter", "spec.disruption.expireAfter", True))
        if disruption.get("consolidationPolicy") == "WhenUnderutilized":
            disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
            conversion.changes.append("consolidationPolicy WhenUnderutilized became WhenEmptyOrUnderutilized")
        if "consolidateAfter" not in disruption:
            # v1beta1 forbade consolidateAfter with WhenUnderutilized; v1 requires it (0s: at once).
            disruption["consolidateAfter"] = "0s"
            conversion.changes.append("consolidateAfter 0s was added (required in karpenter.sh/v1)")


# --- karpenter.k8s.aws/v1beta1 EC2NodeClass ----------------------------------------------------------


def _ec2nodeclass_v1beta1(doc: Mapping[str, Any], conversion: Conversion) -> None:
    document = {key: copy.deepcopy(value) for key, value in doc.items() if key != "status"}
    document["apiVersion"] = EC2NODECLASS_API_VERSION
    document["metadata"] = _metadata(doc)
    conversion.document = document
    conversion.changes.append(f"apiVersion became {EC2NODECLASS_API_VERSION}")
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return
    has_selector = bool(spec.get("amiSelectorTerms"))
    family = _family(spec, has_selector, "spec.amiSelectorTerms", conversion)
    if not has_selector and family != "Ubuntu":
        _alias_for(family, spec, conversion, "spec.amiSelectorTerms")
    _hop_limit(spec, conversion)


# --- karpenter.sh/v1alpha5 Provisioner ---------------------------------------------------------------

_PROVISIONER_FIELDS = (
    "annotations",
    "labels",
    "taints",
    "startupTaints",
    "requirements",
    "kubeletConfiguration",
    "provider",
    "providerRef",
    "ttlSecondsAfterEmpty",
    "ttlSecondsUntilExpired",
    "limits",
    "weight",
    "consolidation",
)


def _provisioner(doc: Mapping[str, Any], conversion: Conversion) -> None:
    spec = _mapping(doc.get("spec"), "spec", conversion, required=True)
    _unknown_fields(spec, _PROVISIONER_FIELDS, "spec", conversion)
    metadata: dict[str, Any] = {}
    template_spec: dict[str, Any] = {}
    nodepool_spec: dict[str, Any] = {"template": {"metadata": metadata, "spec": template_spec}}
    conversion.document = {
        "apiVersion": NODEPOOL_API_VERSION,
        "kind": NODEPOOL_KIND,
        "metadata": _metadata(doc),
        "spec": nodepool_spec,
    }
    conversion.paths += [
        ("spec.template.metadata.labels", "spec.labels", True),
        ("spec.template.metadata.annotations", "spec.annotations", True),
        ("spec.template.spec.requirements", "spec.requirements", True),
        ("spec.template.spec.taints", "spec.taints", True),
        ("spec.template.spec.startupTaints", "spec.startupTaints", True),
        ("spec.template.spec.nodeClassRef", "spec.providerRef", False),
        ("spec.template.spec.expireAfter", "spec.ttlSecondsUntilExpired", False),
        ("spec.disruption", "spec", False),
        ("spec.limits", "spec.limits.resources", True),
    ]
    for old, new in (("labels", "labels"), ("annotations", "annotations")):
        if old in spec:
            metadata[new] = spec[old]
            conversion.changes.append(f"spec.{old} moved to spec.template.metadata.{new}")
    template_spec["requirements"] = spec.get("requirements", [])
    if "requirements" in spec:
        conversion.changes.append("spec.requirements moved to spec.template.spec.requirements")
    for name in ("taints", "startupTaints"):
        if name in spec:
            template_spec[name] = spec[name]
            conversion.changes.append(f"spec.{name} moved to spec.template.spec.{name}")

    _provider_ref(spec, template_spec, conversion)

    expire = _seconds(spec.get("ttlSecondsUntilExpired"), "spec.ttlSecondsUntilExpired", conversion)
    template_spec["expireAfter"] = format_duration(expire)
    conversion.changes.append(
        f"spec.ttlSecondsUntilExpired became spec.template.spec.expireAfter: {template_spec['expireAfter']}"
        if expire is not None
        else "no ttlSecondsUntilExpired: expireAfter set to Never (nodes did not expire)"
    )
    nodepool_spec["disruption"] = _provisioner_disruption(spec, conversion)

    _provisioner_kubelet(spec, conversion)
    if "limits" in spec:
        limits = _mapping(spec["limits"], "spec.limits", conversion)
        _unknown_fields(limits, ("resources",), "spec.limits", conversion)
        if "resources" in limits:
            nodepool_spec["limits"] = limits["resources"]
            conversion.changes.append("spec.limits.resources moved to spec.limits")
    if "weight" in spec:
        nodepool_spec["weight"] = spec["weight"]


def _provider_ref(spec: Mapping[str, Any], template_spec: dict[str, Any], conversion: Conversion) -> None:
    """spec.providerRef becomes the template's nodeClassRef; inline provider settings cannot be converted."""
    if "provider" in spec:
        conversion.problems.append(
            (
                "spec.provider",
                "inline provider settings are not supported: move them to an AWSNodeTemplate "
                "(or an EC2NodeClass) and reference it with spec.providerRef",
            )
        )
    ref = _mapping(spec.get("providerRef"), "spec.providerRef", conversion)
    if "providerRef" not in spec and "provider" not in spec:
        conversion.problems.append(
            (
                "spec.providerRef",
                "required: Fleetwright needs an AWSNodeTemplate/EC2NodeClass to launch nodes",
            )
        )
    if ref:
        kind = ref.get("kind", "AWSNodeTemplate")
        if kind not in ("AWSNodeTemplate", NODECLASS_KIND):
            conversion.problems.append(("spec.providerRef.kind", f"expected AWSNodeTemplate, got {kind!r}"))
        template_spec["nodeClassRef"] = {
            "group": NODECLASS_GROUP,
            "kind": NODECLASS_KIND,
            "name": ref.get("name"),
        }
        conversion.changes.append(
            "spec.providerRef became spec.template.spec.nodeClassRef (AWSNodeTemplate → EC2NodeClass)"
        )


def _provisioner_kubelet(spec: Mapping[str, Any], conversion: Conversion) -> None:
    """The Provisioner's kubelet settings, which now live on the EC2NodeClass."""
    if "kubeletConfiguration" not in spec:
        return
    kubelet = _mapping(spec["kubeletConfiguration"], "spec.kubeletConfiguration", conversion)
    if kubelet.pop("containerRuntime", None) is not None:
        conversion.changes.append("kubeletConfiguration.containerRuntime was dropped (containerd only)")
    conversion.kubelet = kubelet
    conversion.kubelet_path = "spec.kubeletConfiguration"
    conversion.changes.append(
        "spec.kubeletConfiguration moved to the EC2NodeClass (spec.kubelet); "
        "Fleetwright applies it to this NodePool's nodes"
    )


def _provisioner_disruption(spec: Mapping[str, Any], conversion: Conversion) -> dict[str, Any]:
    after_empty = _seconds(spec.get("ttlSecondsAfterEmpty"), "spec.ttlSecondsAfterEmpty", conversion)
    consolidation = _mapping(spec.get("consolidation"), "spec.consolidation", conversion)
    _unknown_fields(consolidation, ("enabled",), "spec.consolidation", conversion)
    enabled = consolidation.get("enabled", False)
    if not isinstance(enabled, bool):
        conversion.problems.append(("spec.consolidation.enabled", f"expected true or false, got {enabled!r}"))
        enabled = False
    if enabled and after_empty is not None:
        conversion.problems.append(
            (
                "spec.ttlSecondsAfterEmpty",
                "ttlSecondsAfterEmpty and consolidation.enabled are mutually exclusive",
            )
        )
    if enabled:
        conversion.changes.append(
            "consolidation.enabled: true became consolidationPolicy WhenEmptyOrUnderutilized"
        )
        return {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    if after_empty is not None:
        conversion.changes.append(
            "ttlSecondsAfterEmpty became consolidationPolicy WhenEmpty, "
            f"consolidateAfter {format_duration(after_empty)}"
        )
        return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": format_duration(after_empty)}
    conversion.changes.append(
        "no ttlSecondsAfterEmpty or consolidation: consolidationPolicy WhenEmpty, consolidateAfter Never "
        "(nodes were never removed for being empty or underutilized)"
    )
    return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}


# --- karpenter.k8s.aws/v1alpha1 AWSNodeTemplate ------------------------------------------------------

_AWSNODETEMPLATE_FIELDS = (
    "subnetSelector",
    "securityGroupSelector",
    "amiSelector",
    "amiFamily",
    "instanceProfile",
    "userData",
    "tags",
    "blockDeviceMappings",
    "metadataOptions",
    "detailedMonitoring",
    "context",
    "launchTemplate",
)
_COPIED_NODE_TEMPLATE_FIELDS = (
    "instanceProfile",
    "userData",
    "tags",
    "blockDeviceMappings",
    "metadataOptions",
    "detailedMonitoring",
    "context",
)


def _awsnodetemplate(doc: Mapping[str, Any], conversion: Conversion) -> None:
    spec = _mapping(doc.get("spec"), "spec", conversion, required=True)
    _unknown_fields(spec, _AWSNODETEMPLATE_FIELDS, "spec", conversion)
    out: dict[str, Any] = {}
    conversion.document = {
        "apiVersion": EC2NODECLASS_API_VERSION,
        "kind": EC2NODECLASS_KIND,
        "metadata": _metadata(doc),
        "spec": out,
    }
    conversion.paths += [
        ("spec.subnetSelectorTerms", "spec.subnetSelector", False),
        ("spec.securityGroupSelectorTerms", "spec.securityGroupSelector", False),
        ("spec.amiSelectorTerms", "spec.amiSelector", False),
        ("spec", "spec", True),
    ]
    if "launchTemplate" in spec:
        conversion.problems.append(
            (
                "spec.launchTemplate",
                "launch templates are not supported in v1; describe the settings in the node class",
            )
        )
    amis = _mapping(spec.get("amiSelector"), "spec.amiSelector", conversion)
    out["amiFamily"] = spec.get("amiFamily")
    if out["amiFamily"] is None:
        del out["amiFamily"]
    family = _family(out, bool(amis), "spec.amiSelector", conversion)
    if amis:
        out["amiSelectorTerms"] = _ami_terms(amis, conversion)
        conversion.changes.append("spec.amiSelector became spec.amiSelectorTerms")
    elif family != "Ubuntu":
        _alias_for(family, out, conversion, "spec.amiFamily")
    for name, path, target in (
        ("subnetSelector", "spec.subnetSelector", "subnetSelectorTerms"),
        ("securityGroupSelector", "spec.securityGroupSelector", "securityGroupSelectorTerms"),
    ):
        selector = _mapping(spec.get(name), path, conversion, required=True)
        if selector:
            out[target] = _selector_terms(selector, path, conversion)
            conversion.changes.append(f"spec.{name} became spec.{target}")
    for name in _COPIED_NODE_TEMPLATE_FIELDS:
        if name in spec:
            out[name] = spec[name]
    if "instanceProfile" not in spec:
        role = node_role_for_legacy()
        out["role"] = role
        shown = "a stand-in for it" if role == STACK_NODE_ROLE else repr(role)
        conversion.changes.append(
            "spec.instanceProfile is not set: v1 has no cluster-wide default instance profile "
            "(v1alpha5's aws.defaultInstanceProfile), so spec.role is the Fleetwright stack's node role "
            f"({shown}; stack output NodeRoleName, {ENV_NODE_ROLE} in the functions), "
            "for which Fleetwright manages an instance profile"
        )
        conversion.paths.append(("spec.role", "spec.instanceProfile", False))
    _hop_limit(out, conversion)


def _split_ids(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _selector_values(selector: Mapping[str, Any], path: str, conversion: Conversion) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, value in selector.items():
        if not isinstance(value, str):
            conversion.problems.append((f'{path}["{key}"]', f"expected a string, got {value!r}"))
        else:
            values[str(key)] = value
    return values


def _selector_terms(selector: Mapping[str, Any], path: str, conversion: Conversion) -> list[dict[str, Any]]:
    """``{aws-ids: "a,b"}`` → one ``id`` term each; any other keys → one ``tags`` term."""
    values = _selector_values(selector, path, conversion)
    ids = [item for key in _ID_KEYS if key in values for item in _split_ids(values.pop(key))]
    if ids and values:
        conversion.problems.append(
            (path, "aws-ids cannot be combined with tag selectors; use one or the other")
        )
    return [{"id": item} for item in ids] if ids else [{"tags": values}]


def _ami_terms(selector: Mapping[str, Any], conversion: Conversion) -> list[dict[str, Any]]:
    """``aws::ids`` → ``id`` terms; ``aws::name``/``aws::owners``/tags → name/owner/tags terms."""
    path = "spec.amiSelector"
    values = _selector_values(selector, path, conversion)
    ids = [item for key in _ID_KEYS if key in values for item in _split_ids(values.pop(key))]
    if ids:
        if values:
            conversion.problems.append((path, "aws::ids cannot be combined with other AMI selectors"))
        return [{"id": item} for item in ids]
    owners = _split_ids(values.pop("aws::owners", ""))
    term: dict[str, Any] = {}
    if "aws::name" in values:
        term["name"] = values.pop("aws::name")
    if values:
        term["tags"] = values
    return [{**term, "owner": owner} for owner in owners] if owners else [term]
