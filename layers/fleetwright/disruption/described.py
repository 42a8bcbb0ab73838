"""Instance descriptions kept across warm disruption passes.

Of what the disruption input reads from an instance, only its state and its NodeClaim tag can change
(type, zone, capacity type, AMI and launch time are fixed at launch). A description is reused while the
instance is ``running`` with its NodeClaim tag and was described less than ``max_age_seconds`` ago; new
instances, ``pending`` or stopping ones, untagged ones and old descriptions are described again. Every
listing of live instances (the garbage collector's, at most ``DEFAULT_LIST_EVERY_SECONDS`` apart, less
than ``max_age_seconds``) refreshes the descriptions it returns and drops the ones it no longer lists,
and a termination drops its instances, so a description a pass uses is never older than
``max_age_seconds`` and a state change is seen within that. The interruption and termination functions
do not use this: they describe what they act on themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from fleetwright.cloud.instances import Instance, LaunchTemplateInfo, TerminateResult
from fleetwright.cloud.provider import InstanceReader, InventoryCloud

DEFAULT_MAX_AGE_SECONDS = 300.0


class DescribedInstances:
    """``describe`` (the :class:`~fleetwright.cloud.provider.InstanceReader` view) through a cache.

    ``clock`` gives epoch seconds. ``described`` counts the instances actually described (for logs and
    the bench).
    """

    def __init__(
        self,
        cloud: InstanceReader,
        *,
        max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cloud = cloud
        self.max_age_seconds = max_age_seconds
        self.clock = clock
        self.described = 0
        self._entries: dict[str, tuple[Instance, float]] = {}

    def _trusted(self, instance_id: str, now: float) -> bool:
        entry = self._entries.get(instance_id)
        if entry is None:
            return False
        instance, at = entry
        return instance.state == "running" and bool(instance.nodeclaim) and now - at < self.max_age_seconds

    def describe(self, instance_ids: Iterable[str]) -> dict[str, Instance]:
        """This cluster's instances among ``instance_ids``, described again only when needed."""
        wanted = list(dict.fromkeys(instance_ids))
        now = self.clock()
        stale = [i for i in wanted if not self._trusted(i, now)]
        if stale:
            found = self.cloud.describe(stale)
            self.described += len(stale)
            for instance_id in stale:
                if instance_id in found:
                    self._entries[instance_id] = (found[instance_id], now)
                else:  # gone, or not ours: never cached
                    self._entries.pop(instance_id, None)
        return {i: self._entries[i][0] for i in wanted if i in self._entries}

    def forget(self, instance_ids: Iterable[str]) -> None:
        """Describe these again next time."""
        for instance_id in instance_ids:
            self._entries.pop(instance_id, None)

    def observe(self, live: Iterable[Instance]) -> None:
        """A fresh listing of every live instance: refresh those it holds, forget the others."""
        now = self.clock()
        listed = {i.id: i for i in live}
        for instance_id in list(self._entries):
            if instance_id not in listed:
                del self._entries[instance_id]
        for instance_id, instance in listed.items():
            if instance_id in self._entries:
                self._entries[instance_id] = (instance, now)


class ObservedCloud:
    """The cloud provider as the garbage collector uses it, showing its listings and terminations to a
    :class:`DescribedInstances`."""

    def __init__(self, cloud: InventoryCloud, described: DescribedInstances) -> None:
        self.cloud = cloud
        self.described_instances = described

    def list(self) -> Sequence[Instance]:
        """Every live instance of this cluster (and refresh the cached descriptions)."""
        found = self.cloud.list()
        self.described_instances.observe(found)
        return found

    def describe_any(self, instance_ids: Iterable[str]) -> Mapping[str, Instance]:
        """Instances among ``instance_ids`` whoever owns them."""
        return self.cloud.describe_any(instance_ids)

    def terminate(self, instance_ids: Iterable[str]) -> TerminateResult:
        """Terminate (and forget the descriptions of) this cluster's instances."""
        ids = list(instance_ids)
        self.described_instances.forget(ids)
        return self.cloud.terminate(ids)

    def launch_templates(self) -> Sequence[LaunchTemplateInfo]:
        """This cluster's launch templates."""
        return self.cloud.launch_templates()

    def launch_template_image(self, template_id: str) -> str:
        """The AMI of the template's latest version."""
        return self.cloud.launch_template_image(template_id)

    def delete_launch_template(self, name: str) -> bool:
        """Delete one of this cluster's launch templates."""
        return self.cloud.delete_launch_template(name)
