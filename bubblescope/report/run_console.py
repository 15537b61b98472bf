"""Rich console summaries for `run`, `ablate` and `gate`, and the ablation progress bar (rendering only)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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

from bubblescope.report.bandwidth_rows import launch_path_sentence
from bubblescope.report.cells import fmt_duration_ms, fmt_duration_ns, plural, tpot_noise_note
from bubblescope.report.console import print_rows
from bubblescope.report.escape import console_text as escape
from bubblescope.report.gate_markdown import gate_change_text
from bubblescope.report.spec_rows import expert_union_items
from bubblescope.stats import INTERVAL_LABEL


def _interval(block: dict[str, float]) -> str:
    """`+1.234 ms [+1.100, +1.400]`, or the same marked `not resolved` when it is noise."""
    from bubblescope.report.cells import fmt_interval

    return escape(fmt_interval(block))


def print_run_summary(
    console: Console,
    record: dict[str, Any],
    out_dir: str,
    notices: list[str],
    *,
    notes: Console | None = None,
) -> None:
    """What to fix first, TPOT with its interval, floor, blocking reads by site, idle by class, files;
    the notices go to `notes` (the CLI's stderr console) when given."""
    from bubblescope.report.analysis_console import print_fix_first
    from bubblescope.report.run_rows import findings_analysis, floor_text, tokens_per_step, tpot_interval_ms

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
    for label, value in expert_union_items(record):
        console.print(f"{escape(label)}: {escape(value)}")
    analysis = record.get("analysis")
    if analysis:
        console.print(f"blocking reads / step: [bold]{analysis['blocking_reads_per_step']:.2f}[/]")
        rows = [
            [str(index), str(sync.get("site")), str(sync.get("op")), f"{float(sync.get('per_step', 0)):.2f}"]
            + [str(sync.get("hint", ""))]
            for index, sync in enumerate(analysis.get("syncs", [])[:10], start=1)
        ]
        if rows:
            print_rows(console, "Blocking reads by site", ["#", "site", "op", "per step", "hint"], rows)
        if analysis.get("gpu_measured"):
            idle = analysis["idle_by_class_ns_per_step"]
            console.print(
                "GPU idle / step: " + ", ".join(f"{escape(k)} {fmt_duration_ns(v)}" for k, v in idle.items())
            )
        if analysis.get("launch_path"):
            console.print(escape(launch_path_sentence(analysis["launch_path"])))
    _print_tp_ranks(console, record)
    _print_notes(notes or console, "note", notices)
    console.print(f"written to {escape(out_dir)}")


def _print_notes(console: Console, label: str, notices: list[str]) -> None:
    """`label: text` per notice, the label coloured (yellow), the text escaped and wrapped."""
    for notice in notices:
        console.print(f"[yellow]{label}:[/] {escape(notice)}")


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
    print_rows(console, "Ranks", headers, rows)


def print_ablation_summary(
    console: Console,
    attribution: dict[str, Any],
    notices: list[str],
    *,
    manifest: dict[str, Any] | None = None,
    records: dict[str, dict[str, Any]] | None = None,
    analyses: dict[str, dict[str, Any]] | None = None,
    notes: Console | None = None,
) -> None:
    """Per-switch savings with intervals, the interaction term and the waterfall; with the manifest and
    records of a tensor-parallel ablation also the world size and each configuration's slowest rank; with
    the configurations' analyses also their kernel families against the floor."""
    if manifest is not None:
        _print_ablation_tp(console, manifest, records or {})
    if not attribution:
        console.print("[yellow]no attribution yet:[/] some configurations are not measured")
        _print_notes(notes or console, "note", notices)
        return
    console.print(
        f"baseline {fmt_duration_ms(attribution['baseline_tpot_ms'])} → all on "
        f"{fmt_duration_ms(attribution['all_on_tpot_ms'])}; "
        f"saving {_interval(attribution['total_saving_ms'])}"
    )
    from bubblescope.report.ablation_rows import switch_rows

    headers, rows = switch_rows(attribution["switches"], attribution.get("shapley_method"))
    print_rows(console, f"TPOT saving per switch (ms, {INTERVAL_LABEL}; positive = faster)", headers, rows)
    from bubblescope.report.ablation_cells import removed_idle_note

    if idle_note := removed_idle_note(attribution["switches"]):
        console.print(escape(idle_note))
    console.print(
        f"interaction (all-on saving − sum of single savings): {_interval(attribution['interaction_ms'])}"
    )
    if attribution.get("predicted_vs_measured"):
        from bubblescope.report.predicted_rows import PREDICTED_NOTE, PREDICTED_TITLE, predicted_rows

        # Seven columns of sentences: print_rows stacks them as blocks where a table cannot fit.
        headers, rows = predicted_rows(attribution["predicted_vs_measured"])
        print_rows(console, PREDICTED_TITLE, headers, rows)
        console.print(escape(PREDICTED_NOTE))
    console.print(
        "waterfall: "
        + " → ".join(f"{escape(s['step'])} {fmt_duration_ms(s['tpot_ms'])}" for s in attribution["waterfall"])
    )
    if manifest is not None and analyses:
        from bubblescope.report.ablation_bandwidth import print_families
        from bubblescope.report.ablation_rows import config_key_with_role

        base_key = config_key_with_role(manifest, "baseline")
        print_families(console, manifest, records or {}, analyses, base_key)
    _print_notes(notes or console, "note", notices)


def _print_ablation_tp(
    console: Console, manifest: dict[str, Any], records: dict[str, dict[str, Any]]
) -> None:
    from bubblescope.report.tp_rows import ablation_tp_rows

    headers, rows = ablation_tp_rows(manifest, records)
    if not rows:
        return
    console.print(f"tensor parallel: [bold]{escape(rows[0][1])}[/] ranks")
    print_rows(console, "Slowest rank per configuration", headers, rows)


def print_gate_table(console: Console, verdict: dict[str, Any], *, notes: Console | None = None) -> None:
    """The gate verdict as a rich table; its warnings go to `notes` (stderr in the CLI) when given."""
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
        else:
            improved = check.get("change") == "improvement"
            table.add_row(
                "TPOT",
                fmt_duration_ms(check["baseline_ms"]),
                fmt_duration_ms(check["current_ms"]),
                "[green]improved[/]" if improved else check["status"],
                escape(gate_change_text(check)),
            )
    console.print(table)
    _print_notes(notes or console, "warning", verdict.get("warnings", []))
    if verdict.get("diff"):
        from bubblescope.report.diff_render import print_diff

        print_diff(console, verdict["diff"], notes=notes)


class AblationProgress:
    """`ablate`'s progress on stderr: repeats of every configuration still to measure. A bar with ETA on
    a terminal; in a pipe or CI log one line per finished repeat and per finished configuration, as it
    happens (a bar there would only print its final state, at the end)."""

    def __init__(self, console: Console, progress: Progress | None, repeats: int) -> None:
        self._console, self._progress, self._repeats = console, progress, repeats
        self._task = progress.add_task("ablation", total=None) if progress is not None else None
        self._pending, self._measured = 0, 0

    def start(self, pending: int) -> None:
        """Called once with how many configurations will be measured."""
        self._pending = pending
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=max(1, pending * self._repeats))
        else:
            self._console.print(
                f"measuring {plural(pending, 'configuration')} of {plural(self._repeats, 'timed repeat')}"
            )

    def repeat_done(self, index: int) -> None:
        """Called after timed repeat `index` (0-based) of the configuration being measured."""
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task)
        else:
            self._console.print(
                f"configuration {self._measured + 1}/{self._pending}: "
                f"timed repeat {index + 1}/{self._repeats} done"
            )

    def config_done(self, key: str) -> None:
        """Called after a configuration is measured and saved."""
        self._measured += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=f"done {escape(key)}")
        else:
            # One line whatever the width: the key stays copyable.
            self._console.print(
                f"configuration {self._measured}/{self._pending} done: {escape(key)}", soft_wrap=True
            )


@contextlib.contextmanager
def ablation_progress(console: Console, repeats: int) -> Iterator[AblationProgress]:
    """An AblationProgress of `repeats` per configuration on `console` (stderr)."""
    if not console.is_terminal:
        yield AblationProgress(console, None, repeats)
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
    with bar:
        yield AblationProgress(console, bar, repeats)


class RunProgress:
    """`run`'s progress on stderr: timed repeats (counted in steps), then the profiled window, then the
    report. A bar with ETA on a terminal; in a pipe or CI log one line per stage instead of a bar."""

    def __init__(self, console: Console, progress: Progress | None, steps: int, repeats: int) -> None:
        self._console, self._progress = console, progress
        self._steps, self._repeats = steps, repeats
        self._task = None
        if progress is not None:
            self._task = progress.add_task(self._repeat_text(0), total=steps * repeats)
        else:
            console.print(f"timing {plural(repeats, 'repeat')} of {plural(steps, 'step')}")

    def _repeat_text(self, done: int) -> str:
        return f"timed repeat {min(done + 1, self._repeats)}/{self._repeats}"

    def repeat_done(self, index: int) -> None:
        """Called after timed repeat `index` (0-based)."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=self._steps, description=self._repeat_text(index + 1))
        else:
            self._console.print(f"timed repeat {index + 1}/{self._repeats} done")

    def phase(self, text: str) -> None:
        """A stage after the timed repeats (profiled window, report)."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=escape(text))
        else:
            self._console.print(escape(text))


@contextlib.contextmanager
def run_progress(console: Console, settings: Any) -> Iterator[RunProgress]:
    """A RunProgress for `settings` (steps, repeats) on `console` (stderr)."""
    if not console.is_terminal:
        yield RunProgress(console, None, settings.steps, settings.repeats)
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("steps"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    with bar:
        yield RunProgress(console, bar, settings.steps, settings.repeats)
