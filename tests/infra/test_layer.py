"""The shared layer: arm64 wheels for the Lambda runtime, the package without its offline-only parts."""

from __future__ import annotations

from pathlib import Path

from tests.infra.conftest import Synthesis, only

EM_AARCH64 = 183  # ELF e_machine of 64-bit ARM


def _layer_dir(synthesis: Synthesis) -> Path:
    _, layer = only(synthesis.fleetwright.resources("AWS::Lambda::LayerVersion"))
    asset_hash = layer["Properties"]["Content"]["S3Key"].removesuffix(".zip")
    return synthesis.outdir / f"asset.{asset_hash}"


def _elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF"
    return int.from_bytes(header[18:20], "little")


def test_layer_targets_arm64_python(synthesis: Synthesis) -> None:
    _, layer = only(synthesis.fleetwright.resources("AWS::Lambda::LayerVersion"))
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.14"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_layer_holds_the_package_and_its_dependencies_under_python(synthesis: Synthesis) -> None:
    python = _layer_dir(synthesis) / "python"
    for module in ("fleetwright/model", "fleetwright/scheduling", "fleetwright/aws", "pydantic", "yaml"):
        assert (python / module).is_dir(), module
    assert (python / "fleetwright" / "catalog" / "data").is_dir()  # the built-in instance-type catalog


def test_native_extensions_are_built_for_aarch64_cpython_314(synthesis: Synthesis) -> None:
    extensions = sorted((_layer_dir(synthesis) / "python").rglob("*.so"))
    assert any(p.parent.name == "pydantic_core" for p in extensions)
    for path in extensions:
        assert "cpython-314-aarch64-linux-gnu" in path.name, path.name
        assert _elf_machine(path) == EM_AARCH64, path.name


def test_layer_leaves_out_offline_tools_and_runtime_provided_sdk(synthesis: Synthesis) -> None:
    python = _layer_dir(synthesis) / "python"
    for absent in (
        "fleetwright/local",
        "fleetwright/cli.py",
        "fleetwright/plan.py",
        "fleetwright/catalog/generate.py",
        "boto3",
        "botocore",
        "bin",
    ):
        assert not (python / absent).exists(), absent
    assert not list(python.rglob("__pycache__"))
    # what the functions' cold start needs to read and validate NodePool documents is there
    for present in ("fleetwright/manifests.py", "fleetwright/validation.py", "fleetwright/provisioning"):
        assert (python / present).exists(), present


def test_layer_fits_lambda_limits(synthesis: Synthesis) -> None:
    size = sum(p.stat().st_size for p in _layer_dir(synthesis).rglob("*") if p.is_file())
    # All layers and the function together must stay under 250 MB unzipped; leave room for the functions.
    assert size < 50 * 1024 * 1024, size
