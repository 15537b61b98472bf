"""`bubblescope presets` (placeholder until the reference model lands)."""

from __future__ import annotations

import typer

from bubblescope.errors import BubblescopeError


def register(app: typer.Typer) -> None:
    @app.command("presets", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def presets() -> None:
        """Not implemented yet."""
        raise BubblescopeError("'presets' is not implemented yet")
