"""kubeconfig files: contexts, CA data or files, insecure mode, tokens, $KUBECONFIG merging, errors."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright.kube import KubeconfigError, StaticToken, load_kubeconfig
from fleetwright.kube.config import TokenFile

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


def test_current_context_gives_server_ca_token_and_namespace(tmp_path: Path) -> None:
    config = load_kubeconfig(write(tmp_path / "config", kubeconfig()))
    assert config.server == "https://prod.example.com"
    assert config.ca_data == PEM
    assert config.insecure is False
    assert config.token == StaticToken("prod-token")
    assert config.namespace == "ops"


def test_named_context_without_user_credentials(tmp_path: Path) -> None:
    config = load_kubeconfig(write(tmp_path / "config", kubeconfig()), context="local")
    assert config.server == "http://127.0.0.1:6443"
    assert config.ca_data is None
    assert config.token is None
    assert config.namespace == "default"


def test_certificate_authority_file_is_resolved_against_the_kubeconfig_directory(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(PEM)
    doc = kubeconfig()
    doc["clusters"][0]["cluster"] = {"server": "https://x", "certificate-authority": "ca.crt"}
    assert load_kubeconfig(write(tmp_path / "config", doc)).ca_data == PEM


def test_insecure_skip_tls_verify(tmp_path: Path) -> None:
    doc = kubeconfig()
    doc["clusters"][0]["cluster"] = {"server": "https://x", "insecure-skip-tls-verify": True}
    config = load_kubeconfig(write(tmp_path / "config", doc))
    assert config.insecure is True
    assert config.ca_data is None


def test_token_file_is_read_on_use(tmp_path: Path) -> None:
    token_path = tmp_path / "token"
    token_path.write_text("first\n")
    doc = kubeconfig()
    doc["users"][0]["user"] = {"tokenFile": str(token_path)}
    config = load_kubeconfig(write(tmp_path / "config", doc))
    assert isinstance(config.token, TokenFile)
    assert config.token.token() == "first"
    token_path.write_text("rotated")
    assert config.token.token() == "rotated"


def test_kubeconfig_env_merges_files_first_one_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = write(
        tmp_path / "a",
        {
            "clusters": [{"name": "prod", "cluster": {"server": "https://from-a"}}],
            "current-context": "prod",
        },
    )
    second = write(tmp_path / "b", kubeconfig(**{"current-context": "local"}))
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    config = load_kubeconfig()
    assert config.server == "https://from-a"  # cluster "prod" from the first file
    assert config.token == StaticToken("prod-token")  # user and context from the second


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"current-context": "staging"}, "no context named 'staging'"),
        ({"current-context": None}, "no current-context"),
        ({"clusters": []}, "no cluster named 'prod'"),
        (
            {"users": [{"name": "admin", "user": {"exec": {"command": "aws"}}}]},
            "uses exec, which fleetwright does not support",
        ),
        (
            {"clusters": [{"name": "prod", "cluster": {"certificate-authority-data": "!!"}}]},
            "has no server",
        ),
        (
            {
                "clusters": [
                    {"name": "prod", "cluster": {"server": "https://x", "certificate-authority-data": "!!"}}
                ]
            },
            "certificate-authority-data is not valid base64",
        ),
    ],
)
def test_unusable_kubeconfigs_are_explained(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(KubeconfigError, match=message):
        load_kubeconfig(write(tmp_path / "config", kubeconfig(**change)))


def test_missing_file_is_a_kubeconfig_error(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="cannot read kubeconfig"):
        load_kubeconfig(tmp_path / "absent")


def test_emulator_kubeconfig_is_understood(tmp_path: Path) -> None:
    from fleetwright.local.apiserver import ApiServer

    server = ApiServer(port=6553, token="t0k")
    config = load_kubeconfig(server.write_kubeconfig(tmp_path / "config"))
    assert config.server == "http://127.0.0.1:6553"
    assert config.token == StaticToken("t0k")
