"""`bubblescope.diff/1` rendered: plain-string sections shared by console, Markdown and HTML."""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import (
    Rows,
    fmt_duration_ms,
    fmt_duration_ns,
    fmt_estimate,
    fmt_interval,
    md_cell,
    md_table,
    num,
    plain,
)
from bubblescope.trace.kernel_names import short_kernel_name

CHANGE_WORDS = {
    "improvement": "improvement (faster beyond the noise)",
    "regression": "regression (slower beyond the noise)",
    "unresolved": "not resolved (within the noise)",
}


def _signed_ns(value: Any) -> str:
    number = num(value)
    if number is None:
        return "—"
    return ("+" if number > 0 else "−" if number < 0 else "±") + fmt_duration_ns(abs(number))


def _signed_percent(value: float) -> str:
    """`+3.2%` / `−53.9%`: the same minus sign as the Δ beside it (Python's format gives a hyphen)."""
    return f"{value:+.1f}%".replace("-", "−")


def _per_step(value: Any) -> str:
    number = num(value)
    return "—" if number is None else f"{number:g}"


def headline(diff: dict[str, Any]) -> str:
    """One line: ΔTPOT with its interval and what it means, or why TPOT is not compared."""
    tpot = diff.get("tpot") or {}
    if tpot.get("status") != "timed":
        return f"TPOT not compared: {plain(tpot.get('reason'))}"
    delta = tpot["delta_ms"]
    return (
        f"TPOT {fmt_duration_ms(tpot['baseline_ms'])} → {fmt_duration_ms(tpot['current_ms'])}: "
        # Digits to the interval's resolution, as every surface shows an estimate (cells.fmt_estimate).
        # (with the typographic minus the headline's percentage uses).
        f"Δ {fmt_estimate(delta['est'], delta['lo'], delta['hi'], 'ms', signed=True).replace('-', '−')} "
        f"({_signed_percent((tpot['ratio']['est'] - 1) * 100)}; {tpot['interval']}) — "
        f"{CHANGE_WORDS.get(tpot.get('change'), plain(tpot.get('change')))}"
    )


def sections(diff: dict[str, Any]) -> list[tuple[str, Rows, str]]:
    """(title, rows, text when empty) for each table of the diff, in reading order."""
    reads = diff.get("reads") or {}
    out: list[tuple[str, Rows, str]] = []
    out.append(
        (
            "Summary (per step)",
            (
                ["measure", "baseline", "current", "Δ"],
                _summary_rows(diff),
            ),
            "nothing to compare",
        )
    )
    read_headers = ["change", "site", "op", "baseline / step", "current / step"]
    read_rows = [
        [
            label,
            plain(r["site"]),
            plain(r["op"]),
            _per_step(r["baseline_per_step"]),
            _per_step(r["current_per_step"]),
        ]
        for label, key in (("added", "added"), ("removed", "removed"))
        for r in reads.get(key) or []
    ]
    # Same read, another line number (code above it changed): shown, never counted as added or removed.
    read_rows += [
        [
            "moved",
            f"{plain(r['from_site'])} ⇒ {plain(r['site'])}",
            plain(r["op"]),
            _per_step(r["baseline_per_step"]),
            _per_step(r["current_per_step"]),
        ]
        for r in reads.get("moved") or []
    ]
    by = "by exact line" if reads.get("compared_by") == "exact line" else "by site"
    out.append((f"Blocking reads added / removed, {by}", (read_headers, read_rows), "no read site changed"))
    kernels = diff.get("kernels")
    if kernels is not None:
        kernel_rows = [
            [
                "added",
                short_kernel_name(plain(k["name"])),
                "—",
                _per_step(k["count_per_step"]),
                "—",
                fmt_duration_ns(k["ns_per_step"]),
            ]
            for k in kernels.get("added") or []
        ]
        kernel_rows += [
            [
                "removed",
                short_kernel_name(plain(k["name"])),
                _per_step(k["count_per_step"]),
                "—",
                fmt_duration_ns(k["ns_per_step"]),
                "—",
            ]
            for k in kernels.get("removed") or []
        ]
        kernel_rows += [
            [
                "slower" if k["delta_ns_per_step"] > 0 else "faster",
                short_kernel_name(plain(k["name"])),
                _per_step(k["baseline_count_per_step"]),
                _per_step(k["current_count_per_step"]),
                fmt_duration_ns(k["baseline_ns_per_step"]),
                fmt_duration_ns(k["current_ns_per_step"]) + f" ({_signed_ns(k['delta_ns_per_step'])})",
            ]
            for k in kernels.get("changed") or []
        ]
        headers = [
            "change",
            "kernel",
            "count / step before",
            "count / step after",
            "time / step before",
            "after",
        ]
        out.append(
            (
                "Kernels added, removed, slower or faster (matched by name)",
                (headers, kernel_rows),
                "no kernel changed",
            )
        )
    switches = diff.get("switches")
    if switches is not None:
        rows = [
            [
                plain(s["name"]),
                fmt_interval(s.get("baseline_alone_ms")),
                fmt_interval(s.get("current_alone_ms")),
            ]
            for s in switches
        ]
        out.append(
            (
                "Per-switch saving alone (ms, 95% CI)",
                (["switch", "baseline ablation", "current ablation"], rows),
                "no switches",
            )
        )
    return out


def _summary_rows(diff: dict[str, Any]) -> list[list[str]]:
    reads = diff.get("reads") or {}
    rows = []
    b, c = num(reads.get("baseline_per_step")), num(reads.get("current_per_step"))
    rows.append(
        [
            "blocking reads",
            _per_step(b),
            _per_step(c),
            f"{c - b:+g}" if b is not None and c is not None else "—",
        ]
    )
    gpu_step = diff.get("gpu_step")
    if gpu_step:
        rows.append(
            [
                "GPU time of the median step",
                fmt_duration_ns(gpu_step["baseline_ns"]),
                fmt_duration_ns(gpu_step["current_ns"]),
                _signed_ns(gpu_step["delta_ns"]),
            ]
        )
    rows += _launch_path_rows(diff.get("launch_path"))
    for cls, idle in (diff.get("idle_per_step") or {}).items():
        rows.append(
            [
                f"GPU idle: {cls} (median step)",
                fmt_duration_ns(idle["baseline_ns"]),
                fmt_duration_ns(idle["current_ns"]),
                _signed_ns(idle["delta_ns"]),
            ]
        )
    return rows


def _launch_path_rows(path: Any) -> list[list[str]]:
    """Kernel launches and launch gap of the median step, each side with its interval, and Δ."""
    from bubblescope.report.bandwidth_rows import gap_text, launches_text

    if not isinstance(path, dict):
        return []
    rows = []
    for measure, label, text in (
        ("launches_per_step", "kernel launches (median step)", launches_text),
        ("launch_gap_ns_per_step", "launch gap (median step, critical path)", gap_text),
    ):
        entry = path.get(measure)
        if not isinstance(entry, dict):
            continue
        delta = text(entry.get("delta"), signed=True)
        rows.append([label, text(entry.get("baseline")), text(entry.get("current")), delta])
    return rows


def render_diff_markdown(diff: dict[str, Any], heading_level: int = 2) -> str:
    """The diff as Markdown (CI comments); every name escaped by md_cell."""
    hashes = "#" * heading_level
    parts = [
        f"{hashes} bubblescope diff",
        f"_baseline: {md_cell(diff['baseline']['path'])} · current: {md_cell(diff['current']['path'])}_",
        md_cell(headline(diff)),
    ]
    for title, rows, empty in sections(diff):
        parts += [f"{hashes}# {md_cell(title)}", md_table(rows, empty)]
    parts += [f"> {md_cell(note)}" for note in diff.get("notes") or []]
    return "\n\n".join(parts) + "\n"


def print_diff(console: Any, diff: dict[str, Any], *, notes: Any = None) -> None:
    """The diff on a rich console, every string escaped; its notes go to `notes` (stderr) when given."""
    from bubblescope.report.analysis_console import print_table
    from bubblescope.report.escape import console_text

    console.print(
        f"[bold]bubblescope diff[/bold] {console_text(diff['baseline']['path'])} → "
        f"{console_text(diff['current']['path'])}"
    )
    console.print(console_text(headline(diff)))
    for title, rows, empty in sections(diff):
        if rows[1]:
            print_table(console, title, rows)
        else:
            console.print(f"{console_text(title)}: {console_text(empty)}")
    for note in diff.get("notes") or []:
        (notes or console).print(f"[yellow]note:[/] {console_text(note)}")


def render_diff_html(diff: dict[str, Any]) -> str:
    """A self-contained HTML page of the diff (tables only, no plotly needed)."""
    from bubblescope.report.html_page import Page
    from bubblescope.report.html_tables import esc, table_html

    page = Page("bubblescope diff")
    page.heading("bubblescope diff")
    page.add(
        f'<p class="sub">baseline: {esc(diff["baseline"]["path"])} · '
        f"current: {esc(diff['current']['path'])}</p>"
    )
    page.add(f"<p><b>{esc(headline(diff))}</b></p>")
    for title, rows, empty in sections(diff):
        page.add(f"<h2>{esc(title)}</h2>")
        page.add(table_html(rows, empty))
    for note in diff.get("notes") or []:
        page.add(f'<p class="warn">{esc(note)}</p>')
    return page.render()
