"""Connection settings: kubeconfig files through the official loader, and ``ClusterConfig`` turned into
the official ``Configuration`` (CA bundle, insecure mode, bearer token asked before every request)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright.kube import ClusterConfig, KubeClient, KubeconfigError, StaticToken, load_kubeconfig
from fleetwright.kube.config import configuration
from fleetwright.kube.resources import NODES
from fleetwright.local.apiserver import ApiServer

PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def kubeconfig(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "prod",
                "cluster": {
                    "server": "https://prod.example.com/",
                    "certificate-authority-data": base64.b64encode(PEM).decode(),
                },
            },
            {"name": "emulator", "cluster": {"server": "http://127.0.0.1:6443"}},
        ],
        "users": [
            {"name": "admin", "user": {"token": "prod-token"}},
            {"name": "nobody", "user": {}},
        ],
        "contexts": [
            {"name": "prod", "context": {"cluster": "prod", "user": "admin", "namespace": "ops"}},
            {"name": "local", "context": {"cluster": "emulator", "user": "nobody"}},
        ],
        "current-context": "prod",
    }
    doc.update(overrides)
    return doc


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def bearer(settings: Any) -> str | None:
    """The Authorization header value the official client would send."""
    value = settings.get_api_key_with_prefix("authorization")
    return None if value is None else str(value)


def test_current_context_gives_server_ca_and_token(tmp_path: Path) -> None:
    settings = load_kubeconfig(write(tmp_path / "config", kubeconfig()))
    assert settings.host == "https://prod.example.com"
    assert Path(settings.ssl_ca_cert).read_bytes() == PEM
    assert settings.verify_ssl is True
    assert bearer(settings) == "Bearer prod-token"


def test_named_context_without_user_credentials(tmp_path: Path) -> None:
    settings = load_kubeconfig(write(tmp_path / "config", kubeconfig()), context="local")
    assert settings.host == "http://127.0.0.1:6443"
    assert bearer(settings) is None


def test_certificate_authority_file_is_resolved_against_the_kubeconfig_directory(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(PEM)
    doc = kubeconfig()
    doc["clusters"][0]["cluster"] = {"server": "https://x", "certificate-authority": "ca.crt"}
    assert Path(load_kubeconfig(write(tmp_path / "config", doc)).ssl_ca_cert).read_bytes() == PEM


def test_insecure_skip_tls_verify(tmp_path: Path) -> None:
    doc = kubeconfig()
    doc["clusters"][0]["cluster"] = {"server": "https://x", "insecure-skip-tls-verify": True}
    assert load_kubeconfig(write(tmp_path / "config", doc)).verify_ssl is False


def test_token_file(tmp_path: Path) -> None:
    token_path = tmp_path / "token"
    token_path.write_text("from-file")
    doc = kubeconfig()
    doc["users"][0]["user"] = {"tokenFile": str(token_path)}
    assert bearer(load_kubeconfig(write(tmp_path / "config", doc))) == "Bearer from-file"


def test_kubeconfig_env_merges_files_first_entry_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write(tmp_path / "a", {"clusters": [{"name": "prod", "cluster": {"server": "https://from-a"}}]})
    second = write(tmp_path / "b", kubeconfig())
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    settings = load_kubeconfig()
    assert settings.host == "https://from-a"  # cluster "prod" from the first file
    assert bearer(settings) == "Bearer prod-token"  # user and context from the second


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"current-context": "staging"}, "staging"),
        ({"clusters": []}, "prod"),
    ],
)
def test_unusable_kubeconfigs_are_explained(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    path = write(tmp_path / "config", kubeconfig(**change))
    with pytest.raises(KubeconfigError, match=message) as raised:
        load_kubeconfig(path)
    assert str(path) in str(raised.value)


def test_missing_file_is_a_kubeconfig_error(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="absent"):
        load_kubeconfig(tmp_path / "absent")


def test_a_client_from_the_emulators_kubeconfig_authenticates(tmp_path: Path) -> None:
    with ApiServer(port=0, token="t0k") as server:
        client = KubeClient.from_kubeconfig(str(server.write_kubeconfig(tmp_path / "config")))
        client.create(NODES, {"metadata": {"name": "n1"}})
        assert [n["metadata"]["name"] for n in client.list(NODES).items] == ["n1"]
        client.close()


def test_cluster_config_becomes_an_official_configuration() -> None:
    settings = configuration(ClusterConfig("https://api.example.com/", ca_data=PEM, token=StaticToken("t")))
    assert settings.host == "https://api.example.com"
    assert Path(settings.ssl_ca_cert).read_bytes() == PEM
    assert bearer(settings) == "Bearer t"
    # The same bundle reuses its file: a warm function building clients again leaves no litter.
    assert configuration(ClusterConfig("https://other", ca_data=PEM)).ssl_ca_cert == settings.ssl_ca_cert
    assert configuration(ClusterConfig("https://x", insecure=True)).verify_ssl is False
    assert bearer(configuration(ClusterConfig("http://127.0.0.1:1"))) is None
