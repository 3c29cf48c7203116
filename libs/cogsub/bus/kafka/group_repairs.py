"""Two repairs to aiokafka's group membership, kept apart because they touch its internals.

Both were found on noida-db and matter on any broker (docs/reliability.md):

- **Abandoned member ids are left explicitly.** When a commit, heartbeat or sync
  fails with a stale generation, aiokafka forgets its member id and rejoins under a
  new one, but never tells the broker that the old id is gone. Kafka drops the old
  id only when its session expires, so the rebalance waits that long for it; a
  broker that never expires sessions (noida-db) waits forever, with the group stuck
  in ``CompletingRebalance``. :func:`leave_abandoned_ids` sends the LeaveGroup that
  aiokafka does not.
- **A member whose coordination died is detectable.** An unexpected error in
  aiokafka's coordination task (noida-db once answered a SyncGroup with an empty
  assignment, which aiokafka cannot decode) ends that task for good: every later
  ``getmany`` re-raises the same error. :func:`coordination_failure` tells the
  adapter so that it can replace the member instead of failing forever.

aiokafka is pinned in ``constraints.txt``; ``tests/libs/bus_kafka/test_kafka_group.py``
fails if these internals move.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka.protocol.group import LeaveGroupRequest

log = structlog.get_logger(__name__)

_pending_leaves: set[asyncio.Task[None]] = set()  # strong references until each is sent


def leave_abandoned_ids(consumer: AIOKafkaConsumer) -> None:
    """From now on, every member id the consumer drops is left at the broker."""
    coordinator = consumer._coordinator
    reset_generation = coordinator.reset_generation

    def reset_and_leave() -> None:
        abandoned = coordinator.member_id
        reset_generation()
        if abandoned and not consumer._closed:
            task = asyncio.get_running_loop().create_task(_leave(coordinator, abandoned))
            _pending_leaves.add(task)
            task.add_done_callback(_pending_leaves.discard)

    coordinator.reset_generation = reset_and_leave


async def _leave(coordinator: Any, member_id: str) -> None:
    try:
        response = await coordinator._send_req(LeaveGroupRequest(coordinator.group_id, member_id))
    except Exception as exc:  # best effort: Kafka expires the id anyway
        log.warning("kafka_leave_abandoned_failed", group=coordinator.group_id, error=repr(exc))
        return
    log.info(
        "kafka_left_abandoned_member",
        group=coordinator.group_id,
        member_id=member_id,
        error_code=response.error_code,
    )


def coordination_failure(consumer: AIOKafkaConsumer) -> BaseException | None:
    """The error that ended the consumer's coordination task, if it has ended."""
    task = getattr(getattr(consumer, "_coordinator", None), "_coordination_task", None)
    if task is None or not task.done() or task.cancelled():
        return None
    failure: BaseException | None = task.exception()
    return failure
