"""Rich console view of a `bubblescope.analysis/1` dict: what a person reads in ten seconds.

What to fix first, then the headline per device (busy / idle and idle by class), the blocking reads by
site with their fix hints, the top kernels and the largest gaps with their blame. Rendering only; every
string from the trace goes through `escape.console_text` (rich markup and terminal escapes shown
literally).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bubblescope.floor.trace_floor import floor_line
from bubblescope.report.bandwidth_rows import (
    BANDWIDTH_TITLE,
    bandwidth_rows,
    bandwidth_sentence,
    console_bandwidth_rows,
)
from bubblescope.report.cells import (
    READS_NOT_DETECTABLE,
    blame_text,
    fmt_measured_ns,
    nothing_to_fix_text,
    plural,
    reads_undetectable,
    steps_and_ranks,
)
from bubblescope.report.console import print_rows
from bubblescope.report.escape import console_text, plain_console_text
from bubblescope.report.findings import FIX_FIRST_TITLE, fix_first, fix_first_caption, fix_first_rows
from bubblescope.report.kernel_overlap import kernel_overlap_note
from bubblescope.report.kernel_rows import kernel_rows

CLASS_STYLE = {
    "sync": "bold red",
    "host": "yellow",
    "launch": "cyan",
    "dependency": "magenta",
    "outside": "dim",
}
TOP_GAPS_SHOWN = 8
TOP_KERNELS_SHOWN = 10


def us(ns: float | None) -> str:
    """ns -> '12.3 µs' below a millisecond, '12.35 ms' above (one unit spelling everywhere); null is
    `not measured` (bubblescope.analysis.not_measured)."""
    return fmt_measured_ns(ns)


# The console's kernel columns: eleven did not fit 100 columns and rich drew the names zero wide. The
# HTML and Markdown tables keep all of them (count, total, mean, max).
# A C++ template name runs to a thousand characters; the console shows its start (the HTML all of it).
CONSOLE_KERNEL_NAME_CHARS = 90
CONSOLE_KERNEL_COLUMNS = ("#", "kernel", "per step", "time / step", "share", "p50", "achieved GB/s")


def console_kernel_rows(table: tuple[list[str], list[list[str]]]) -> tuple[list[str], list[list[str]]]:
    """`kernel_rows` cut to CONSOLE_KERNEL_COLUMNS; achieved GB/s only when some kernel has it."""
    headers, rows = table
    keep = [i for i, h in enumerate(headers) if h in CONSOLE_KERNEL_COLUMNS]
    gbps = headers.index("achieved GB/s") if "achieved GB/s" in headers else None
    if gbps is not None and all(row[gbps] == "—" for row in rows):
        keep.remove(gbps)
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows]


def print_table(console: Console, title: str, rows: tuple[list[str], list[list[str]]]) -> None:
    """Plain-string rows as a table (numbers never cut), or as blocks on a console too narrow for it."""
    headers, body = rows
    print_rows(console, title, headers, body)


def print_fix_first(console: Console, analysis: dict, tokens_per_step: float = 1.0) -> None:
    """The ranked fix-first list (or a line saying there is nothing to fix)."""
    findings = fix_first(analysis, tokens_per_step)
    if findings:
        print_table(console, FIX_FIRST_TITLE, fix_first_rows(findings))
    else:
        console.print(f"[green]{console_text(nothing_to_fix_text(analysis))}[/green]")
    caption = fix_first_caption(analysis)
    if caption:
        console.print(f"[dim]{console_text(caption)}[/dim]")


def print_analysis(
    console: Console, analysis: dict, top: int | None = None, *, notes: Console | None = None
) -> None:
    """Print the fix-first list, then the summary, device, sync, kernel and gap tables of `analysis`,
    then utilisation, kernel categories and host ops (report/views_console.py); `top` (--top) sets the
    rows of the kernel, gap and host op tables; warnings go to `notes` (the CLI's stderr) when given."""
    summary = analysis["summary"]
    print_fix_first(console, analysis)
    steps, ranks = steps_and_ranks(analysis)
    on_ranks = f" on each of {ranks} ranks" if ranks > 1 else ""
    headline = (
        f"[bold]bubblescope analyze[/bold]: {plural(steps, 'step')}{on_ranks} "
        f"(steps from {console_text(analysis['step_source'])}), "
        + (
            f"blocking reads {READS_NOT_DETECTABLE}"
            if reads_undetectable(analysis)
            else f"{plural(summary['blocking_reads_per_step'], 'blocking read')}/step"
        )
    )
    if analysis.get("gpu_measured", True):
        headline += (
            f", GPU busy {us(summary['gpu_busy_ns_per_step'])}/step, "
            f"idle {us(summary['idle_ns_per_step'])}/step"
        )
    console.print(headline)
    console.print(console_text(floor_line(analysis)))
    for warning in analysis["warnings"]:
        (notes or console).print(f"[yellow]warning:[/yellow] {console_text(warning)}")
    if analysis.get("gpu_measured", True):
        console.print(_per_step_classes(summary))
        console.print(_devices_table(analysis["devices"]))
    else:
        console.print(
            "[yellow]GPU idle time not reported: the trace lacks the GPU activity it needs[/yellow]"
        )
    if analysis["syncs"]:
        console.print(_syncs_table(analysis["syncs"]))
        _sync_hints(console, analysis["syncs"])
    elif reads_undetectable(analysis):
        console.print(f"host-blocking reads: {console_text(READS_NOT_DETECTABLE)}")
    else:
        console.print("[green]no host-blocking reads found[/green]")
    kernels = analysis.get("kernels") or []
    if kernels:
        headers, rows = console_kernel_rows(kernel_rows(kernels, name_chars=CONSOLE_KERNEL_NAME_CHARS))
        limit = top or TOP_KERNELS_SHOWN
        shown = f"Top {min(len(rows), limit)} of {plural(len(rows), 'kernel')} by GPU time"
        note = kernel_overlap_note(analysis)
        if note:
            # The heading, then the note, then the table under them.
            console.print(f"[italic]{console_text(shown)}[/italic]")
            console.print(f"[dim]{console_text(note)}[/dim]")
        print_table(console, "" if note else shown, (headers, rows[:limit]))
    breakdown = bandwidth_rows(analysis)
    if breakdown[1]:
        print_table(console, BANDWIDTH_TITLE, console_bandwidth_rows(breakdown))
        console.print(console_text(bandwidth_sentence(analysis)))
    if analysis["gaps_top"] and analysis.get("gpu_measured", True):
        console.print(_gaps_table(analysis["gaps_top"][: top or TOP_GAPS_SHOWN]))
    from bubblescope.report.views_console import print_views

    print_views(console, analysis, top)


def _per_step_classes(summary: dict) -> Table:
    table = Table(title="GPU idle per step, by cause", title_justify="left")
    for cls in summary["idle_by_class_ns_per_step"]:
        table.add_column(console_text(cls), justify="right", style=CLASS_STYLE.get(cls))
    table.add_row(*(us(v) for v in summary["idle_by_class_ns_per_step"].values()))
    return table


def _devices_table(devices: list[dict]) -> Table:
    table = Table(title="Devices (whole trace)", title_justify="left")
    for col, justify in (
        ("rank/dev", "right"),
        ("span", "right"),
        ("busy", "right"),
        ("idle", "right"),
        ("idle by cause", "left"),
        ("kernels", "right"),
    ):
        table.add_column(col, justify=justify, overflow="fold")
    for d in devices:
        causes = " ".join(
            f"[{CLASS_STYLE.get(c, '')}]{console_text(c)}[/] {us(ns)}"
            for c, ns in d["idle_by_class_ns"].items()
            if ns
        )
        table.add_row(
            console_text(f"{d['rank']}/{d['device']}"),
            us(d["span_ns"]),
            us(d["busy_ns"]),
            us(d["idle_ns"]),
            causes or "-",
            str(d["kernel_count"]),
        )
    return table


def _syncs_table(syncs: list[dict]) -> Table:
    table = Table(title="Host-blocking reads by site (fix below)", title_justify="left")
    for col, justify in (
        ("#", "right"),
        ("site", "left"),
        ("op", "left"),
        ("count", "right"),
        ("/step", "right"),
        ("blocked", "right"),
        ("bubble", "right"),
    ):
        # Numbers never wrap mid-number; long site names fold.
        table.add_column(col, justify=justify, overflow="fold", no_wrap=justify == "right")
    for i, s in enumerate(syncs, start=1):
        table.add_row(
            str(i),
            console_text(s["site"]),
            console_text(s["op"] or s["api"]),
            str(s["count"]),
            f"{s['per_step']:g}",
            us(s["blocked_ns"]),
            us(s["bubble_ns"]),
        )
    return table


def _sync_hints(console: Console, syncs: list[dict]) -> None:
    """One numbered fix per site, wrapped under its number (a hanging indent, at any width)."""
    hints = Table.grid(padding=(0, 1))
    hints.add_column(justify="right", no_wrap=True, min_width=3)
    hints.add_column(overflow="fold")
    for i, s in enumerate(syncs, start=1):
        hints.add_row(f"{i}.", Text(plain_console_text(s["hint"])))
    console.print(hints)


def _gaps_table(gaps: list[dict]) -> Table:
    table = Table(title="Largest GPU idle gaps", title_justify="left")
    for col, justify in (
        ("rank", "right"),
        ("step", "right"),
        ("start", "right"),
        ("dur", "right"),
        ("class", "left"),
        ("blame", "left"),
    ):
        table.add_column(col, justify=justify, overflow="fold", no_wrap=justify == "right")
    for g in gaps:
        style = CLASS_STYLE.get(g["class"], "")
        cls = console_text(g["class"])
        table.add_row(
            console_text(g.get("rank", 0)),
            str(g["step"]) if g["step"] >= 0 else "-",
            us(g["start_ns"]),
            us(g["dur_ns"]),
            f"[{style}]{cls}[/{style}]" if style else cls,
            console_text(blame_text(g["blame"])),
        )
    return table
