"""What the running command has written so far: the line Ctrl-C prints names it.

Commands call `note_saved` as their results reach the disk (`run` after its record, `ablate` after each
configuration); `bubblescope.cli.main` prints `interrupted_line()` on KeyboardInterrupt and exits 130.
"""

from __future__ import annotations

NOTHING_SAVED = "nothing was written"
_saved: list[str] = []


def note_saved(text: str | None) -> None:
    """Say what is on disk now (replaces the previous note); None: nothing."""
    _saved[:] = [text] if text else []


def interrupted_line() -> str:
    """`bubblescope: interrupted; <what is saved>` (one line, for stderr)."""
    return f"bubblescope: interrupted; {_saved[0] if _saved else NOTHING_SAVED}"
