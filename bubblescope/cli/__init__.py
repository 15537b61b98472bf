"""The `bubblescope` command line: one typer command per file, assembled here.

Each command parses, calls into the library, renders and exits; no analysis lives in cli/.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from bubblescope.errors import BubblescopeError


class Interrupted(Exception):
    """Ctrl-C inside a command (typer would turn KeyboardInterrupt into a silent exit 130)."""


class ReaderGone(Exception):
    """The reader of stdout closed the pipe (typer would exit 1 on EPIPE: the gate's regression code)."""


class _Group(TyperGroup):
    """The command group: Ctrl-C and a closed pipe leave every command as exceptions `main` handles."""

    def invoke(self, ctx: Any) -> Any:
        from bubblescope.cli.saved import note_saved

        # A new command has saved nothing yet (the app may run several commands in one process).
        note_saved(None)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Interrupted() from exc
        except BrokenPipeError as exc:
            raise ReaderGone() from exc


def package_version() -> str:
    """The installed distribution's version (the package's own when it is run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bubblescope")
    except PackageNotFoundError:
        from bubblescope import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"bubblescope {package_version()}")
        raise typer.Exit()


app = typer.Typer(
    cls=_Group,
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
    # -h on every command (click's contexts inherit the group's help option names).
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Latency profiler for batch-size-1 LLM decoding. Finds host-blocking device reads and the GPU idle
    gaps they cause, and attributes TPOT savings to named optimization switches."""


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
        # Only modules already loaded: an exception of a click nobody imported cannot be raised, and
        # importing click here cost every command ~20 ms of start-up.
        module = sys.modules.get(module_name)
        if module is not None:
            types.append(module.ClickException)
    return tuple(types)


# Set (to anything but 0) to see the traceback of an unexpected exception instead of one line; pytest
# sets PYTEST_CURRENT_TEST, so a bug under test fails loudly with its traceback.
DEBUG_ENV = "BUBBLESCOPE_DEBUG"
# Local variables that name the file a function is working on, looked up in the failing frames.
_PATH_LOCALS = ("path", "trace_path", "record_path", "file", "target", "ablation_path", "manifest_path")


def one_line(text: object) -> str:
    """`text` on one line with control characters shown as escapes (a file name may hold ESC or \\n)."""
    raw = str(text)
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in raw)


def _file_in_traceback(tb: TracebackType | None) -> str | None:
    """The innermost file a bubblescope frame was working on when it raised (its `path`-like local)."""
    found = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__", "").startswith("bubblescope"):
            for name in _PATH_LOCALS:
                value = frame.f_locals.get(name)
                if isinstance(value, (str, Path)) and value:
                    found = str(value)
                    break
        tb = tb.tb_next
    return found


def _file_in_argv(argv: list[str]) -> str | None:
    """The command's arguments that name existing files or folders, comma-separated."""
    named = []
    for arg in argv[1:]:
        try:
            if not arg.startswith("-") and os.path.exists(arg):
                named.append(arg)
        except (OSError, ValueError):
            continue
    return ", ".join(named) or None


def internal_error_line(exc: BaseException, argv: list[str]) -> str:
    """One line for an exception bubblescope did not expect: what, on which file, and where to report."""
    where = _file_in_traceback(exc.__traceback__) or _file_in_argv(argv)
    detail = one_line(exc)
    detail = detail if len(detail) <= 200 else detail[:197] + "..."
    on_file = f" while processing {one_line(where)}" if where else ""
    return (
        f"bubblescope: internal error{on_file}: {type(exc).__name__}: {detail} "
        f"(a bug in bubblescope: please report it with this line and the input; "
        f"{DEBUG_ENV}=1 shows the traceback)"
    )


def usage_error_line(exc: BaseException) -> str:
    """A click usage error (unknown option, bad value) as one line, with where to find help."""
    format_message = getattr(exc, "format_message", None)
    message = one_line(format_message() if callable(format_message) else exc)
    context = getattr(exc, "ctx", None)
    command = getattr(context, "command_path", None)
    hint = f" (see '{one_line(command)} --help')" if command else ""
    return f"bubblescope: error: {message}{hint}"


def _reraise_unexpected() -> bool:
    """Under pytest or with BUBBLESCOPE_DEBUG set, unexpected exceptions propagate with their traceback."""
    debug = os.environ.get(DEBUG_ENV, "")
    return (bool(debug) and debug != "0") or "PYTEST_CURRENT_TEST" in os.environ


def main() -> None:
    """Entry point: BubblescopeError becomes one line on stderr and exit code 2, never a traceback; so
    does any unexpected exception (a bug), with the file it was processing and a request to report it."""
    try:
        result = app(standalone_mode=False)
    except BubblescopeError as exc:
        typer.echo(f"bubblescope: error: {one_line(exc)}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("bubblescope: aborted", err=True)
        sys.exit(130)
    except (Interrupted, KeyboardInterrupt):
        from bubblescope.cli.saved import interrupted_line

        typer.echo(interrupted_line(), err=True)
        sys.exit(130)
    except (ReaderGone, BrokenPipeError):
        # `bubblescope analyze ... | head`: the reader left; not a bug. Point stdout at /dev/null so the
        # interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    # Evaluated when an exception gets here, so a click imported during the command counts too.
    except _click_exception_types() as exc:
        # Usage errors (unknown option, bad value): click's message on one line, exit 2. click's own
        # show() prints four (usage, hint, blank, error).
        typer.echo(usage_error_line(exc), err=True)
        sys.exit(getattr(exc, "exit_code", 2))
    except (SystemExit, GeneratorExit):
        raise
    except Exception as exc:  # noqa: BLE001 - the last line of defence against a traceback
        if _reraise_unexpected():
            raise
        typer.echo(internal_error_line(exc, sys.argv), err=True)
        sys.exit(2)
    # In standalone_mode=False a command's `raise typer.Exit(n)` comes back as the return value.
    sys.exit(result if isinstance(result, int) else 0)
