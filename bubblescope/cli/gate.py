"""`bubblescope gate`: fail CI on new host-blocking reads or a TPOT regression beyond the noise."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
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
from bubblescope.errors import ConfigError

FORMATS = ("table", "markdown", "json")


class GateFormat(str, Enum):
    """The values `--format` accepts (shown as choices in --help)."""

    table = "table"
    markdown = "markdown"
    json = "json"


def register(app: typer.Typer) -> None:
    @app.command("gate")
    def gate(
        baseline: str = typer.Option(
            ..., "--baseline", help="Baseline RunRecord (record.json or its folder) or trace."
        ),
        current: str = typer.Option(..., "--current", help="Current RunRecord or trace."),
        max_regression: str = typer.Option(
            "3%",
            "--max-regression",
            help="Allowed TPOT regression: 3% or 0.03 (a bare number above 1 is refused).",
        ),
        output_format: Annotated[
            GateFormat, typer.Option("--format", help="table, markdown ($GITHUB_STEP_SUMMARY) or json.")
        ] = GateFormat.table,
        max_decompressed_mb: int = typer.Option(
            DEFAULT_MAX_DECOMPRESSED_MB, "--max-decompressed-mb", help=MAX_DECOMPRESSED_HELP
        ),
        max_files: int = typer.Option(DEFAULT_MAX_TRACE_FILES, "--max-files", help=MAX_FILES_HELP),
        max_samples: int = typer.Option(DEFAULT_MAX_SAMPLES, "--max-samples", help=MAX_SAMPLES_HELP),
    ) -> None:
        """Compare a current run with a baseline; exit 0 pass, 1 regression, 2 bad input.

        Fails when blocking reads per step increased (exact: a count, no noise, works from CPU
        traces) or when TPOT regressed beyond both --max-regression and the noise (the lower bound
        of the bootstrap 95% interval of current/baseline median exceeds 1 + threshold). With a
        trace on either side only the reads are gated.
        """
        from bubblescope.gate import run_gate

        if output_format not in FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(FORMATS)}")
        with trace_cap_mb(max_decompressed_mb), input_caps(max_files, max_samples):
            verdict = run_gate(baseline, current, max_regression)
        try:
            _print_verdict(verdict, output_format)
        except BrokenPipeError:
            # `gate ... | head -1`: the reader left; the verdict still decides the exit status.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if verdict["exit_code"]:
            # SystemExit, not typer.Exit: with standalone_mode=False click returns an Exit's code
            # from app() instead of exiting, and CI needs the process status.
            sys.exit(verdict["exit_code"])


def _print_verdict(verdict: dict, output_format: str) -> None:
    if output_format == "json":
        typer.echo(json.dumps(verdict, indent=1))
    elif output_format == "markdown":
        from bubblescope.report.gate_markdown import render_gate_markdown

        typer.echo(render_gate_markdown(verdict))
    else:
        from bubblescope.report.console import make_console
        from bubblescope.report.run_console import print_gate_table

        print_gate_table(make_console(), verdict, notes=make_console(stderr=True))
