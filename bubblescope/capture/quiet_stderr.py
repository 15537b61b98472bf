"""Keep the profiler library's `USDT:` trace lines off the user's console.

libkineto writes a `USDT:... profiler_start` / `profiler_stop` line to file descriptor 2 each time a
torch.profiler window opens or closes; in `bubblescope run` they interleave with the summary. Python's
`sys.stderr` cannot filter them (they come from C++), so the descriptor itself is pointed at a temporary
file for the window, and every other line is written back to the real stderr afterwards.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

NOISE_PREFIXES = (b"USDT:",)


@contextlib.contextmanager
def without_profiler_noise() -> Iterator[None]:
    """Run the block with fd 2 captured; replay what it wrote minus the profiler's `USDT:` lines."""
    try:
        sys.stderr.flush()
        saved_fd = os.dup(2)
    except (OSError, ValueError):
        # No real descriptor 2 (an embedding host): nothing to filter.
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError, OSError):
                sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            captured.seek(0)
            kept = [line for line in captured.read().splitlines(True) if not line.startswith(NOISE_PREFIXES)]
            if kept:
                os.write(2, b"".join(kept))
