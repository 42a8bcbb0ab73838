"""An attach-detach controller stand-in: VolumeAttachments (storage.k8s.io/v1) for the persistent volumes
of the pods running on each node.

As kube-controller-manager's attach-detach controller with a CSI driver does: a pod bound to a node that
mounts a bound PersistentVolumeClaim gets a VolumeAttachment ``csi-<sha256>`` for (volume, driver, node),
marked attached; once no pod on that node uses the volume any more (the pod is gone or finished), the
attachment is deleted ``detach_delay`` seconds later (the time a detach takes). Fleetwright's termination
waits for those deletions before terminating a drained node's instance.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from typing import Any

from fleetwright.local.apiserver.controllers import Controller
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.resources import (
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    VOLUME_ATTACHMENTS,
)
from fleetwright.local.apiserver.store import Store, WatchEvent

JsonObject = dict[str, Any]

DEFAULT_ATTACHER = "ebs.csi.aws.com"
DEFAULT_DETACH_DELAY_SECONDS = 5.0
FINISHED = ("Succeeded", "Failed")


def attachment_name(volume: str, attacher: str, node: str) -> str:
    """The name the CSI attacher gives an attachment: ``csi-`` + sha256 of volume, driver and node."""
    return "csi-" + hashlib.sha256(f"{volume}{attacher}{node}".encode()).hexdigest()


def _claims(pod: JsonObject) -> list[str]:
    return [
        str(v["persistentVolumeClaim"]["claimName"])
        for v in (pod.get("spec") or {}).get("volumes") or []
        if (v.get("persistentVolumeClaim") or {}).get("claimName")
    ]


class AttachDetachController(Controller):
    """Attaches the volumes of running pods and detaches those no pod on the node uses any more."""

    watches = (PODS, PERSISTENT_VOLUME_CLAIMS, VOLUME_ATTACHMENTS)

    def __init__(self, store: Store, *, detach_delay: float = DEFAULT_DETACH_DELAY_SECONDS) -> None:
        super().__init__(store)
        self.detach_delay = detach_delay
        self._unused_since: dict[str, float] = {}
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()

    def wants(self, event: WatchEvent) -> bool:
        """Pods that mount claims, claims and attachments; other pods never change an attachment."""
        return event.resource.key != PODS.key or bool(_claims(event.object))

    def stop(self) -> None:
        """Unsubscribe and drop pending detach timers."""
        super().stop()
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()

    def desired(self) -> dict[str, JsonObject]:
        """The attachments the running pods need, by name."""
        claims = {
            (c["metadata"].get("namespace"), c["metadata"]["name"]): c
            for c in self.store.list(PERSISTENT_VOLUME_CLAIMS)[0]
        }
        volumes = {v["metadata"]["name"]: v for v in self.store.list(PERSISTENT_VOLUMES)[0]}
        wanted: dict[str, JsonObject] = {}
        for pod in self.store.list(PODS)[0]:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or (pod.get("status") or {}).get("phase") in FINISHED:
                continue
            namespace = pod["metadata"].get("namespace")
            for claim_name in _claims(pod):
                claim = claims.get((namespace, claim_name))
                volume = str(((claim or {}).get("spec") or {}).get("volumeName") or "")
                if not volume:
                    continue
                csi = ((volumes.get(volume) or {}).get("spec") or {}).get("csi") or {}
                attacher = str(csi.get("driver") or DEFAULT_ATTACHER)
                name = attachment_name(volume, attacher, node)
                wanted[name] = {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "VolumeAttachment",
                    "metadata": {"name": name},
                    "spec": {
                        "attacher": attacher,
                        "nodeName": node,
                        "source": {"persistentVolumeName": volume},
                    },
                    "status": {"attached": True},
                }
        return wanted

    def reconcile(self) -> None:
        """Create the attachments wanted; delete the unwanted ones once unused for ``detach_delay``."""
        wanted = self.desired()
        existing = {a["metadata"]["name"]: a for a in self.store.list(VOLUME_ATTACHMENTS)[0]}
        now = self.store.clock()
        for name, body in wanted.items():
            if name not in existing:
                with contextlib.suppress(ApiError):
                    self.store.create(VOLUME_ATTACHMENTS, body)
        with self._lock:
            for name in list(self._unused_since):
                if name in wanted or name not in existing:
                    del self._unused_since[name]
            for name in existing:
                if name in wanted:
                    continue
                since = self._unused_since.setdefault(name, now)
                left = since + self.detach_delay - now
                if left <= 0:
                    with contextlib.suppress(ApiError):
                        self.store.delete(VOLUME_ATTACHMENTS, None, name)
                    self._unused_since.pop(name, None)
                elif since == now:  # newly unused: come back when its detach is done
                    timer = threading.Timer(left, self._runner.notify)
                    timer.daemon = True
                    self._timers = [t for t in self._timers if t.is_alive()] + [timer]
                    timer.start()
