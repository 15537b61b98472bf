"""`bubblescope run` (placeholder until the reference model lands)."""

from __future__ import annotations

import typer

from bubblescope.errors import BubblescopeError


def register(app: typer.Typer) -> None:
    @app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def run() -> None:
        """Not implemented yet."""
        raise BubblescopeError("'run' is not implemented yet")
