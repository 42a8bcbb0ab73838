"""The requeue loop: a pod not placed yet is tried again after the others while the batch progresses.

As in Karpenter, a pod that cannot be placed yet goes to the back of the queue: it may need another pod
of the batch placed first (required pod affinity to it, a chain of them, or a spread only its turn can
balance). The loop stops when a whole pass over the queue places nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from fleetwright.model.pod import Pod


def place_while_progressing(
    pending: Sequence[Pod], place: Callable[[Pod], str | None], hopeless: Callable[[Pod], bool]
) -> dict[str, str]:
    """Place ``pending`` in order, requeueing failures; why each pod left unplaced failed, by pod key.

    ``place`` places a pod or says why it cannot; a pod ``hopeless`` says no placement can change (a
    missing volume, contradictory selectors) is not requeued.
    """
    queue = deque(pending)
    requeued_at: dict[str, int] = {}  # pod key -> queue length when it was last pushed back
    failures: dict[str, str] = {}
    while queue:
        pod = queue[0]
        if requeued_at.get(pod.key) == len(queue):
            break  # every pod left was tried since the last placement
        queue.popleft()
        reason = place(pod)
        if reason is None:
            if failures:
                failures.pop(pod.key, None)
            continue
        failures[pod.key] = reason
        if hopeless(pod):
            continue
        queue.append(pod)
        requeued_at[pod.key] = len(queue)
    return failures
