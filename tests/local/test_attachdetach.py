"""The emulator's attach-detach controller: a running pod's persistent volume gets a VolumeAttachment on its
node, deleted a few seconds after the last pod using it there leaves; kubectl lists them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.resources import (
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    VOLUME_ATTACHMENTS,
)
from fleetwright.local.attachdetach import attachment_name
from tests.support.local import KUBECTL, Kubectl
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time

DETACH_SECONDS = 0.5


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(port=0, detach_delay=DETACH_SECONDS) as apiserver:
        yield apiserver


def _seed(server: ApiServer) -> None:
    store = server.store
    store.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
    store.create(
        PERSISTENT_VOLUMES,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-data"},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0abc"}, "capacity": {}},
        },
    )
    store.create(
        PERSISTENT_VOLUME_CLAIMS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"volumeName": "pv-data", "accessModes": ["ReadWriteOnce"]},
        },
        "default",
    )
    store.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "db-0", "namespace": "default"},
            "spec": {
                "nodeName": "node-a",
                "containers": [{"name": "db", "image": "postgres"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            },
        },
        "default",
    )


def test_a_running_pods_volume_is_attached_and_detached_after_it_leaves(server: ApiServer) -> None:
    _seed(server)
    name = attachment_name("pv-data", "ebs.csi.aws.com", "node-a")

    wait_for(lambda: bool(server.store.list(VOLUME_ATTACHMENTS)[0]))
    [attachment] = server.store.list(VOLUME_ATTACHMENTS)[0]
    assert attachment["metadata"]["name"] == name and name.startswith("csi-")
    assert attachment["spec"] == {
        "attacher": "ebs.csi.aws.com",
        "nodeName": "node-a",
        "source": {"persistentVolumeName": "pv-data"},
    }

    server.store.delete(PODS, "default", "db-0", grace_period=0)
    # Detaching takes a while: the attachment outlives the pod, then goes.
    assert [a["metadata"]["name"] for a in server.store.list(VOLUME_ATTACHMENTS)[0]] == [name]
    wait_for(lambda: not server.store.list(VOLUME_ATTACHMENTS)[0])


def test_kubectl_lists_volume_attachments(
    server: ApiServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if not KUBECTL.exists():
        pytest.fail(f"{KUBECTL} is missing: run .ci/install-kubectl first")
    kubectl = Kubectl(KUBECTL, server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config"))
    _seed(server)
    wait_for(lambda: bool(server.store.list(VOLUME_ATTACHMENTS)[0]))

    out = kubectl("get", "volumeattachments", "-o", "jsonpath={.items[*].spec.nodeName}")

    assert out == "node-a"
