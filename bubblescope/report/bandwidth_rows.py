"""The analysis' `bandwidth` block (bubblescope/floor/kernel_bandwidth.py) as rows for every surface.

One row per kernel family of a workload that models its kernels' bytes (the reference decoder): the
critical-path time per step, the bytes it must read, the achieved TB/s, its share of the measured copy
ceiling, the time those bytes take at the ceiling and the excess over it — the breakdown of what stands
between the profiled step and the speed-of-light floor — and the step's kernel launches and launch gap
(`launch_path`). Rendering only.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import (
    NBSP,
    NOT_MEASURED,
    Rows,
    fmt_duration_ns,
    fmt_estimate,
    md_cell,
    md_table,
    num,
    plain,
)

BANDWIDTH_TITLE = "Where the step's GPU time goes against the floor (kernel families)"
BANDWIDTH_HEADERS = [
    "family",
    "launches / step",
    "time / step",
    "MB / step",
    "achieved TB/s",
    "of ceiling",
    "at ceiling",
    "excess",
]


def bandwidth_rows(analysis: dict[str, Any] | None) -> Rows:
    """Headers and rows of the breakdown, largest excess first; no rows without a `bandwidth` block."""
    block = (analysis or {}).get("bandwidth")
    if not isinstance(block, dict):
        return BANDWIDTH_HEADERS, []
    rows = []
    for row in block.get("families") or []:
        size, achieved = num(row.get("bytes_per_step")), num(row.get("achieved_gbps"))
        fraction = num(row.get("fraction_of_ceiling"))
        rows.append(
            [
                plain(row.get("family")),
                f"{num(row.get('launches_per_step')) or 0:.1f}",
                fmt_duration_ns(row.get("critical_ns")),
                _megabytes(size),
                terabytes_per_s(achieved),
                ("<1%" if fraction < 0.005 else f"{fraction:.0%}") if fraction is not None else "—",
                fmt_duration_ns(row.get("at_ceiling_ns")) if row.get("at_ceiling_ns") is not None else "—",
                fmt_duration_ns(row.get("excess_ns")) if row.get("excess_ns") is not None else "—",
            ]
        )
    return BANDWIDTH_HEADERS, rows


def _megabytes(size: float | None) -> str:
    if size is None:
        return "—"
    return "<0.1" if size < 5e4 else f"{size / 1e6:,.1f}"


def terabytes_per_s(gbps: float | None) -> str:
    # Latency-bound families (routing, norms) move kilobytes: their rate is real but rounds to zero.
    if gbps is None:
        return "—"
    return "<0.01" if gbps < 5 else f"{gbps / 1e3:.2f}"


def bandwidth_sentence(analysis: dict[str, Any] | None) -> str:
    """One line that says what the rows describe and what they add up to ('' without a block)."""
    block = (analysis or {}).get("bandwidth")
    if not isinstance(block, dict):
        return ""
    ceiling = num(block.get("ceiling_gbps"))
    source = plain(block.get("ceiling_source") or "given")
    at_ceiling = block.get("at_ceiling_ns")
    parts = [
        f"Mean of {block.get('steps')} profiled steps: GPU step {fmt_duration_ns(block.get('gpu_step_ns'))}, "
        "charged along the critical path (a kernel that starts early under PDL and waits is counted once)."
    ]
    if ceiling and at_ceiling is not None:
        modelled_mb = num(block.get("bytes_modelled_per_step")) / 1e6
        parts.append(
            f"The modelled kernels read {modelled_mb:,.1f}{NBSP}MB per step: "
            f"{fmt_duration_ns(at_ceiling)} at the {ceiling:,.0f}{NBSP}GB/s copy ceiling ({source})."
        )
    parts.append(launch_path_sentence(block.get("launch_path")))
    parts.append(
        "Idle here is the profiled step's (tracing adds host time); the timed step's is in the summary."
    )
    return " ".join(parts)


def launches_text(interval: Any, signed: bool = False) -> str:
    """`449 [449, 449]` kernel launches of the median step (counts: no decimals beyond a half),
    `not measured` where null."""
    if not isinstance(interval, dict) or num(interval.get("est")) is None:
        return NOT_MEASURED
    spec = "+g" if signed else "g"
    values = [num(interval.get(key)) for key in ("est", "lo", "hi")]
    text = f"{values[0]:{spec}}"
    if values[1] is not None and values[2] is not None:
        text += f" [{values[1]:{spec}}, {values[2]:{spec}}]"
    return text.replace("-", "−")


def gap_text(interval: Any, signed: bool = False) -> str:
    """`2177.4 µs [1838.3, 2266.4]` (an {est, lo, hi} of ns) at the interval's resolution."""
    if not isinstance(interval, dict) or num(interval.get("est")) is None:
        return NOT_MEASURED
    lo, hi = num(interval.get("lo")), num(interval.get("hi"))
    return fmt_estimate(
        interval["est"] / 1e3,
        None if lo is None else lo / 1e3,
        None if hi is None else hi / 1e3,
        "µs",
        signed=signed,
    ).replace("-", "−")


def launch_path_sentence(path: Any) -> str:
    """Launches and launch gap per step in one sentence ('not measured' without them)."""
    if not isinstance(path, dict) or not path.get("steps"):
        return "Kernel launches and launch gap per step: not measured."
    return (
        f"Per step (median of {path['steps']} profiled steps, 95% CI): "
        f"{launches_text(path.get('launches_per_step'))} kernel launches (a CUDA graph's kernels count "
        f"each); launch gap {gap_text(path.get('launch_gap_ns_per_step'))} (no kernel running between the "
        "step's consecutive kernels; the idle row, step by step)."
    )


def bandwidth_markdown(analysis: dict[str, Any] | None) -> list[str]:
    """The breakdown's Markdown section (heading, sentence, table), nothing without a block."""
    rows = bandwidth_rows(analysis)
    if not rows[1]:
        return []
    return [f"### {BANDWIDTH_TITLE}", "", md_cell(bandwidth_sentence(analysis)), "", md_table(rows), ""]


# The console keeps six of the eight columns so the table fits 100 columns with the family names whole.
CONSOLE_COLUMNS = ("family", "time / step", "MB / step", "achieved TB/s", "of ceiling", "excess")


def console_bandwidth_rows(rows: Rows) -> Rows:
    """`bandwidth_rows` cut to CONSOLE_COLUMNS."""
    headers, body = rows
    keep = [headers.index(column) for column in CONSOLE_COLUMNS]
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in body]


LAUNCH_PATH_HEADERS = ["kernel launches / step", "launch gap / step"]


def launch_path_cells(records: list[dict[str, Any]]) -> list[list[str]] | None:
    """Per RunRecord (in order): its launches and launch gap of the median step, for a configuration
    table; None when no record carries them (the columns are left out)."""
    paths = [(record.get("analysis") or {}).get("launch_path") for record in records]
    if not any(isinstance(path, dict) and path.get("steps") for path in paths):
        return None
    return [
        [launches_text(path.get("launches_per_step")), gap_text(path.get("launch_gap_ns_per_step"))]
        if isinstance(path, dict)
        else [NOT_MEASURED, NOT_MEASURED]
        for path in paths
    ]
