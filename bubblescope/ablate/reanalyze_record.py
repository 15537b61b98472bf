"""Re-analyse one RunRecord of an ablation from its stored trace (`ablate --reanalyze`).

Its own module so that the folder-level re-analysis (reanalyze.py) and the tensor-parallel one
(tp.py, every rank's record) both call it without importing each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bubblescope.errors import RecordError
from bubblescope.files.atomic import write_json_atomic
from bubblescope.records.run_record import RunRecord, save_record
from bubblescope.records.validate import contained_path


def own_file(record_path: Path, root: Path, name: Any, what: str) -> Path:
    """A file a record names beside itself: a plain name, resolving inside the ablation `root`."""
    if not isinstance(name, str) or "/" in name or "\\" in name or name in ("", ".", ".."):
        raise RecordError(f"{record_path}: {what} {str(name)[:60]!r} is not a file name beside the record")
    return contained_path(
        root, str((record_path.parent / name).relative_to(root)), what=what, source=str(record_path)
    )


def reanalyze_record(record: RunRecord, record_path: Path, root: Path | None = None) -> RunRecord:
    """Recompute a record's `analysis` block (and its analysis file) from its trace; save it.

    Args:
        root: the folder the record's files must stay in (default: the folder above runs/).
    Raises:
        RecordError: a trace or analysis file named outside `root`, or a missing trace.
    """
    from bubblescope.capture.measure import add_profiled_ratio, analysis_block

    root = record_path.parent.parent if root is None else root
    trace_name = record.get("trace")
    if not trace_name:
        return record
    trace_path = own_file(record_path, root, trace_name, "trace")
    analysis_file = record.get("analysis_file") or f"{record_path.stem}.analysis.json"
    analysis_path = own_file(record_path, root, analysis_file, "analysis_file")
    if not analysis_file.endswith(".analysis.json") or analysis_path.resolve() == record_path.resolve():
        raise RecordError(f"{record_path}: analysis_file {analysis_file[:60]!r} is not an analysis file name")
    if trace_path.is_symlink() or not trace_path.is_file():
        raise RecordError(f"{record_path}: its trace {trace_name} is missing; cannot re-analyse")
    on_cuda = record.get("environment", {}).get("device") == "cuda"
    record["analysis"], full = analysis_block(trace_path, on_cuda, record.get("kernel_bytes"))
    add_profiled_ratio(record["analysis"], full, record.get("samples_ns") or [])
    if full is not None:
        write_json_atomic(analysis_path, full)
        record["analysis_file"] = analysis_file
    save_record(record, record_path)
    return record
