"""`bubblescope run`: measure one switch configuration and write a RunRecord, trace and report."""

from __future__ import annotations

import datetime as _dt
import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from bubblescope.cli.reference_options import (
    AcceptLenOption,
    BlockOption,
    PathOption,
    RoutingOverlapOption,
    SpecOption,
    reference_options,
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


def _print_plain(record: dict[str, Any], out_dir: Path, notices: list[str]) -> None:
    from bubblescope.report.cells import fmt_ms_estimate, plural, tpot_noise_note
    from bubblescope.report.escape import plain_console_text
    from bubblescope.report.markdown import tpot_interval_ms
    from bubblescope.stats import INTERVAL_LABEL

    summary = record["summary"]
    lo, hi = tpot_interval_ms(summary)
    tpot_text, range_text = fmt_ms_estimate(summary["tpot_ms"], lo, hi)
    typer.echo(
        f"TPOT {tpot_text} ({INTERVAL_LABEL} {range_text}){tpot_noise_note(summary['tpot_ms'], lo, hi)}, "
        f"{plural(summary['tokens'], 'token')}"
    )
    analysis = record.get("analysis")
    if analysis:
        typer.echo(f"blocking reads per step: {analysis['blocking_reads_per_step']:.2f}")
    for notice in notices:
        typer.echo(f"note: {plain_console_text(notice)}")
    typer.echo(f"written to {plain_console_text(out_dir)}")


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        workload: str = typer.Option(
            None, "--workload", help="package.module:factory (default: the reference Ling-3.0 workload)."
        ),
        preset: str = typer.Option(
            None, "--preset", help="Preset; default: the largest this machine holds (debug on CPU)."
        ),
        toggle: str = typer.Option(None, "--toggle", help="Switches to turn on, comma-separated."),
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
            typer.Option("--out", help="Output folder (default reports/runs/UTC_TIME-PRESET-SWITCHES/)."),
        ] = None,
        output_format: Annotated[
            RunFormat, typer.Option("--format", help="table, or json (prints the RunRecord).")
        ] = RunFormat.table,
        tp: int = typer.Option(
            1, "--tp", help="Tensor-parallel ranks of the reference model (one GPU each; gloo on CPU)."
        ),
        spec: SpecOption = None,
        block: BlockOption = 8,
        accept_len: AcceptLenOption = None,
        routing_overlap: RoutingOverlapOption = 0.0,
        path: PathOption = "auto",
    ) -> None:
        """Measure TPOT of one switch configuration: timed steps, a profiled window, a RunRecord.

        Writes record.json (schema bubblescope.run/1), trace.json.gz, analysis.json and report.html
        into --out. With --tp N it starts N ranks (torchrun-compatible), rank 0 times, every rank
        writes trace.rankN.json.gz, and record.json lists them under "tp". On CPU it runs the
        tiny debug preset and counts device readbacks per step from
        the trace (each would block the host on a GPU); GPU bubbles are not measured there.
        """
        from rich.console import Console

        from bubblescope.capture.floor import resolve_floor_bandwidth
        from bubblescope.capture.measure import RunSettings, measure_config
        from bubblescope.capture.setup import build_workload
        from bubblescope.report.run_console import print_run_summary

        if output_format not in FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(FORMATS)}")
        settings = RunSettings(
            steps=steps, warmup=warmup, repeats=repeats, profile_steps=profile_steps, read_sites=read_sites
        )
        if tp != 1:
            from bubblescope.capture.launch_tp import run_tp_from_cli

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
            if output_format == "json":
                typer.echo(json.dumps(record, indent=1))
            elif Console().is_terminal:
                print_run_summary(Console(), record, str(out_dir), notices)
            else:
                _print_plain(record, out_dir, notices)
            return
        built = build_workload(
            workload,
            preset,
            seed=seed,
            max_steps=warmup + steps,
            reference=reference_options(spec, block, accept_len, path, routing_overlap),
        )
        from bubblescope.capture.setup import resolve_toggles

        enabled, notices = resolve_toggles(toggle, all_on, built.workload)
        if built.notice:
            typer.echo(built.notice, err=True)
        out_dir = out or default_out_dir("runs", built.preset, enabled)
        workload_info = {
            "name": getattr(built.workload, "name", "workload"),
            "factory": built.factory,
            "preset": built.preset,
        }
        from bubblescope.out_lock import out_lock
        from bubblescope.report.run_page import write_run_report

        with out_lock(out_dir, "run"):
            record, run_notices = measure_config(
                built.workload,
                enabled,
                settings=settings,
                record_path=out_dir / "record.json",
                workload_info=workload_info,
                bandwidth=resolve_floor_bandwidth(),
            )
            record, notice = write_run_report(out_dir / "record.json")
        notices += run_notices + ([notice] if notice else [])
        if output_format == "json":
            typer.echo(json.dumps(record, indent=1))
            return
        console = Console()
        if console.is_terminal:
            print_run_summary(console, record, str(out_dir), notices)
        else:
            _print_plain(record, out_dir, notices)
