"""`bubblescope floor` (placeholder until the reference model lands)."""

from __future__ import annotations

import typer

from bubblescope.errors import BubblescopeError


def register(app: typer.Typer) -> None:
    @app.command("floor", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def floor() -> None:
        """Not implemented yet."""
        raise BubblescopeError("'floor' is not implemented yet")
