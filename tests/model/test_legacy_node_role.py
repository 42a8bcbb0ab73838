"""v1alpha5 AWSNodeTemplates without ``instanceProfile`` (Karpenter then used its global
``aws.defaultInstanceProfile``) are converted with the Fleetwright stack's node role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetwright.cli import main
from fleetwright.config.settings import settings_from_env
from fleetwright.model.legacy import ENV_NODE_ROLE, STACK_NODE_ROLE, stack_node_role
from infra.nodepools import load_nodepool_config
from tests.model.karpenter_docs import parse_text
from tests.model.test_legacy import v1_document_in

# Written after Karpenter v0.31's examples/provisioner (bottlerocket, spot, custom user data): none of
# them sets instanceProfile.
BOTTLEROCKET = """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  providerRef: {name: bottlerocket}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: bottlerocket}
spec:
  amiFamily: Bottlerocket
  subnetSelector: {karpenter.sh/discovery: my-cluster}
  securityGroupSelector: {karpenter.sh/discovery: my-cluster}
  blockDeviceMappings:
    - deviceName: /dev/xvda
      ebs: {volumeType: gp3, volumeSize: 4Gi, deleteOnTermination: true}
    - deviceName: /dev/xvdb
      ebs: {volumeType: gp3, volumeSize: 20Gi, deleteOnTermination: true}
"""

SPOT_TEMPLATE = """
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: spot}
spec:
  subnetSelector: {karpenter.sh/discovery: my-cluster}
  securityGroupSelector: {karpenter.sh/discovery: my-cluster}
  userData: |
    #!/bin/bash
    echo "extra setup"
"""

POD = """
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: web, image: nginx, resources: {requests: {cpu: "1"}}}]
"""


def test_template_without_instance_profile_gets_the_stack_node_role() -> None:
    with stack_node_role("FleetwrightNodeRole-prod"):
        parsed = parse_text(SPOT_TEMPLATE)
    (nodeclass,) = parsed.nodeclasses
    assert nodeclass.spec.role == "FleetwrightNodeRole-prod" and nodeclass.spec.instance_profile is None
    assert nodeclass.spec.user_data is not None and "extra setup" in nodeclass.spec.user_data
    (warning,) = parsed.warnings
    assert "spec.instanceProfile is not set" in warning.message
    assert "aws.defaultInstanceProfile" in warning.message
    assert "node role ('FleetwrightNodeRole-prod'; stack output NodeRoleName" in warning.message
    assert v1_document_in(warning)["spec"]["role"] == "FleetwrightNodeRole-prod"


def test_a_template_with_an_instance_profile_keeps_it() -> None:
    with stack_node_role("FleetwrightNodeRole-prod"):
        parsed = parse_text(SPOT_TEMPLATE.replace("spec:\n", "spec:\n  instanceProfile: MyProfile\n", 1))
    (nodeclass,) = parsed.nodeclasses
    assert nodeclass.spec.instance_profile == "MyProfile" and nodeclass.spec.role is None
    assert "instanceProfile is not set" not in parsed.warnings[0].message


def test_without_a_deployment_the_role_is_a_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_NODE_ROLE, raising=False)
    parsed = parse_text(SPOT_TEMPLATE)
    assert parsed.nodeclasses[0].spec.role == STACK_NODE_ROLE
    assert "a stand-in for it" in parsed.warnings[0].message


def test_functions_convert_with_the_role_the_stack_names_them() -> None:
    settings = settings_from_env(
        {
            "FLEETWRIGHT_CLUSTER_NAME": "demo",
            "FLEETWRIGHT_STATE_TABLE": "fleetwright-state",
            "AWS_REGION": "us-east-1",
            "FLEETWRIGHT_NODEPOOLS_PARAMETER": "/fleetwright/demo/nodepools",
            ENV_NODE_ROLE: "Fleetwright-demo-NodeRole1A2B3C",
        },
        read_parameter=lambda name: BOTTLEROCKET,
    )
    (nodeclass,) = settings.config.nodeclasses
    assert nodeclass.name == "bottlerocket" and nodeclass.spec.role == "Fleetwright-demo-NodeRole1A2B3C"
    assert [np.name for np in settings.config.nodepools] == ["default"]


def test_plan_accepts_the_upstream_style_pair(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_NODE_ROLE, raising=False)
    path = tmp_path / "provisioner.yaml"
    path.write_text(BOTTLEROCKET + POD)
    code = main(["plan", "-o", "json", "-f", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["summary"]["scheduled"] == 1
    assert "spec.instanceProfile is not set" in err


def test_synth_does_not_name_the_stack_role_after_the_stand_in(tmp_path: Path) -> None:
    path = tmp_path / "provisioner.yaml"
    path.write_text(BOTTLEROCKET)
    generated = load_nodepool_config([str(path)])
    assert generated.nodeclasses[0].spec.role == STACK_NODE_ROLE and generated.node_roles() == set()
    named = load_nodepool_config([str(path)], node_role_name="KarpenterNodeRole-prod")
    assert named.nodeclasses[0].spec.role == "KarpenterNodeRole-prod"
    assert named.node_roles() == {"KarpenterNodeRole-prod"}
