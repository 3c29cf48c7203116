"""The ArchiveStore contract, written once and run against every adapter.

A concrete test class inherits ``ArchiveStoreContract`` and provides an
``archive_factory`` fixture: a zero-argument callable returning a NEW archive
over the same backend each time, so a test can close one and reopen another.
Every key a test writes starts with its own unique prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from cogsub.archive.ports import ArchiveStore
from cogsub.bulk import put_all
from cogsub.core.errors import InvalidInputError, NotFoundError, ObjectExistsError

ArchiveFactory = Callable[[], ArchiveStore]


class ArchiveSession:
    """Opens archives for one test and closes whatever is still open."""

    def __init__(self, factory: ArchiveFactory) -> None:
        self._factory = factory
        self._open: list[ArchiveStore] = []

    def archive(self) -> ArchiveStore:
        archive = self._factory()
        self._open.append(archive)
        return archive

    async def close(self, archive: ArchiveStore) -> None:
        self._open.remove(archive)
        await archive.close()

    async def close_all(self) -> None:
        for archive in reversed(self._open):
            await archive.close()
        self._open.clear()


async def _keys(archive: ArchiveStore, prefix: str) -> list[str]:
    return [key async for key in archive.list(prefix)]


class ArchiveStoreContract:
    """Behaviour every ArchiveStore adapter keeps (see ``cogsub.archive.ports``)."""

    racing_puts = 200
    concurrent_puts = 500

    @pytest.fixture
    async def session(self, archive_factory: ArchiveFactory) -> AsyncIterator[ArchiveSession]:
        session = ArchiveSession(archive_factory)
        try:
            yield session
        finally:
            await session.close_all()

    @pytest.fixture
    def prefix(self, unique_name: str) -> str:
        return f"contract/{unique_name}"

    async def test_put_then_get_returns_exact_bytes(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        archive = session.archive()
        bodies = {
            f"{prefix}/events/2026/05/08/a.json": b'{"eventId": "a"}',
            f"{prefix}/binary.bin": bytes(range(256)) * 40,
            f"{prefix}/empty": b"",
        }
        for key, body in bodies.items():
            await archive.put_once(key, body)
        for key, body in bodies.items():
            assert await archive.get(key) == body

    async def test_second_put_once_raises_and_keeps_the_original(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        archive = session.archive()
        key = f"{prefix}/once.json"
        await archive.put_once(key, b"original")
        for body in (b"original", b"different"):
            with pytest.raises(ObjectExistsError) as raised:
                await archive.put_once(key, body)
            assert raised.value.key == key
        assert await archive.get(key) == b"original"

    async def test_put_all_gives_each_object_its_own_outcome(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        # ``put_all`` takes the adapter's ``put_once_many`` where there is one.
        archive = session.archive()
        await archive.put_once(f"{prefix}/taken", b"first")
        items = [(f"{prefix}/new/{i}.json", f'{{"i": {i}}}'.encode()) for i in range(40)] + [
            (f"{prefix}/taken", b"second"),
            ("", b"an empty key"),
            (f"{prefix}/twice", b"one"),
            (f"{prefix}/twice", b"two"),
        ]
        outcomes = await put_all(archive, items)

        assert outcomes[:40] == [None] * 40
        assert isinstance(outcomes[40], ObjectExistsError)
        assert isinstance(outcomes[41], InvalidInputError)
        assert outcomes[42] is None
        assert isinstance(outcomes[43], ObjectExistsError)
        for key, body in items[:40]:
            assert await archive.get(key) == body
        assert await archive.get(f"{prefix}/taken") == b"first"
        assert await archive.get(f"{prefix}/twice") == b"one"
        assert await put_all(archive, []) == []

    async def test_exists(self, session: ArchiveSession, prefix: str) -> None:
        archive = session.archive()
        key = f"{prefix}/here.json"
        assert not await archive.exists(key)
        await archive.put_once(key, b"{}")
        assert await archive.exists(key)
        assert not await archive.exists(f"{prefix}/here")
        assert not await archive.exists(f"{prefix}/here.json.more")

    async def test_list_by_prefix_is_sorted_and_prefix_exact(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        archive = session.archive()
        names = ["b/5", "a/2", "ab/4", "a-b/3", "a/1", "a/sub/6", "c"]
        for name in names:
            await archive.put_once(f"{prefix}/{name}", name.encode())

        def under(start: str) -> list[str]:
            return sorted(f"{prefix}/{n}" for n in names if n.startswith(start))

        assert await _keys(archive, f"{prefix}/") == under("")
        # A string prefix, not a directory: "a" matches a/..., a-b/... and ab/...
        assert await _keys(archive, f"{prefix}/a") == under("a")
        assert await _keys(archive, f"{prefix}/a") == [
            f"{prefix}/a-b/3",
            f"{prefix}/a/1",
            f"{prefix}/a/2",
            f"{prefix}/a/sub/6",
            f"{prefix}/ab/4",
        ]
        assert await _keys(archive, f"{prefix}/a/") == under("a/")
        assert await _keys(archive, f"{prefix}/a/1") == [f"{prefix}/a/1"]
        assert await _keys(archive, f"{prefix}/nothing") == []
        assert await _keys(archive, f"{prefix}-other") == []

    async def test_delete_then_put_again(self, session: ArchiveSession, prefix: str) -> None:
        archive = session.archive()
        key = f"{prefix}/forget-me.json"
        await archive.put_once(key, b"first life")
        await archive.delete(key)
        assert not await archive.exists(key)
        with pytest.raises(NotFoundError):
            await archive.get(key)
        assert await _keys(archive, prefix) == []
        await archive.put_once(key, b"second life")
        assert await archive.get(key) == b"second life"
        # Deleting what is not there is not an error.
        await archive.delete(f"{prefix}/never-existed.json")

    async def test_get_missing_raises_not_found(self, session: ArchiveSession, prefix: str) -> None:
        archive = session.archive()
        with pytest.raises(NotFoundError):
            await archive.get(f"{prefix}/missing.json")

    async def test_get_many_returns_what_exists_and_leaves_out_the_rest(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        archive = session.archive()
        stored = {f"{prefix}/many/{i:03d}.json": f"body {i}".encode() * (i + 1) for i in range(40)}
        for key, body in stored.items():
            await archive.put_once(key, body)
        erased = f"{prefix}/many/007.json"
        await archive.delete(erased)
        missing = f"{prefix}/many/never.json"
        asked = [missing, *reversed(stored), erased, f"{prefix}/many/003.json"]
        found = await archive.get_many(asked)
        expected = {k: b for k, b in stored.items() if k != erased}
        assert found == expected
        assert list(found) == [k for k in dict.fromkeys(asked) if k in expected]  # asked order
        assert await archive.get_many([]) == {}
        assert await archive.get_many([missing]) == {}

    async def test_get_many_refuses_an_invalid_key_before_reading(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        archive = session.archive()
        with pytest.raises(InvalidInputError):
            await archive.get_many([f"{prefix}/fine.json", ""])

    async def test_get_many_beside_deletes_returns_whole_bodies_or_nothing(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        archive = session.archive()
        stored = {f"{prefix}/race/{i:03d}.json": f"body {i} ".encode() * 50 for i in range(60)}
        for key, body in stored.items():
            await archive.put_once(key, body)
        doomed = list(stored)[::2]
        read, *_ = await asyncio.gather(
            archive.get_many(list(stored)), *(archive.delete(key) for key in doomed)
        )
        assert all(read[key] == stored[key] for key in read)  # never a torn body
        assert set(stored) - set(doomed) <= set(read)  # the survivors are all there
        assert set(await archive.get_many(list(stored))) == set(stored) - set(doomed)

    async def test_racing_put_once_on_one_key_has_exactly_one_winner(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        archive = session.archive()
        key = f"{prefix}/contested.json"
        bodies = [f"writer-{i}".encode() for i in range(self.racing_puts)]
        outcomes = await asyncio.gather(
            *(archive.put_once(key, body) for body in bodies), return_exceptions=True
        )
        winners = [body for body, outcome in zip(bodies, outcomes, strict=True) if outcome is None]
        losers = [outcome for outcome in outcomes if outcome is not None]
        assert len(winners) == 1
        assert all(isinstance(loser, ObjectExistsError) for loser in losers)
        assert await archive.get(key) == winners[0]

    async def test_concurrent_distinct_puts_are_all_readable(
        self, session: ArchiveSession, prefix: str
    ) -> None:
        archive = session.archive()
        bodies = {
            f"{prefix}/many/{i:04d}.json": f'{{"n": {i}}}'.encode() * 20
            for i in range(self.concurrent_puts)
        }
        await asyncio.gather(*(archive.put_once(k, b) for k, b in bodies.items()))
        read = await asyncio.gather(*(archive.get(k) for k in bodies))
        assert read == list(bodies.values())
        assert await _keys(archive, f"{prefix}/many/") == sorted(bodies)

    async def test_data_survives_a_new_instance(self, session: ArchiveSession, prefix: str) -> None:
        archive = session.archive()
        key = f"{prefix}/durable.json"
        await archive.put_once(key, b"still here")
        await session.close(archive)

        reopened = session.archive()
        assert await reopened.get(key) == b"still here"
        assert await _keys(reopened, prefix) == [key]
        with pytest.raises(ObjectExistsError):
            await reopened.put_once(key, b"overwrite attempt")
