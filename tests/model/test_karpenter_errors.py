"""Malformed Karpenter documents: every problem names the file, document, object, field path and cause."""

from __future__ import annotations

import pytest

from fleetwright.model.errors import DocumentError, DocumentRef
from fleetwright.model.karpenter import (
    KARPENTER_KINDS,
    check_references,
    is_karpenter_document,
    parse_karpenter_document,
)
from tests.model.karpenter_docs import fixture_docs, parse_fixture, parse_text

MALFORMED = "malformed.yaml"

# (document index, "Kind name" as shown, field path, text the message must contain)
CASES = [
    (0, "NodePool unknown-field", "spec.disruption.consolidateAftr", "did you mean 'consolidateAfter'?"),
    (1, "NodePool bad-operator", "spec.template.spec.requirements[0].operator", "(got 'Equals')"),
    (
        2,
        "NodePool in-without-values",
        "spec.template.spec.requirements[0].values",
        "In needs at least one value",
    ),
    (3, "NodePool gt-not-integer", "spec.template.spec.requirements[0].values", "one non-negative integer"),
    (4, "NodePool bad-taint-effect", "spec.template.spec.taints[0].effect", "'NoExecute' (got 'NoSchedul')"),
    (5, "NodePool weight-zero", "spec.weight", "greater than or equal to 1 (got 0)"),
    (6, "NodePool weight-too-high", "spec.weight", "less than or equal to 100 (got 101)"),
    (
        7,
        "EC2NodeClass role-and-profile",
        "spec.instanceProfile",
        "exactly one of role or instanceProfile (both",
    ),
    (
        8,
        "EC2NodeClass no-identity",
        "spec.instanceProfile",
        "exactly one of role or instanceProfile (neither",
    ),
    (9, "NodePool bad-limit", "spec.limits.memory", "invalid quantity '10GB'"),
    (10, "NodePool bad-expire", "spec.template.spec.expireAfter", "invalid duration '30d'"),
    (
        11,
        "NodePool restricted-label",
        'spec.template.metadata.labels["karpenter.sh/team"]',
        "domain karpenter.sh",
    ),
    (12, "NodePool hostname-requirement", "spec.template.spec.requirements[0].key", "kubernetes.io/hostname"),
    (
        13,
        "EC2NodeClass alias-with-id",
        "spec.amiSelectorTerms[0]",
        "alias cannot be combined with id, name, owner or tags",
    ),
    (14, "EC2NodeClass alias-and-other-term", "spec.amiSelectorTerms", "alias term cannot be combined"),
    (15, "NodePool", "metadata.name", "required field is missing"),
    (16, "EC2NodeClass wrong-group", "apiVersion", "use karpenter.k8s.aws/v1"),
    (17, "NodePool min-values", "spec.template.spec.requirements[0].minValues", "at least 3 values, got 2"),
    (18, "NodePool kubelet-in-v1", "spec.template.spec.kubelet", "moved to the EC2NodeClass"),
    (19, "NodePool unquoted-label", "spec.template.metadata.labels.tier", "got 2 (quote it in YAML)"),
    (20, "EC2NodeClass kms-typo", "spec.blockDeviceMappings[0].ebs.kmsKeyId", "did you mean 'kmsKeyID'?"),
    (21, "NodePool schedule-without-duration", "spec.disruption.budgets[0]", "schedule and duration"),
    (22, "EC2NodeClass no-family", "spec.amiFamily", "required when amiSelectorTerms has no alias"),
    (23, "NodePool other-node-class", "spec.template.spec.nodeClassRef.kind", "only through EC2NodeClass"),
    (24, "NodeClaim claim-1", "kind", "not a Karpenter kind"),
    (25, "EC2NodeClass family-mismatch", "spec.amiFamily", "does not match the alias family AL2023"),
]


def test_every_malformed_fixture_has_a_case() -> None:
    assert [case[0] for case in CASES] == list(range(len(fixture_docs(MALFORMED))))


@pytest.mark.parametrize(("index", "what", "path", "text"), CASES, ids=[case[1] for case in CASES])
def test_malformed_document_is_reported_in_full(index: int, what: str, path: str, text: str) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_fixture(MALFORMED, index)
    location = f"fixtures/{MALFORMED}: document {index} ({what}): {path}: "
    lines = str(caught.value).splitlines()
    assert any(line.startswith(location) and text in line for line in lines), lines


def test_all_problems_of_a_document_are_collected() -> None:
    text = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: many}
spec:
  weight: 0
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: a, operator: Equals, values: [x]}
        - {key: b, operator: In}
      taints: [{key: c, effect: Never}]
  limits: {cpu: lots}
"""
    with pytest.raises(DocumentError) as caught:
        parse_text(text)
    paths = [path for path, _ in caught.value.problems]
    assert paths == [
        "spec.template.spec.requirements[0].operator",
        "spec.template.spec.requirements[1].values",
        "spec.template.spec.taints[0].effect",
        "spec.limits.cpu",
        "spec.weight",
    ]


def test_unknown_field_without_a_close_match_lists_the_known_fields() -> None:
    text = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: x}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
  frobnicate: true
"""
    with pytest.raises(
        DocumentError, match="unknown field 'frobnicate'; expected one of template, disruption"
    ):
        parse_text(text)


def test_unknown_top_level_field_is_rejected_but_status_is_ignored() -> None:
    doc = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "x"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                    "requirements": [],
                }
            }
        },
        "status": {"anything": ["goes"]},
    }
    assert parse_karpenter_document(doc, DocumentRef("a.yaml")).nodepools[0].name == "x"
    with pytest.raises(DocumentError, match="specs: unknown field 'specs'; did you mean 'spec'"):
        parse_karpenter_document({**doc, "specs": {}}, DocumentRef("a.yaml"))


def test_missing_kind_and_non_mapping_documents() -> None:
    with pytest.raises(DocumentError, match="document 3: kind: required field is missing"):
        parse_karpenter_document({"apiVersion": "karpenter.sh/v1"}, DocumentRef("a.yaml", 3))
    with pytest.raises(DocumentError, match="expected a mapping, got list"):
        parse_karpenter_document([1, 2], DocumentRef("a.yaml"))  # type: ignore[arg-type]


def test_karpenter_kinds_include_v1_and_legacy_versions() -> None:
    assert ("karpenter.sh/v1", "NodePool") in KARPENTER_KINDS
    assert ("karpenter.k8s.aws/v1", "EC2NodeClass") in KARPENTER_KINDS
    assert ("karpenter.sh/v1beta1", "NodePool") in KARPENTER_KINDS
    assert ("karpenter.k8s.aws/v1beta1", "EC2NodeClass") in KARPENTER_KINDS
    assert ("karpenter.sh/v1alpha5", "Provisioner") in KARPENTER_KINDS
    assert ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate") in KARPENTER_KINDS
    assert ("karpenter.sh/v1", "EC2NodeClass") not in KARPENTER_KINDS


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"apiVersion": "karpenter.sh/v1", "kind": "NodePool"}, True),
        ({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass"}, True),
        ({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim"}, True),
        ({"apiVersion": "v1", "kind": "NodePool"}, True),  # a Karpenter kind with a wrong version
        ({"apiVersion": "apps/v1", "kind": "Deployment"}, False),
        ({"apiVersion": "v1", "kind": "Pod"}, False),
        ({}, False),
    ],
)
def test_is_karpenter_document(doc: dict[str, str], expected: bool) -> None:
    assert is_karpenter_document(doc) is expected


def test_check_references_reports_missing_node_classes_and_duplicates() -> None:
    pools = parse_fixture("nodepools-v1.yaml", 0).nodepools + parse_fixture("nodepools-v1.yaml", 1).nodepools
    classes = parse_fixture("ec2nodeclasses-v1.yaml", 1).nodeclasses
    assert check_references(pools, classes) == [
        "NodePool general-purpose: nodeClassRef EC2NodeClass default not found",
        "NodePool minimal: nodeClassRef EC2NodeClass default not found",
    ]
    classes += parse_fixture("ec2nodeclasses-v1.yaml", 0).nodeclasses
    assert check_references(pools, classes) == []
    assert check_references(pools + pools[:1], classes) == [
        "NodePool general-purpose: defined more than once"
    ]


def test_document_without_spec_names_the_missing_field() -> None:
    doc = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}}
    with pytest.raises(DocumentError) as caught:
        parse_karpenter_document(doc, DocumentRef("x.yaml", 1))
    assert str(caught.value) == "x.yaml: document 1 (NodePool p): spec: required field is missing"
