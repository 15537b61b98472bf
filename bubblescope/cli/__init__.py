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
    # Markdown mode reflows docstring paragraphs to the terminal instead of keeping their hard line breaks.
    rich_markup_mode="markdown",
)


def _register() -> None:
    # Imported here so that `import bubblescope.cli` stays cheap and torch-free.
    from bubblescope.cli import ablate, analyze, diff, floor, gate, presets, profile, report, run

    for module in (run, ablate, analyze, report, diff, gate, floor, presets, profile):
        module.register(app)


_register()


def _click_exception_types() -> tuple[type[BaseException], ...]:
    """ClickException classes: typer >= 0.29 bundles its own click (typer._click) beside the real one."""
    types: list[type[BaseException]] = []
    for module_name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = __import__(module_name, fromlist=["ClickException"])
        except ImportError:
            continue
        types.append(module.ClickException)
    return tuple(types)


def main() -> None:
    """Entry point: BubblescopeError becomes one line on stderr and exit code 2, never a traceback."""
    click_errors = _click_exception_types()
    try:
        result = app(standalone_mode=False)
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
    except click_errors as exc:
        # Usage errors (unknown option, bad value): click's own one-line message, exit 2.
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    # In standalone_mode=False a command's `raise typer.Exit(n)` comes back as the return value.
    sys.exit(result if isinstance(result, int) else 0)
