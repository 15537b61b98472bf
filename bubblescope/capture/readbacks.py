"""Moved to `bubblescope.readbacks` (the analysis core: the gate counts reads without the capture layer)."""

from bubblescope.readbacks import READBACK_OPS, count_readbacks, read_cpu_trace  # noqa: F401
