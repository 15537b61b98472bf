"""`bubblescope gate` (not implemented yet)."""

from __future__ import annotations

import typer

from bubblescope.errors import BubblescopeError


def register(app: typer.Typer) -> None:
    @app.command("gate", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def gate() -> None:
        """Not implemented yet."""
        raise BubblescopeError("'gate' is not implemented yet")
