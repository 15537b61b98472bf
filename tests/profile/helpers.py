"""Expected read lines come from the toy scripts' `# READ-...` comments, never from the tool's output."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def line_of(script: str | Path, tag: str) -> int:
    """1-based line of the single line in `script` ending with `# <tag>` (or containing it)."""
    path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    hits = [n for n, text in enumerate(path.read_text().splitlines(), 1) if f"# {tag}" in text]
    assert len(hits) == 1, f"{path.name}: tag {tag!r} found {len(hits)} times"
    return hits[0]


def site(script: str, tag: str, function: str) -> str:
    return f"{Path(script).name}({line_of(script, tag)}): {function}"


def load_outputs(out: Path) -> tuple[dict, dict]:
    return json.loads((out / "analysis.json").read_text()), json.loads((out / "profile.json").read_text())


def trace_events(out: Path) -> list[dict]:
    with gzip.open(out / "trace.json.gz", "rt") as handle:
        return json.load(handle)["traceEvents"]


def rows_by_site(analysis: dict) -> dict[tuple[str, str], dict]:
    return {(row["site"], row["op"]): row for row in analysis["syncs"]}
