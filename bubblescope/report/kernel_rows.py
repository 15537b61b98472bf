"""The per-kernel table (analysis `kernels[]`) as plain-string rows for console, Markdown and HTML."""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import NAME_CHARS_SHOWN, Rows, fmt_duration_ns, num, plain, shorten

KERNEL_HEADERS = [
    "#",
    "kernel",
    "count",
    "per step",
    "time / step",
    "share",
    "total",
    "mean",
    "p50",
    "max",
    "achieved GB/s",
]


def kernel_rows(kernels: list[dict[str, Any]] | None, name_chars: int | None = None) -> Rows:
    """One row per kernel, in the analysis' order (largest total first).

    Args:
        kernels: analysis/1 `kernels[]` rows.
        name_chars: cut names to this many characters (None: whole; tables show the whole name).
    """
    rows = []
    for index, k in enumerate((k for k in kernels or [] if isinstance(k, dict)), start=1):
        share = num(k.get("share"))
        gbps = num(k.get("achieved_gbps"))
        name = plain(k.get("name"))
        rows.append(
            [
                str(index),
                shorten(name, name_chars) if name_chars else name,
                plain(k.get("count")),
                plain(k.get("count_per_step")),
                fmt_duration_ns(k.get("ns_per_step")),
                f"{share:.1%}" if share is not None else "—",
                fmt_duration_ns(k.get("total_ns")),
                fmt_duration_ns(k.get("mean_ns")),
                fmt_duration_ns(k.get("p50_ns")),
                fmt_duration_ns(k.get("max_ns")),
                f"{gbps:,.0f}" if gbps is not None else "—",
            ]
        )
    return KERNEL_HEADERS, rows


def kernel_sort_keys(kernels: list[dict[str, Any]] | None) -> list[list[float | str]]:
    """Per row of `kernel_rows`, the raw value of each column (what a sortable HTML table sorts by)."""
    keys = []
    for index, k in enumerate((k for k in kernels or [] if isinstance(k, dict)), start=1):
        keys.append(
            [
                index,
                # Sorting by a name's start is enough; the whole name is in the cell already.
                shorten(plain(k.get("name")), NAME_CHARS_SHOWN),
                *(
                    num(k.get(field)) if num(k.get(field)) is not None else -1.0
                    for field in (
                        "count",
                        "count_per_step",
                        "ns_per_step",
                        "share",
                        "total_ns",
                        "mean_ns",
                        "p50_ns",
                        "max_ns",
                        "achieved_gbps",
                    )
                ),
            ]
        )
    return keys
