"""The metric catalog (``infra.controller_metrics.CATALOG``) is what the code writes, and every metric the
dashboards graph is one the code writes, with the dimensions it writes it with, at the monitoring level
deployed: a graph of a misspelt name, a dimension nobody sets or a series the level withholds would stay
empty without a word."""

from __future__ import annotations

import ast
import importlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from fleetwright.observability import limits
from infra import controller_metrics as cm
from tests.support.infra import REPO_ROOT, Template, render

LAYER = REPO_ROOT / "layers"
# Calls whose metric name is a variable: limits.report_limits publishes these two by name.
INDIRECT = {"fleetwright/observability/limits.py": {limits.DURATION_OF_TIMEOUT, limits.MEMORY_OF_LIMIT}}
QUERY = re.compile(
    r"SELECT (?P<function>[A-Z]+)\((?P<name>\w+)\) FROM (?:SCHEMA\((?P<schema>[^)]*)\)|(?P<namespace>\w+))"
    r"(?: WHERE (?P<where>.*?))?(?: GROUP BY (?P<group>\w+(?:, \w+)*))?$"
)


def _metrics_calls(tree: ast.AST) -> Iterator[tuple[ast.FunctionDef | ast.Module, ast.Call]]:
    """Every ``<...>metrics.add(...)`` call, with the function it is in."""
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    for scope in scopes:
        for node in ast.walk(scope):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add"
            ):
                receiver = node.func.value
                name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
                if name == "metrics":
                    yield scope, node


def _dimensions(scope: ast.AST, call: ast.Call) -> tuple[str, ...]:
    """The dimension keys of a call: a dict literal, or a local variable assigned one."""
    given = call.args[3] if len(call.args) > 3 else None
    given = next((k.value for k in call.keywords if k.arg == "dimensions"), given)
    if given is None:
        return ()
    if isinstance(given, ast.Name):
        assigned = [
            a.value
            for a in ast.walk(scope)
            if isinstance(a, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == given.id for t in a.targets)
        ]
        assert len(assigned) == 1, ast.unparse(call)
        given = assigned[0]
    assert isinstance(given, ast.Dict), f"dimensions the test cannot read: {ast.unparse(call)}"
    keys = [k.value for k in given.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    assert len(keys) == len(given.keys), f"dimension names the test cannot read: {ast.unparse(call)}"
    return tuple(sorted(keys))


def emitted_series() -> dict[tuple[str, tuple[str, ...]], set[str]]:
    """(metric name, its own dimensions) → the layer's files writing it, read from the source."""
    found: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for path in sorted((LAYER / "fleetwright").rglob("*.py")):
        relative = path.relative_to(LAYER).as_posix()
        calls = list(_metrics_calls(ast.parse(path.read_text(encoding="utf-8"))))
        if not calls:
            continue
        module = importlib.import_module(relative.removesuffix(".py").replace("/", "."))
        for scope, call in calls:
            dimensions = _dimensions(scope, call)
            try:
                names = {eval(ast.unparse(call.args[0]), vars(module))}  # a constant of the module
            except NameError:
                names = INDIRECT[relative]
            for name in names:
                found.setdefault((name, dimensions), set()).add(relative)
    return found


def test_the_catalog_lists_every_series_the_code_writes_and_no_other() -> None:
    emitted = emitted_series()
    assert len(emitted) > 60
    catalog = {(spec.name, dims) for spec in cm.CATALOG for dims in spec.dimension_sets}
    assert set(emitted) - catalog == set(), "written but not in infra/controller_metrics.py CATALOG"
    assert catalog - set(emitted) == set(), "in the catalog but nothing writes it"
    assert len(cm.BY_NAME) == len(cm.CATALOG)  # one entry a name


@dataclass(frozen=True)
class Line:
    """One custom metric a dashboard reads: a plain metric or a Metrics Insights query."""

    name: str
    service: str | None
    dimensions: tuple[str, ...] | None  # own dimensions of the series read (None: every series)
    keys: tuple[str, ...]  # dimensions named in WHERE / GROUP BY (besides service)
    function: str
    text: str


def _lines(widgets: list[dict[str, Any]]) -> list[Line]:
    """The custom (namespace Fleetwright) metrics the metric widgets read."""
    found: list[Line] = []
    for widget in widgets:
        for line in widget["properties"].get("metrics", []) if widget["type"] == "metric" else []:
            options = line[-1] if isinstance(line[-1], dict) else {}
            if "expression" in options:
                if options["expression"].startswith("SELECT"):
                    found.append(_query_line(options["expression"]))
                continue
            if line[0] != cm.NAMESPACE:
                continue
            plain = [item for item in line if not isinstance(item, dict)]
            dims = dict(zip(plain[2::2], plain[3::2], strict=True))
            service = dims.pop("service", None)
            found.append(Line(plain[1], service, tuple(sorted(dims)), (), "plain", json.dumps(line)))
    return found


def _query_line(query: str) -> Line:
    match = QUERY.match(query)
    assert match, f"a query the test cannot read: {query}"
    where = match["where"] or ""
    groups = set(match["group"].split(", ")) if match["group"] else set()
    keys = set(re.findall(r"(\w+) (?:=|IN) ", where)) | groups
    service = re.search(r"service = '([\w-]+)'", where)
    schema = match["schema"]
    if schema is not None:
        namespace, *columns = [c.strip() for c in schema.split(",")]
        dimensions: tuple[str, ...] | None = tuple(sorted(set(columns) - {"service"}))
    else:
        namespace, dimensions = match["namespace"], None
    assert namespace == cm.NAMESPACE, query
    own_keys = tuple(sorted(keys - {"service"}))
    return Line(
        match["name"], service[1] if service else None, dimensions, own_keys, match["function"], query
    )


def _problems(lines: list[Line], level: str) -> list[str]:
    """Why each line would graph nothing, or the wrong thing, at ``level``."""
    problems = []
    for line in lines:
        spec = cm.BY_NAME.get(line.name)
        if spec is None:
            problems.append(f"{line.name}: no code writes it ({line.text})")
            continue
        if line.service is not None and line.service not in spec.services:
            problems.append(f"{line.name}: not written by {line.service} ({line.text})")
        if line.dimensions is not None:  # one exact series
            if line.dimensions not in spec.dimension_sets:
                problems.append(f"{line.name}: never written with dimensions {line.dimensions} ({line.text})")
            elif not cm.published(level, line.name, line.dimensions):
                problems.append(f"{line.name}{line.dimensions}: withheld at monitoring={level}")
            continue
        matching = [dims for dims in spec.dimension_sets if set(line.keys) <= set(dims)]
        if not matching:
            problems.append(f"{line.name}: never written with {line.keys} ({line.text})")
        # Summing every series of a metric written as a total and as a split counts it twice.
        if len(matching) > 1 and line.function in ("SUM", "AVG"):
            problems.append(f"{line.name}: {line.function} over {len(matching)} dimension sets ({line.text})")
        if not cm.published(level, line.name):
            problems.append(f"{line.name}: (some series) withheld at monitoring={level} ({line.text})")
    return problems


def _dashboard_lines(template: Template) -> list[Line]:
    [dashboard] = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    return _lines(json.loads(render(dashboard["Properties"]["DashboardBody"]))["widgets"])


@pytest.mark.parametrize("level", ["full", "alarms", "essential"])
def test_every_dashboard_metric_is_written_with_its_dimensions_at_its_level(
    level: str, request: pytest.FixtureRequest
) -> None:
    template = {
        "full": lambda: request.getfixturevalue("synthesis").fleetwright.raw,
        "alarms": lambda: request.getfixturevalue("watching")[0],
        "essential": lambda: request.getfixturevalue("economy")[0],
    }[level]()
    lines = _dashboard_lines(template)
    assert len(lines) > 15
    assert _problems(lines, level) == []


def test_the_overview_graphs_the_nodes_by_nodepool_and_capacity_type(watching: Any, economy: Any) -> None:
    def graphed(template: Template) -> set[tuple[str, tuple[str, ...] | None, tuple[str, ...]]]:
        return {(line.name, line.dimensions, line.keys) for line in _dashboard_lines(template)}

    split = {
        (cm.NODE_COUNT, ("NodePool",), ("NodePool",)),
        (cm.NODE_COUNT, ("CapacityType",), ("CapacityType",)),
        (cm.CLUSTER_HOURLY_COST, ("NodePool",), ("NodePool",)),
    }
    totals = {(cm.NODE_COUNT, (), ()), (cm.CLUSTER_HOURLY_COST, (), ()), (cm.PENDING_PODS, (), ())}
    assert split | totals <= graphed(watching[0])
    # Economy pays for the totals only.
    assert totals <= graphed(economy[0]) and not split & graphed(economy[0])


def test_the_check_catches_what_would_graph_nothing() -> None:
    """The checks above fail on the mistakes they exist for."""
    lines = [
        _query_line("SELECT SUM(NodeCount) FROM Fleetwright WHERE service = 'fleetwright-disruption'"),
        _query_line("SELECT SUM(LaunchErrors) FROM Fleetwright GROUP BY InstanceType"),
        _query_line("SELECT MAX(NodeCount) FROM SCHEMA(Fleetwright, NodePool, service) GROUP BY NodePool"),
        Line("PendingPod", "fleetwright-provisioner", (), (), "plain", "typo"),
        Line(cm.PENDING_PODS, "fleetwright-disruption", (), (), "plain", "other service"),
    ]
    problems = _problems(lines, "essential")
    expected = [
        "NodeCount: SUM over 3 dimension sets",
        "NodeCount: (some series) withheld at monitoring=essential",
        "LaunchErrors: never written with ('InstanceType',)",
        "NodeCount('NodePool',): withheld at monitoring=essential",
        "PendingPod: no code writes it",
        "PendingPods: not written by fleetwright-disruption",
    ]
    assert [p[: len(e)] for p, e in zip(problems, expected, strict=True)] == expected


@pytest.mark.parametrize(
    "source",
    [
        "def f(self, d):\n    self.metrics.add('X', 1, 'Count', d)\n",
        "def f(self, k):\n    self.metrics.add('X', 1, 'Count', {k: 'v'})\n",
    ],
)
def test_unreadable_dimensions_fail_loudly(source: str) -> None:
    [(scope, call)] = list(_metrics_calls(ast.parse(source)))
    with pytest.raises(AssertionError):
        _dimensions(scope, call)


# Karpenter v1.14's metrics reference (karpenter.sh, "Metrics"): the karpenter_* names.
KARPENTER_METRICS = [
    "consolidation_score",
    "consolidation_moves_total",
    "build_info",
    "nodeclaims_unhealthy_disrupted_total",
    "nodeclaims_termination_duration_seconds",
    "nodeclaims_terminated_total",
    "nodeclaims_instance_termination_duration_seconds",
    "nodeclaims_disrupted_total",
    "nodeclaims_created_total",
    "nodes_total_pod_requests",
    "nodes_total_pod_limits",
    "nodes_total_daemon_requests",
    "nodes_total_daemon_limits",
    "nodes_termination_duration_seconds",
    "nodes_terminated_total",
    "nodes_system_overhead",
    "nodes_lifetime_duration_seconds",
    "nodes_drained_total",
    "nodes_current_lifetime_seconds",
    "nodes_created_total",
    "nodes_allocatable",
    "pods_unstarted_time_seconds",
    "pods_unbound_time_seconds",
    "pods_state",
    "pods_startup_duration_seconds",
    "pods_scheduling_decision_duration_seconds",
    "pods_provisioning_unstarted_time_seconds",
    "pods_provisioning_unbound_time_seconds",
    "pods_provisioning_startup_duration_seconds",
    "pods_provisioning_scheduling_undecided_time_seconds",
    "pods_provisioning_bound_duration_seconds",
    "pods_eviction_requests_total",
    "pods_drained_total",
    "pods_bound_duration_seconds",
    "voluntary_disruption_queue_failures_total",
    "voluntary_disruption_failed_validations_total",
    "voluntary_disruption_eligible_nodes",
    "voluntary_disruption_decisions_total",
    "voluntary_disruption_decisions_by_nodepool_total",
    "voluntary_disruption_decision_evaluation_duration_seconds",
    "voluntary_disruption_consolidation_timeouts_total",
    "scheduler_unschedulable_pods_count",
    "scheduler_unfinished_work_seconds",
    "scheduler_scheduling_duration_seconds",
    "scheduler_queue_depth",
    "scheduler_pending_pods_by_effective_zone_count",
    "scheduler_ignored_pods_count",
    "nodepools_usage",
    "nodepools_nodes_consuming_budgets",
    "nodepools_limit",
    "nodepools_cost_tracker_errors_total",
    "nodepools_cost_total",
    "nodepools_allowed_disruptions",
    "interruption_received_messages_total",
    "interruption_message_queue_duration_seconds",
    "interruption_instance_status_unhealthy_total",
    "interruption_deleted_messages_total",
    "cluster_utilization_percent",
    "cluster_state_unsynced_time_seconds",
    "cluster_state_synced",
    "cluster_state_node_count",
    "cloudprovider_instance_type_offering_price_estimate",
    "cloudprovider_instance_type_offering_available",
    "cloudprovider_instance_type_memory_bytes",
    "cloudprovider_instance_type_cpu_cores",
    "cloudprovider_instance_termination_failures_total",
    "cloudprovider_instance_launch_failures_total",
    "cloudprovider_errors_total",
    "cloudprovider_duration_seconds",
    "cloudprovider_batcher_batch_time_seconds",
    "cloudprovider_batcher_batch_size",
]
# AWS's own metrics of the deployed resources the mapping may name.
AWS_METRICS = {
    "ExecutionTime",
    "ExecutionsStarted",
    "Succeeded",
    "Failed",
    "TimedOut",
    "Aborted",
    "NumberOfMessagesDeleted",
    "ApproximateAgeOfOldestMessage",
    "Errors",
    "Duration",
    "Invocations",
    "Throttles",
}


def _mapping_rows() -> list[tuple[str, str]]:
    """(Karpenter column, Fleetwright column) of the tables under docs/metrics.md's mapping section."""
    text = (REPO_ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text.split("## Karpenter's metrics and Fleetwright's", 1)[1]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| `")]
    return [(row[1], row[2]) for row in rows]


def test_the_karpenter_mapping_covers_every_karpenter_metric_once() -> None:
    named = [name for karpenter, _ in _mapping_rows() for name in re.findall(r"`karpenter_(\w+)`", karpenter)]
    assert sorted(named) == sorted(KARPENTER_METRICS)


def test_the_karpenter_mapping_names_only_metrics_the_code_writes() -> None:
    checked = 0
    for _, fleetwright in _mapping_rows():
        for name, dimensions in re.findall(r"`([A-Z]\w+)(?:\{([\w,=]+)\})?`", fleetwright):
            if name in AWS_METRICS:
                continue
            spec = cm.BY_NAME.get(name)
            assert spec is not None, f"docs/metrics.md names {name}, which no code writes"
            keys = {d.split("=")[0] for d in dimensions.split(",")} if dimensions else set()
            assert any(keys <= set(dims) for dims in spec.dimension_sets), f"{name}{{{dimensions}}}"
            checked += 1
    assert checked > 30


# AWS's metrics the Grafana boards may read, by namespace.
AWS_NAMESPACES = {
    "AWS/Lambda": {"Duration", "Invocations", "Errors", "Throttles"},
    "AWS/States": {"ExecutionTime", "ExecutionsStarted", "ExecutionsSucceeded", "ExecutionsFailed"},
    "AWS/SQS": {"ApproximateAgeOfOldestMessage", "NumberOfMessagesDeleted"},
}


def _grafana_lines(board: dict[str, Any]) -> tuple[list[Line], list[str]]:
    """The custom metrics a Grafana board's CloudWatch targets read, and its problems with AWS's metrics."""
    lines: list[Line] = []
    problems: list[str] = []
    for panel in board["panels"]:
        for target in panel["targets"]:
            if target.get("metricQueryType") == 1:
                lines.append(_query_line(target["sqlExpression"]))
                continue
            namespace, name = target["namespace"], target["metricName"]
            if namespace != cm.NAMESPACE:
                if name not in AWS_NAMESPACES.get(namespace, set()):
                    problems.append(f"{panel['title']}: {namespace} {name}")
                continue
            assert target["matchExact"] is True, panel["title"]
            dimensions = dict(target["dimensions"])
            service = dimensions.pop("service", None)
            own = tuple(sorted(dimensions))
            lines.append(Line(name, None if service == "*" else service, own, own, "plain", panel["title"]))
    return lines, problems


@pytest.mark.parametrize("board", ["capacity", "performance"])
def test_the_grafana_boards_read_only_metrics_the_code_writes(board: str) -> None:
    path = REPO_ROOT / "examples" / "grafana" / f"fleetwright-{board}.json"
    lines, problems = _grafana_lines(json.loads(path.read_text(encoding="utf-8")))
    assert len(lines) >= 6
    # Grafana reads whatever the deployment writes: checked against what monitoring=full publishes.
    assert problems + _problems(lines, "full") == []
