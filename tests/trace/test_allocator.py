"""`keep_freed_memory`: a large block freed and allocated again is reused, not faulted in afresh."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bubblescope.trace.allocator import keep_freed_memory

# In a fresh interpreter (the setting is process-wide): minor page faults of allocating, filling and
# freeing 32 MiB a second time.
_PROGRAM = """
import resource, sys
from bubblescope.trace.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
block = bytearray(32 << 20)
del block
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = bytearray(32 << 20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM, mode], capture_output=True, text=True, check=True, timeout=60
    )
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_block_is_reused() -> None:
    # Default glibc: a 32 MiB block is its own mapping, unmapped on free: ~8192 faults of 4 KiB pages
    # (fewer with transparent huge pages, never none).
    assert _faults("default") > 8
    assert _faults("keep") <= 8


@pytest.mark.skipif(sys.platform.startswith("linux"), reason="elsewhere it does nothing")
def test_other_systems_untouched() -> None:
    assert keep_freed_memory() is False
