"""The host op table, kernel time by category and GPU utilisation per step on the HTML page
(report/views.py rows through html_tables.table_html; the host op table sorts on a header click)."""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import num
from bubblescope.report.html_tables import esc, table_html
from bubblescope.report.views import (
    CATEGORIES_TITLE,
    HOST_OPS_TITLE,
    host_op_rows,
    kernel_category_rows,
    utilization_heading,
    utilization_rows,
)

_HOST_OP_FIELDS = (
    "calls",
    "calls_per_step",
    "self_ns_per_step",
    "total_ns_per_step",
    "self_share",
    "self_ns",
    "total_ns",
)


def views_html(page: Any, analysis: dict[str, Any] | None) -> None:
    """Append the three views' sections to `page` (an html.Page); nothing for an analysis without steps."""
    if not analysis or not analysis.get("steps"):
        return
    page.add(f"<h2>{esc(utilization_heading(analysis))}</h2>")
    if analysis.get("gpu_measured") is not False:
        page.add(table_html(utilization_rows(analysis)))
    categories = kernel_category_rows(analysis.get("kernel_categories"))
    if categories[1]:
        page.add(f"<h2>{esc(CATEGORIES_TITLE)}</h2>")
        page.add(table_html(categories))
    host_ops = [op for op in analysis.get("host_ops") or [] if isinstance(op, dict)]
    page.add(f"<h2>{esc(HOST_OPS_TITLE)} ({len(host_ops)})</h2>")
    sort_keys = [
        [op.get("name"), op.get("kind")] + [num(op.get(field)) or 0 for field in _HOST_OP_FIELDS]
        for op in host_ops
    ]
    page.add(table_html(host_op_rows(host_ops), "no host ops inside the steps", sort_keys=sort_keys))
