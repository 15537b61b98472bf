"""`bubblescope diff`: what changed between two runs, ablations, analyses or traces."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from bubblescope.cli.trace_cap import (
    DEFAULT_MAX_SAMPLES,
    DEFAULT_MAX_TRACE_FILES,
    MAX_FILES_HELP,
    MAX_SAMPLES_HELP,
    input_caps,
)
from bubblescope.errors import BubblescopeError

DIFF_HELP = "\n\n".join(
    [
        "Compare two runs, ablations (their baseline configurations), analysis JSON files or traces: ΔTPOT "
        "with its 95% interval (two-level bootstrap; where both sides were timed), blocking reads added or "
        "removed by site, GPU idle per step by cause, kernels added / removed / slower (matched by name) "
        "and the median step's GPU time.",
        "Examples: `bubblescope diff runs/before runs/after` · "
        "`bubblescope diff before.json.gz after.json.gz --format markdown >> $GITHUB_STEP_SUMMARY`",
        "Exit code 0 on success, 2 on bad input.",
    ]
)


class DiffFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"
    csv = "csv"


def register(app: typer.Typer) -> None:
    @app.command("diff", help=DIFF_HELP)
    def diff(
        baseline: Annotated[
            Path, typer.Argument(metavar="BASELINE", help="Run folder, record, ablation, analysis or trace.")
        ],
        current: Annotated[Path, typer.Argument(metavar="CURRENT", help="The same kinds as BASELINE.")],
        output_format: Annotated[
            DiffFormat,
            typer.Option(
                "--format",
                help="table (console), json (bubblescope.diff/1), markdown, html, or csv (one table, "
                "named by --table: reads, kernels, idle or switches; raw values).",
            ),
        ] = DiffFormat.table,
        table: Annotated[
            str | None,
            typer.Option(
                "--table", metavar="NAME", help="With --format csv: reads, kernels, idle or switches."
            ),
        ] = None,
        output: Annotated[
            Path | None,
            typer.Option(
                "-o", "--out", metavar="FILE", help="Write here instead of stdout (its folder must exist)."
            ),
        ] = None,
        output_alias: Annotated[Path | None, typer.Option("--output", hidden=True)] = None,
        step_marker: Annotated[
            str | None,
            typer.Option(
                "--step-marker",
                metavar="REGEX",
                help="Step annotation regex for bare traces; it must match the whole name (a full match).",
            ),
        ] = None,
        max_files: Annotated[int, typer.Option("--max-files", help=MAX_FILES_HELP)] = DEFAULT_MAX_TRACE_FILES,
        max_samples: Annotated[
            int, typer.Option("--max-samples", help=MAX_SAMPLES_HELP)
        ] = DEFAULT_MAX_SAMPLES,
    ) -> None:
        from bubblescope.cli.outputs import check_out_file
        from bubblescope.cli.report import ReportCommandError
        from bubblescope.diff import run_diff
        from bubblescope.report import diff_render
        from bubblescope.report.csv_tables import DIFF_TABLES, diff_csv, pick_table

        if output is not None and output_alias is not None:
            raise ReportCommandError("give -o/--out once (--output is its old spelling)")
        output = output if output is not None else output_alias
        if output is not None:
            check_out_file(output)
        try:
            if output_format is DiffFormat.csv:
                pick_table(DIFF_TABLES, table, "diff")
            elif table is not None:
                raise BubblescopeError("--table goes with --format csv")
            with input_caps(max_files, max_samples):
                result = run_diff(baseline, current, step_marker)
        except BubblescopeError as exc:
            raise ReportCommandError(str(exc)) from None
        if output_format is DiffFormat.table and output is None:
            from bubblescope.report.console import make_console

            diff_render.print_diff(make_console(), result, notes=make_console(stderr=True))
            return
        if output_format is DiffFormat.json or output_format is DiffFormat.table:
            text = json.dumps(result, indent=1, allow_nan=False) + "\n"
        elif output_format is DiffFormat.markdown:
            text = diff_render.render_diff_markdown(result)
        elif output_format is DiffFormat.csv:
            text = diff_csv(result, table)
        else:
            text = diff_render.render_diff_html(result)
        if output is None:
            typer.echo(text, nl=False)
            return
        from bubblescope.files.atomic import write_text_atomic

        try:
            written = write_text_atomic(output, text)
        except OSError as exc:
            raise BubblescopeError(f"{output}: cannot write ({exc.strerror or exc})") from None
        from bubblescope.report.escape import plain_console_text

        typer.echo(f"wrote {plain_console_text(written)}")
