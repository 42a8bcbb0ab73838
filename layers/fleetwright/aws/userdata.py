"""Instance user data that joins a node to the cluster, per AMI family.

* AL2023: a nodeadm ``NodeConfig`` in a MIME multipart document, after the user's own parts.
* AL2: a ``/etc/eks/bootstrap.sh`` call, after the user's shell script (MIME multipart).
* Bottlerocket: TOML settings merged over the user's TOML.
* Windows2019/2022/2025: a PowerShell ``Start-EKSBootstrap.ps1`` call (``windows_userdata``).
* Custom: the user's user data unchanged.

With ``instanceStorePolicy: RAID0`` each family is told to put its local NVMe disks in a RAID-0 array for
the kubelet's and containerd's data, as Karpenter writes it: AL2 ``--local-disks raid0``, AL2023
``spec.instance.localStorage.strategy: RAID0``, Bottlerocket an ``apiclient ephemeral-storage`` bootstrap
command (see :func:`raid0_bootstrap_command`).

Output is deterministic (sorted keys, fixed MIME boundary) so equal settings give equal launch
templates.
"""

from __future__ import annotations

import email
import email.message
import email.policy
import json
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.mime.base import MIMEBase
from email.mime.multipart import MIMEMultipart
from typing import Any

import yaml

from fleetwright.aws.cluster import ClusterInfo
from fleetwright.model import labels as wk
from fleetwright.model.ec2nodeclass import KubeletConfiguration
from fleetwright.model.quantity import go_duration_string
from fleetwright.model.taints import Taint

BOUNDARY = "//FLEETWRIGHT//"
NODECONFIG_TYPE = ("application", "node.eks.aws")
SHELL_TYPE = ("text", "x-shellscript")

# Labels the kubelet may not set itself (NodeRestriction) or that the kubelet and cloud controller
# set from the instance anyway.
_SET_BY_NODE = frozenset(
    {wk.ZONE, wk.REGION, wk.INSTANCE_TYPE, wk.ARCH, wk.OS, wk.HOSTNAME, wk.WINDOWS_BUILD}
)
_KUBELET_ALLOWED_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    """Everything user data is made of."""

    cluster: ClusterInfo
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()  # taints and startup taints, registered by the kubelet
    kubelet: KubeletConfiguration | None = None
    custom_user_data: str | None = None
    instance_store_policy: str | None = None
    bottlerocket_version: str = ""  # of the selected AMI ("latest", "v1.46.0", "" when unknown)


def kubelet_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels the kubelet can register: without those in the kubernetes.io/k8s.io domains that
    NodeRestriction forbids, and without those the node sets from the instance itself."""
    result = {}
    for key, value in labels.items():
        if key in _SET_BY_NODE:
            continue
        domain = key.partition("/")[0] if "/" in key else ""
        restricted = domain.endswith("kubernetes.io") or domain.endswith("k8s.io")
        if restricted and not key.startswith(_KUBELET_ALLOWED_PREFIXES):
            continue
        result[key] = value
    return dict(sorted(result.items()))


def _labels_flag(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in kubelet_labels(labels).items())


def _taints_flag(taints: Iterable[Taint]) -> str:
    return ",".join(t.render() for t in taints)


def _kubelet_config(options: BootstrapOptions) -> dict[str, Any]:
    """KubeletConfiguration fields (camelCase) from the node class's kubelet settings."""
    kubelet = options.kubelet
    if kubelet is None:
        return {}
    dumped = kubelet.model_dump(by_alias=True, exclude_none=True)
    return {key: dumped[key] for key in sorted(dumped)}


def nodeconfig(options: BootstrapOptions) -> dict[str, Any]:
    """The nodeadm ``NodeConfig`` document joining the node to the cluster."""
    cluster = options.cluster
    config = _kubelet_config(options)
    if options.taints:
        config["registerWithTaints"] = [
            {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
            for t in options.taints
        ]
    flags = []
    labels = _labels_flag(options.labels)
    if labels:
        flags.append(f"--node-labels={labels}")
    kubelet: dict[str, Any] = {}
    if config:
        kubelet["config"] = config
    if flags:
        kubelet["flags"] = flags
    spec: dict[str, Any] = {
        "cluster": {
            "name": cluster.name,
            "apiServerEndpoint": cluster.endpoint,
            "certificateAuthority": cluster.ca_bundle,
            "cidr": cluster.service_cidr,
        }
    }
    if kubelet:
        spec["kubelet"] = kubelet
    if _raid0(options):
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def _part(maintype: str, subtype: str, payload: str) -> MIMEBase:
    part = MIMEBase(maintype, subtype, charset="us-ascii")
    del part["MIME-Version"]
    part.set_payload(payload)
    return part


def _user_parts(user_data: str | None, default_type: tuple[str, str]) -> list[MIMEBase]:
    """The user's user data as MIME parts (a MIME document is split; anything else is one part)."""
    if not user_data or not user_data.strip():
        return []
    if user_data.lstrip().startswith(("MIME-Version:", "Content-Type: multipart")):
        message = email.message_from_string(user_data, policy=email.policy.compat32)
        if message.is_multipart():
            parts = []
            for sub in message.get_payload():
                if not isinstance(sub, email.message.Message):
                    continue
                payload = sub.get_payload()
                parts.append(_part(sub.get_content_maintype(), sub.get_content_subtype(), str(payload)))
            return parts
    text = user_data
    if "kind: NodeConfig" in text:
        return [_part(*NODECONFIG_TYPE, text)]
    return [_part(*default_type, text)]


def _multipart(parts: Iterable[MIMEBase]) -> str:
    message = MIMEMultipart("mixed", boundary=BOUNDARY)
    for part in parts:
        message.attach(part)
    return message.as_string(policy=email.policy.compat32.clone(linesep="\n"))


def al2023_user_data(options: BootstrapOptions) -> str:
    """MIME multipart: the user's parts, then Fleetwright's NodeConfig (nodeadm merges them in order)."""
    ours = yaml.safe_dump(nodeconfig(options), sort_keys=False, default_flow_style=False)
    return _multipart([*_user_parts(options.custom_user_data, SHELL_TYPE), _part(*NODECONFIG_TYPE, ours)])


@dataclass(frozen=True, slots=True)
class KubeletFlag:
    """One kubelet command-line flag; ``listed`` values are comma-separated lists (labels, taints,
    key/value maps), which some families quote."""

    name: str
    value: str
    listed: bool = False


def kubelet_flags(options: BootstrapOptions, *, windows: bool = False) -> list[KubeletFlag]:
    """The kubelet flags Karpenter passes to a bootstrap script, in its order: labels, taints, then the
    node class's kubelet settings. For Windows it names system before kube reservations and always
    passes ``--register-with-taints`` (empty when there are none)."""
    flags = []
    labels = _labels_flag(options.labels)
    if labels:
        flags.append(KubeletFlag("--node-labels", labels, listed=True))
    if options.taints or windows:
        flags.append(KubeletFlag("--register-with-taints", _taints_flag(options.taints), listed=True))
    kubelet = options.kubelet
    if kubelet is None:
        return flags
    if kubelet.max_pods is not None:
        flags.append(KubeletFlag("--max-pods", str(kubelet.max_pods)))
    if kubelet.pods_per_core is not None:
        flags.append(KubeletFlag("--pods-per-core", str(kubelet.pods_per_core)))
    reserved = [("--kube-reserved", kubelet.kube_reserved), ("--system-reserved", kubelet.system_reserved)]
    for flag, values, separator in (
        *[(name, values, "=") for name, values in (reversed(reserved) if windows else reserved)],
        ("--eviction-hard", kubelet.eviction_hard, "<"),
        ("--eviction-soft", kubelet.eviction_soft, "<"),
        ("--eviction-soft-grace-period", kubelet.eviction_soft_grace_period, "="),
    ):
        if values:
            pairs = ",".join(f"{k}{separator}{v}" for k, v in sorted(values.items()))
            flags.append(KubeletFlag(flag, pairs, listed=True))
    for flag, value in (
        ("--eviction-max-pod-grace-period", kubelet.eviction_max_pod_grace_period),
        ("--image-gc-high-threshold", kubelet.image_gc_high_threshold_percent),
        ("--image-gc-low-threshold", kubelet.image_gc_low_threshold_percent),
        ("--cpu-cfs-quota", None if kubelet.cpu_cfs_quota is None else str(kubelet.cpu_cfs_quota).lower()),
    ):
        if value is not None:
            flags.append(KubeletFlag(flag, str(value)))
    return flags


def _al2_kubelet_args(options: BootstrapOptions) -> list[str]:
    """``--kubelet-extra-args`` words for bootstrap.sh (the whole string is shell-quoted once)."""
    return [f"{flag.name}={flag.value}" for flag in kubelet_flags(options)]


def al2_user_data(options: BootstrapOptions) -> str:
    """MIME multipart: the user's shell script, then ``/etc/eks/bootstrap.sh`` with kubelet flags."""
    cluster = options.cluster
    command = [
        "/etc/eks/bootstrap.sh",
        cluster.name,
        "--apiserver-endpoint",
        cluster.endpoint,
        "--b64-cluster-ca",
        cluster.ca_bundle,
    ]
    kubelet = options.kubelet
    if kubelet is not None and kubelet.cluster_dns:
        command += ["--dns-cluster-ip", kubelet.cluster_dns[0]]
    if kubelet is not None and kubelet.max_pods is not None:
        command += ["--use-max-pods", "false"]
    kubelet_args = _al2_kubelet_args(options)
    if kubelet_args:
        command += ["--kubelet-extra-args", " ".join(kubelet_args)]
    if _raid0(options):
        command += ["--local-disks", "raid0"]
    script = "#!/bin/bash -xe\n" + " ".join(shlex.quote(word) for word in command) + "\n"
    return _multipart([*_user_parts(options.custom_user_data, SHELL_TYPE), _part(*SHELL_TYPE, script)])


def bottlerocket_settings(options: BootstrapOptions) -> dict[str, Any]:
    """The ``settings.kubernetes`` table Fleetwright contributes."""
    cluster = options.cluster
    kubernetes: dict[str, Any] = {
        "api-server": cluster.endpoint,
        "cluster-certificate": cluster.ca_bundle,
        "cluster-name": cluster.name,
    }
    if options.kubelet is not None:
        kubernetes.update(bottlerocket_kubelet_settings(options.kubelet))
    labels = kubelet_labels(options.labels)
    if labels:
        kubernetes["node-labels"] = labels
    if options.taints:
        taints: dict[str, list[str]] = {}
        for taint in options.taints:
            taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
        kubernetes["node-taints"] = dict(sorted(taints.items()))
    settings: dict[str, Any] = {"kubernetes": kubernetes}
    if _raid0(options):
        settings["bootstrap-commands"] = raid0_bootstrap_command(options.bottlerocket_version)
    return {"settings": settings}


def bottlerocket_kubelet_settings(kubelet: KubeletConfiguration) -> dict[str, Any]:
    """The node class's kubelet settings under Bottlerocket's ``settings.kubernetes`` names, as Karpenter
    writes them: soft-eviction grace periods as Go prints a duration (``1m`` → ``1m0s``)."""
    kubernetes: dict[str, Any] = {}
    if kubelet.max_pods is not None:
        kubernetes["max-pods"] = kubelet.max_pods
    if kubelet.cluster_dns:
        kubernetes["cluster-dns-ip"] = kubelet.cluster_dns[0]
    grace = {
        key: go_duration_string(value) for key, value in (kubelet.eviction_soft_grace_period or {}).items()
    }
    for key, values in (
        ("kube-reserved", kubelet.kube_reserved),
        ("system-reserved", kubelet.system_reserved),
        ("eviction-hard", kubelet.eviction_hard),
        ("eviction-soft", kubelet.eviction_soft),
        ("eviction-soft-grace-period", grace),
    ):
        if values:
            kubernetes[key] = dict(sorted(values.items()))
    for key, value in (
        ("eviction-max-pod-grace-period", kubelet.eviction_max_pod_grace_period),
        ("image-gc-high-threshold-percent", kubelet.image_gc_high_threshold_percent),
        ("image-gc-low-threshold-percent", kubelet.image_gc_low_threshold_percent),
        ("cpu-cfs-quota-enforced", kubelet.cpu_cfs_quota),
    ):
        if value is not None:
            kubernetes[key] = value
    return kubernetes


def _raid0(options: BootstrapOptions) -> bool:
    return options.instance_store_policy == "RAID0"


def bottlerocket_binds_default_paths(version: str) -> bool:
    """True when this Bottlerocket release binds the default paths itself (``latest``, or v1.46.0 and
    later): ``apiclient ephemeral-storage bind`` then needs no ``--dirs``."""
    if version == "latest":
        return True
    parts = version.lstrip("v").split(".")
    if len(parts) < 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return False
    major, minor = int(parts[0]), int(parts[1])
    return major > 1 or (major == 1 and minor >= 46)


def raid0_bootstrap_command(version: str) -> dict[str, Any]:
    """Bottlerocket's ``settings.bootstrap-commands`` entry that makes the instance store the node's
    ephemeral storage, run on every boot and essential."""
    bind = ["apiclient", "ephemeral-storage", "bind"]
    if not bottlerocket_binds_default_paths(version):
        bind += ["--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]
    return {
        "000-mount-instance-storage": {
            "commands": [["apiclient", "ephemeral-storage", "init"], bind],
            "essential": True,
            "mode": "always",
        }
    }


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def bottlerocket_user_data(options: BootstrapOptions) -> str:
    """TOML: the user's settings with Fleetwright's cluster, kubelet, label and taint settings on top."""
    user = tomllib.loads(options.custom_user_data) if options.custom_user_data else {}
    return to_toml(_merge(user, bottlerocket_settings(options)))


def to_toml(document: Mapping[str, Any]) -> str:
    """A small TOML writer for nested tables of strings, numbers, booleans and lists of those."""
    lines: list[str] = []

    def key(name: str) -> str:
        return name if name.replace("-", "").replace("_", "").isalnum() else json.dumps(name)

    def value(item: Any) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, int | float):
            return repr(item)
        if isinstance(item, list):
            return "[" + ", ".join(value(v) for v in item) + "]"
        return json.dumps(str(item), ensure_ascii=False)

    def table(path: list[str], body: Mapping[str, Any]) -> None:
        scalars = [(k, v) for k, v in body.items() if not isinstance(v, Mapping)]
        tables = [(k, v) for k, v in body.items() if isinstance(v, Mapping)]
        if path and (scalars or not tables):
            lines.append(f"[{'.'.join(key(p) for p in path)}]")
        for name, item in scalars:
            lines.append(f"{key(name)} = {value(item)}")
        if scalars:
            lines.append("")
        for name, item in tables:
            table([*path, name], item)

    table([], document)
    return "\n".join(lines).rstrip("\n") + "\n"


def user_data_for(family: str, options: BootstrapOptions) -> str:
    """User data for an AMI family (``AL2023``, ``AL2``, ``Bottlerocket``, ``Windows*``; others get the
    user's own)."""
    normalized = family.lower()
    if normalized == "al2023":
        return al2023_user_data(options)
    if normalized == "al2":
        return al2_user_data(options)
    if normalized == "bottlerocket":
        return bottlerocket_user_data(options)
    if normalized.startswith("windows"):
        from fleetwright.aws.windows_userdata import windows_user_data

        return windows_user_data(options)
    return options.custom_user_data or ""
