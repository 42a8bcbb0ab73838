"""Where the API server is and how to authenticate, turned into the official client's ``Configuration``.

kubeconfig files are read by the official client (``kubernetes.config.load_kube_config``). What remains
here is ours: ``ClusterConfig``, a plain description that costs nothing to import (the emulator, the tests
and EKS authentication build one without loading the official client), and the bearer-token sources that
``Configuration.refresh_api_key_hook`` asks before every request, so an EKS token is renewed before it
expires instead of after a failed call.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from fleetwright.kube.errors import KubeconfigError

DEFAULT_KUBECONFIG = "~/.kube/config"


class TokenSource(Protocol):
    """Supplies the bearer token for each request; ``refresh=True`` after a 401 asks for a new one."""

    def token(self, refresh: bool = False) -> str:
        """The current bearer token."""
        ...


@dataclass(frozen=True, slots=True)
class StaticToken:
    """A fixed bearer token."""

    value: str

    def token(self, refresh: bool = False) -> str:
        """The token; refreshing cannot change it."""
        return self.value


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """How to reach one API server.

    ``ca_data`` is the PEM bundle that signs the server's certificate (None: the system trust store);
    ``insecure`` skips certificate verification (for emulators). ``token`` is asked for a bearer token
    before every request.
    """

    server: str
    ca_data: bytes | None = None
    insecure: bool = False
    token: TokenSource | None = None
    namespace: str = "default"


# The official client verifies TLS against a CA *file*; one file per distinct bundle, reused by warm
# Lambdas that build clients again, removed at exit.
_CA_FILES: dict[str, str] = {}
_CA_LOCK = threading.Lock()


def _ca_file(pem: bytes) -> str:
    digest = hashlib.sha256(pem).hexdigest()
    with _CA_LOCK:
        path = _CA_FILES.get(digest)
        if path is None or not os.path.exists(path):
            fd, path = tempfile.mkstemp(prefix="fleetwright-ca-", suffix=".crt")
            with os.fdopen(fd, "wb") as out:
                out.write(pem)
            if not _CA_FILES:
                atexit.register(_remove_ca_files)
            _CA_FILES[digest] = path
        return path


def _remove_ca_files() -> None:
    for path in _CA_FILES.values():
        with contextlib.suppress(OSError):
            os.unlink(path)


def token_hook(source: TokenSource) -> Any:
    """A ``Configuration.refresh_api_key_hook`` that puts ``source``'s current token in place."""

    def refresh(configuration: Any) -> None:
        configuration.api_key["authorization"] = source.token()

    return refresh


def configuration(config: ClusterConfig) -> Any:
    """The official client's ``Configuration`` for ``config`` (imports ``kubernetes.client``)."""
    from kubernetes.client import Configuration  # type: ignore[import-untyped]

    result = Configuration(host=config.server.rstrip("/"))
    if config.insecure:
        result.verify_ssl = False
    elif config.ca_data:
        result.ssl_ca_cert = _ca_file(config.ca_data)
    if config.token is not None:
        # auth_settings() only sends a bearer token when the key exists; the hook fills it per request.
        result.api_key = {"authorization": ""}
        result.api_key_prefix = {"authorization": "Bearer"}
        result.refresh_api_key_hook = token_hook(config.token)
    return result


def kubeconfig_path(path: str | os.PathLike[str] | None = None) -> str:
    """``path``, else ``$KUBECONFIG`` (files separated by ``os.pathsep``), else ``~/.kube/config``.

    Read now rather than at import, as the official client's default is, so a changed environment counts.
    """
    if path is not None:
        return os.fspath(path)
    return os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG


def load_kubeconfig(path: str | os.PathLike[str] | None = None, context: str | None = None) -> Any:
    """The official client's ``Configuration`` for ``context`` (default: ``current-context``) of a kubeconfig.

    Everything the official loader understands works (token, tokenFile, client certificates, exec
    plugins, CA files and data, insecure-skip-tls-verify); a file that cannot be used raises
    :class:`KubeconfigError`.
    """
    import yaml
    from kubernetes.client import Configuration
    from kubernetes.config import ConfigException, load_kube_config  # type: ignore[import-untyped]

    files = kubeconfig_path(path)
    result = Configuration()
    try:
        load_kube_config(
            config_file=files, context=context, client_configuration=result, persist_config=False
        )
    except (ConfigException, OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as err:
        # The loader reports a malformed document as whatever it trips over.
        raise KubeconfigError(f"kubeconfig {files}: {err}") from err
    return result
