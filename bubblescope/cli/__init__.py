"""The `bubblescope` command line: one typer command per file, assembled here.

Each command parses, calls into the library, renders and exits; no analysis lives in cli/.
"""

from __future__ import annotations

import sys

import typer

from bubblescope.errors import BubblescopeError

app = typer.Typer(
    name="bubblescope",
    help=(
        "Latency profiler for batch-size-1 LLM decoding. Finds host-blocking device reads and the GPU "
        "idle gaps they cause, and attributes TPOT savings to named optimization switches."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    # Imported here so that `import bubblescope.cli` stays cheap and torch-free.
    from bubblescope.cli import ablate, analyze, floor, gate, presets, report, run

    for module in (run, ablate, analyze, report, gate, floor, presets):
        module.register(app)


_register()


def main() -> None:
    """Entry point: BubblescopeError becomes one line on stderr and exit code 2, never a traceback."""
    try:
        app(standalone_mode=False)
    except BubblescopeError as exc:
        typer.echo(f"bubblescope: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("bubblescope: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        typer.echo("bubblescope: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # click usage errors arrive here in standalone_mode=False
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
