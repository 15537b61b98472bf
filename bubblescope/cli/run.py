"""`bubblescope run`: measure one switch configuration and write a RunRecord, trace and report."""

from __future__ import annotations

import datetime as _dt
import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from bubblescope.capture.setup import resolve_toggles
from bubblescope.cli.outputs import check_out_folder
from bubblescope.cli.reference_options import (
    AcceptLenOption,
    BlockOption,
    PathOption,
    RoutingOverlapOption,
    SpecOption,
    reference_options,
)
from bubblescope.cli.run_options import (
    BandwidthOption,
    ForceOption,
    ThreadsOption,
    ToggleAliasOption,
    TogglesOption,
    merged_toggles,
)
from bubblescope.errors import ConfigError

FORMATS = ("table", "json")


class RunFormat(str, Enum):
    """The values `--format` accepts (shown as choices in --help)."""

    table = "table"
    json = "json"


def default_out_dir(kind: str, preset: str | None, enabled: frozenset[str]) -> Path:
    """`reports/<kind>/<UTC timestamp>-<preset>-<switches>/`."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    switches = "+".join(sorted(enabled)) or "baseline"
    return Path("reports") / kind / f"{stamp}-{preset or 'default'}-{switches}"


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        workload: str = typer.Option(
            None, "--workload", help="package.module:factory (default: the reference Ling-3.0 workload)."
        ),
        preset: str = typer.Option(
            None, "--preset", help="Preset; default: the largest this machine holds (debug on CPU)."
        ),
        toggles: TogglesOption = None,
        toggle_alias: ToggleAliasOption = None,
        all_on: bool = typer.Option(False, "--all", help="Turn on every switch usable on this device."),
        steps: int = typer.Option(64, "--steps", help="Timed decode steps per repeat."),
        warmup: int = typer.Option(8, "--warmup", help="Untimed steps before each repeat."),
        repeats: int = typer.Option(3, "--repeats", help="Repeats (the sequence restarts between them)."),
        profile_steps: int = typer.Option(
            4, "--profile-steps", help="Steps in the profiled window (0: no trace)."
        ),
        read_sites: bool = typer.Option(
            True,
            "--read-sites/--no-read-sites",
            help="Name the exact line of each blocking read, from the profiled window only (timed steps "
            "never run with the read tap).",
        ),
        seed: int = typer.Option(0, "--seed", help="Weight seed."),
        out: Annotated[
            Path | None,
            typer.Option(
                "-o",
                "--out",
                metavar="DIR",
                help="Output folder (default reports/runs/UTC_TIME-PRESET-SWITCHES/); one that already "
                "holds a run is refused unless --force.",
            ),
        ] = None,
        force: ForceOption = False,
        output_format: Annotated[
            RunFormat,
            typer.Option(
                "--format", help="table, or json (the RunRecord plus findings[], the fix-first list)."
            ),
        ] = RunFormat.table,
        tp: int = typer.Option(
            1, "--tp", help="Tensor-parallel ranks of the reference model (one GPU each; gloo on CPU)."
        ),
        spec: SpecOption = None,
        block: BlockOption = 8,
        accept_len: AcceptLenOption = None,
        routing_overlap: RoutingOverlapOption = 0.0,
        path: PathOption = "auto",
        threads: ThreadsOption = None,
        bandwidth: BandwidthOption = None,
    ) -> None:
        """Measure TPOT of one switch configuration: timed steps, a profiled window, a RunRecord.

        Writes record.json (schema bubblescope.run/1), trace.json.gz, analysis.json and report.html
        into --out. With --tp N it starts N ranks (torchrun-compatible), rank 0 times, every rank
        writes trace.rankN.json.gz, and record.json lists them under "tp". On CPU it runs the
        tiny debug preset and counts device readbacks per step from
        the trace (each would block the host on a GPU); GPU bubbles are not measured there, and
        torch uses one intra-op thread (--threads) so TPOT is stable.
        Progress (repeats, steps, the profiled window) and notes go to stderr.
        """
        from bubblescope.capture.floor import resolve_floor_bandwidth
        from bubblescope.capture.measure import RunSettings

        if output_format not in FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(FORMATS)}")
        toggle = merged_toggles(toggles, toggle_alias)
        settings = RunSettings(
            steps=steps, warmup=warmup, repeats=repeats, profile_steps=profile_steps, read_sites=read_sites
        )
        if out is not None:
            check_out_folder(out, holds="record.json", force=force)
        floor_bandwidth = resolve_floor_bandwidth(bandwidth) if bandwidth is not None else None
        if tp != 1:
            from bubblescope.capture.launch_tp import run_tp_from_cli

            if threads is not None or bandwidth is not None:
                raise ConfigError(
                    "--threads and --bandwidth apply to a single-process run; with --tp each CPU rank "
                    "uses cpu_count/N threads and the floor the measured (or assumed H200) bandwidth"
                )

            options = {
                "workload": workload,
                "preset": preset,
                "toggle": toggle,
                "all_on": all_on,
                "spec": spec,
                "block": block,
                "accept_len": accept_len,
                "routing_overlap": routing_overlap,
                "path": path,
            }
            result = run_tp_from_cli(tp, **options, settings=settings, seed=seed, out=out)
            if result is None:
                return
            record, notices, out_dir = result
            _print_result(record, out_dir, notices, output_format)
            return
        record, notices, out_dir = _run_one_process(
            workload,
            preset,
            toggle,
            all_on,
            reference_options(spec, block, accept_len, path, routing_overlap),
            settings=settings,
            seed=seed,
            out=out,
            threads=threads,
            bandwidth=floor_bandwidth,
        )
        _print_result(record, out_dir, notices, output_format)


def _run_one_process(
    workload_spec: str | None,
    preset: str | None,
    toggle: str | None,
    all_on: bool,
    reference: Any,
    *,
    settings: Any,
    seed: int,
    out: Path | None,
    threads: int | None,
    bandwidth: tuple[float, str] | None,
) -> tuple[dict[str, Any], list[str], Path]:
    """Build, measure under a progress display (stderr), write record and report; (record, notices, dir)."""
    from bubblescope.capture.floor import resolve_floor_bandwidth
    from bubblescope.capture.measure import measure_config
    from bubblescope.capture.setup import build_workload
    from bubblescope.capture.threads import apply_cpu_threads
    from bubblescope.cli.saved import note_saved
    from bubblescope.report.console import make_console
    from bubblescope.report.escape import console_text
    from bubblescope.report.run_console import run_progress

    errors = make_console(stderr=True)
    built = build_workload(
        workload_spec,
        preset,
        seed=seed,
        max_steps=settings.warmup + settings.steps,
        reference=reference,
    )
    enabled, notices = resolve_toggles(toggle, all_on, built.workload)
    if built.notice:
        errors.print(console_text(built.notice))
    threads_line = apply_cpu_threads(built.workload, threads)
    if threads_line:
        errors.print(console_text(threads_line))
    out_dir = out or default_out_dir("runs", built.preset, enabled)
    workload_info = {
        "name": getattr(built.workload, "name", "workload"),
        "factory": built.factory,
        "preset": built.preset,
    }
    from bubblescope.files.out_lock import out_lock

    note_saved(f"no run recorded in {out_dir}")
    with out_lock(out_dir, "run"), run_progress(errors, settings) as progress:
        record, run_notices = measure_config(
            built.workload,
            enabled,
            settings=settings,
            record_path=out_dir / "record.json",
            workload_info=workload_info,
            bandwidth=bandwidth or resolve_floor_bandwidth(),
            on_repeat=progress.repeat_done,
            on_phase=progress.phase,
        )
        note_saved(f"the run is recorded in {out_dir / 'record.json'} (report.html not written yet)")
        progress.phase("writing report.html")
        from bubblescope.report.run_page import write_run_report

        record, notice = write_run_report(out_dir / "record.json")
    note_saved(f"the run is recorded in {out_dir}")
    return record, notices + run_notices + ([notice] if notice else []), out_dir


def record_json(record: dict[str, Any]) -> dict[str, Any]:
    """What `run --format json` prints: the RunRecord plus the fix-first list the console shows.

    `findings[]` and `idle_bound` come from the same builder as `analyze --format json`
    (`report.findings.with_findings`), with the record's timed step as the bound, so the idle findings
    together never promise more than the timed idle. The record on disk stays as saved.
    """
    from bubblescope.report.findings import with_findings
    from bubblescope.report.run_rows import findings_analysis, tokens_per_step

    bounded = with_findings(findings_analysis(record, None), tokens_per_step(record))
    return {**record, "findings": bounded["findings"], "idle_bound": bounded["idle_bound"]}


def _print_result(record: dict[str, Any], out_dir: Path, notices: list[str], output_format: str) -> None:
    """The RunRecord as JSON, or the summary: the same content on a terminal and in a pipe (80 columns
    unless $COLUMNS says otherwise); notes on stderr."""
    from bubblescope.report.console import make_console
    from bubblescope.report.run_console import print_run_summary

    if output_format == "json":
        typer.echo(json.dumps(record_json(record), indent=1, allow_nan=False))
        return
    print_run_summary(make_console(), record, str(out_dir), notices, notes=make_console(stderr=True))
