"""The speed-of-light floor of a bare trace, from bytes per token and bandwidth the user gives.

A trace does not say how many bytes a token reads nor how fast the GPU that recorded it moves them, and
the machine running `analyze` is usually not that GPU, so nothing is assumed: the floor exists only when
both `--bytes-per-token` and `--bandwidth` are given. It is compared with the median step's GPU time
(one token per step; a speculative step's tokens are not in a bare trace). Never imports torch.
"""

from __future__ import annotations

from typing import Any

from bubblescope.errors import ConfigError


def trace_floor(
    analysis: dict[str, Any], bytes_per_token: float | None, bandwidth_gbps: float | None
) -> dict[str, Any]:
    """The analysis' `floor` block: {floor_ms, bytes_per_token, bandwidth_gbps, bandwidth_source,
    gpu_step_over_floor} when both numbers are given, else {"missing": what to give}.

    Raises:
        ConfigError: a number that is not positive (one line, exit 2).
    """
    for flag, value in (("--bytes-per-token", bytes_per_token), ("--bandwidth", bandwidth_gbps)):
        if value is not None and not value > 0:
            raise ConfigError(f"{flag} must be > 0, got {value}")
    if bytes_per_token is None or bandwidth_gbps is None:
        missing = [
            f
            for f, v in (("--bytes-per-token", bytes_per_token), ("--bandwidth", bandwidth_gbps))
            if v is None
        ]
        return {"missing": " and ".join(missing)}
    floor_ms = bytes_per_token / (bandwidth_gbps * 1e9) * 1e3
    gpu_step_ns = (analysis.get("summary") or {}).get("gpu_step_ns_median") or 0
    block: dict[str, Any] = {
        "bytes_per_token": float(bytes_per_token),
        "bandwidth_gbps": float(bandwidth_gbps),
        "bandwidth_source": "given",
        "floor_ms": floor_ms,
    }
    if gpu_step_ns and analysis.get("gpu_measured") is not False:
        block["gpu_step_over_floor"] = gpu_step_ns / 1e6 / floor_ms
        # The bandwidth the median step achieved if it moved bytes_per_token: the ceiling ÷ the ratio.
        block["achieved_gbps"] = bytes_per_token / gpu_step_ns
    return block


def floor_line(analysis: dict[str, Any]) -> str:
    """One plain line about a trace's floor for every surface."""
    floor = analysis.get("floor")
    if not isinstance(floor, dict):
        return "floor: not measured (give --bytes-per-token and --bandwidth of the GPU that ran the trace)"
    if "floor_ms" not in floor:
        return f"floor: not measured (give {floor.get('missing')} of the GPU that ran the trace)"
    ratio = floor.get("gpu_step_over_floor")
    ratio_text = (
        f" · median GPU step ÷ floor {ratio:.2f}× ({floor['achieved_gbps']:,.0f} GB/s achieved)"
        if isinstance(ratio, float)
        else ""
    )
    return (
        f"floor {floor['floor_ms'] * 1e3:.1f} µs ({floor['bytes_per_token'] / 1e6:.1f} MB/token at "
        f"{floor['bandwidth_gbps']:g} GB/s, given){ratio_text}"
        if floor["floor_ms"] < 1
        else f"floor {floor['floor_ms']:.2f} ms ({floor['bytes_per_token'] / 1e6:.1f} MB/token at "
        f"{floor['bandwidth_gbps']:g} GB/s, given){ratio_text}"
    )
