"""Readiness: named probes of the backends, each bounded in time and never piled up.

``/readyz`` runs every probe at once and waits at most the readiness timeout for
each. A probe still running when the next request comes (a backend that hangs
rather than refuses) is joined, not started again: an orchestrator polling a
frozen store every half second holds one probe there, not a growing heap of
them, each keeping a connection and a worker thread busy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import structlog

from cogsub.core.errors import FieldProblem, UnavailableError

log = structlog.get_logger("cogsub.api")

Probe = Callable[[], Awaitable[object]]
"""Answers (returns) when its dependency serves; raises or hangs when it does not."""


class NotReadyError(UnavailableError):
    """Some dependencies did not answer; ``problems`` names each (field: the dependency)."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = tuple(problems)
        names = ", ".join(problem.field for problem in self.problems)
        super().__init__(f"not ready: {names} did not answer")


class ReadinessProbes:
    """The probes of ``/readyz`` by dependency name (``index``, ``archive``, ``bus``).

    Args:
        probes: One probe per dependency; the names appear in the 503 answer.
        timeout_s: How long each probe may take before its dependency counts as down.
    """

    def __init__(self, probes: Mapping[str, Probe], *, timeout_s: float) -> None:
        self._probes = dict(probes)
        self._timeout_s = timeout_s
        self._running: dict[str, asyncio.Task[object]] = {}

    @property
    def dependencies(self) -> list[str]:
        """The names of the probed dependencies, in the order given."""
        return list(self._probes)

    async def check(self) -> None:
        """Return once every probe answered in time.

        Raises:
            NotReadyError: naming each dependency that failed or timed out. Why
                goes to the log only: the probe needs no key, so it tells no secrets.
        """
        outcomes = await asyncio.gather(*(self._check(name) for name in self._probes))
        failed = [problem for problem in outcomes if problem is not None]
        if failed:
            raise NotReadyError(failed)

    async def _check(self, name: str) -> FieldProblem | None:
        task = self._running.get(name)
        # (An app served from another event loop before cannot join that loop's probe.)
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            task = asyncio.create_task(self._run(name), name=f"readiness-{name}")
            task.add_done_callback(_retrieve)
            self._running[name] = task
        try:
            # shield: a timeout ends this wait, not the probe, which a later request may join.
            await asyncio.wait_for(asyncio.shield(task), self._timeout_s)
        except TimeoutError:
            log.warning("api_not_ready", dependency=name, timeout_s=self._timeout_s)
            return FieldProblem(name, f"did not answer within {self._timeout_s:g} s")
        except Exception as exc:
            log.warning(
                "api_not_ready", dependency=name, error_type=type(exc).__name__, error=str(exc)
            )
            return FieldProblem(name, "failed")
        return None

    async def _run(self, name: str) -> object:
        return await self._probes[name]()


def _retrieve(task: asyncio.Task[object]) -> None:
    # A probe that fails after its waiters timed out (they reported the timeout) still
    # has its error looked at, or asyncio would log "exception was never retrieved".
    if not task.cancelled():
        task.exception()
