"""Decide what each `bubblescope report` argument is and load it into plain dicts.

An argument can be a run folder (`record.json`, or a single `<key>.json` RunRecord), a RunRecord
file, an ablation folder (`ablation.json` + `runs/*.json`) or its `ablation.json`, a `bubblescope
profile` folder or any of its files (profile.json, analysis.json, trace: `profiling/load.py`), an
analysis/1 JSON, or a bare profiler trace (Kineto JSON, plain or gzip). Bare traces are analysed together by
`bubblescope.analysis.traces.analyze_traces` (several files are the ranks of one run). Nothing here imports
torch; rendering lives in html.py / markdown.py.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bubblescope.analysis.not_measured import null_unmeasured_analysis, null_unmeasured_record
from bubblescope.errors import BubblescopeError, RecordError
from bubblescope.records.run_record import validate_record
from bubblescope.records.validate import MAX_DOCUMENT_DEPTH, check_depth, contained_path
from bubblescope.trace import json_scan

RUN_SCHEMA = "bubblescope.run/1"
ABLATION_SCHEMA = "bubblescope.ablation/1"
ANALYSIS_SCHEMA = "bubblescope.analysis/1"
# Records and analyses are small; a bigger JSON here is almost surely a trace or a mistake.
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
# How many bytes of a file we read to tell a bubblescope document from a trace.
SNIFF_BYTES = 4096


class ReportInputError(BubblescopeError):
    """A `report` argument that does not exist or is none of the inputs `report` understands."""


@dataclass
class RunInput:
    """One RunRecord plus, when reachable, the full analysis/1 of its trace."""

    path: Path
    record: dict[str, Any]
    analysis: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)


@dataclass
class AblationInput:
    """An ablation document, its loaded RunRecords by config key, and analyses by key where on disk."""

    path: Path
    ablation: dict[str, Any]
    records: dict[str, dict[str, Any]]
    analyses: dict[str, dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


@dataclass
class TraceInput:
    """An analysis/1 document, computed from bare traces or read from an analysis JSON."""

    paths: list[Path]
    analysis: dict[str, Any]


@dataclass
class ProfileInput(TraceInput):
    """A `bubblescope profile` folder: its analysis (exact read lines) and its `bubblescope.profile/1`
    record (settings, timed steps). Renders as a trace plus the profile's own sections."""

    record: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


ReportInput = RunInput | AblationInput | TraceInput


def read_json_document(path: Path, *, expect_schema: str | None = None) -> dict[str, Any]:
    """Read a (possibly gzipped) JSON object, bounded in size and depth; check its schema when asked.

    Raises:
        RecordError: missing, unreadable, not a JSON object, too large, nested deeper than
            `validate.MAX_DOCUMENT_DEPTH` levels (any recursive consumer would fail on it), or another schema.
    """
    try:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise RecordError(
                f"{path}: larger than {MAX_DOCUMENT_BYTES >> 20} MiB; not a bubblescope document"
            )
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as handle:
                raw = handle.read(MAX_DOCUMENT_BYTES + 1)
            if len(raw) > MAX_DOCUMENT_BYTES:
                raise RecordError(f"{path}: decompresses past {MAX_DOCUMENT_BYTES >> 20} MiB")
        # Depth from the text (numpy, ~1 s per 100 MB): a walk of the parsed document took 5 s per
        # 8 M elements, and a parser would recurse first.
        if json_scan.max_depth(raw) > MAX_DOCUMENT_DEPTH:
            raise RecordError(
                f"{path}: nested deeper than {MAX_DOCUMENT_DEPTH} levels; not a bubblescope document"
            )
        doc = json.loads(raw)
    except FileNotFoundError:
        raise RecordError(f"{path}: file not found") from None
    except (OSError, EOFError) as exc:
        raise RecordError(f"{path}: cannot read ({exc.__class__.__name__}: {exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise RecordError(
            f"{path}: not valid JSON (nested too deeply: more than ~1000 levels of arrays or objects)"
        ) from None
    if not isinstance(doc, dict):
        raise RecordError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    if expect_schema is not None and doc.get("schema") != expect_schema:
        raise RecordError(f"{path}: schema is {doc.get('schema')!r}, expected {expect_schema!r}")
    return doc


def _sniff_schema(path: Path) -> str | None:
    """The `schema` of a bubblescope JSON file, or None for anything else (e.g. a trace)."""
    if path.suffix == ".gz":
        return None
    try:
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise ReportInputError(f"{path}: cannot read ({exc})") from None
    if '"schema"' not in head or "bubblescope." not in head:
        return None
    schema = read_json_document(path).get("schema")
    return schema if isinstance(schema, str) else None


def _run_record_in_folder(folder: Path) -> Path | None:
    """`record.json`, else the folder's only RunRecord `<key>.json`, else None."""
    if (folder / "record.json").is_file():
        return folder / "record.json"
    candidates = [p for p in sorted(folder.glob("*.json")) if _sniff_schema(p) == RUN_SCHEMA]
    if len(candidates) > 1:
        names = ", ".join(p.name for p in candidates[:5])
        raise ReportInputError(f"{folder}: holds several RunRecords ({names}); pass one of them")
    return candidates[0] if candidates else None


def _optional_analysis(base: Path, relative: Any, warnings: list[str]) -> dict[str, Any] | None:
    """Load an analysis file named by a record, relative to the record's folder; warn when unusable."""
    if not isinstance(relative, str) or not relative:
        return None
    path = contained_path(base, relative, what="analysis_file", source=str(base))
    if not path.is_file():
        warnings.append(f"analysis file {relative} is missing; showing the record's summary only")
        return None
    try:
        return read_json_document(path, expect_schema=ANALYSIS_SCHEMA)
    except RecordError as exc:
        warnings.append(str(exc))
        return None


def load_run(record_path: Path) -> RunInput:
    """Load a RunRecord file and the analysis it points to (if present)."""
    record = read_json_document(record_path, expect_schema=RUN_SCHEMA)
    validate_record(record, source=str(record_path))
    warnings: list[str] = []
    analysis = _optional_analysis(record_path.parent, record.get("analysis_file"), warnings)
    return RunInput(path=record_path, record=record, analysis=analysis, warnings=warnings)


def load_ablation(ablation_path: Path) -> AblationInput:
    """Load `ablation.json` and every finished config's RunRecord (and analysis, when on disk)."""
    ablation = read_json_document(ablation_path, expect_schema=ABLATION_SCHEMA)
    check_depth(ablation, str(ablation_path))
    folder = ablation_path.parent
    records: dict[str, dict[str, Any]] = {}
    analyses: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    configs = ablation.get("configs")
    if not isinstance(configs, list):
        raise RecordError(f"{ablation_path}: 'configs' must be a list")
    for config in configs:
        if not isinstance(config, dict) or not isinstance(config.get("key"), str):
            raise RecordError(f"{ablation_path}: every config needs a string 'key'")
        key = config["key"]
        relative = config.get("record") or f"runs/{key}.json"
        record_path = contained_path(folder, relative, what=f"record of {key}", source=str(ablation_path))
        if not record_path.is_file():
            if config.get("status") == "done":
                warnings.append(f"config {key}: record {record_path.name} is missing")
            continue
        records[key] = validate_record(
            read_json_document(record_path, expect_schema=RUN_SCHEMA), source=str(record_path)
        )
        analysis = _optional_analysis(record_path.parent, records[key].get("analysis_file"), warnings)
        if analysis is not None:
            analyses[key] = analysis
    return AblationInput(
        path=ablation_path, ablation=ablation, records=records, analyses=analyses, warnings=warnings
    )


def _analyze_bare_traces(paths: list[Path], step_marker: str | None) -> TraceInput:
    try:
        from bubblescope.analysis.traces import analyze_traces
    except ImportError as exc:
        raise ReportInputError(
            f"cannot analyse bare traces: bubblescope.analysis is unavailable ({exc})"
        ) from None
    analysis = analyze_traces([str(p) for p in paths], step_marker=step_marker)
    if not isinstance(analysis, dict) or analysis.get("schema") != ANALYSIS_SCHEMA:
        raise ReportInputError(f"analysis of {paths[0]} did not return a {ANALYSIS_SCHEMA} document")
    return TraceInput(paths=paths, analysis=analysis)


def _classify_file(path: Path) -> tuple[str, Path]:
    schema = _sniff_schema(path)
    if schema is None:
        return "trace", path
    if schema == RUN_SCHEMA:
        return "run", path
    if schema == ABLATION_SCHEMA:
        return "ablation", path
    if schema == ANALYSIS_SCHEMA:
        return "analysis", path
    raise ReportInputError(
        f"{path}: unknown schema {schema!r} (report reads run/1, ablation/1, analysis/1, traces)"
    )


def classify_path(path: Path) -> tuple[str, Path]:
    """Return (kind, file) with kind one of run, ablation, analysis, trace.

    Raises:
        ReportInputError: the path is missing or a folder with nothing `report` can read.
    """
    if path.is_dir():
        if (path / "ablation.json").is_file():
            return "ablation", path / "ablation.json"
        record = _run_record_in_folder(path)
        if record is not None:
            return "run", record
        # A folder of traces (one per rank), as `analyze` reads it.
        if any(p.name.endswith((".json", ".json.gz")) and not p.name.startswith(".") for p in path.iterdir()):
            return "trace", path
        raise ReportInputError(
            f"{path}: folder has neither ablation.json, a RunRecord (record.json) nor trace files"
        )
    if path.is_file():
        return _classify_file(path)
    from bubblescope.trace.source import not_regular_reason

    reason = not_regular_reason(path) or "no such file or folder"
    raise ReportInputError(
        f"{path}: {reason}" + ("" if reason == "no such file or folder" else "; refusing to read it")
    )


def load_inputs(paths: list[str | Path], *, step_marker: str | None = None) -> list[ReportInput]:
    """Load every argument; bare traces are analysed together as one multi-rank run, placed last.

    Args:
        paths: command-line arguments, in order.
        step_marker: regex naming step annotations in bare traces that have neither `bubblescope.step`
            nor `ProfilerStep#N` (passed to `analyze_traces`). Default None.

    Raises:
        ReportInputError / RecordError / TraceError: one line naming the offending path.
    """
    if not paths:
        raise ReportInputError("give at least one run folder, record, ablation folder or trace file")
    loaded: list[ReportInput] = []
    traces: list[Path] = []
    for raw in paths:
        profile = _profile_input(Path(raw))
        if profile is not None:
            loaded.append(profile)
            continue
        kind, file = classify_path(Path(raw))
        if kind == "run":
            loaded.append(load_run(file))
        elif kind == "ablation":
            loaded.append(load_ablation(file))
        elif kind == "analysis":
            loaded.append(
                TraceInput(paths=[file], analysis=read_json_document(file, expect_schema=ANALYSIS_SCHEMA))
            )
        else:
            traces.append(file)
    if traces:
        loaded.append(_analyze_bare_traces(traces, step_marker))
    return loaded


def _profile_input(path: Path) -> ProfileInput | None:
    """The profile `path` belongs to (folder, profile.json, its analysis or trace), or None."""
    from bubblescope.profiling.load import load_profile, profile_folder

    if profile_folder(path) is None:
        return None
    loaded = load_profile(path)
    if loaded.analysis is None:
        notices = "; ".join(loaded.warnings) or "no trace was recorded"
        raise ReportInputError(f"{path}: the profile has no analysis ({notices})")
    return ProfileInput(
        paths=[path], analysis=loaded.analysis, record=loaded.record, warnings=loaded.warnings
    )


# ---- Conforming documents to the container shapes the renderers rely on ----
# A shape is `dict` / `list` (that container, contents unchecked), `{key: shape}` (a dict whose listed
# keys are conformed; others left alone) or `[shape]` (a list whose elements are conformed; elements of
# the wrong type dropped). Scalars are never checked here: the renderers format any scalar.
Shape = Any
RUN_SHAPE: Shape = {
    "environment": dict,
    "workload": dict,
    "switches": {"enabled": list, "available": [dict]},
    "settings": dict,
    "summary": {"tpot_ci95_ms": list},
    "floor": dict,
    "analysis": {"syncs": [dict], "idle_by_class_ns_per_step": dict},
}
ANALYSIS_SHAPE: Shape = {
    "inputs": [dict],
    "warnings": list,
    "devices": [{"idle_by_class_ns": dict, "streams": [dict]}],
    "steps": [dict],
    "syncs": [dict],
    "gaps_top": [dict],
    "summary": {"idle_by_class_ns_per_step": dict},
    "timeline": {"lanes": [dict], "slices": [dict], "gaps": [dict], "syncs": [dict]},
}
INTERVAL_KEYS = ("alone_ms", "removed_from_all_ms", "shapley_ms", "cumulative_ms")
ABLATION_SHAPE: Shape = {
    "workload": dict,
    "toggles": list,
    "order": list,
    "configs": [{"enabled": list, "roles": list}],
    "attribution": {
        "total_saving_ms": dict,
        "interaction_ms": dict,
        "switches": [
            {
                **{key: dict for key in INTERVAL_KEYS},
                "removed_reads_per_step": dict,
                "removed_idle_us_per_step": dict,
                "removed_idle_per_step": {"by_class_us": dict},
            }
        ],
        "waterfall": [dict],
        "predicted_vs_measured": [
            {
                "predicted_ms": dict,
                "measured_alone_ms": dict,
                "measured_removed_from_all_ms": dict,
                "reasons": list,
            }
        ],
    },
}
_MISSING = object()


def _conform(value: Any, shape: Shape) -> Any:
    """`value` reshaped to `shape`, or _MISSING when it is a container of the wrong kind."""
    if shape is dict or shape is list:
        return value if isinstance(value, shape) else _MISSING
    if isinstance(shape, list):
        if not isinstance(value, list):
            return _MISSING
        kept = (_conform(item, shape[0]) for item in value)
        return [item for item in kept if item is not _MISSING]
    if not isinstance(value, dict):
        return _MISSING
    out = dict(value)
    for key, sub_shape in shape.items():
        if out.get(key) is None:
            continue
        conformed = _conform(out[key], sub_shape)
        out[key] = None if conformed is _MISSING else conformed
    return out


def conform_document(doc: Any, shape: Shape) -> dict[str, Any]:
    """A copy of a record/analysis/ablation where every container the renderers index has the type the
    contract gives it (a wrong one becomes null), so a malformed field degrades to '—', never a crash."""
    conformed = _conform(doc, shape)
    return {} if conformed is _MISSING else conformed


def conform_run(record: Any) -> dict[str, Any]:
    # Records written before not-measured became null carry zeros beside gpu_measured false.
    return conform_document(null_unmeasured_record(record), RUN_SHAPE)


def conform_analysis(analysis: Any) -> dict[str, Any] | None:
    return None if analysis is None else conform_document(null_unmeasured_analysis(analysis), ANALYSIS_SHAPE)


def conform_ablation(ablation: Any, records: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The ablation and its records by key, both conformed."""
    records = records if isinstance(records, dict) else {}
    return conform_document(ablation, ABLATION_SHAPE), {str(k): conform_run(v) for k, v in records.items()}
