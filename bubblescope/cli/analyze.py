"""`bubblescope analyze` (not implemented yet)."""

from __future__ import annotations

import typer

from bubblescope.errors import BubblescopeError


def register(app: typer.Typer) -> None:
    @app.command("analyze", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def analyze() -> None:
        """Not implemented yet."""
        raise BubblescopeError("'analyze' is not implemented yet")
