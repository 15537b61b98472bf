"""The speed-of-light floor of a run: bytes per token / HBM bandwidth (ARCHITECTURE §4)."""

from __future__ import annotations

from typing import Any


def resolve_floor_bandwidth(given_gbps: float | None = None) -> tuple[float, str] | None:
    """(GB/s, source) from `bubblescope.floor.bandwidth` (measured on CUDA, else its documented default).

    Returns None when that module is not installed: the record then carries `floor: null`.
    """
    try:
        from bubblescope.floor.bandwidth import resolve_bandwidth
    except ImportError:
        return None
    bandwidth = resolve_bandwidth(given_gbps)
    return bandwidth.gbps, bandwidth.source


def compute_floor(
    workload: Any, enabled: frozenset[str], tpot_ms: float, bandwidth: tuple[float, str] | None
) -> dict[str, Any] | None:
    """The `floor` block of a RunRecord, or None when bytes or bandwidth are unknown."""
    if bandwidth is None or not callable(getattr(workload, "bytes_per_token", None)):
        return None
    bytes_per_token = int(workload.bytes_per_token(enabled))
    if bytes_per_token <= 0:
        return None
    bandwidth_gbps, source = bandwidth
    floor_ms = bytes_per_token / (bandwidth_gbps * 1e9) * 1e3
    return {
        "bytes_per_token": bytes_per_token,
        "bandwidth_gbps": bandwidth_gbps,
        "bandwidth_source": source,
        "floor_ms": floor_ms,
        "tpot_over_floor": tpot_ms / floor_ms,
    }


def kernel_bytes_block(
    workload: Any, enabled: frozenset[str], bandwidth: tuple[float, str] | None
) -> dict[str, Any] | None:
    """The RunRecord `kernel_bytes` block: the workload's bytes per kernel family and the ceiling they
    are judged against ({rules, ceiling_gbps, ceiling_source, model}), or None when the workload does not
    model its kernels' bytes (`kernel_bytes(enabled)` absent or None)."""
    rules_of = getattr(workload, "kernel_bytes", None)
    rules = rules_of(frozenset(enabled)) if callable(rules_of) else None
    if not rules:
        return None
    return {
        "rules": rules,
        "ceiling_gbps": bandwidth[0] if bandwidth else None,
        "ceiling_source": bandwidth[1] if bandwidth else None,
        "model": type(workload).__module__,
    }
