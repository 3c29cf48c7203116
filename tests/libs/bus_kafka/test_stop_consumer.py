"""Stopping an aiokafka consumer whose fetcher re-raises the cancellation of its own tasks."""

from __future__ import annotations

import asyncio

import pytest

from cogsub.bus.kafka import stop_consumer


class _Client:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class _ConsumerLikeAiokafka:
    """What aiokafka 0.12's ``stop`` does with the broker gone: it cancels a pending fetch
    task and awaits it, so the task's CancelledError leaves ``stop`` before the client closes."""

    def __init__(self) -> None:
        self._client = _Client()

    async def stop(self) -> None:
        pending = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        pending.cancel()
        await pending
        await self._client.close()


async def test_the_fetchers_own_cancellation_is_absorbed_and_the_client_closed() -> None:
    consumer = _ConsumerLikeAiokafka()
    await stop_consumer(consumer)
    assert consumer._client.closed


async def test_a_cancellation_of_the_caller_still_reaches_it() -> None:
    consumer = _ConsumerLikeAiokafka()
    stopping = asyncio.ensure_future(stop_consumer(consumer))
    await asyncio.sleep(0)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
