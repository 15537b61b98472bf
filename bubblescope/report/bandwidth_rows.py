"""The analysis' `bandwidth` block (bubblescope/floor/kernel_bandwidth.py) as rows for every surface.

One row per kernel family of a workload that models its kernels' bytes (the reference decoder): the
critical-path time per step, the bytes it must read, the achieved TB/s, its share of the measured copy
ceiling, the time those bytes take at the ceiling and the excess over it — the breakdown of what stands
between the profiled step and the speed-of-light floor. Rendering only.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import Rows, fmt_duration_ns, md_cell, md_table, num, plain

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
                _terabytes_per_s(achieved),
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


def _terabytes_per_s(gbps: float | None) -> str:
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
        parts.append(
            f"The modelled kernels read {num(block.get('bytes_modelled_per_step')) / 1e6:,.1f} MB per step: "
            f"{fmt_duration_ns(at_ceiling)} at the {ceiling:,.0f} GB/s copy ceiling ({source})."
        )
    parts.append(
        "Idle here is the profiled step's (tracing adds host time); the timed step's is in the summary."
    )
    return " ".join(parts)


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
