from typing import Any

import pytest

from fleetwright.model.errors import DocumentError, DocumentRef
from fleetwright.model.kube import (
    daemonset_pod,
    expand_workload,
    node_from_object,
    pod_from_object,
    workload_pods,
)
from fleetwright.model.labels import HOSTNAME, ZONE
from fleetwright.model.pod import HostPort
from fleetwright.model.taints import Taint

GI = 2**30
MI = 2**20


def pod(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec}


def container(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "pause", "resources": resources, **extra}


def deployment(
    template_spec: dict[str, Any], replicas: int | None = 3, kind: str = "Deployment"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"metadata": {"labels": {"app": "web"}}, "spec": template_spec}}
    if replicas is not None:
        spec["replicas" if kind != "Job" else "parallelism"] = replicas
    return {
        "apiVersion": "apps/v1" if kind != "Job" else "batch/v1",
        "kind": kind,
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
        "spec": spec,
    }


def problems(err: pytest.ExceptionInfo[DocumentError]) -> dict[str, str]:
    return dict(err.value.problems)


# --- requests --------------------------------------------------------------------------------------------


def test_requests_sum_containers_and_count_one_pod() -> None:
    p = pod_from_object(
        pod(
            {
                "containers": [
                    container({"cpu": "250m", "memory": "1Gi"}),
                    container({"cpu": "1", "memory": "512Mi"}),
                ]
            }
        )
    )
    assert p.requests == {"cpu": 1250, "memory": GI + 512 * MI, "pods": 1}


def test_limits_stand_in_for_missing_requests_per_resource() -> None:
    p = pod_from_object(pod({"containers": [container({"cpu": "100m"}, {"cpu": "2", "memory": "2Gi"})]}))
    # cpu keeps its explicit request; memory has only a limit, so the request defaults to it.
    assert p.requests == {"cpu": 100, "memory": 2 * GI, "pods": 1}


def test_init_container_larger_than_containers_sets_the_request() -> None:
    p = pod_from_object(
        pod(
            {
                "initContainers": [container({"cpu": "3"}), container({"memory": "4Gi"})],
                "containers": [container({"cpu": "1", "memory": "1Gi"})],
            }
        )
    )
    # Init containers run one at a time: each is compared, not summed.
    assert p.requests == {"cpu": 3000, "memory": 4 * GI, "pods": 1}


def test_sidecar_init_containers_add_to_the_running_pod() -> None:
    sidecar = container({"cpu": "500m", "memory": "256Mi"}, restartPolicy="Always")
    p = pod_from_object(
        pod(
            {
                "initContainers": [sidecar, container({"cpu": "2"})],
                "containers": [container({"cpu": "1", "memory": "1Gi"})],
            }
        )
    )
    # Running: 1 + 0.5 cpu. During init: the later init container runs beside the sidecar: 2 + 0.5.
    assert p.requests == {"cpu": 2500, "memory": GI + 256 * MI, "pods": 1}


def test_sidecar_after_init_container_does_not_add_to_it() -> None:
    p = pod_from_object(
        pod(
            {
                "initContainers": [
                    container({"cpu": "2"}),
                    container({"cpu": "500m"}, restartPolicy="Always"),
                ],
                "containers": [container({"cpu": "1"})],
            }
        )
    )
    assert p.requests["cpu"] == 2000


def test_overhead_is_added() -> None:
    p = pod_from_object(
        pod({"containers": [container({"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}})
    )
    assert p.requests == {"cpu": 1250, "memory": 120 * MI, "pods": 1}


def test_container_without_resources_requests_only_a_pod_slot() -> None:
    assert pod_from_object(pod({"containers": [{"name": "c"}]})).requests == {"pods": 1}


# --- node selection --------------------------------------------------------------------------------------


def test_node_selector_and_required_affinity_terms() -> None:
    p = pod_from_object(
        pod(
            {
                "containers": [container()],
                "nodeSelector": {"disk": "ssd"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": ZONE, "operator": "In", "values": ["us-east-1a"]},
                                        {"key": "gen", "operator": "Gt", "values": ["5"]},
                                    ]
                                },
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                                    ]
                                },
                            ]
                        }
                    }
                },
            }
        )
    )
    assert p.node_selector.matches({"disk": "ssd"})
    assert not p.node_selector.matches({"disk": "hdd"})
    assert len(p.required_affinity) == 2
    first, second = p.required_affinity
    # Expressions within a term are ANDed.
    assert first.matches({ZONE: "us-east-1a", "gen": "6"})
    assert not first.matches({ZONE: "us-east-1a", "gen": "5"})
    # matchFields on metadata.name select the node's hostname.
    assert second.matches({HOSTNAME: "node-1"})
    assert not second.matches({HOSTNAME: "node-2"})
    # Terms are ORed: a node meeting either (plus the nodeSelector) qualifies.
    options = p.node_requirement_options()
    assert any(o.matches({"disk": "ssd", HOSTNAME: "node-1"}) for o in options)
    assert not any(o.matches({"disk": "hdd", HOSTNAME: "node-1"}) for o in options)


def test_empty_node_selector_term_matches_no_node() -> None:
    p = pod_from_object(
        pod(
            {
                "containers": [container()],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}
                    }
                },
            }
        )
    )
    assert not any(o.matches({HOSTNAME: "any", ZONE: "us-east-1a"}) for o in p.node_requirement_options())


def test_preferred_node_affinity_keeps_weights() -> None:
    p = pod_from_object(
        pod(
            {
                "containers": [container()],
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 30,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": ZONE, "operator": "NotIn", "values": ["us-east-1c"]}
                                    ]
                                },
                            }
                        ]
                    }
                },
            }
        )
    )
    (term,) = p.preferred_affinity
    assert term.weight == 30
    assert term.requirements.matches({ZONE: "us-east-1a"})
    assert not term.requirements.matches({ZONE: "us-east-1c"})


def test_pod_affinity_terms_default_to_the_pods_namespace() -> None:
    selector = {"matchLabels": {"app": "db"}}
    p = pod_from_object(
        pod(
            {
                "containers": [container()],
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": ZONE, "labelSelector": selector}
                        ]
                    },
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 50,
                                "podAffinityTerm": {
                                    "topologyKey": HOSTNAME,
                                    "labelSelector": {
                                        "matchExpressions": [
                                            {"key": "app", "operator": "In", "values": ["web"]}
                                        ]
                                    },
                                    "namespaces": ["a", "b"],
                                },
                            }
                        ]
                    },
                },
            },
            namespace="shop",
        )
    )
    (affinity,) = p.pod_affinity
    assert affinity.topology_key == ZONE
    assert affinity.namespaces == ("shop",)
    assert affinity.label_selector is not None
    assert affinity.label_selector.matches({"app": "db"})
    assert not affinity.label_selector.matches({"app": "web"})
    (anti,) = p.preferred_pod_anti_affinity
    assert anti.weight == 50
    assert anti.namespaces == ("a", "b")
    assert anti.label_selector is not None and anti.label_selector.matches({"app": "web"})
    assert p.pod_anti_affinity == ()


def test_topology_spread_constraints() -> None:
    p = pod_from_object(
        pod(
            {
                "containers": [container()],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 2,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "minDomains": 3,
                    }
                ],
            }
        )
    )
    (tsc,) = p.topology_spread
    assert (tsc.topology_key, tsc.max_skew, tsc.when_unsatisfiable, tsc.min_domains) == (
        ZONE,
        2,
        "ScheduleAnyway",
        3,
    )
    assert tsc.node_affinity_policy == "Honor" and tsc.node_taints_policy == "Ignore"


def test_tolerations() -> None:
    p = pod_from_object(
        pod(
            {
                "containers": [container()],
                "tolerations": [
                    {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
                    {"key": "spot", "operator": "Exists"},
                    {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                ],
            }
        )
    )
    gpu, spot, everything = p.tolerations
    assert gpu.tolerates(Taint("gpu", "NoSchedule", "true"))
    assert not gpu.tolerates(Taint("gpu", "NoSchedule", "false"))
    assert spot.tolerates(Taint("spot", "NoExecute", "x"))
    assert everything.tolerates(Taint("anything", "NoExecute"))
    assert not everything.tolerates(Taint("anything", "NoSchedule"))
    assert everything.toleration_seconds == 30


def test_host_ports_from_containers_and_init_containers() -> None:
    p = pod_from_object(
        pod(
            {
                "initContainers": [container(ports=[{"containerPort": 9000, "hostPort": 9000}])],
                "containers": [
                    container(
                        ports=[
                            {"containerPort": 80, "hostPort": 8080, "protocol": "UDP", "hostIP": "10.0.0.1"},
                            {"containerPort": 443},
                        ]
                    )
                ],
            }
        )
    )
    assert set(p.host_ports) == {HostPort(9000), HostPort(8080, "UDP", "10.0.0.1")}


def test_host_network_binds_every_container_port() -> None:
    p = pod_from_object(
        pod({"hostNetwork": True, "containers": [container(ports=[{"containerPort": 10250}])]})
    )
    assert p.host_ports == (HostPort(10250),)


def test_metadata_owner_volumes_and_status() -> None:
    p = pod_from_object(
        {
            "metadata": {
                "name": "web-0",
                "namespace": "shop",
                "uid": "abc",
                "labels": {"app": "web"},
                "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                "ownerReferences": [
                    {"kind": "Node", "name": "n", "controller": False},
                    {"kind": "ReplicaSet", "name": "web-7d", "controller": True},
                ],
            },
            "spec": {
                "containers": [container()],
                "nodeName": "node-1",
                "priority": 1000,
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "config", "configMap": {"name": "cfg"}},
                ],
            },
            "status": {"phase": "Running"},
        }
    )
    assert p.key == "shop/web-0"
    assert (p.uid, p.labels, p.annotations) == (
        "abc",
        {"app": "web"},
        {"karpenter.sh/do-not-disrupt": "true"},
    )
    assert p.owner == ("ReplicaSet", "web-7d")
    assert p.volume_claims == ("data-web-0", "web-0-scratch")
    assert (p.node_name, p.priority, p.phase) == ("node-1", 1000, "Running")


def test_defaults_for_a_minimal_pod() -> None:
    p = pod_from_object(pod({"containers": [container()]}))
    assert (p.namespace, p.node_name, p.owner, p.priority, p.phase) == ("default", None, None, 0, "Pending")


def test_unknown_fields_are_ignored() -> None:
    p = pod_from_object(
        pod(
            {
                "containers": [container({"cpu": "1"}, futureField=1)],
                "dnsPolicy": "ClusterFirst",
                "newThing": {},
            }
        )
    )
    assert p.requests["cpu"] == 1000


# --- errors ----------------------------------------------------------------------------------------------


def test_bad_quantity_names_the_field() -> None:
    with pytest.raises(DocumentError) as err:
        pod_from_object(
            pod({"containers": [container({"cpu": "lots"})]}), DocumentRef("pods.yaml", 2, "Pod", "p")
        )
    assert "spec.containers[0].resources.requests.cpu" in problems(err)
    assert str(err.value).startswith(
        "pods.yaml: document 2 (Pod p): spec.containers[0].resources.requests.cpu:"
    )


def test_missing_containers() -> None:
    with pytest.raises(DocumentError) as err:
        pod_from_object(pod({}))
    assert "spec.containers" in problems(err)


def test_bad_operator_names_the_expression() -> None:
    spec = {
        "containers": [container()],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}
                    ]
                }
            }
        },
    }
    with pytest.raises(DocumentError) as err:
        pod_from_object(pod(spec))
    path = (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].operator"
    )
    assert "Equals" in problems(err)[path]


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(DocumentError) as err:
        pod_from_object(
            pod(
                {
                    "containers": [container({"memory": "1Gb"})],
                    "tolerations": [{"key": "a", "effect": "NoScheduling"}],
                    "priority": "high",
                }
            )
        )
    assert set(problems(err)) == {
        "spec.containers[0].resources.requests.memory",
        "spec.tolerations[0].effect",
        "spec.priority",
    }


def test_negative_request_is_rejected() -> None:
    with pytest.raises(DocumentError) as err:
        pod_from_object(pod({"containers": [container({"cpu": "-1"})]}))
    assert "spec.containers[0].resources.requests.cpu" in problems(err)


# --- workloads -------------------------------------------------------------------------------------------


def test_expand_deployment() -> None:
    pods = expand_workload(deployment({"containers": [container({"cpu": "1"})]}))
    assert [p["metadata"]["name"] for p in pods] == ["web-0", "web-1", "web-2"]
    assert {p["metadata"]["namespace"] for p in pods} == {"shop"}
    assert all(p["metadata"]["labels"] == {"app": "web"} for p in pods)
    owner = pods[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"], owner["uid"]) == (
        "Deployment",
        "web",
        True,
        "u-1",
    )


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "Job"])
def test_replicas_default_to_one(kind: str) -> None:
    assert len(expand_workload(deployment({"containers": [container()]}, replicas=None, kind=kind))) == 1


def test_job_uses_parallelism_capped_by_completions() -> None:
    job = deployment({"containers": [container()]}, replicas=4, kind="Job")
    assert len(expand_workload(job)) == 4
    job["spec"]["completions"] = 2
    assert len(expand_workload(job)) == 2


def test_statefulset_claims_per_pod() -> None:
    sts = deployment({"containers": [container()]}, replicas=2, kind="StatefulSet")
    sts["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {}}]
    pods = workload_pods(sts)
    assert [p.volume_claims for p in pods] == [("data-web-0",), ("data-web-1",)]


def test_workload_pods_convert_and_own() -> None:
    pods = workload_pods(deployment({"containers": [container({"memory": "1Gi"})]}, replicas=2))
    assert [p.key for p in pods] == ["shop/web-0", "shop/web-1"]
    assert all(p.owner == ("Deployment", "web") and p.requests["memory"] == GI for p in pods)


def test_workload_template_errors_name_the_template_path() -> None:
    with pytest.raises(DocumentError) as err:
        workload_pods(deployment({"containers": [container({"cpu": "one"})]}))
    assert "spec.template.spec.containers[0].resources.requests.cpu" in problems(err)


def test_bad_replicas() -> None:
    bad = deployment({"containers": [container()]})
    bad["spec"]["replicas"] = "three"
    with pytest.raises(DocumentError) as err:
        expand_workload(bad)
    assert "spec.replicas" in problems(err)


def test_daemonset_pod_is_the_template_with_controller_tolerations() -> None:
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [container({"cpu": "100m", "memory": "128Mi"})]},
            }
        },
    }
    p = daemonset_pod(ds)
    assert (p.key, p.owner, p.labels) == ("kube-system/agent", ("DaemonSet", "agent"), {"app": "agent"})
    assert p.requests == {"cpu": 100, "memory": 128 * MI, "pods": 1}
    assert any(t.tolerates(Taint("node.kubernetes.io/unschedulable", "NoSchedule")) for t in p.tolerations)
    # Only node-condition taints are tolerated automatically.
    assert not any(t.tolerates(Taint("dedicated", "NoSchedule", "gpu")) for t in p.tolerations)


# --- nodes -----------------------------------------------------------------------------------------------


def test_node_from_object() -> None:
    bound = pod_from_object(pod({"containers": [container({"cpu": "1"})], "nodeName": "n1"}))
    node = node_from_object(
        {
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {ZONE: "us-east-1a"}},
            "spec": {
                "providerID": "aws:///us-east-1a/i-123",
                "unschedulable": True,
                "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
            },
            "status": {
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        },
        [bound],
    )
    assert node.allocatable == {"cpu": 1930, "memory": 7 * GI, "pods": 29}
    assert node.capacity["cpu"] == 2000
    assert node.taints == (Taint("dedicated", "NoSchedule", "gpu"),)
    assert (node.unschedulable, node.ready, node.provider_id) == (True, False, "aws:///us-east-1a/i-123")
    assert node.pods == [bound]


def test_node_without_conditions_is_ready_and_allocatable_falls_back_to_capacity() -> None:
    node = node_from_object({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}})
    assert node.ready and node.allocatable == {"cpu": 4000}


def test_node_without_resources_is_rejected() -> None:
    with pytest.raises(DocumentError) as err:
        node_from_object({"metadata": {"name": "n"}})
    assert "status.allocatable" in problems(err)


def test_workload_pods_match_the_expanded_pod_objects() -> None:
    sts = deployment(
        {
            "containers": [container({"cpu": "1"})],
            "volumes": [
                {"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "data", "emptyDir": {}},
            ],
        },
        replicas=3,
        kind="StatefulSet",
    )
    sts["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}}]
    fast = workload_pods(sts)
    slow = [pod_from_object(obj) for obj in expand_workload(sts)]
    assert [(p.key, p.labels, p.volume_claims, p.owner, p.requests) for p in fast] == [
        (p.key, p.labels, p.volume_claims, p.owner, p.requests) for p in slow
    ]
    assert fast[2].volume_claims == ("shared", "web-2-scratch", "data-web-2")
    # Replicas do not share mutable state.
    fast[0].labels["extra"] = "x"
    assert "extra" not in fast[1].labels
