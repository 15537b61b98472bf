"""Let glibc's malloc keep large freed blocks for reuse instead of handing them back to the kernel.

Analysis makes and drops many short-lived arrays of 1-30 MB (a column per chunk, a sort's scratch). By
default glibc serves each from a fresh `mmap` and unmaps it on free, so the next one faults its pages
in again, each zeroed by the kernel: on the 1.79 M-event benchmark file that was 0.5-0.8 s of system
CPU out of ~4.9 s. With both thresholds raised, freed blocks stay in the heap and are reused: system
CPU 0.28-0.33 s, the whole run ~5 % less CPU, peak RSS +1 % (benchmarks/RESULTS.md, issue 26).

For a short-lived command only (`bubblescope analyze`): a library call must not change the
allocator of the program that imported it.
"""

from __future__ import annotations

import ctypes
import sys

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the heap (and are reused once freed); the heap's top is given back
# only past this much free memory.
_KEEP_BYTES = 1 << 30


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (and the workers it forks). Returns
    whether it did: False on other C libraries and other systems, which keep their own behaviour."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The running program's own symbols: the C library it is linked with.
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on a refused value.
    return bool(mallopt(_M_MMAP_THRESHOLD, _KEEP_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES))
