"""Where the API server is and how to authenticate: ``ClusterConfig``, token sources, kubeconfig files.

kubeconfig files are read with PyYAML rather than the official client, to keep that client (and its
import time) out of the Lambda layer.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from fleetwright.kube.errors import KubeconfigError

DEFAULT_KUBECONFIG = Path("~/.kube/config")


class TokenSource(Protocol):
    """Supplies the bearer token for each request; ``refresh=True`` after a 401 asks for a new one."""

    def token(self, refresh: bool = False) -> str:
        """The current bearer token."""
        ...


@dataclass(frozen=True, slots=True)
class StaticToken:
    """A fixed bearer token (kubeconfig ``token``)."""

    value: str

    def token(self, refresh: bool = False) -> str:
        """The token; refreshing cannot change it."""
        return self.value


@dataclass(frozen=True, slots=True)
class TokenFile:
    """A token read from a file on every request (kubeconfig ``tokenFile``), so a rotated token (a projected
    service-account token) is picked up without a restart."""

    path: Path

    def token(self, refresh: bool = False) -> str:
        """The file's content, stripped."""
        try:
            return self.path.read_text().strip()
        except OSError as err:
            raise KubeconfigError(f"cannot read token file {self.path}: {err}") from err


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """How to reach one API server.

    ``ca_data`` is the PEM bundle that signs the server's certificate (None: the system trust store);
    ``insecure`` skips certificate verification (kubeconfig ``insecure-skip-tls-verify``, for emulators).
    ``namespace`` is the context's default namespace.
    """

    server: str
    ca_data: bytes | None = None
    insecure: bool = False
    token: TokenSource | None = None
    namespace: str = "default"


def _named(doc: Mapping[str, Any], section: str, key: str, name: str, where: str) -> Mapping[str, Any]:
    for entry in doc.get(section) or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(key)
            if value is None:
                return {}
            if not isinstance(value, Mapping):
                raise KubeconfigError(f"{where}: {section} entry {name!r} has no {key} mapping")
            return value
    raise KubeconfigError(f"{where}: no {key} named {name!r} in {section}")


def _decode_base64(value: Any, field: str, where: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError) as err:
        raise KubeconfigError(f"{where}: {field} is not valid base64: {err}") from err


def _resolve(path: Any, base_dir: Path | None) -> Path:
    # kubectl resolves relative paths in a kubeconfig against the file's directory.
    p = Path(str(path)).expanduser()
    return p if p.is_absolute() or base_dir is None else base_dir / p


def config_from_kubeconfig(
    doc: Mapping[str, Any],
    context: str | None = None,
    base_dir: Path | None = None,
    where: str = "kubeconfig",
) -> ClusterConfig:
    """The ``ClusterConfig`` of ``context`` (default: ``current-context``) in a parsed kubeconfig.

    Understood: cluster ``server``, ``certificate-authority-data``, ``certificate-authority``,
    ``insecure-skip-tls-verify``; user ``token`` and ``tokenFile``; context ``namespace``. Client
    certificates and ``exec``/``auth-provider`` plugins are refused with a :class:`KubeconfigError`.
    """
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"{where}: not a kubeconfig mapping")
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(f"{where}: no context given and no current-context set")
    ctx = _named(doc, "contexts", "context", str(name), where)
    cluster_name = ctx.get("cluster")
    if not cluster_name:
        raise KubeconfigError(f"{where}: context {name!r} names no cluster")
    cluster = _named(doc, "clusters", "cluster", str(cluster_name), where)
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(f"{where}: cluster {cluster_name!r} has no server")
    ca_data: bytes | None = None
    if cluster.get("certificate-authority-data"):
        ca_data = _decode_base64(cluster["certificate-authority-data"], "certificate-authority-data", where)
    elif cluster.get("certificate-authority"):
        ca_path = _resolve(cluster["certificate-authority"], base_dir)
        try:
            ca_data = ca_path.read_bytes()
        except OSError as err:
            raise KubeconfigError(f"{where}: cannot read certificate-authority {ca_path}: {err}") from err
    token: TokenSource | None = None
    user_name = ctx.get("user")
    if user_name:
        user = _named(doc, "users", "user", str(user_name), where)
        for unsupported in ("client-certificate", "client-certificate-data", "exec", "auth-provider"):
            if user.get(unsupported):
                raise KubeconfigError(
                    f"{where}: user {user_name!r} uses {unsupported}, which fleetwright does not support; "
                    "use a bearer token (token or tokenFile) or EKS authentication"
                )
        if user.get("token"):
            token = StaticToken(str(user["token"]))
        elif user.get("tokenFile"):
            token = TokenFile(_resolve(user["tokenFile"], base_dir))
    return ClusterConfig(
        server=str(server).rstrip("/"),
        ca_data=ca_data,
        insecure=cluster.get("insecure-skip-tls-verify") is True,
        token=token,
        namespace=str(ctx.get("namespace") or "default"),
    )


def kubeconfig_paths(path: str | os.PathLike[str] | None = None) -> list[Path]:
    """The files to read: ``path``, else every entry of ``$KUBECONFIG``, else ``~/.kube/config``."""
    if path is not None:
        return [Path(path).expanduser()]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [DEFAULT_KUBECONFIG.expanduser()]


def merge_kubeconfigs(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge kubeconfig documents like kubectl: the first file to name an entry (or current-context) wins."""
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    for doc in docs:
        if not merged.get("current-context") and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for section in ("clusters", "users", "contexts"):
            seen = {e.get("name") for e in merged[section]}
            for entry in doc.get(section) or []:
                if isinstance(entry, Mapping) and entry.get("name") not in seen:
                    merged[section].append(entry)
                    seen.add(entry.get("name"))
    return merged


def load_kubeconfig(path: str | os.PathLike[str] | None = None, context: str | None = None) -> ClusterConfig:
    """Read a kubeconfig (``path``, ``$KUBECONFIG`` or ``~/.kube/config``) and return ``context``'s config."""
    paths = kubeconfig_paths(path)
    docs = []
    for p in paths:
        if not p.exists() and len(paths) > 1:
            continue  # kubectl skips missing entries of $KUBECONFIG
        try:
            doc = yaml.safe_load(p.read_text())
        except OSError as err:
            raise KubeconfigError(f"cannot read kubeconfig {p}: {err}") from err
        except yaml.YAMLError as err:
            raise KubeconfigError(f"{p}: not valid YAML: {err}") from err
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise KubeconfigError(f"{p}: not a kubeconfig mapping")
        docs.append(doc)
    if not docs:
        raise KubeconfigError(f"no kubeconfig found in {', '.join(str(p) for p in paths)}")
    where = str(paths[0]) if len(paths) == 1 else ", ".join(str(p) for p in paths)
    return config_from_kubeconfig(merge_kubeconfigs(docs), context, paths[0].parent, where)
