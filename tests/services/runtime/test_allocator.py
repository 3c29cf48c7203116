"""The fixed mmap threshold and the heap trim, in fresh interpreters: both act on the whole
process."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import threading

import pytest

from cogsub.runtime.allocator import keep_heap_trimmed

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="mallopt and mallinfo2 are glibc's",
)

# Free an 8 MiB block (glibc then raises its threshold above 8 MiB unless it is fixed),
# then allocate 2 MiB: is it a mapping of its own (counted in hblkhd) or heap?
PROBE = """
import ctypes, json, sys
sys.path.insert(0, {services!r})
from cogsub.runtime.allocator import fix_mmap_threshold

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
fixed = fix_mmap_threshold() if {fix!r} else None
libc.free(libc.malloc(8 << 20))
before = libc.mallinfo2().hblkhd
block = libc.malloc({size})
mapped = libc.mallinfo2().hblkhd - before
libc.free(block)
print(json.dumps({{"fixed": fixed, "mapped": mapped}}))
"""


SERVICES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "services"))


def _probe(
    *, fix: bool, env: dict[str, str] | None = None, size: int = 2 << 20
) -> dict[str, int | bool | None]:
    code = PROBE.format(services=SERVICES, fix=fix, size=size)
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    environment.update(env or {})
    out = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    )
    result: dict[str, int | bool | None] = json.loads(out.stdout)
    return result


def test_glibc_alone_serves_a_large_block_from_the_heap_after_a_larger_one_was_freed() -> None:
    assert _probe(fix=False)["mapped"] == 0


def test_a_fixed_threshold_keeps_large_blocks_mapped_so_that_freeing_gives_them_back() -> None:
    result = _probe(fix=True)
    assert result["fixed"] is True
    assert isinstance(result["mapped"], int) and result["mapped"] >= 2 << 20


def test_the_operators_own_glibc_setting_stands() -> None:
    result = _probe(fix=True, env={"MALLOC_MMAP_THRESHOLD_": str(16 << 20)})
    assert result["fixed"] is False
    assert result["mapped"] == 0  # their 16 MiB threshold: a 2 MiB block is heap


def test_blocks_below_the_fixed_threshold_stay_on_the_heap_to_be_reused() -> None:
    assert _probe(fix=True, size=512 << 10) == {"fixed": True, "mapped": 0}


# 80 MiB of 2,000-byte heap blocks, all freed but one in 64: the survivors pin the heap,
# so glibc cannot shrink it from the top, and the freed pages stay resident until trimmed.
TRIM_PROBE = """
import ctypes, json, sys
from pathlib import Path
sys.path.insert(0, {services!r})
from cogsub.runtime.allocator import release_free_heap

def resident_anonymous_mib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
blocks = [libc.malloc(2000) for _ in range(40_000)]
for block in blocks:
    ctypes.memset(block, 1, 2000)
for i, block in enumerate(blocks):
    if i % 64:
        libc.free(block)
before = resident_anonymous_mib()
released = release_free_heap()
print(json.dumps({{"released": released, "before": before, "after": resident_anonymous_mib()}}))
"""


def test_trimming_gives_the_pages_of_freed_heap_blocks_back() -> None:
    code = TRIM_PROBE.format(services=SERVICES)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert result["released"] is True
    # ~78 MiB were freed; the pages that hold a survivor stay (one block in 64 of 2 KB).
    assert result["before"] - result["after"] > 50, result


def test_the_heap_is_trimmed_on_every_period_until_stopped() -> None:
    threads: list[int] = []

    def release() -> bool:
        threads.append(threading.get_ident())
        return True

    async def main() -> None:
        stop = asyncio.Event()
        trimming = asyncio.create_task(keep_heap_trimmed(stop, every_s=0.02, release=release))
        await asyncio.sleep(0.15)
        stop.set()
        await asyncio.wait_for(trimming, timeout=1)  # it ends once stopped

    asyncio.run(main())
    assert len(threads) >= 3
    assert threading.get_ident() not in threads  # off the event loop's thread
