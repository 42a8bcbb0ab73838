"""Older Karpenter documents are accepted, converted to v1 and explained in a warning."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.errors import DocumentError, DocumentWarning
from fleetwright.model.karpenter import kubelet_for
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.nodepool import NodePool
from fleetwright.model.taints import Taint
from tests.model.karpenter_docs import parse_fixture, parse_text

LEGACY = "legacy.yaml"


def v1_document_in(warning: DocumentWarning) -> dict[str, Any]:
    """The v1 equivalent the warning shows, read back as YAML."""
    lines = warning.message.splitlines()
    start = lines.index("  the equivalent v1 document:") + 1
    body = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        body.append(line[4:])
    loaded: dict[str, Any] = yaml.safe_load("\n".join(body))
    return loaded


# --- karpenter.sh/v1beta1 NodePool -------------------------------------------------------------------


def test_v1beta1_nodepool_moves_fields_into_their_v1_places() -> None:
    parsed = parse_fixture(LEGACY, 0)
    pool = parsed.nodepools[0]
    assert pool.api_version == "karpenter.sh/v1"
    assert pool.expire_after_seconds() == 168 * 3600
    assert pool.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    ref = pool.spec.template.spec.node_class_ref
    assert (ref.group, ref.kind, ref.name) == ("karpenter.k8s.aws", "EC2NodeClass", "default")
    assert pool.limits() == {"cpu": 1_000_000}
    assert pool.labels() == {"team": "web"}


def test_v1beta1_nodepool_keeps_its_kubelet_for_the_node_class() -> None:
    pool = parse_fixture(LEGACY, 0).nodepools[0]
    legacy = pool.legacy_kubelet()
    assert legacy is not None
    assert legacy.source == "karpenter.sh/v1beta1 NodePool spec.template.spec.kubelet"
    assert legacy.kubelet.max_pods == 58
    nodeclass = parse_fixture("ec2nodeclasses-v1.yaml", 0).nodeclasses[0]  # has its own kubelet (maxPods 20)
    overrides = kubelet_for(pool, nodeclass)
    assert overrides.max_pods == 58
    assert overrides.system_reserved == {"cpu": 100, "memory": 100 * 2**20}
    # A v1 NodePool has nothing of its own: the node class decides.
    v1_pool = parse_fixture("nodepools-v1.yaml", 1).nodepools[0]
    assert kubelet_for(v1_pool, nodeclass).max_pods == 20
    assert kubelet_for(v1_pool, None) == KubeletOverrides()


def test_v1beta1_nodepool_warning_shows_an_equivalent_v1_document() -> None:
    parsed = parse_fixture(LEGACY, 0)
    (warning,) = parsed.warnings
    rendered = warning.render()
    assert rendered.startswith(
        f"fixtures/{LEGACY}: document 0 (NodePool default): warning: karpenter.sh/v1beta1"
    )
    assert "spec.disruption.expireAfter moved to spec.template.spec.expireAfter" in rendered
    assert "WhenUnderutilized became WhenEmptyOrUnderutilized" in rendered
    assert "and in the referenced EC2NodeClass:" in rendered and "maxPods: 58" in rendered
    shown = NodePool.model_validate(v1_document_in(warning))
    assert shown.spec == parsed.nodepools[0].spec
    assert "kubelet" not in v1_document_in(warning)["spec"]["template"]["spec"]


def test_v1beta1_consolidate_after_with_when_empty_is_kept() -> None:
    pool = parse_text(
        """
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: []
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}
"""
    ).nodepools[0]
    assert pool.spec.disruption.consolidation_policy == "WhenEmpty"
    assert pool.spec.disruption.consolidate_after_seconds() == 30
    assert pool.expire_after_seconds() == 720 * 3600
    assert pool.spec.template.spec.node_class_ref.group == "karpenter.k8s.aws"


def test_v1beta1_errors_point_at_the_original_field() -> None:
    with pytest.raises(DocumentError) as caught:
        parse_text(
            """
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: []
      kubelet: {maxPods: many}
  disruption: {expireAfter: 30d}
"""
        )
    problems = dict(caught.value.problems)
    assert "invalid duration '30d'" in problems["spec.disruption.expireAfter"]
    assert "valid integer" in problems["spec.template.spec.kubelet.maxPods"]


# --- karpenter.k8s.aws/v1beta1 EC2NodeClass ----------------------------------------------------------


def test_v1beta1_node_class_without_amis_gets_the_family_alias() -> None:
    parsed = parse_fixture(LEGACY, 1)
    nodeclass = parsed.nodeclasses[0]
    assert [term.alias for term in nodeclass.spec.ami_selector_terms] == ["bottlerocket@latest"]
    assert nodeclass.spec.resolved_ami_family() == "Bottlerocket"
    # The old default hop limit (2) is kept so pods reaching IMDS keep working.
    assert nodeclass.spec.metadata_options.http_put_response_hop_limit == 2
    (warning,) = parsed.warnings
    assert "alias bottlerocket@latest" in warning.message
    assert EC2NodeClass.model_validate(v1_document_in(warning)) == nodeclass


def test_v1beta1_ubuntu_needs_explicit_amis() -> None:
    base = """
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: ubuntu}
spec:
  amiFamily: Ubuntu
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"""
    with pytest.raises(DocumentError) as caught:
        parse_text(base)
    assert [path for path, _ in caught.value.problems] == ["spec.amiSelectorTerms"]
    assert "Ubuntu was removed in v1" in str(caught.value)
    nodeclass = parse_text(
        base + "  amiSelectorTerms: [{name: 'ubuntu-eks/*', owner: '099720109477'}]\n"
    ).nodeclasses[0]
    assert nodeclass.spec.ami_family == "AL2"


# --- karpenter.sh/v1alpha5 Provisioner ---------------------------------------------------------------


def test_provisioner_becomes_a_nodepool() -> None:
    parsed = parse_fixture(LEGACY, 2)
    pool = parsed.nodepools[0]
    assert pool.name == "batch"
    assert pool.labels() == {"team": "batch"}
    assert pool.spec.template.metadata.annotations == {"example.com/owner": "data"}
    instance_type = pool.requirements().get("node.kubernetes.io/instance-type")
    assert instance_type is not None and instance_type.has("m5.large")
    assert pool.taints() == (Taint(key="batch", effect="NoSchedule", value="true"),)
    assert pool.startup_taints() == (Taint(key="example.com/agent-not-ready", effect="NoSchedule"),)
    assert pool.node_class_name() == "batch"
    assert pool.expire_after_seconds() == 2_592_000
    assert pool.spec.disruption.consolidation_policy == "WhenEmpty"
    assert pool.spec.disruption.consolidate_after_seconds() == 30
    assert pool.limits() == {"cpu": 100_000, "memory": 400 * 2**30}
    assert pool.weight_value() == 10
    legacy = pool.legacy_kubelet()
    assert legacy is not None and legacy.kubelet.max_pods == 20
    assert legacy.source == "karpenter.sh/v1alpha5 Provisioner spec.kubeletConfiguration"
    (warning,) = parsed.warnings
    assert "containerRuntime was dropped" in warning.message
    assert NodePool.model_validate(v1_document_in(warning)).spec == pool.spec


def provisioner(spec: str) -> str:
    return f"""
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {{name: p}}
spec:
  providerRef: {{name: default}}
{spec}
"""


def test_consolidation_enabled_becomes_when_empty_or_underutilized() -> None:
    pool = parse_text(provisioner("  consolidation: {enabled: true}")).nodepools[0]
    assert pool.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert pool.spec.disruption.consolidate_after_seconds() == 0


def test_provisioner_without_ttls_never_expires_or_consolidates() -> None:
    pool = parse_text(provisioner("")).nodepools[0]
    assert pool.expire_after_seconds() is None
    assert pool.spec.disruption.consolidation_policy == "WhenEmpty"
    assert pool.spec.disruption.consolidate_after_seconds() is None
    assert pool.legacy_kubelet() is None


@pytest.mark.parametrize(
    ("spec", "path", "text"),
    [
        ("  provider: {subnetSelector: {a: b}}", "spec.provider", "move them to an AWSNodeTemplate"),
        (
            "  ttlSecondsAfterEmpty: 30\n  consolidation: {enabled: true}",
            "spec.ttlSecondsAfterEmpty",
            "mutually exclusive",
        ),
        ("  ttlSecondsAfterEmpty: -5", "spec.ttlSecondsAfterEmpty", "non-negative number of seconds"),
        ("  requirments: []", "spec.requirments", "did you mean 'requirements'?"),
        (
            "  requirements: [{key: a, operator: Equal, values: [b]}]",
            "spec.requirements[0].operator",
            "got 'Equal'",
        ),
        ("  labels: {kubernetes.io/hostname: x}", 'spec.labels["kubernetes.io/hostname"]', "restricted"),
        ("  limits: {resources: {cpu: ten}}", "spec.limits.resources.cpu", "invalid quantity 'ten'"),
        ("  limits: {cpu: 10}", "spec.limits.cpu", "unknown field 'cpu'; expected one of resources"),
        (
            "  kubeletConfiguration: {maxPods: -1}",
            "spec.kubeletConfiguration.maxPods",
            "greater than or equal to 0",
        ),
        ("  weight: 0", "spec.weight", "greater than or equal to 1"),
    ],
)
def test_provisioner_problems_are_reported_at_the_provisioner_field(spec: str, path: str, text: str) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_text(provisioner(spec))
    problems = dict(caught.value.problems)
    assert path in problems, problems
    assert text in problems[path]


def test_provisioner_without_provider_ref_is_rejected() -> None:
    with pytest.raises(DocumentError, match=r"\(Provisioner p\): spec\.providerRef: required"):
        parse_text(
            """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: p}
spec: {ttlSecondsAfterEmpty: 30}
"""
        )


# --- karpenter.k8s.aws/v1alpha1 AWSNodeTemplate ------------------------------------------------------


def test_aws_node_template_becomes_an_ec2_node_class() -> None:
    parsed = parse_fixture(LEGACY, 3)
    nodeclass = parsed.nodeclasses[0]
    spec = nodeclass.spec
    assert nodeclass.name == "batch"
    assert [term.id for term in spec.subnet_selector_terms] == ["subnet-0a1b2c3d", "subnet-0e1f2a3b"]
    assert [term.tags for term in spec.security_group_selector_terms] == [{"karpenter.sh/discovery": "demo"}]
    assert [(t.name, t.owner) for t in spec.ami_selector_terms] == [
        ("my-ami-*", "self"),
        ("my-ami-*", "123456789012"),
    ]
    assert spec.ami_family == "AL2"
    assert spec.instance_profile == "KarpenterNodeInstanceProfile"
    assert spec.tags == {"team": "batch"}
    assert spec.metadata_options.http_put_response_hop_limit == 2
    (warning,) = parsed.warnings
    assert "&id" not in warning.message  # shared terms are written out in full
    assert EC2NodeClass.model_validate(v1_document_in(warning)) == nodeclass


def node_template(spec: str) -> str:
    return f"""
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {{name: t}}
spec:
  instanceProfile: KarpenterNodeInstanceProfile
  securityGroupSelector: {{aws-ids: sg-0123}}
{spec}
"""


def test_ami_ids_and_missing_ami_selector() -> None:
    with_ids = parse_text(node_template("  subnetSelector: {a: b}\n  amiSelector: {aws::ids: 'ami-1,ami-2'}"))
    assert [t.id for t in with_ids.nodeclasses[0].spec.ami_selector_terms] == ["ami-1", "ami-2"]
    assert [t.id for t in with_ids.nodeclasses[0].spec.security_group_selector_terms] == ["sg-0123"]
    default = parse_text(node_template("  subnetSelector: {a: b}\n  amiFamily: AL2023"))
    assert [t.alias for t in default.nodeclasses[0].spec.ami_selector_terms] == ["al2023@latest"]


@pytest.mark.parametrize(
    ("spec", "path", "text"),
    [
        ("  subnetSelector: {a: b}\n  launchTemplate: my-template", "spec.launchTemplate", "not supported"),
        ("  amiFamily: AL2", "spec.subnetSelector", "required field is missing"),
        ("  subnetSelector: {aws-ids: 'subnet-1', team: x}", "spec.subnetSelector", "cannot be combined"),
        ("  subnetSelector: {aws-ids: 'subnet-1!'}", "spec.subnetSelector", "invalid subnet id 'subnet-1!'"),
        ("  subnetSelector: {a: b}\n  amiFamily: Custom", "spec.amiFamily", "no EKS-optimized AMI alias"),
        (
            "  subnetSelector: {a: b}\n  blockDeviceMappings: [{ebs: {}}]",
            "spec.blockDeviceMappings[0].ebs",
            "volumeSize",
        ),
        (
            "  subnetSelector: {a: b}\n  subnetSelectr: {}",
            "spec.subnetSelectr",
            "did you mean 'subnetSelector'?",
        ),
    ],
)
def test_aws_node_template_problems(spec: str, path: str, text: str) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_text(node_template(spec))
    problems = dict(caught.value.problems)
    assert path in problems, problems
    assert text in problems[path]


def test_v1beta1_document_that_only_needs_a_new_api_version_still_warns() -> None:
    parsed = parse_text(
        """
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""
    )
    (warning,) = parsed.warnings
    assert "karpenter.sh/v1beta1 NodePool is deprecated" in warning.message
    assert "apiVersion became karpenter.sh/v1" in warning.message
    assert v1_document_in(warning)["apiVersion"] == "karpenter.sh/v1"
