"""Reading node user data back: what a kubelet booted from it would register (labels, taints, limits).

The inverse of :mod:`fleetwright.aws.userdata` for the kubelet simulator. It understands the three
formats that module writes, and the same formats when written by hand:

* AL2023: nodeadm ``NodeConfig`` documents (in MIME multipart, or bare YAML). ``kubelet.flags`` may carry
  ``--node-labels`` / ``--register-with-taints``; ``kubelet.config`` may carry ``registerWithTaints``,
  ``maxPods``, ``kubeReserved``, ...; later documents override earlier ones, as nodeadm merges them.
* AL2: ``/etc/eks/bootstrap.sh CLUSTER ... --kubelet-extra-args '...'`` in a shell script.
* Bottlerocket: TOML ``settings.kubernetes`` (``node-labels``, ``node-taints``, ``max-pods``, ...).
* Windows: PowerShell ``& $EKSBootstrapScriptFile -EKSClusterName '...' -KubeletExtraArgs '...'``.
"""

from __future__ import annotations

import email
import email.message
import email.policy
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.quantity import QuantityError
from fleetwright.model.resources import ResourceList, parse_resources
from fleetwright.model.taints import Taint

AL2023 = "AL2023"
AL2 = "AL2"
BOTTLEROCKET = "Bottlerocket"
WINDOWS = "Windows"  # the build comes from the AMI, not from user data


@dataclass(frozen=True, slots=True)
class NodeBootstrap:
    """What user data tells the kubelet: its cluster, the labels and taints to register with, and the
    settings that shape allocatable. ``family`` is ``AL2023``, ``AL2``, ``Bottlerocket``, ``Windows`` or
    ``""`` when no bootstrap configuration was found."""

    family: str = ""
    cluster_name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    kubelet: KubeletOverrides = field(default_factory=KubeletOverrides)


@dataclass
class _Settings:
    """Accumulates settings while documents are read in order (later ones win)."""

    family: str = ""
    cluster_name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] | None = None
    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: dict[str, str] = field(default_factory=dict)
    system_reserved: dict[str, str] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)
    eviction_soft: dict[str, str] = field(default_factory=dict)

    def result(self) -> NodeBootstrap:
        return NodeBootstrap(
            family=self.family,
            cluster_name=self.cluster_name,
            labels=dict(self.labels),
            taints=tuple(self.taints or ()),
            kubelet=KubeletOverrides(
                max_pods=self.max_pods,
                pods_per_core=self.pods_per_core,
                kube_reserved=_resources(self.kube_reserved),
                system_reserved=_resources(self.system_reserved),
                eviction_hard=dict(self.eviction_hard),
                eviction_soft=dict(self.eviction_soft),
            ),
        )


def _resources(raw: Mapping[str, str]) -> ResourceList:
    try:
        return parse_resources(raw)
    except QuantityError:
        return {}  # a kubelet would refuse to start; the simulator registers with defaults instead


def parse_user_data(user_data: str | bytes) -> NodeBootstrap:
    """The bootstrap settings in ``user_data`` (already base64-decoded); unknown formats give defaults."""
    text = user_data.decode("utf-8", errors="replace") if isinstance(user_data, bytes) else user_data
    settings = _Settings()
    for content_type, body in _parts(text):
        _read_part(settings, content_type, body)
    return settings.result()


def _parts(text: str) -> list[tuple[str, str]]:
    """``(content type, body)`` of each MIME part, or the whole text with an empty content type."""
    stripped = text.lstrip()
    if stripped.startswith(("MIME-Version:", "Content-Type:")):
        message = email.message_from_string(stripped, policy=email.policy.compat32)
        if message.is_multipart():
            parts = []
            for sub in message.walk():
                if sub.is_multipart():
                    continue
                payload = sub.get_payload(decode=True)
                body = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
                parts.append((sub.get_content_type(), body))
            return parts
    return [("", text)]


def _read_part(settings: _Settings, content_type: str, body: str) -> None:
    if content_type == "application/node.eks.aws" or "kind: NodeConfig" in body:
        for document in yaml.safe_load_all(body):
            if isinstance(document, Mapping) and document.get("kind") == "NodeConfig":
                _read_nodeconfig(settings, document)
        return
    if "/etc/eks/bootstrap.sh" in body:
        _read_bootstrap_script(settings, body)
        return
    if "Start-EKSBootstrap.ps1" in body:
        _read_powershell(settings, body)
        return
    if content_type in ("", "application/toml") and "[settings" in body:
        try:
            document = tomllib.loads(body)
        except tomllib.TOMLDecodeError:
            return
        _read_bottlerocket(settings, document)


# --- AL2023: nodeadm NodeConfig ---------------------------------------------------------------------------


def _read_nodeconfig(settings: _Settings, document: Mapping[str, Any]) -> None:
    settings.family = AL2023
    spec = _mapping(document.get("spec"))
    cluster = _mapping(spec.get("cluster"))
    if cluster.get("name"):
        settings.cluster_name = str(cluster["name"])
    kubelet = _mapping(spec.get("kubelet"))
    config = _mapping(kubelet.get("config"))
    flags = kubelet.get("flags")
    if isinstance(flags, list):
        _read_flags(settings, [str(f) for f in flags])
    if isinstance(config.get("registerWithTaints"), list):
        settings.taints = [
            Taint(str(t.get("key", "")), str(t.get("effect", "")), str(t.get("value") or ""))
            for t in config["registerWithTaints"]
            if isinstance(t, Mapping)
        ]
    if isinstance(config.get("nodeLabels"), Mapping):
        settings.labels.update({str(k): str(v) for k, v in config["nodeLabels"].items()})
    _read_kubelet_values(
        settings,
        max_pods=config.get("maxPods"),
        pods_per_core=config.get("podsPerCore"),
        kube_reserved=config.get("kubeReserved"),
        system_reserved=config.get("systemReserved"),
        eviction_hard=config.get("evictionHard"),
        eviction_soft=config.get("evictionSoft"),
    )


# --- AL2: bootstrap.sh --kubelet-extra-args --------------------------------------------------------------


def _read_bootstrap_script(settings: _Settings, script: str) -> None:
    for line in _logical_lines(script):
        if "/etc/eks/bootstrap.sh" not in line:
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if "/etc/eks/bootstrap.sh" not in words:
            continue
        args = words[words.index("/etc/eks/bootstrap.sh") + 1 :]
        settings.family = AL2
        if args and not args[0].startswith("-"):
            settings.cluster_name = args[0]
        for i, word in enumerate(args):
            if word == "--kubelet-extra-args" and i + 1 < len(args):
                _read_flags(settings, shlex.split(args[i + 1]))
            elif word.startswith("--kubelet-extra-args="):
                _read_flags(settings, shlex.split(word.partition("=")[2]))


# --- Windows: Start-EKSBootstrap.ps1 -KubeletExtraArgs ----------------------------------------------------

_PS_ARGUMENT = re.compile(r"-(?P<name>[A-Za-z]+)\s+'(?P<value>(?:[^']|'')*)'")


def _read_powershell(settings: _Settings, script: str) -> None:
    for line in script.splitlines():
        if "-EKSClusterName" not in line:
            continue
        settings.family = WINDOWS
        arguments = {m["name"]: m["value"].replace("''", "'") for m in _PS_ARGUMENT.finditer(line)}
        if arguments.get("EKSClusterName"):
            settings.cluster_name = arguments["EKSClusterName"]
        if arguments.get("KubeletExtraArgs"):
            try:
                _read_flags(settings, shlex.split(arguments["KubeletExtraArgs"]))
            except ValueError:
                continue


def _logical_lines(script: str) -> Iterable[str]:
    """Lines with backslash continuations joined."""
    pending = ""
    for line in script.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _read_flags(settings: _Settings, flags: list[str]) -> None:
    """Kubelet command-line flags (``--name=value`` or ``--name value``)."""
    values: dict[str, str] = {}
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag.startswith("--") and "=" in flag:
            name, _, value = flag[2:].partition("=")
            values[name] = value
        elif flag.startswith("--") and i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            values[flag[2:]] = flags[i + 1]
            i += 1
        i += 1
    if "node-labels" in values:
        settings.labels.update(_pairs(values["node-labels"], "="))
    if "register-with-taints" in values:
        settings.taints = [_taint(item) for item in values["register-with-taints"].split(",") if item]
    _read_kubelet_values(
        settings,
        max_pods=values.get("max-pods"),
        pods_per_core=values.get("pods-per-core"),
        kube_reserved=_pairs(values.get("kube-reserved", ""), "="),
        system_reserved=_pairs(values.get("system-reserved", ""), "="),
        eviction_hard=_pairs(values.get("eviction-hard", ""), "<"),
        eviction_soft=_pairs(values.get("eviction-soft", ""), "<"),
    )


def _pairs(text: str, separator: str) -> dict[str, str]:
    result = {}
    for item in text.split(","):
        key, sep, value = item.partition(separator)
        if sep and key.strip():
            result[key.strip()] = value.strip()
    return result


def _taint(text: str) -> Taint:
    """``key=value:Effect`` or ``key:Effect``."""
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    return Taint(key.strip(), effect.strip(), value.strip())


# --- Bottlerocket: TOML settings -------------------------------------------------------------------------


def _read_bottlerocket(settings: _Settings, document: Mapping[str, Any]) -> None:
    kubernetes = _mapping(_mapping(document.get("settings")).get("kubernetes"))
    if not kubernetes:
        return
    settings.family = BOTTLEROCKET
    if kubernetes.get("cluster-name"):
        settings.cluster_name = str(kubernetes["cluster-name"])
    settings.labels.update({str(k): str(v) for k, v in _mapping(kubernetes.get("node-labels")).items()})
    raw_taints = kubernetes.get("node-taints")
    if isinstance(raw_taints, Mapping):
        taints = []
        for key, entries in raw_taints.items():
            # Each value is "value:Effect" (or a list of them, one taint per effect).
            for entry in entries if isinstance(entries, list) else [entries]:
                value, _, effect = str(entry).rpartition(":")
                taints.append(Taint(str(key), effect, value))
        settings.taints = taints
    _read_kubelet_values(
        settings,
        max_pods=kubernetes.get("max-pods"),
        pods_per_core=None,
        kube_reserved=kubernetes.get("kube-reserved"),
        system_reserved=kubernetes.get("system-reserved"),
        eviction_hard=kubernetes.get("eviction-hard"),
        eviction_soft=kubernetes.get("eviction-soft"),
    )


# --- shared ----------------------------------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _mapping(value).items()}


def _integer(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _read_kubelet_values(
    settings: _Settings,
    *,
    max_pods: Any,
    pods_per_core: Any,
    kube_reserved: Any,
    system_reserved: Any,
    eviction_hard: Any,
    eviction_soft: Any,
) -> None:
    if _integer(max_pods) is not None:
        settings.max_pods = _integer(max_pods)
    if _integer(pods_per_core) is not None:
        settings.pods_per_core = _integer(pods_per_core)
    for target, raw in (
        (settings.kube_reserved, kube_reserved),
        (settings.system_reserved, system_reserved),
        (settings.eviction_hard, eviction_hard),
        (settings.eviction_soft, eviction_soft),
    ):
        if _mapping(raw):
            target.clear()
            target.update(_strings(raw))
