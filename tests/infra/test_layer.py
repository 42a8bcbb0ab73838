"""The shared layer: arm64 wheels for the Lambda runtime, the package without its offline-only parts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import botocore
import jmespath
import s3transfer

from tests.support.infra import Synthesis, only

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
    # the kept libraries: TTL caches, budget schedules, the environment model (and what it brings)
    for module in ("cachetools", "croniter", "pydantic_settings", "dotenv", "dateutil"):
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
        "fleetwright/explain",
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


def test_tracing_builds_its_tracer_from_the_layer(synthesis: Synthesis, tmp_path: Path) -> None:
    """``FLEETWRIGHT_TRACING=true`` builds Powertools' Tracer, which needs the X-Ray SDK: it must come from
    the layer, as deployed. A fresh interpreter without site-packages sees the layer's pure-Python packages
    (the compiled ones are built for the Lambda platform; wrapt falls back to Python) and the runtime's
    botocore, and traces a span."""
    runtime = tmp_path / "runtime"  # what the Lambda runtime provides besides the layer
    runtime.mkdir()
    for module in (boto3, botocore, jmespath, s3transfer):
        (runtime / module.__name__).symlink_to(Path(str(module.__file__)).parent)
    # What runtime/provisioner.py's tracing_spans builds (that module itself needs the compiled pydantic).
    code = (
        "import sys\n"
        "from aws_lambda_powertools import Tracer\n"
        "from fleetwright.observability.metrics import TracerSpans\n"
        "spans = TracerSpans(Tracer(service='fleetwright-provisioner'))\n"
        "with spans.span('pass'):\n"
        "    pass\n"
        "assert 'aws_xray_sdk' in sys.modules\n"
        "print(sys.modules['aws_xray_sdk'].__file__)\n"
    )
    python = _layer_dir(synthesis) / "python"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": f"{python}{os.pathsep}{runtime}",
        "AWS_LAMBDA_FUNCTION_NAME": "fleetwright-provisioner",
        "AWS_REGION": "us-east-1",
    }
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(python))
