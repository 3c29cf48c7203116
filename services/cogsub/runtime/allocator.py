"""How a cogsub process's C allocator gives large blocks back to the system.

glibc serves a request of 128 KiB or more with a mapping of its own, unmapped on
free, but after each such free it raises that threshold to the freed size (up to
32 MiB). The embedded index's arrays are as long as the index: once a few have been
freed as they grew, their successors come from the heap, where a freed array leaves
a hole its longer successor does not fit, and resident memory keeps every size the
index grew through (the soak saw a 38 MiB step as the arrays passed a million
slots). A fixed threshold keeps such blocks mapped, and freeing them gives them back.

It is fixed at 1 MiB, not glibc's 128 KiB: a search's temporaries for a bank of up to
~100k documents stay below it and are reused from the heap, where fresh mappings
would make every search fault their pages in again (a third more time per search
of a 1M-document index of 8-dimensional vectors).
"""

from __future__ import annotations

import ctypes
import os

# mallopt's parameter number for the threshold, from glibc's <malloc.h>.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1024 * 1024
# glibc reads this at start-up; an operator who sets it has chosen, and that stands.
GLIBC_KNOB = "MALLOC_MMAP_THRESHOLD_"


def fix_mmap_threshold(threshold_bytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Serve blocks of ``threshold_bytes`` or more from mappings given back on free.

    Returns whether the threshold was set: not when the environment sets
    ``MALLOC_MMAP_THRESHOLD_``, and not on a C library without glibc's ``mallopt``.
    """
    if GLIBC_KNOB in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # not glibc (macOS, Windows)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold_bytes))
