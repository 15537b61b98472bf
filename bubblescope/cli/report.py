"""`bubblescope report`: one self-contained HTML page (or Markdown) from runs, ablations and traces."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from bubblescope.cli.trace_cap import (
    DEFAULT_MAX_DECOMPRESSED_MB,
    DEFAULT_MAX_SAMPLES,
    DEFAULT_MAX_TRACE_FILES,
    MAX_DECOMPRESSED_HELP,
    MAX_FILES_HELP,
    MAX_SAMPLES_HELP,
    input_caps,
    trace_cap_mb,
)
from bubblescope.errors import BubblescopeError

DEFAULT_HTML_NAME = "report.html"
REPORT_HELP = "\n\n".join(
    [
        "Render a report: TPOT waterfall, per-switch ΔTPOT with intervals and what each switch removed, a "
        "one-step timeline (host lane, GPU lanes, gaps shaded by cause, blocking reads marked), the "
        "blocking-read table with source lines and fix hints, the speed-of-light bar and the environment.",
        "The HTML file inlines plotly.js, so it opens offline and works as a CI artifact. From a bare trace "
        "it shows the analysis alone (timeline, blocking reads, gaps). Exit code 2 on bad input.",
        "Examples: `bubblescope report runs/ablation -o ablation.html` · "
        "`bubblescope report trace.json.gz --format markdown >> $GITHUB_STEP_SUMMARY`",
    ]
)


# typer ships its own copy of click; its ClickException (what typer's runner turns into a message and an
# exit code) is reachable only through the public exceptions derived from it.
_TyperClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class ReportCommandError(_TyperClickException, BubblescopeError):  # type: ignore[misc, valid-type]
    """A bad `report` input, ending the command with one line and exit code 2 on every path.

    `bubblescope.cli.main` catches it as a BubblescopeError (one line, exit 2); typer's standalone mode
    (CliRunner, `python -m`) shows it as a click error with the same exit code.
    """

    exit_code = 2


class ReportFormat(str, Enum):
    html = "html"
    markdown = "markdown"


def _format_for(output: Path | None) -> ReportFormat:
    """`-o notes.md` without --format writes Markdown (an HTML page in a .md file renders as raw text)."""
    markdown = output is not None and output.suffix.lower() in (".md", ".markdown")
    return ReportFormat.markdown if markdown else ReportFormat.html


def write_report(
    paths: list[Path],
    output: Path | None,
    report_format: ReportFormat,
    step_marker: str | None = None,
    floor_inputs: tuple[float | None, float | None] = (None, None),
    views: tuple[int | None, float | None] = (None, None),
) -> tuple[str, Path | None]:
    """Load the inputs, render them, and write the result atomically when there is a destination.

    Args:
        paths: the command's arguments; output: destination (None: report.html, or stdout for Markdown);
        step_marker: regex for bare traces' step annotations (see `analyze_traces`).
        floor_inputs: (--bytes-per-token, --bandwidth) for bare traces' floor (floor/trace_floor.py).
        views: (--top, --min-gap in µs) applied to every analysis shown (report/views.limit_views).

    Returns:
        (rendered text, path written or None when Markdown goes to stdout).
    Raises:
        BubblescopeError: bad input (one line naming the path).
    """
    from bubblescope.cli.outputs import check_out_file
    from bubblescope.files.atomic import write_text_atomic
    from bubblescope.report.load_inputs import AblationInput, RunInput, TraceInput, load_inputs
    from bubblescope.report.views import limit_views

    if output is not None:
        check_out_file(output)
    inputs = load_inputs(list(paths), step_marker=step_marker)
    apply_floor_inputs(inputs, *floor_inputs)
    for item in inputs:
        if isinstance(item, TraceInput):
            item.analysis = limit_views(item.analysis, *views)
        elif isinstance(item, RunInput) and item.analysis:
            item.analysis = limit_views(item.analysis, *views)
        elif isinstance(item, AblationInput):
            item.analyses = {key: limit_views(value, *views) for key, value in item.analyses.items()}
    if report_format is ReportFormat.markdown:
        from bubblescope.report.markdown import render_inputs_markdown

        text = render_inputs_markdown(inputs)
    else:
        try:
            from bubblescope.report.html import render_inputs_html
        except ImportError as exc:
            raise BubblescopeError(
                f"the HTML report needs plotly ({exc}); install it, or use --format markdown"
            ) from None
        text = render_inputs_html(inputs)
        output = output or Path(DEFAULT_HTML_NAME)
    if output is None:
        return text, None
    check_out_file(output)
    try:
        return text, write_text_atomic(output, text)
    except OSError as exc:
        raise BubblescopeError(f"{output}: cannot write ({exc.strerror or exc})") from None


def apply_floor_inputs(inputs: list, bytes_per_token: float | None, bandwidth_gbps: float | None) -> None:
    """--bytes-per-token / --bandwidth: a bare trace's floor (floor/trace_floor.py), and a recorded run's
    floor at the given bandwidth (its own bytes per token unless --bytes-per-token is given).

    Raises:
        BubblescopeError: the options were given but no input can use them.
    """
    from bubblescope.floor.trace_floor import trace_floor
    from bubblescope.report.load_inputs import AblationInput, RunInput, TraceInput

    used = False
    for item in inputs:
        if isinstance(item, TraceInput):
            item.analysis["floor"] = trace_floor(item.analysis, bytes_per_token, bandwidth_gbps)
            used = True
        elif bandwidth_gbps is not None:
            records = [item.record] if isinstance(item, RunInput) else []
            if isinstance(item, AblationInput):
                records = list(item.records.values())
            used = any([_refloor(record, bandwidth_gbps, bytes_per_token) for record in records]) or used
    if (bandwidth_gbps is not None or bytes_per_token is not None) and not used:
        raise BubblescopeError(
            "--bandwidth / --bytes-per-token: no input can use them (a run needs --bandwidth and its "
            "recorded bytes per token; a bare trace needs both)"
        )


def _refloor(record: dict, bandwidth_gbps: float, bytes_per_token: float | None) -> bool:
    """Recompute a RunRecord's floor block at `bandwidth_gbps` (source "given"); False without bytes."""
    from bubblescope.floor.bandwidth import GIVEN_SOURCE, resolve_bandwidth

    gbps = resolve_bandwidth(bandwidth_gbps).gbps
    floor = record.get("floor") or {}
    bytes_read = bytes_per_token if bytes_per_token is not None else floor.get("bytes_per_token")
    tpot_ms = (record.get("summary") or {}).get("tpot_ms")
    if not isinstance(bytes_read, (int, float)) or bytes_read <= 0:
        return False
    floor_ms = bytes_read / (gbps * 1e9) * 1e3
    record["floor"] = {
        "bytes_per_token": bytes_read,
        "bandwidth_gbps": gbps,
        "bandwidth_source": GIVEN_SOURCE,
        "floor_ms": floor_ms,
        "tpot_over_floor": tpot_ms / floor_ms if isinstance(tpot_ms, (int, float)) else None,
    }
    return True


def register(app: typer.Typer) -> None:
    @app.command("report", help=REPORT_HELP)
    def report(
        paths: Annotated[
            list[Path] | None,
            typer.Argument(
                metavar="RUN_OR_ABLATION_DIR_OR_TRACE...",
                help="Run folders or RunRecord JSON files, ablation folders, analysis JSON, or profiler "
                "traces (.json / .json.gz; several traces are read as the ranks of one run).",
                show_default=False,
            ),
        ] = None,
        output: Annotated[
            Path | None,
            typer.Option(
                "-o",
                "--out",
                metavar="FILE",
                help="File to write (default: report.html for HTML, stdout for Markdown); its folder "
                "must exist.",
            ),
        ] = None,
        output_alias: Annotated[Path | None, typer.Option("--output", hidden=True)] = None,
        report_format: Annotated[
            ReportFormat | None,
            typer.Option(
                "--format",
                help="html: one self-contained page; markdown: for CI summaries. Default: markdown when "
                "-o names a .md file, else html.",
            ),
        ] = None,
        step_marker: Annotated[
            str | None,
            typer.Option(
                "--step-marker",
                metavar="REGEX",
                help="For bare traces without bubblescope.step or ProfilerStep#N: the regex naming one "
                "step's annotation (e.g. 'decode_step_.*'); it must match the whole name (a full match).",
            ),
        ] = None,
        bytes_per_token: Annotated[
            float | None,
            typer.Option(
                "--bytes-per-token",
                metavar="BYTES",
                help="Bytes one token reads: a bare trace's floor (with --bandwidth); for runs, instead "
                "of the recorded bytes.",
            ),
        ] = None,
        bandwidth: Annotated[
            float | None,
            typer.Option(
                "--bandwidth",
                metavar="GB/S",
                help="HBM GB/s of the GPU that ran the inputs: the floor of bare traces (with "
                "--bytes-per-token) and of runs (their recorded bytes per token).",
            ),
        ] = None,
        max_decompressed_mb: Annotated[
            int, typer.Option("--max-decompressed-mb", help=MAX_DECOMPRESSED_HELP)
        ] = DEFAULT_MAX_DECOMPRESSED_MB,
        max_files: Annotated[int, typer.Option("--max-files", help=MAX_FILES_HELP)] = DEFAULT_MAX_TRACE_FILES,
        max_samples: Annotated[
            int, typer.Option("--max-samples", help=MAX_SAMPLES_HELP)
        ] = DEFAULT_MAX_SAMPLES,
        top: Annotated[
            int | None,
            typer.Option(
                "--top", metavar="N", min=1, help="Rows per table: kernels, host ops, read sites, gaps."
            ),
        ] = None,
        min_gap_us: Annotated[
            float | None,
            typer.Option(
                "--min-gap", metavar="US", min=0, help="List only idle gaps at least this long (µs)."
            ),
        ] = None,
    ) -> None:
        if output is not None and output_alias is not None:
            raise ReportCommandError("give -o/--out once (--output is its old spelling)")
        output = output if output is not None else output_alias
        try:
            with trace_cap_mb(max_decompressed_mb), input_caps(max_files, max_samples):
                text, written = write_report(
                    paths or [],
                    output,
                    report_format or _format_for(output),
                    step_marker,
                    (bytes_per_token, bandwidth),
                    (top, min_gap_us),
                )
        except BubblescopeError as exc:
            raise ReportCommandError(str(exc)) from None
        if written is None:
            typer.echo(text, nl=False)
        else:
            from bubblescope.report.escape import plain_console_text

            typer.echo(f"wrote {plain_console_text(written)}")
