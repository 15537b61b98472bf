"""A profile session's own sections: the timed TPOT (when steps were timed) and where each blocking
read is called from, as HTML (`profile_sections_html`) and Markdown (`profile_markdown`).

`bubblescope report` adds them for a profile folder (report/html.py, report/markdown.py), and the
session's own page (report/profile_page.py) is built from them, so re-rendering keeps them. Imports no
other report module but the escaping and cells, so the pages can import it without a circle.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import NBSP
from bubblescope.report.escape import html_text

CHAIN_HEADERS = [
    "your line",
    "read at",
    "op",
    "per step",
    "count",
    "host blocked",
    "GPU bubble",
    "call chain",
]
NOT_MEASURED = "not measured"
CPU_TIMES_NOTE = "CPU run: times are host (CPU) wall times per step, not GPU times"


def _us(value: Any, measured: bool) -> str:
    if not measured:
        return NOT_MEASURED
    return f"{value / 1000:.1f}{NBSP}µs" if isinstance(value, (int, float)) else "—"


def has_read_chains(analysis: dict[str, Any]) -> bool:
    """True for an analysis made with the read tap (a profile's, or a run's with exact lines)."""
    return isinstance(analysis.get("read_sites"), dict)


def read_chain_rows(analysis: dict[str, Any]) -> list[list[str]]:
    """One row per syncs[] entry: user line, library line, counts, times and the caller chain."""
    measured = analysis.get("gpu_measured") is not False
    rows = []
    for sync in analysis.get("syncs") or []:
        if not isinstance(sync, dict):
            continue
        chain = (
            " ← ".join(map(str, sync.get("stack") or [])) or f"(trace {sync.get('line', 'def')} line only)"
        )
        rows.append(
            [
                str(sync.get("line_exact") or sync.get("site")),
                str(sync.get("read_at") or "—"),
                str(sync.get("op")),
                str(sync.get("per_step")),
                str(sync.get("count")),
                _us(sync.get("blocked_ns"), measured),
                _us(sync.get("bubble_ns"), measured),
                chain,
            ]
        )
    return rows


def timed_items(record: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The timed TPOT as (label, value) pairs; empty when the profile timed no step."""
    timed = (record or {}).get("timed")
    if not isinstance(timed, dict):
        return []
    lo, hi = (list(timed.get("tpot_ci95_ms") or []) + [None, None])[:2]
    tpot = _ms(timed.get("tpot_ms"))
    interval = f"[{_ms(lo)}, {_ms(hi)}]" if lo is not None and hi is not None else "no interval"
    clock = "CUDA events at step boundaries" if timed.get("timing") == "cuda-events" else "host clock (CPU)"
    items = [
        ("TPOT (timed steps)", f"{tpot} {interval}"),
        ("interval", str(timed.get("interval") or "—")),
        ("timed steps", f"{timed.get('steps')} in {len(timed.get('samples_ns') or [])} blocks, {clock}"),
    ]
    ratio = timed.get("profiled_step_over_timed")
    if isinstance(ratio, (int, float)):
        items.append(("profiled step ÷ timed step", f"{ratio:.2f}×"))
    if timed.get("timing") != "cuda-events":
        items.append(("note", CPU_TIMES_NOTE))
    return items


def _ms(value: Any) -> str:
    return f"{value:.3f}{NBSP}ms" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"


def _table(headers: list[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{html_text(empty)}</p>'
    head = "".join(f"<th>{html_text(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _coverage_note(analysis: dict[str, Any]) -> str:
    sites = analysis.get("read_sites") or {}
    return f"exact lines from the read tap; covered: {sites.get('covered', 'n/a')}"


def profile_sections_html(
    analysis: dict[str, Any], record: dict[str, Any] | None = None, warnings: list[str] | None = None
) -> str:
    """The profile's own sections: timed TPOT (when timed) and the call-chain table (when tapped)."""
    parts = [f'<p class="warn">{html_text(w)}</p>' for w in warnings or []]
    items = timed_items(record)
    if items:
        parts.append("<h2>Timed TPOT</h2>" + _table(["metric", "value"], [list(i) for i in items], ""))
    if has_read_chains(analysis):
        parts.append(
            "<h2>Where each blocking read is called from</h2>"
            f'<p class="sub">{html_text(_coverage_note(analysis))}</p>'
            + _table(CHAIN_HEADERS, read_chain_rows(analysis), "no host-blocking reads")
        )
    return "".join(parts)


def profile_markdown(
    analysis: dict[str, Any], record: dict[str, Any] | None = None, warnings: list[str] | None = None
) -> str:
    """`profile_sections_html` as Markdown (empty when there is nothing profile-specific)."""
    from bubblescope.report.cells import md_cell, md_items, md_table

    parts = [f"> ⚠ {md_cell(w)}" for w in warnings or []]
    items = timed_items(record)
    if items:
        parts += ["### Timed TPOT", md_items(items)]
    if has_read_chains(analysis):
        parts += [
            "### Where each blocking read is called from",
            md_cell(_coverage_note(analysis)),
            md_table((CHAIN_HEADERS, read_chain_rows(analysis)), "no host-blocking reads"),
        ]
    return "\n\n".join(parts) + "\n" if parts else ""
