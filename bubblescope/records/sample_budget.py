"""How many step samples a RunRecord read for statistics may hold (`--max-samples`).

Kept apart from `records` so the CLI can name the default in `--help` without importing numpy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from bubblescope.errors import RecordError

# Step samples (repeats x steps) a record read for statistics may hold. The bootstrap holds every sample
# once per replicate (2000): ~50 KB per sample at its peak (10,000 repeats x 16 steps took 7.8 GB and
# over 2 minutes in gate and diff), so 20,000 samples stay near 1 GB. A run of 5 repeats x 64 steps holds
# 320. More: --max-samples (gate, diff, report).
DEFAULT_MAX_SAMPLES = 20_000
_MAX_SAMPLES: ContextVar[int | None] = ContextVar("bubblescope_max_samples", default=None)


@contextlib.contextmanager
def record_sample_cap(max_samples: int | None) -> Iterator[None]:
    """Within the block, records read for statistics may hold at most `max_samples` step samples
    (None: keep the current cap). The CLI's `--max-samples` sets it once for a whole command."""
    token = _MAX_SAMPLES.set(max_samples) if max_samples is not None else None
    try:
        yield
    finally:
        if token is not None:
            _MAX_SAMPLES.reset(token)


def check_sample_budget(record: dict[str, Any], source: str) -> None:
    """Refuse, in one line, a record with more step samples than the statistics are bounded for."""
    cap = _MAX_SAMPLES.get() or DEFAULT_MAX_SAMPLES
    for key in ("samples_ns", "host_samples_ns"):
        matrix = record.get(key)
        if not isinstance(matrix, list):
            continue
        count = sum(len(row) if isinstance(row, list) else 1 for row in matrix)
        if count > cap:
            raise RecordError(
                f"{source}: {key} holds {count} samples ({len(matrix)} repeats), more than the {cap} "
                "the statistics are bounded for; raise --max-samples"
            )
