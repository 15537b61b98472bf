"""`bubblescope analyze`: host-blocking reads and classified GPU idle gaps of torch.profiler traces."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from bubblescope.cli.trace_cap import (
    DEFAULT_MAX_DECOMPRESSED_MB,
    DEFAULT_MAX_TRACE_FILES,
    MAX_DECOMPRESSED_HELP,
    MAX_FILES_HELP,
    trace_files_cap,
)
from bubblescope.errors import ConfigError

FORMATS = ("table", "json", "markdown", "csv")


class Executor(str, Enum):
    """The values `--executor` accepts."""

    local = "local"
    dask = "dask"


class AnalyzeFormat(str, Enum):
    """The values `--format` accepts (shown as choices in --help)."""

    table = "table"
    json = "json"
    markdown = "markdown"
    csv = "csv"


FORMAT_HELP = (
    "table (rich summary), json (bubblescope.analysis/1), markdown, or csv (one table, named by --table, "
    "raw values: ns, fractions, full names)."
)
TOP_HELP = "Rows per table: kernels, host ops, blocking-read sites and gaps (all formats; JSON too)."
MIN_GAP_HELP = "List only idle gaps at least this long (µs); per-class idle totals still count every gap."
TABLE_HELP = (
    "With --format csv, the table to print: steps, kernels, kernel-categories, host-ops, reads, gaps or "
    "devices."
)
TRACES_HELP = "Trace files (.json/.json.gz) or folders of them; one file per rank."
STEP_MARKER_HELP = (
    "Regex naming step annotations when there is no bubblescope.step / ProfilerStep#N, e.g. "
    "'decode_step_.*'. It must match the whole name (a full match: 'decode' does not match 'decode_1')."
)
BYTES_HELP = (
    "Bytes one decoded token reads from HBM (your model's weights + KV); with --bandwidth gives a floor."
)
BANDWIDTH_HELP = (
    "HBM bandwidth (GB/s) of the GPU that recorded the trace; with --bytes-per-token gives a floor."
)
ANNOTATE_HELP = (
    "Also write the trace with bubblescope's findings on their own tracks (OUT.json.gz; "
    "opens in ui.perfetto.dev). Several ranks: OUT.rankN.json.gz."
)
JOBS_HELP = "Worker processes for a folder of ranks (default: every core; 1 = one after another)."
EXECUTOR_HELP = (
    "local (a process pool on this machine) or dask (a Dask cluster: pip install 'bubblescope[dask]'). "
    "Each worker analyses whole ranks; the cross-rank summary is reduced here."
)
SCHEDULER_HELP = (
    "Address of a running Dask scheduler (tcp://HOST:8786) for --executor dask; without it a local "
    "Dask cluster of --jobs workers is started. Workers must see the trace paths."
)
TIMELINE_HELP = (
    "Put the drawing timeline (one step's slices, gaps and syncs; most of the JSON's bytes) into "
    "--format json, for `bubblescope report`."
)


def register(app: typer.Typer) -> None:
    @app.command("analyze")
    def analyze(
        traces: Annotated[list[Path], typer.Argument(help=TRACES_HELP)],
        step_marker: Annotated[str | None, typer.Option("--step-marker", help=STEP_MARKER_HELP)] = None,
        output_format: Annotated[
            AnalyzeFormat, typer.Option("--format", help=FORMAT_HELP)
        ] = AnalyzeFormat.table,
        annotate: Annotated[Path | None, typer.Option("--annotate", help=ANNOTATE_HELP)] = None,
        bytes_per_token: Annotated[
            float | None, typer.Option("--bytes-per-token", metavar="BYTES", help=BYTES_HELP)
        ] = None,
        bandwidth: Annotated[
            float | None, typer.Option("--bandwidth", metavar="GB/S", help=BANDWIDTH_HELP)
        ] = None,
        max_decompressed_mb: Annotated[
            int, typer.Option("--max-decompressed-mb", help=MAX_DECOMPRESSED_HELP)
        ] = DEFAULT_MAX_DECOMPRESSED_MB,
        max_files: Annotated[int, typer.Option("--max-files", help=MAX_FILES_HELP)] = DEFAULT_MAX_TRACE_FILES,
        jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, help=JOBS_HELP)] = None,
        executor: Annotated[Executor, typer.Option("--executor", help=EXECUTOR_HELP)] = Executor.local,
        scheduler: Annotated[
            str | None, typer.Option("--scheduler", metavar="ADDRESS", help=SCHEDULER_HELP)
        ] = None,
        timeline: Annotated[bool, typer.Option("--timeline", help=TIMELINE_HELP)] = False,
        top: Annotated[int | None, typer.Option("--top", metavar="N", min=1, help=TOP_HELP)] = None,
        min_gap_us: Annotated[
            float | None, typer.Option("--min-gap", metavar="US", min=0, help=MIN_GAP_HELP)
        ] = None,
        table: Annotated[str | None, typer.Option("--table", metavar="NAME", help=TABLE_HELP)] = None,
    ) -> None:
        """Find every host-blocking read and GPU idle gap in torch.profiler traces, and blame each.

        For each decode step and device: blocking reads (.item(), .cpu(), nonzero, synchronize ...) with
        the Python line and ATen op that made them, the time blocked and the GPU idle time they caused;
        every GPU idle gap classed sync / host / launch / dependency / outside; and the per-stream
        idle breakdown in Holistic Trace Analysis' terms (host wait, kernel wait, other), in exact ns.
        Exit 0 on success, 2 on a bad trace or option.
        """
        from bubblescope.cli.outputs import check_out_file
        from bubblescope.floor.trace_floor import trace_floor
        from bubblescope.trace.allocator import keep_freed_memory

        # A short-lived command: freed column arrays are reused instead of faulted in afresh (~5 % CPU).
        keep_freed_memory()

        if output_format not in FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {output_format!r}")
        if max_decompressed_mb <= 0:
            raise ConfigError("--max-decompressed-mb must be positive")
        if annotate is not None:
            check_out_file(annotate, option="--annotate")
        if output_format == "csv":
            from bubblescope.report.csv_tables import ANALYSIS_TABLES, pick_table

            # Refused before any trace is read: a bad --table must not cost a minute of analysis.
            pick_table(ANALYSIS_TABLES, table, "analyze")
        elif table is not None:
            raise ConfigError("--table goes with --format csv")
        pool = {
            "step_marker": step_marker,
            "max_decompressed_bytes": max_decompressed_mb << 20,
            "jobs": jobs,
            "executor": executor.value,
            "scheduler": scheduler,
        }
        with trace_files_cap(max_files):
            draws = timeline and output_format == "json"
            if annotate is not None or draws:
                from bubblescope.analysis.traces import analysis_dict
                from bubblescope.ranks.pool import rank_analyses

                ranks = rank_analyses(traces, **pool)
                result = analysis_dict(ranks, timeline=draws)
                if annotate is not None:
                    _write_annotations(ranks, annotate, max_decompressed_mb << 20)
                del ranks
            else:
                from bubblescope.ranks.pool import rank_results
                from bubblescope.ranks.reduce import reduce_results

                result = reduce_results(rank_results(traces, **pool))
        result["floor"] = trace_floor(result, bytes_per_token, bandwidth)
        from bubblescope.report.views import limit_views

        result = limit_views(result, top, min_gap_us)
        if output_format == "csv":
            from bubblescope.report.csv_tables import analysis_csv

            typer.echo(analysis_csv(result, table), nl=False)
        elif output_format == "json":
            from bubblescope.report.findings import with_findings

            # The fix-first list and the idle bound it used, as every other surface shows them.
            typer.echo(json.dumps(with_findings(result), indent=1, allow_nan=False))
        elif output_format == "markdown":
            from bubblescope.report.analysis_markdown import render_analysis_markdown

            typer.echo(render_analysis_markdown(result, top), nl=False)
        else:
            from bubblescope.report.analysis_console import print_analysis
            from bubblescope.report.console import make_console

            print_analysis(make_console(), result, top, notes=make_console(stderr=True))


def _write_annotations(ranks: list, out: Path, max_bytes: int) -> None:
    from bubblescope.analysis.traces import gap_blamer
    from bubblescope.report.annotated_trace import annotated_paths, write_annotated_trace

    for rank, path in zip(ranks, annotated_paths(out, len(ranks)), strict=True):
        written = write_annotated_trace(rank, gap_blamer(rank), path, max_bytes)
        from bubblescope.report.escape import plain_console_text

        typer.echo(f"annotated trace: {plain_console_text(written)}", err=True)
