"""Rich console view of a `bubblescope.analysis/1` dict: what a person reads in ten seconds.

Headline per device (busy / idle and idle by class), the blocking reads by site with their fix hints,
and the largest gaps with their blame. Rendering only; no analysis here.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

CLASS_STYLE = {
    "sync": "bold red",
    "host": "yellow",
    "launch": "cyan",
    "dependency": "magenta",
    "outside": "dim",
}
TOP_GAPS_SHOWN = 8


def us(ns: float) -> str:
    """ns -> '12.3 µs' (or ms above 10 ms)."""
    return f"{ns / 1e6:.2f} ms" if abs(ns) >= 1e7 else f"{ns / 1e3:.1f} µs"


def print_analysis(console: Console, analysis: dict) -> None:
    """Print the summary, device, sync and gap tables of `analysis`."""
    summary = analysis["summary"]
    headline = (
        f"[bold]bubblescope analyze[/bold]: {summary['steps']} steps "
        f"(steps from {analysis['step_source']}), "
        f"{summary['blocking_reads_per_step']:g} blocking reads/step"
    )
    if analysis.get("gpu_measured", True):
        headline += (
            f", GPU busy {us(summary['gpu_busy_ns_per_step'])}/step, "
            f"idle {us(summary['idle_ns_per_step'])}/step"
        )
    console.print(headline)
    for warning in analysis["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {warning}")
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
    else:
        console.print("[green]no host-blocking reads found[/green]")
    if analysis["gaps_top"] and analysis.get("gpu_measured", True):
        console.print(_gaps_table(analysis["gaps_top"][:TOP_GAPS_SHOWN]))


def _per_step_classes(summary: dict) -> Table:
    table = Table(title="GPU idle per step, by cause", title_justify="left")
    for cls in summary["idle_by_class_ns_per_step"]:
        table.add_column(cls, justify="right", style=CLASS_STYLE.get(cls))
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
            f"[{CLASS_STYLE[c]}]{c}[/] {us(ns)}" for c, ns in d["idle_by_class_ns"].items() if ns
        )
        table.add_row(
            f"{d['rank']}/{d['device']}",
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
        table.add_column(col, justify=justify, overflow="fold")
    for i, s in enumerate(syncs, start=1):
        table.add_row(
            str(i),
            s["site"],
            s["op"] or s["api"],
            str(s["count"]),
            f"{s['per_step']:g}",
            us(s["blocked_ns"]),
            us(s["bubble_ns"]),
        )
    return table


def _sync_hints(console: Console, syncs: list[dict]) -> None:
    for i, s in enumerate(syncs, start=1):
        console.print(f"  [bold]{i}.[/bold] {s['hint']}")


def _gaps_table(gaps: list[dict]) -> Table:
    table = Table(title="Largest GPU idle gaps", title_justify="left")
    for col, justify in (
        ("step", "right"),
        ("start", "right"),
        ("dur", "right"),
        ("class", "left"),
        ("blame", "left"),
    ):
        table.add_column(col, justify=justify, overflow="fold")
    for g in gaps:
        style = CLASS_STYLE.get(g["class"], "")
        table.add_row(
            str(g["step"]) if g["step"] >= 0 else "-",
            us(g["start_ns"]),
            us(g["dur_ns"]),
            f"[{style}]{g['class']}[/{style}]" if style else g["class"],
            g["blame"],
        )
    return table
