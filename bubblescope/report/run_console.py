"""Rich console summaries for `run`, `ablate` and `gate`, and the ablation progress bar (rendering only)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from bubblescope.report.cells import fmt_duration_ms, fmt_duration_ns, plural, tpot_noise_note
from bubblescope.report.escape import console_text as escape
from bubblescope.stats import INTERVAL_LABEL


def _interval(block: dict[str, float]) -> str:
    """`+1.234 ms [+1.100, +1.400]`, or the same marked `not resolved` when it is noise."""
    from bubblescope.report.cells import fmt_interval

    return escape(fmt_interval(block))


def print_run_summary(console: Console, record: dict[str, Any], out_dir: str, notices: list[str]) -> None:
    """What to fix first, TPOT with its interval, floor, blocking reads by site, idle by class, files."""
    from bubblescope.report.analysis_console import print_fix_first
    from bubblescope.report.markdown import findings_analysis, floor_text, tokens_per_step, tpot_interval_ms

    summary = record["summary"]
    lo, hi = tpot_interval_ms(summary)
    enabled = ", ".join(record["switches"]["enabled"]) or "(baseline: none)"
    console.print(
        f"[bold]{escape(record['workload'].get('name', '?'))}[/] preset "
        f"[bold]{escape(str(record.get('preset')))}[/] switches {escape(enabled)}"
    )
    print_fix_first(console, findings_analysis(record, None), tokens_per_step(record))
    from bubblescope.report.cells import fmt_ms_estimate

    # Digits to the interval's resolution (cells.interval_decimals), as on every other surface.
    tpot_text, range_text = fmt_ms_estimate(summary["tpot_ms"], lo, hi)
    interval = f" ({INTERVAL_LABEL} {range_text})" if lo is not None else ""
    interval += tpot_noise_note(summary["tpot_ms"], lo, hi)
    console.print(
        f"TPOT [bold]{tpot_text}[/]{escape(interval)} · "
        f"{summary['tokens_per_s']:.1f} tok/s · {plural(summary['tokens'], 'token')} in "
        f"{plural(summary['repeats'], 'repeat')}"
    )
    console.print(escape(floor_text(record)))
    analysis = record.get("analysis")
    if analysis:
        console.print(f"blocking reads / step: [bold]{analysis['blocking_reads_per_step']:.2f}[/]")
        table = Table("#", "site", "op", "per step", "hint", box=None)
        for index, sync in enumerate(analysis.get("syncs", [])[:10], start=1):
            table.add_row(
                str(index),
                escape(sync.get("site")),
                escape(sync.get("op")),
                f"{float(sync.get('per_step', 0)):.2f}",
                escape(sync.get("hint", "")),
            )
        if analysis.get("syncs"):
            console.print(table)
        if analysis.get("gpu_measured"):
            idle = analysis["idle_by_class_ns_per_step"]
            console.print(
                "GPU idle / step: " + ", ".join(f"{escape(k)} {fmt_duration_ns(v)}" for k, v in idle.items())
            )
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
        f"baseline {fmt_duration_ms(attribution['baseline_tpot_ms'])} → all on "
        f"{fmt_duration_ms(attribution['all_on_tpot_ms'])}; "
        f"saving {_interval(attribution['total_saving_ms'])}"
    )
    from bubblescope.report.markdown import switch_rows

    headers, rows = switch_rows(attribution["switches"], attribution.get("shapley_method"))
    table = Table(
        *(escape(h) for h in headers),
        title=f"TPOT saving per switch (ms, {INTERVAL_LABEL}; positive = faster)",
    )
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    from bubblescope.report.ablation_cells import removed_idle_note

    if idle_note := removed_idle_note(attribution["switches"]):
        console.print(escape(idle_note))
    console.print(
        f"interaction (all-on saving − sum of single savings): {_interval(attribution['interaction_ms'])}"
    )
    if attribution.get("predicted_vs_measured"):
        from bubblescope.report.predicted_rows import PREDICTED_NOTE, PREDICTED_TITLE, predicted_rows

        headers, rows = predicted_rows(attribution["predicted_vs_measured"])
        predicted = Table(*(escape(h) for h in headers), title=PREDICTED_TITLE)
        for row in rows:
            predicted.add_row(*(escape(cell) for cell in row))
        console.print(predicted)
        console.print(escape(PREDICTED_NOTE))
    console.print(
        "waterfall: "
        + " → ".join(f"{escape(s['step'])} {fmt_duration_ms(s['tpot_ms'])}" for s in attribution["waterfall"])
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
                escape(", ".join(str(s["site"]) for s in check["increased_sites"])),
            )
        elif check["status"] == "skipped":
            table.add_row("TPOT", "–", "–", "skipped", escape(check["reason"]))
        elif check.get("change") == "improvement":
            table.add_row(
                "TPOT",
                fmt_duration_ms(check["baseline_ms"]),
                fmt_duration_ms(check["current_ms"]),
                "[green]improved[/]",
                f"{(1 - check['ratio']['est']) * 100:.1f}% faster "
                f"[{(1 - check['ratio']['hi']) * 100:.1f}%, {(1 - check['ratio']['lo']) * 100:.1f}%]",
            )
        else:
            ratio = check["ratio"]
            table.add_row(
                "TPOT",
                fmt_duration_ms(check["baseline_ms"]),
                fmt_duration_ms(check["current_ms"]),
                check["status"],
                f"ratio {ratio['est']:.3f} [{ratio['lo']:.3f}, {ratio['hi']:.3f}], "
                f"limit {1 + check['threshold']:.3f}: {escape(check['reason'])}",
            )
    console.print(table)
    for warning in verdict.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    if verdict.get("diff"):
        from bubblescope.report.diff_render import print_diff

        print_diff(console, verdict["diff"])


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
