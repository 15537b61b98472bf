"""The toy workload's planted reads, located in its source text (never taken from the tool's output)."""

from __future__ import annotations

from pathlib import Path

import bubblescope.examples.toy_workload as toy_module


def line_of(statement: str) -> int:
    """1-based line of a statement in the toy's source (one planted read)."""
    lines = Path(toy_module.__file__).read_text().splitlines()
    found = [i + 1 for i, text in enumerate(lines) if text.strip() == statement]
    assert len(found) == 1, statement
    return found[0]


PLANTED = line_of("_ = float(hidden_state.norm().item())")
TOKEN_READ = line_of("token_id = int(next_token.item())")
EXPECTED = {f"toy_workload.py({PLANTED}): step", f"toy_workload.py({TOKEN_READ}): step"}
