"""`bubblescope report` (not implemented yet)."""

from __future__ import annotations

import typer

from bubblescope.errors import BubblescopeError


def register(app: typer.Typer) -> None:
    @app.command("report", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def report() -> None:
        """Not implemented yet."""
        raise BubblescopeError("'report' is not implemented yet")
