"""Which switches an ablation studies: `--toggles a,b` as given, or `--all` in the workload's order."""

from __future__ import annotations

from typing import Any


def split_names(text: str | None) -> list[str]:
    """`"a, b,,c"` → ["a", "b", "c"] (empty parts dropped)."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def study_toggles(toggles: str | None, all_on: bool, workload: Any) -> tuple[list[str], list[str]]:
    """The switches under study and notices (GPU-only switches left out of --all on CPU).

    Raises:
        ConfigError: unknown switch, a GPU-only switch on CPU, or --toggles with --all.
    """
    from bubblescope.capture.setup import resolve_toggles

    enabled, notices = resolve_toggles(toggles, all_on, workload)
    if all_on:
        return [info.name for info in workload.switches() if info.name in enabled], notices
    return [name for name in split_names(toggles) if name in enabled], notices
