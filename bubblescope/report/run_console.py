"""Rich console summaries for `run`, `ablate` and `gate`, and the ablation progress bar (rendering only)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table


def _interval(block: dict[str, float], scale: float = 1.0, unit: str = "ms") -> str:
    return f"{block['est'] * scale:+.4f} {unit} [{block['lo'] * scale:+.4f}, {block['hi'] * scale:+.4f}]"


def print_run_summary(console: Console, record: dict[str, Any], out_dir: str, notices: list[str]) -> None:
    """TPOT with interval, floor, blocking reads by site, idle by class, files written."""
    summary = record["summary"]
    lo, hi = summary["tpot_ci95_ms"]
    enabled = ", ".join(record["switches"]["enabled"]) or "(baseline: none)"
    console.print(
        f"[bold]{escape(record['workload'].get('name', '?'))}[/] preset "
        f"[bold]{escape(str(record.get('preset')))}[/] switches {escape(enabled)}"
    )
    console.print(
        f"TPOT [bold]{summary['tpot_ms']:.4f} ms[/] (95% CI {lo:.4f}–{hi:.4f}) · "
        f"{summary['tokens_per_s']:.1f} tok/s · {summary['tokens']} tokens in {summary['repeats']} repeats"
    )
    floor = record.get("floor")
    if floor:
        console.print(
            f"floor {floor['floor_ms']:.4f} ms ({floor['bytes_per_token'] / 1e6:.1f} MB/token at "
            f"{floor['bandwidth_gbps']:.0f} GB/s, {escape(floor['bandwidth_source'])}) · "
            f"TPOT ÷ floor {floor['tpot_over_floor']:.1f}×"
        )
    analysis = record.get("analysis")
    if analysis:
        console.print(f"blocking reads / step: [bold]{analysis['blocking_reads_per_step']:.2f}[/]")
        table = Table("site", "op", "per step", "hint", box=None)
        for sync in analysis.get("syncs", [])[:10]:
            table.add_row(
                escape(str(sync.get("site"))),
                escape(str(sync.get("op"))),
                f"{float(sync.get('per_step', 0)):.2f}",
                escape(str(sync.get("hint", ""))),
            )
        if analysis.get("syncs"):
            console.print(table)
        if analysis.get("gpu_measured"):
            idle = analysis["idle_by_class_ns_per_step"]
            console.print("idle µs / step: " + ", ".join(f"{k} {v / 1e3:.1f}" for k, v in idle.items()))
    _print_tp_ranks(console, record)
    for notice in notices:
        console.print(f"[yellow]note:[/] {escape(notice)}")
    console.print(f"written to {escape(out_dir)}")


def _print_tp_ranks(console: Console, record: dict[str, Any]) -> None:
    """World size, slowest rank and why, and one line per rank (nothing for a single-process run)."""
    from bubblescope.report.tp_rows import rank_rows, slowest_rank_text, tp_of

    tp = tp_of(record)
    if tp is None:
        return
    console.print(
        f"tensor parallel: [bold]{escape(str(tp.get('world_size')))}[/] ranks "
        f"({escape(str(tp.get('backend')))}) · slowest rank [bold]{escape(str(tp.get('slowest_rank')))}[/]"
    )
    console.print(escape(slowest_rank_text(tp)))
    headers, rows = rank_rows(tp)
    table = Table(*headers, box=None)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)


def print_ablation_summary(
    console: Console,
    attribution: dict[str, Any],
    notices: list[str],
    *,
    manifest: dict[str, Any] | None = None,
    records: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Per-switch savings with intervals, the interaction term and the waterfall; with the manifest and
    records of a tensor-parallel ablation also the world size and each configuration's slowest rank."""
    if manifest is not None:
        _print_ablation_tp(console, manifest, records or {})
    if not attribution:
        console.print("[yellow]no attribution yet:[/] some configurations are not measured")
        for notice in notices:
            console.print(f"[yellow]note:[/] {escape(notice)}")
        return
    console.print(
        f"baseline {attribution['baseline_tpot_ms']:.4f} ms → all on {attribution['all_on_tpot_ms']:.4f} ms; "
        f"saving {_interval(attribution['total_saving_ms'])}"
    )
    table = Table(
        "switch",
        "alone",
        "removed from all",
        f"Shapley ({attribution['shapley_method']})",
        "reads removed / step",
        title="TPOT saving per switch (ms, 95% CI; positive = faster)",
    )
    for row in attribution["switches"]:
        reads = sum(row["removed_reads_per_step"].values())
        table.add_row(
            escape(row["name"]),
            _interval(row["alone_ms"]),
            _interval(row["removed_from_all_ms"]),
            _interval(row["shapley_ms"]),
            f"{reads:+.2f}",
        )
    console.print(table)
    console.print(
        f"interaction (all-on saving − sum of single savings): {_interval(attribution['interaction_ms'])}"
    )
    console.print(
        "waterfall: "
        + " → ".join(f"{escape(s['step'])} {s['tpot_ms']:.4f}" for s in attribution["waterfall"])
    )
    for notice in notices:
        console.print(f"[yellow]note:[/] {escape(notice)}")


def _print_ablation_tp(
    console: Console, manifest: dict[str, Any], records: dict[str, dict[str, Any]]
) -> None:
    from bubblescope.report.tp_rows import ablation_tp_rows

    headers, rows = ablation_tp_rows(manifest, records)
    if not rows:
        return
    console.print(f"tensor parallel: [bold]{escape(rows[0][1])}[/] ranks; slowest rank per configuration")
    table = Table(*headers, box=None)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)


def print_gate_table(console: Console, verdict: dict[str, Any]) -> None:
    """The gate verdict as a rich table."""
    colour = "green" if verdict["verdict"] == "pass" else "red"
    console.print(f"[bold {colour}]gate: {verdict['verdict']}[/]")
    table = Table("check", "baseline", "current", "status", "detail", box=None)
    for check in verdict["checks"]:
        if check["name"] == "blocking_reads":
            table.add_row(
                "blocking reads / step",
                f"{check['baseline_per_step']:.2f}",
                f"{check['current_per_step']:.2f}",
                check["status"],
                escape(", ".join(s["site"] for s in check["increased_sites"])),
            )
        elif check["status"] == "skipped":
            table.add_row("TPOT", "–", "–", "skipped", escape(check["reason"]))
        else:
            ratio = check["ratio"]
            table.add_row(
                "TPOT ms",
                f"{check['baseline_ms']:.4f}",
                f"{check['current_ms']:.4f}",
                check["status"],
                f"ratio {ratio['est']:.3f} [{ratio['lo']:.3f}, {ratio['hi']:.3f}], "
                f"limit {1 + check['threshold']:.3f}: {escape(check['reason'])}",
            )
    console.print(table)
    for warning in verdict.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(warning)}")


def ablation_progress(console: Console) -> Progress:
    """A progress bar over repeats of all pending configurations, with ETA."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
