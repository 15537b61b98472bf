"""Moved to `bubblescope.readbacks` (the analysis core: the gate counts reads without the capture layer)."""

from bubblescope.readbacks import READBACK_OPS, count_readbacks, load_trace_events  # noqa: F401
