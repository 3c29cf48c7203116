"""How a cogsub process's C allocator gives large blocks back to the system.

glibc serves a request of 128 KiB or more with a mapping of its own, unmapped on
free, but after each such free it raises that threshold to the freed size (up to
32 MiB). The embedded index's arrays are as long as the index: once a few have been
freed as they grew, their successors come from the heap, where a freed array leaves
a hole its longer successor does not fit, and resident memory keeps every size the
index grew through (the soak saw a 38 MiB step as the arrays passed a million
slots). A fixed threshold keeps such blocks mapped, and freeing them gives them back.

It is fixed at 1 MiB, not glibc's 128 KiB: a vector search's temporaries (a block of
65,536 slots at a time, whatever the index holds) stay below it and are reused from
the heap, where fresh mappings would make every search fault their pages in again (a
third more time per search of a 1M-document index of 8-dimensional vectors).

Below the threshold, blocks freed inside the heap stay resident until glibc can
shrink the heap from its top, which a long-lived block above them prevents. With 32
threads (executor threads, SQLite readers) spread over several heaps, the free part
grew from 8 to 42 MiB over a soak while what was in use stayed 34-48: every process
therefore gives the pages of its free blocks back every ``heap_trim_s``
(``keep_heap_trimmed``).
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import os
from collections.abc import Callable
from typing import Any, cast

# mallopt's parameter number for the threshold, from glibc's <malloc.h>.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1024 * 1024
# glibc reads this at start-up; an operator who sets it has chosen, and that stands.
GLIBC_KNOB = "MALLOC_MMAP_THRESHOLD_"


@functools.cache
def _glibc(name: str, *argtypes: type[ctypes._SimpleCData[Any]]) -> Callable[..., int] | None:
    """glibc's ``name`` taking ``argtypes`` and returning an int; None on another C library."""
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS, Windows)
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return cast(Callable[..., int], function)


def fix_mmap_threshold(threshold_bytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Serve blocks of ``threshold_bytes`` or more from mappings given back on free.

    Returns whether the threshold was set: not when the environment sets
    ``MALLOC_MMAP_THRESHOLD_``, and not on a C library without glibc's ``mallopt``.
    """
    if GLIBC_KNOB in os.environ:
        return False
    mallopt = _glibc("mallopt", ctypes.c_int, ctypes.c_int)
    return mallopt is not None and bool(mallopt(_M_MMAP_THRESHOLD, threshold_bytes))


def release_free_heap() -> bool:
    """Give the pages of the C heap's free blocks back to the system now (``malloc_trim``).

    Returns False where there is no glibc ``malloc_trim``, or nothing was given back.
    """
    malloc_trim = _glibc("malloc_trim", ctypes.c_size_t)
    return malloc_trim is not None and bool(malloc_trim(0))


async def keep_heap_trimmed(
    stop: asyncio.Event, every_s: float, release: Callable[[], bool] = release_free_heap
) -> None:
    """``release`` free heap pages every ``every_s`` seconds until ``stop`` is set.

    It runs off the event loop: glibc holds each heap's lock while it walks the free
    blocks (~5 ms for 70 MiB of them), and the loop must not wait on that.
    """
    while True:
        try:
            await asyncio.wait_for(stop.wait(), timeout=every_s)
            return
        except TimeoutError:
            await asyncio.to_thread(release)
