"""The two tables every input kind shows: host-blocking reads and the largest GPU idle gaps.

Runs, ablations and bare traces all show them, in Markdown (markdown.py) and HTML (html_run.py,
html_ablation.py, html.py), so they live apart from any one input kind. Cells are plain strings; escaping
happens at render time (report/escape.py).
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import GAP_ROWS_SHOWN, Rows, blame_text, fmt_duration_ns, num, plain
from bubblescope.trace.kernel_names import short_kernel_name

# What a CPU trace says of blocked time, bubbles and idle: nothing blocks there, so 0 would be a claim.
NOT_MEASURED_NO_GPU = "not measured (no GPU)"


def gpu_measured_of(doc: dict[str, Any] | None) -> bool:
    """False only when a record's `analysis` block or an analysis/1 says the trace had no GPU timeline."""
    doc = doc or {}
    block = doc.get("analysis") if isinstance(doc.get("analysis"), dict) else doc
    return block.get("gpu_measured") is not False


def sync_rows(syncs: list[dict[str, Any]] | None, gpu_measured: bool = True) -> Rows:
    """Blocking-read table: one row per (site, op), worst first.

    Args:
        syncs: analysis `syncs[]` (or a record's).
        gpu_measured: False for a CPU trace: nothing blocked there, so its 0 ns of blocked time and
            bubble are shown as not measured, as the fix-first list and the cards do.
    """
    headers = [
        "site (source line)",
        "op",
        "api",
        "per step",
        "count",
        "host blocked",
        "GPU bubble",
        "fix hint",
    ]
    ordered = sorted(
        (s for s in syncs or [] if isinstance(s, dict)),
        key=lambda s: -(num(s.get("bubble_ns")) or num(s.get("per_step")) or 0.0),
    )
    rows = [
        [
            plain(s.get("site")),
            plain(s.get("op")),
            plain(s.get("api")),
            plain(s.get("per_step")),
            plain(s.get("count")),
            fmt_duration_ns(s.get("blocked_ns")) if gpu_measured else NOT_MEASURED_NO_GPU,
            fmt_duration_ns(s.get("bubble_ns")) if gpu_measured else NOT_MEASURED_NO_GPU,
            plain(s.get("hint")),
        ]
        for s in ordered
    ]
    return headers, rows


def gap_rows(gaps: list[dict[str, Any]] | None, limit: int = GAP_ROWS_SHOWN) -> Rows:
    """The `limit` largest GPU idle gaps, largest first, with their class and blame."""
    headers = ["step", "rank/device", "start", "idle", "class", "blame", "next op"]
    largest = sorted(
        (g for g in gaps or [] if isinstance(g, dict)), key=lambda g: -(num(g.get("dur_ns")) or 0.0)
    )
    rows = [
        [
            plain(g.get("step")),
            f"{plain(g.get('rank'))}/{plain(g.get('device'))}",
            fmt_duration_ns(g.get("start_ns")),
            fmt_duration_ns(g.get("dur_ns")),
            plain(g.get("class")),
            blame_text(g.get("blame")),
            short_kernel_name(plain(g.get("next_op"))) if g.get("next_op") else "—",
        ]
        for g in largest[:limit]
    ]
    return headers, rows


def gaps_heading(gaps: list[Any] | None, limit: int = GAP_ROWS_SHOWN) -> str:
    total = len(gaps or [])
    return (
        f"Largest GPU idle gaps ({min(total, limit)} of {total})"
        if total > limit
        else "Largest GPU idle gaps"
    )
