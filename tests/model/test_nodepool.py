"""NodePool (karpenter.sh/v1): what a valid document means to Fleetwright."""

from __future__ import annotations

import pytest

from fleetwright.model.errors import DocumentError
from fleetwright.model.nodepool import NodePool, NodeSelectorRequirement
from fleetwright.model.taints import Taint
from tests.model.karpenter_docs import parse_fixture, parse_text


def general_purpose() -> NodePool:
    return parse_fixture("nodepools-v1.yaml", 0).nodepools[0]


def minimal() -> NodePool:
    return parse_fixture("nodepools-v1.yaml", 1).nodepools[0]


def test_requirements_keep_operators_and_min_values() -> None:
    reqs = general_purpose().requirements()
    category = reqs.get("karpenter.k8s.aws/instance-category")
    assert category is not None
    assert category.min_values == 2
    assert category.has("m") and not category.has("t")
    generation = reqs.get("karpenter.k8s.aws/instance-generation")
    assert generation is not None and generation.has("5") and not generation.has("4")
    cpu = reqs.get("karpenter.k8s.aws/instance-cpu")
    assert cpu is not None and cpu.has("32") and not cpu.has("33")  # Lte is inclusive
    zone = reqs.get("topology.kubernetes.io/zone")
    assert zone is not None and zone.has("us-west-2a") and not zone.has("us-west-2d")
    assert reqs.matches(
        {
            "karpenter.k8s.aws/instance-category": "c",
            "karpenter.k8s.aws/instance-generation": "6",
            "karpenter.k8s.aws/instance-cpu": "8",
            "karpenter.sh/capacity-type": "spot",
            "kubernetes.io/arch": "arm64",
        }
    )
    assert not reqs.matches({"karpenter.sh/capacity-type": "spot"})  # arch must exist, category In


def test_labels_taints_and_startup_taints() -> None:
    pool = general_purpose()
    assert pool.labels() == {"team": "web", "example.com/tier": "frontend"}
    assert pool.taints() == (Taint(key="example.com/dedicated", effect="NoSchedule", value="web"),)
    assert pool.startup_taints() == (Taint(key="node.example.com/initializing", effect="NoExecute"),)


def test_limits_weight_node_class_and_durations() -> None:
    pool = general_purpose()
    assert pool.limits() == {"cpu": 1_000_000, "memory": 1000 * 2**30, "nvidia.com/gpu": 4}
    assert pool.weight_value() == 50
    assert pool.node_class_name() == "default"
    assert pool.expire_after_seconds() == 168 * 3600
    assert pool.termination_grace_period_seconds() == 5400
    assert pool.spec.disruption.consolidation_policy == "WhenEmpty"
    assert pool.spec.disruption.consolidate_after_seconds() == 300
    budgets = pool.spec.disruption.budgets
    assert [(b.nodes, b.schedule, b.duration, b.reasons) for b in budgets] == [
        ("20%", None, None, ["Empty", "Drifted"]),
        ("0", "0 9 * * mon-fri", "8h", None),
    ]


def test_defaults_of_a_minimal_nodepool() -> None:
    pool = minimal()
    assert pool.expire_after_seconds() == 720 * 3600
    assert pool.termination_grace_period_seconds() is None
    assert pool.limits() is None
    assert pool.weight_value() == 0
    assert pool.labels() == {}
    assert pool.taints() == ()
    assert len(pool.requirements()) == 0
    disruption = pool.spec.disruption
    assert disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert disruption.consolidate_after_seconds() == 0
    assert [budget.nodes for budget in disruption.budgets] == ["10%"]


def test_never_expire_and_never_consolidate() -> None:
    pool = parse_text(
        """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: stable}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
      expireAfter: Never
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}
"""
    ).nodepools[0]
    assert pool.expire_after_seconds() is None
    assert pool.spec.disruption.consolidate_after_seconds() is None


def test_termination_grace_period_may_not_be_never() -> None:
    with pytest.raises(DocumentError, match=r"terminationGracePeriod: 'Never' is not allowed here"):
        parse_text(
            """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
      terminationGracePeriod: Never
"""
        )


def test_server_written_metadata_is_ignored_and_kept_fields_survive() -> None:
    pool = general_purpose()
    assert pool.name == "general-purpose"
    assert pool.metadata.model_dump() == {
        "name": "general-purpose",
        "namespace": None,
        "labels": {},
        "annotations": {},
    }


def test_round_trip_through_yaml_names() -> None:
    pool = general_purpose()
    dumped = pool.model_dump(by_alias=True, exclude_none=True)
    assert dumped["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default"
    assert dumped["spec"]["template"]["spec"]["requirements"][0]["minValues"] == 2
    assert NodePool.model_validate(dumped) == pool


def test_python_names_are_accepted_too() -> None:
    req = NodeSelectorRequirement(
        key="karpenter.k8s.aws/instance-family", operator="In", values=["m5", "c5"], min_values=2
    )
    assert req.min_values == 2


@pytest.mark.parametrize(
    "key",
    [
        "karpenter.sh/capacity-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "kubernetes.io/os",
        "karpenter.k8s.aws/instance-family",
        "karpenter.k8s.aws/instance-gpu-count",
        "node-restriction.kubernetes.io/team",
        "kops.k8s.io/instancegroup",
        "node-role.kubernetes.io/worker",
        "kubernetes.io/role",
        "k8s.io/whatever",
        "karpenter.k8s.aws/instance-tenancy",
        "karpenter.k8s.aws/capacity-reservation-id",
        "karpenter.k8s.aws/placement-group-partition",
        "example.com/team",
        "team",
    ],
)
def test_allowed_label_keys(key: str) -> None:
    pool = parse_text(
        f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  template:
    metadata:
      labels: {{"{key}": "x"}}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: "{key}", operator: Exists}}
"""
    ).nodepools[0]
    assert pool.labels() == {key: "x"}
    assert key in pool.requirements()


@pytest.mark.parametrize(
    ("key", "domain"),
    [
        ("karpenter.sh/nodepool", "karpenter.sh/nodepool"),
        ("karpenter.sh/custom", "karpenter.sh"),
        ("kubernetes.io/hostname", "hostname"),
        ("karpenter.k8s.aws/anything", "karpenter.k8s.aws"),
    ],
)
def test_restricted_label_keys_in_labels_and_requirements(key: str, domain: str) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_text(
            f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  template:
    metadata:
      labels: {{"{key}": "x"}}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: "{key}", operator: Exists}}
"""
        )
    problems = dict(caught.value.problems)
    assert domain in problems[f'spec.template.metadata.labels["{key}"]']
    assert domain in problems["spec.template.spec.requirements[0].key"]


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        ("{key: a, operator: In}", "In needs at least one value"),
        ("{key: a, operator: Lt, values: ['1', '2']}", "exactly one non-negative integer"),
        ("{key: a, operator: Gte, values: ['-1']}", "invalid value '-1'"),
        ("{key: a, operator: In, values: [x], minValues: 51}", "less than or equal to 50"),
        ("{key: a, operator: Exists, minValues: 0}", "greater than or equal to 1"),
        ("{key: 'bad key', operator: Exists}", "invalid key 'bad key'"),
    ],
)
def test_requirement_rules(requirement: str, message: str) -> None:
    with pytest.raises(DocumentError, match=r"spec\.template\.spec\.requirements\[0\]") as caught:
        parse_text(
            f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: [{requirement}]
"""
        )
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ("{nodes: '101%'}", "invalid nodes '101%'"),
        ("{nodes: '5', schedule: '0 9 * *', duration: 1h}", "expected a cron expression with 5 fields"),
        ("{nodes: '5', schedule: 'CRON_TZ=UTC 0 9 * * *', duration: 1h}", "time zones are not supported"),
        ("{nodes: '5', schedule: '@daily', duration: 30s}", "whole hours and minutes"),
        ("{nodes: '5', reasons: [Expired]}", "'Empty', 'Drifted' or 'Underutilized'"),
    ],
)
def test_budget_rules(budget: str, message: str) -> None:
    with pytest.raises(DocumentError, match=r"spec\.disruption\.budgets\[0\]") as caught:
        parse_text(
            f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: []
  disruption:
    budgets: [{budget}]
"""
        )
    assert message in str(caught.value)


def test_legacy_policy_name_in_a_v1_document_is_rejected() -> None:
    with pytest.raises(DocumentError, match=r"consolidationPolicy: .*\(got 'WhenUnderutilized'\)"):
        parse_text(
            """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
  disruption: {consolidationPolicy: WhenUnderutilized}
"""
        )


PACKING_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: batch
  annotations:
    fleetwright.io/packing: {value}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: []
"""


def test_packing_annotation_chooses_the_strategy() -> None:
    assert minimal().packing() == "LowestCost"
    pool = parse_text(PACKING_POOL.format(value="FewerNodes")).nodepools[0]
    assert pool.packing() == "FewerNodes"


def test_unknown_packing_strategy_is_rejected_with_the_choices() -> None:
    with pytest.raises(DocumentError) as caught:
        parse_text(PACKING_POOL.format(value="Cheapest"))
    assert str(caught.value) == (
        "inline.yaml: document 0 (NodePool batch): metadata: annotation fleetwright.io/packing must be one "
        "of FewerNodes, LowestCost, got 'Cheapest'"
    )
