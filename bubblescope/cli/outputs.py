"""Where a command may write, checked before any work: outputs never destroy, never surprise.

* an output folder (`run -o`, `ablate -o`) that is a file is refused before minutes of measuring;
* `run -o` onto a folder that already holds a run is refused unless `--force` (`ablate -o` resumes);
* an output file (`report -o`, `diff -o`, `analyze -o/--annotate`) whose folder does not exist is
  refused with the reason instead of creating folders silently.
"""

from __future__ import annotations

from pathlib import Path

import typer

from bubblescope.errors import BubblescopeError

# typer ships its own copy of click; its ClickException (what typer's runner turns into a message and an
# exit code) is reachable only through the public exceptions derived from it.
_TyperClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class OutputError(_TyperClickException, BubblescopeError):  # type: ignore[misc, valid-type]
    """An output path the command must not write, ending it with one line and exit code 2 on every path
    (`bubblescope.cli.main` catches a BubblescopeError; typer's standalone mode a ClickException)."""

    exit_code = 2


def check_out_folder(
    out: Path, *, option: str = "--out", holds: str | None = None, force: bool = False
) -> None:
    """Refuse an output folder that is a file, or (`holds` given) one that already holds that file.

    Args:
        out: the folder; option: the option's name for the message.
        holds: a file name (e.g. "record.json") whose presence means the folder holds a result.
        force: allow overwriting that result.
    Raises:
        OutputError: `out` is a file, or holds `holds` without `force`.
    """
    if out.exists() and not out.is_dir():
        raise OutputError(f"{option} {out}: is a file, not a folder; give a folder")
    if holds and not force and (out / holds).exists():
        raise OutputError(
            f"{option} {out}: already holds a result ({holds}); give a new folder, or --force to overwrite it"
        )


def check_out_file(path: Path, *, option: str = "-o") -> None:
    """Refuse an output file that is a folder or whose folder does not exist.

    Raises:
        OutputError: naming the path and the reason.
    """
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a folder; give a file name")
    parent = path.parent
    if not parent.is_dir():
        reason = "is a file" if parent.exists() else "does not exist"
        raise OutputError(f"{option} {path}: its folder {parent} {reason}; create the folder first")
