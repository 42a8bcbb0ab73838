"""What the volume-detachment check adds to a drained node's drain pass: one LIST of every VolumeAttachment
in the cluster (the API selects them by name only), filtered to the node. Prints the median time of
``KubeCluster.list_volume_attachments`` against the Kubernetes API emulator holding N attachments spread
over N / 2 nodes, then the machine.

    .venv/bin/python bench/volume_attachments.py [--counts 1000,5000,20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "layers"))

from scheduling import machine  # noqa: E402  (bench/scheduling.py)

from fleetwright.kube.client import KubeClient  # noqa: E402
from fleetwright.kube.cluster import KubeCluster  # noqa: E402
from fleetwright.kube.config import ClusterConfig  # noqa: E402
from fleetwright.local.apiserver import ApiServer  # noqa: E402
from fleetwright.local.apiserver.resources import VOLUME_ATTACHMENTS  # noqa: E402


def seed(server: ApiServer, count: int) -> None:
    """``count`` attachments, two per node."""
    for i in range(count):
        server.store.create(
            VOLUME_ATTACHMENTS,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "VolumeAttachment",
                "metadata": {"name": f"csi-{i:064x}"},
                "spec": {
                    "attacher": "ebs.csi.aws.com",
                    "nodeName": f"ip-10-0-{i // 512}-{(i // 2) % 256}.ec2.internal",
                    "source": {"persistentVolumeName": f"pvc-{i:08d}"},
                },
                "status": {"attached": True},
            },
        )


def measure(count: int, repeat: int) -> tuple[float, int]:
    """Median seconds of one node's listing, and how many it found."""
    with ApiServer(port=0, pod_lifecycle=False, disruption_controller=False, attach_detach=False) as server:
        seed(server, count)
        client = KubeClient(ClusterConfig(server=server.url))
        kube = KubeCluster(client)
        node = "ip-10-0-0-0.ec2.internal"
        times = []
        found = 0
        for _ in range(repeat):
            began = time.perf_counter()
            found = len(kube.list_volume_attachments(node))
            times.append(time.perf_counter() - began)
        client.close()
    return statistics.median(times), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000,5000,20000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'attachments':>12} {'median ms':>10} {'on node':>8}")
    for count in (int(c) for c in args.counts.split(",")):
        seconds, found = measure(count, args.repeat)
        print(f"{count:>12} {seconds * 1000:>10.1f} {found:>8}")
    print(f"machine: {machine()}")


if __name__ == "__main__":
    main()
