"""The host op table, kernel time by category and GPU utilisation on the console (report/views.py
rows through `analysis_console.print_table`, which escapes every cell and never wraps a number).

Column sets are cut to what fits 80 columns; HTML, Markdown and CSV keep every column."""

from __future__ import annotations

from rich.console import Console

from bubblescope.report.cells import Rows, plural
from bubblescope.report.escape import console_text
from bubblescope.report.views import (
    CATEGORIES_TITLE,
    HOST_OPS_TITLE,
    host_op_rows,
    kernel_category_rows,
    utilization_heading,
    utilization_rows,
)

CONSOLE_HOST_OP_COLUMNS = ("op", "calls/step", "self/step", "total/step", "self share")
CONSOLE_CATEGORY_COLUMNS = ("category", "launches/step", "time/step", "share")
CONSOLE_UTILIZATION_COLUMNS = ("step", "GPU interval", "GPU busy", "utilisation")
# Host ops the console lists without --top.
TOP_HOST_OPS_SHOWN = 10


def columns(rows: Rows, names: tuple[str, ...]) -> Rows:
    headers, body = rows
    keep = [i for i, header in enumerate(headers) if header in names]
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in body]


def print_views(console: Console, analysis: dict, top: int | None = None) -> None:
    """Utilisation per step, kernel time by category and the host op table (top `top` rows)."""
    from bubblescope.report.analysis_console import print_table

    console.print(console_text(utilization_heading(analysis)))
    steps = utilization_rows(analysis)
    if steps[1] and analysis.get("gpu_measured", True):
        print_table(console, "", columns(steps, CONSOLE_UTILIZATION_COLUMNS))
    categories = kernel_category_rows(analysis.get("kernel_categories"))
    if categories[1]:
        print_table(console, CATEGORIES_TITLE, columns(categories, CONSOLE_CATEGORY_COLUMNS))
    ops = host_op_rows(analysis.get("host_ops"))
    if ops[1]:
        limit = top or TOP_HOST_OPS_SHOWN
        title = f"{HOST_OPS_TITLE} (top {min(limit, len(ops[1]))} of {plural(len(ops[1]), 'name')})"
        print_table(console, title, columns((ops[0], ops[1][:limit]), CONSOLE_HOST_OP_COLUMNS))
    else:
        console.print("host ops: none inside the steps (the trace holds no cpu_op or runtime events)")
