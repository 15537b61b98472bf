"""`bubblescope ablate` (not implemented yet)."""

from __future__ import annotations

import typer

from bubblescope.errors import BubblescopeError


def register(app: typer.Typer) -> None:
    @app.command("ablate", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def ablate() -> None:
        """Not implemented yet."""
        raise BubblescopeError("'ablate' is not implemented yet")
