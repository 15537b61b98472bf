"""Read a `bubblescope profile` folder back, whichever of its files the user names.

`report`, `diff` and `gate` accept a profile folder, its `profile.json`, its `analysis.json` or its
trace, and give the same answer for each: all four stand for the folder's record (settings, timed
steps) and its analysis with the read tap's exact lines. A named trace is analysed again with the tap's
calls kept beside it (`read_calls.json.gz`) and the session's settings, exactly as the session did;
the other three read the stored `analysis.json` (re-analysed from the trace when it is missing).

A file counts as part of a profile only when the `profile.json` beside it names it under `files`: an
analysis or trace copied elsewhere is read as a plain analysis or trace. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bubblescope.errors import RecordError

PROFILE_SCHEMA = "bubblescope.profile/1"
ANALYSIS_SCHEMA = "bubblescope.analysis/1"
RECORD_NAME = "profile.json"
CALLS_NAME = "read_calls.json.gz"
# Written by the session when it left the last step out (it ran until the session closed).
TRAILING_STEP_WARNING = "last step ran until"
_RECORD_DICTS = ("environment", "settings", "steps", "files")


@dataclass
class LoadedProfile:
    """A profile folder as `report` / `diff` / `gate` see it.

    Attributes:
        folder: the profile folder.
        record: its `bubblescope.profile/1` record.
        analysis: analysis/1 with exact read lines, or None when the session recorded no step.
        given: what the user named: "folder", "record", "analysis" or "trace".
        warnings: what reading it left out or redid, one line each.
    """

    folder: Path
    record: dict[str, Any]
    analysis: dict[str, Any] | None
    given: str
    warnings: list[str] = field(default_factory=list)

    @property
    def on_gpu(self) -> bool:
        return (self.record.get("environment") or {}).get("device") not in (None, "cpu")


def profile_folder(path: str | Path) -> tuple[Path, str] | None:
    """(the profile folder, what `path` is in it) when `path` is a profile folder, its record, or a file
    its record names under `files`; else None. Never raises for a path that is not a profile."""
    target = Path(path)
    if target.is_dir():
        return (target, "folder") if _has_profile_record(target) else None
    if not target.is_file() or not _has_profile_record(target.parent):
        return None
    if target.name == RECORD_NAME:
        return target.parent, "record"
    files = _record_files(target.parent)
    if target.name == files.get("analysis"):
        return target.parent, "analysis"
    if target.name == files.get("trace"):
        return target.parent, "trace"
    return None


def _has_profile_record(folder: Path) -> bool:
    record = folder / RECORD_NAME
    if not record.is_file() or record.is_symlink():
        return False
    try:
        with record.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return f'"{PROFILE_SCHEMA}"'.encode() in head


def _record_files(folder: Path) -> dict[str, Any]:
    try:
        files = read_profile_record(folder / RECORD_NAME).get("files")
    except RecordError:
        return {}
    return files if isinstance(files, dict) else {}


def read_profile_record(path: Path) -> dict[str, Any]:
    """A `profile.json`, checked: schema and the containers every reader indexes.

    Raises:
        RecordError: unreadable, another schema, or a field of the wrong type (one line).
    """
    record = read_document(path, PROFILE_SCHEMA)
    for key in _RECORD_DICTS:
        if not isinstance(record.get(key), dict):
            raise RecordError(f"{path}: '{key}' must be an object")
    if record.get("timed") is not None:
        check_timed(record["timed"], path)
    return record


def read_document(path: Path, schema: str) -> dict[str, Any]:
    """A JSON object of the given schema, read with the trace reader's caps (size, gzip, depth).

    Raises:
        BubblescopeError: unreadable, not an object, nested too deeply, or another schema (one line).
    """
    from bubblescope.records.validate import check_depth
    from bubblescope.trace.events import decode_value
    from bubblescope.trace.load import read_trace_bytes

    doc = decode_value(read_trace_bytes(path), path)
    if not isinstance(doc, dict):
        raise RecordError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    check_depth(doc, str(path))
    if doc.get("schema") != schema:
        raise RecordError(f"{path}: schema is {doc.get('schema')!r}, expected {schema!r}")
    return doc


def check_timed(timed: Any, path: Path | str) -> None:
    """The `timed` block: samples per block, positive integers (docs/SCHEMAS.md)."""
    samples = timed.get("samples_ns") if isinstance(timed, dict) else None
    ok = (
        isinstance(samples, list)
        and samples
        and all(isinstance(block, list) and block for block in samples)
        and all(type(ns) is int and ns > 0 for block in samples for ns in block)
    )
    if not ok:
        raise RecordError(f"{path}: 'timed.samples_ns' must be non-empty lists of positive integer ns")


def load_profile(path: str | Path) -> LoadedProfile:
    """The profile `path` stands for (see `profile_folder`).

    Raises:
        RecordError: `path` is not part of a profile, or its record / analysis is unreadable.
    """
    found = profile_folder(path)
    if found is None:
        raise RecordError(f"{path}: not a bubblescope profile folder or one of its files")
    folder, given = found
    record = read_profile_record(folder / RECORD_NAME)
    warnings: list[str] = []
    files = record["files"]
    if given == "trace":
        analysis = analysis_from_trace(folder, record, warnings)
    elif isinstance(files.get("analysis"), str) and (folder / files["analysis"]).is_file():
        analysis = read_document(folder / files["analysis"], ANALYSIS_SCHEMA)
    elif isinstance(files.get("trace"), str) and (folder / files["trace"]).is_file():
        warnings.append(f"{folder}: no analysis.json; analysed its trace again")
        analysis = analysis_from_trace(folder, record, warnings)
    else:
        analysis = None
        warnings.extend(str(n) for n in record.get("notices") or [])
    return LoadedProfile(folder, record, analysis, given, warnings)


def analysis_from_trace(folder: Path, record: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """The folder's trace analysed again as the session did: its read calls, step marker, device, and
    the trailing step left out when the session left it out."""
    from bubblescope.profiling.read_sites import analyze_with_read_sites
    from bubblescope.profiling.run_sites import load_read_calls
    from bubblescope.profiling.timing import attach_timed

    trace = folder / str(record["files"].get("trace") or "trace.json.gz")
    calls, problem = load_read_calls(trace)
    if problem:
        warnings.append(f"{folder}: {problem}")
    if calls is None:
        calls = []
        warnings.append(f"{folder}: no {CALLS_NAME}; reads keep the trace's def-line sites")
    analysis = analyze_with_read_sites(
        trace,
        calls,
        cuda_run=(record["environment"].get("device") or "cpu") != "cpu",
        step_marker=record["settings"].get("step_marker"),
        drop_last_step=_trailing_step_dropped(folder, record),
    )
    attach_timed(analysis, record.get("timed"))
    return analysis


def _trailing_step_dropped(folder: Path, record: dict[str, Any]) -> bool:
    stored = record["steps"].get("trailing_step_dropped")
    if isinstance(stored, bool):
        return stored
    # Records written before the field: the stored analysis' warning says it.
    import json

    try:
        analysis = json.loads((folder / "analysis.json").read_text())
    except (OSError, ValueError):
        return False
    return any(TRAILING_STEP_WARNING in str(w) for w in analysis.get("warnings") or [])


def timed_per_token_ns(record: dict[str, Any]) -> list[np.ndarray] | None:
    """The profile's timed steps as per-token samples, one array per block (None when not timed)."""
    from bubblescope.stats import per_token_samples_ns

    timed = record.get("timed")
    if not isinstance(timed, dict):
        return None
    samples = timed["samples_ns"]
    tokens = [[int(timed.get("tokens_per_step") or 1)] * len(block) for block in samples]
    return per_token_samples_ns(samples, tokens)
