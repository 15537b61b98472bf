"""Real public torch.profiler traces and their hand-written expected answers.

The trace files are not in the repository: `tools/fetch_real_traces.py` puts them, checksummed, in a
folder. A case whose files are absent skips. Folders searched, in order: `$BUBBLESCOPE_REAL_TRACES`,
`tests/data/real/files/`, `../shared/data/real_traces/`, `/work/traces/real/`.

Each case (`tests/data/real/<case>/expected.json`) is analysed once per session.
"""

from __future__ import annotations

import hashlib
import json
import os
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_DATA = REPO_ROOT / "tests" / "data" / "real"
MANIFEST = REAL_DATA / "manifest.json"


def trace_dirs() -> list[Path]:
    """Folders that may hold `<name>.json.gz` trace files, first match wins."""
    dirs = [Path(os.environ["BUBBLESCOPE_REAL_TRACES"])] if os.environ.get("BUBBLESCOPE_REAL_TRACES") else []
    return dirs + [
        REAL_DATA / "files",
        REPO_ROOT.parent / "shared" / "data" / "real_traces",
        Path("/work/traces/real"),
    ]


@cache
def manifest() -> dict[str, dict]:
    """Trace name -> manifest entry (repo, commit, path, sha256, ...)."""
    return {entry["name"]: entry for entry in json.loads(MANIFEST.read_text())["traces"]}


@cache
def trace_path(name: str) -> Path | None:
    """The local copy of a manifest trace whose sha256 matches, or None."""
    want = manifest()[name]["sha256"]
    for folder in trace_dirs():
        path = folder / f"{name}.json.gz"
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == want:
            return path
    return None


def case_names() -> list[str]:
    return sorted(p.parent.name for p in REAL_DATA.glob("*/expected.json"))


@cache
def expected(case: str) -> dict:
    """The hand-written answers of one case; numbers parsed exactly (interval ends are absolute us)."""
    return json.loads((REAL_DATA / case / "expected.json").read_text(), parse_float=Decimal)


@cache
def analysed(case: str) -> tuple[dict, list[int]]:
    """(analysis/1 dict, origin_ns per rank) of a case's files, computed once per session.

    Skips the calling test when a file is absent (see tools/fetch_real_traces.py).
    """
    paths = [trace_path(name) for name in expected(case)["files"]]
    missing = [name for name, path in zip(expected(case)["files"], paths, strict=True) if path is None]
    if missing:
        pytest.skip(f"real trace(s) {missing} absent: run tools/fetch_real_traces.py")
    from bubblescope.analysis.traces import analysis_dict, analyze_ranks

    ranks = analyze_ranks([str(p) for p in paths], step_marker=expected(case).get("step_marker"))
    return analysis_dict(ranks), [int(r.tables.origin_ns) for r in ranks]
