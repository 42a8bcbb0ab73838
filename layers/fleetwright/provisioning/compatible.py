"""NodePools no instance type can serve: Karpenter's ``NoCompatibleInstanceTypes`` event tells the user their
requirements filter out every type their EC2NodeClass offers (or leave too few for ``minValues``), instead of
leaving them to find it in each pending pod's FailedScheduling message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleetwright.model.instancetype import InstanceType
from fleetwright.scheduling.compat import instance_type_compatible
from fleetwright.scheduling.types import NodePoolTemplate


def incompatible_pools(
    templates: Sequence[NodePoolTemplate],
    catalog: Sequence[InstanceType],
    accepted: Mapping[str, set[str]],
) -> list[tuple[str, bool]]:
    """``(NodePool, min_values)`` for each dynamic NodePool whose requirements no instance type its node
    class boots (``accepted``: names per node class) satisfies, with an available offering; ``min_values``
    when some do, but too few distinct values remain for a requirement's ``minValues``."""
    found: list[tuple[str, bool]] = []
    for template in templates:
        if template.static:
            continue
        names = accepted.get(template.node_class)
        types = [
            it
            for it in catalog
            if (names is None or it.name in names) and instance_type_compatible(it, template.requirements)
        ]
        if not types:
            found.append((template.name, False))
            continue
        for req in template.requirements:
            if req.min_values and len({it.labels.get(req.key) for it in types} - {None}) < req.min_values:
                found.append((template.name, True))
                break
    return found
