"""The per-kernel table (analysis `kernels[]`) as plain-string rows for console, Markdown and HTML.

Rows show each kernel's short name (trace/kernel_names.py; HTML puts the full name on hover, JSON keeps
it in `name`) and its category; an analysis written before short names existed shows its names cut to
`name_chars`."""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import NAME_CHARS_SHOWN, Rows, fmt_duration_ns, num, plain, shorten

KERNEL_HEADERS = [
    "#",
    "kernel",
    "category",
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
        name_chars: cut names without a `short_name` to this many characters (None: NAME_CHARS_SHOWN).
    """
    rows = []
    for index, k in enumerate((k for k in kernels or [] if isinstance(k, dict)), start=1):
        share = num(k.get("share"))
        gbps = num(k.get("achieved_gbps"))
        rows.append(
            [
                str(index),
                display_name(k, name_chars),
                plain(k.get("category")),
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


def display_name(kernel: dict[str, Any], name_chars: int | None = None) -> str:
    """A kernel's short name, else (an older analysis) its name cut to `name_chars`."""
    short = kernel.get("short_name")
    return plain(short) if short else shorten(plain(kernel.get("name")), name_chars or NAME_CHARS_SHOWN)


def kernel_sort_keys(kernels: list[dict[str, Any]] | None) -> list[list[float | str]]:
    """Per row of `kernel_rows`, the raw value of each column (what a sortable HTML table sorts by)."""
    keys = []
    for index, k in enumerate((k for k in kernels or [] if isinstance(k, dict)), start=1):
        keys.append(
            [
                index,
                display_name(k),
                plain(k.get("category")),
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
