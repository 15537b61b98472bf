"""Exact lines of blocking reads in `run` / `ablate` analyses, with each row's `site` left as it was.

`run` and `ablate` install the read tap (`capture/user_reads.py`, the one `bubblescope profile` uses)
for their profiled window only and keep its calls beside the trace (`<stem>.read_calls.json.gz` next
to `<stem>.trace.json.gz`, see `read_calls_path`). This module merges them into the analysis:

- each blocking read found in the trace is tied to the tap's `bubblescope.read#<id>` annotation that
  encloses it on the same thread (CUDA: the runtime call that waited; CPU: the outermost ATen readback
  op that would block on a GPU), and so to that call's stack;
- each `syncs[]` row stays the row the analysis makes without the tap (same `site`, counts and times)
  and gains `lines_exact` (one entry per exact line its reads came from, most reads first: `line_exact`
  — the innermost frame outside torch, libraries and bubblescope, the user's `file.py(LINE): function`
  —, `read_at` — the innermost frame outside torch and bubblescope, which may be a library's —, `stack`
  — the caller chain, innermost first —, `count`, `per_step`, `blocked_ns`, `bubble_ns`), the top
  entry's `line_exact` / `read_at` / `stack` on the row itself, and `line`: "exact" (every read of
  the row tied to a tapped call), "partial", or "def" (none: made in C++ or a compiled graph).

Why `site` is not replaced (as `bubblescope profile` does) and rows are not split by line: the gate
and `diff` key reads by "site [op]" (gate.py `_reads_by_site`, diff.py), the ablation's removed reads
too, and a baseline recorded before this change or with `--no-read-sites` carries the trace's sites.
Leaving rows as they were keeps those comparisons like for like, and every renderer shows what it
showed before (no two rows with the same site). No torch import.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from bubblescope.analysis.readbacks import Span
from bubblescope.errors import BubblescopeError, TraceError

CALLS_SUFFIX = "read_calls.json.gz"
SOURCE = "bubblescope read tap (profiled window only)"
# Separates the trace's site from the exact line while rows are grouped (never written out).
_JOIN = "\x1f"
_FRAME_CLASSES = frozenset({"bubblescope", "compiler", "torch", "library", "stdlib", "user"})


def read_calls_path(trace_path: str | os.PathLike[str]) -> Path:
    """Where the tap's calls of a trace live, beside it: `x.trace.json.gz` -> `x.read_calls.json.gz`,
    `trace.json.gz` -> `read_calls.json.gz`, any other `y.json.gz` -> `y.read_calls.json.gz`."""
    trace = Path(trace_path)
    name = trace.name
    stem = name.removesuffix(".gz").removesuffix(".json")
    if stem == "trace" or stem.endswith(".trace"):
        return trace.parent / f"{stem[: -len('trace')]}{CALLS_SUFFIX}"
    return trace.parent / f"{stem}.{CALLS_SUFFIX}"


def load_read_calls(trace_path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The tap's calls stored beside a trace, checked.

    Returns:
        (calls, None); (None, None) when there is no calls file (tap off, or an older run); (None, a
        one-line warning) when the file is damaged — the analysis then goes on without exact lines.
    """
    from bubblescope.trace.events import decode_value
    from bubblescope.trace.load import read_trace_bytes

    path = read_calls_path(trace_path)
    if not path.exists() and not path.is_symlink():
        return None, None
    try:
        if path.is_symlink() or not path.is_file():
            raise TraceError(f"{path}: not a regular file")
        calls = decode_value(read_trace_bytes(path), path)
        _check_calls(calls, path)
    except BubblescopeError as exc:
        return None, f"read sites left out: {str(exc).splitlines()[0][:200]}"
    return calls, None


def _check_calls(calls: Any, path: Path) -> None:
    if not isinstance(calls, list):
        raise TraceError(f"{path.name}: expected a list of calls")
    for index, call in enumerate(calls):
        ok = (
            isinstance(call, dict)
            and type(call.get("read_id")) is int
            and isinstance(call.get("op"), str)
            and isinstance(call.get("kind"), str)
            and isinstance(call.get("frames"), list)
            and all(_is_frame(f) for f in call["frames"])
        )
        if not ok:
            raise TraceError(f"{path.name}: call {index} is not a read call (read_id, op, kind, frames)")


def _is_frame(frame: Any) -> bool:
    return (
        isinstance(frame, dict)
        and isinstance(frame.get("file"), str)
        and type(frame.get("line")) is int
        and isinstance(frame.get("function"), str)
        and frame.get("class") in _FRAME_CLASSES
    )


def _described(calls: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    from bubblescope.profiling.read_sites import describe_call

    return {int(c["read_id"]): describe_call(c) for c in calls}


def _stats(calls: list[dict[str, Any]], matched: int, reads: int) -> dict[str, Any]:
    from bubblescope.profiling.read_sites import COVERAGE

    return {
        "source": SOURCE,
        "tapped_calls": len(calls),
        "trace_reads": reads,
        "matched_reads": matched,
        "unmatched_trace_reads": reads - matched,
        "covered": COVERAGE,
    }


def _line_entry(
    info: dict[str, Any], count: int, per_step: float, blocked_ns: int | None, bubble_ns: int | None
) -> dict:
    """One exact line of a read row; blocked and bubble times are null on a CPU run (not measured)."""
    return {
        "line_exact": info["site"],
        "read_at": info["read_at"],
        "stack": info["stack"],
        "count": int(count),
        "per_step": per_step,
        "blocked_ns": None if blocked_ns is None else int(blocked_ns),
        "bubble_ns": None if bubble_ns is None else int(bubble_ns),
    }


def _annotate_row(row: dict[str, Any], lines: list[dict[str, Any]], unmatched: int) -> dict[str, Any]:
    """The row with its exact lines (`lines` most reads first) and `line` exact / partial / def."""
    lines = sorted(lines, key=lambda e: (-e["count"], -(e["bubble_ns"] or 0), -(e["blocked_ns"] or 0)))
    top = lines[0] if lines else {"line_exact": None, "read_at": None, "stack": None}
    state = "def" if not lines else ("partial" if unmatched else "exact")
    return {
        **row,
        "line_exact": top["line_exact"],
        "read_at": top["read_at"],
        "stack": top["stack"],
        "line": state,
        "lines_exact": lines,
    }


def analyze_run_trace(
    trace_path: str | os.PathLike[str], calls: list[dict[str, Any]], *, cuda_run: bool
) -> dict[str, Any]:
    """`bubblescope.analysis/1` of a run's trace; on CUDA its syncs carry exact lines (module doc).

    Everything but `syncs` (and the added `read_sites` block) is what `analyze_traces` gives: gaps,
    steps and timeline are computed from the trace's own sites. On CPU the trace has no blocking call,
    so `syncs` stay as they are (the record's readbacks get theirs from `annotate_counted_syncs`).
    """
    from bubblescope.analysis.traces import _sync_entries, analysis_dict, analyze_ranks
    from bubblescope.profiling.read_sites import enclosing_marker, read_markers
    from bubblescope.ranks.reduce import typical_steps

    ranks = analyze_ranks([trace_path])
    analysis = analysis_dict(ranks)
    if not cuda_run:
        analysis["read_sites"] = _stats(calls, 0, 0)
        return analysis
    rank = ranks[0]
    described = _described(calls)
    by_tid = {tid: group for tid, group in read_markers(rank.tables.ops).groupby("tid", sort=False)}
    reads = rank.reads.copy()
    keyed, matched = [], 0
    for site, tid, start, end in zip(
        reads["site"].astype(str),
        reads["tid"].astype(str),
        reads["start_ns"].tolist(),
        reads["end_ns"].tolist(),
        strict=True,
    ):
        read_id = enclosing_marker(by_tid.get(tid), int(start), int(end))
        info = described.get(read_id) if read_id is not None else None
        matched += info is not None
        keyed.append(f"{site}{_JOIN}{info['display']}" if info is not None else site)
    reads["site"] = keyed
    rank.reads = reads
    by_display = {info["display"]: info for info in described.values()}
    # The rows again with the exact line joined to the site: the analysis' own sums per exact line.
    parts: dict[tuple, tuple[list[dict[str, Any]], int]] = {}
    for sub in _sync_entries(ranks, max(len(analysis["steps"]), 1), typical_steps(analysis["steps"])):
        site, _, display = str(sub["site"]).partition(_JOIN)
        lines, unmatched = parts.get((site, sub["op"], sub["kind"], sub["api"]), ([], 0))
        if display and display in by_display:
            entry = (sub["count"], sub["per_step"], sub["blocked_ns"], sub["bubble_ns"])
            lines.append(_line_entry(by_display[display], *entry))
        else:
            unmatched += int(sub["count"])
        parts[(site, sub["op"], sub["kind"], sub["api"])] = (lines, unmatched)
    analysis["syncs"] = [
        _annotate_row(row, *parts.get((row["site"], row["op"], row["kind"], row["api"]), ([], 0)))
        for row in analysis["syncs"]
    ]
    analysis["read_sites"] = _stats(calls, matched, len(reads))
    return analysis


def annotate_counted_syncs(
    trace_path: str | os.PathLike[str], counted: dict[str, Any], calls: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A CPU run's readback rows (`count_readbacks`) with the exact line of each readback.

    Each outermost readback op in a step is tied to the tap annotation enclosing it. The rows stay as
    counted; `lines_exact` adds up to each row's count (checked: on a mismatch the rows get no exact
    line and the stats say why).

    Returns:
        (syncs rows, the `read_sites` stats block).
    """
    instances = readback_instances(trace_path)
    described = _described(calls)
    by_row: dict[tuple[str, str], Counter[str]] = {}
    info_of: dict[str, dict[str, Any]] = {}
    matched = 0
    for site, op, read_id in instances:
        info = described.get(read_id) if read_id is not None else None
        display = info["display"] if info is not None else ""
        if info is not None:
            matched += 1
            info_of[display] = info
        by_row.setdefault((site, op), Counter())[display] += 1
    stats = _stats(calls, matched, len(instances))
    steps = max(int(counted["steps"]), 1)
    rows: list[dict[str, Any]] = []
    for row in counted["syncs"]:
        parts = by_row.get((row["site"], row["op"]), Counter())
        if sum(parts.values()) != int(row["count"]):
            stats["warning"] = "the tap's readbacks differ from the trace's count; exact lines left out"
            return [_annotate_row(r, [], int(r["count"])) for r in counted["syncs"]], stats
        lines = [
            _line_entry(info_of[display], count, count / steps, None, None)
            for display, count in parts.items()
            if display
        ]
        rows.append(_annotate_row(row, lines, parts.get("", 0)))
    return rows, stats


def readback_instances(trace_path: str | os.PathLike[str]) -> list[tuple[str, str, int | None]]:
    """(site, op, enclosing read id or None) of each readback `count_readbacks` counts, in its order.

    The same readbacks as `bubblescope.analysis.readbacks.count_readbacks` (`counted_readbacks`), each tied
    to the innermost `bubblescope.read#N` marker around it on its thread; `annotate_counted_syncs` checks that
    the two agree row by row.
    """
    from bubblescope.analysis.readbacks import counted_readbacks, read_cpu_trace
    from bubblescope.trace.markers import READ_MARKER_PREFIX

    trace = read_cpu_trace(trace_path, stop_at_gpu=False, marker_prefix=READ_MARKER_PREFIX)
    markers: dict[Any, list[tuple[int, int, int]]] = {}
    for marker in trace.markers:
        suffix = marker.name[len(READ_MARKER_PREFIX) :]
        if suffix.isdigit():
            markers.setdefault(marker.tid, []).append((*_span_ns(marker), int(suffix)))
    out = []
    for _step, op, site in counted_readbacks(trace):
        start, end = _span_ns(op)
        enclosing = [m for m in markers.get(op.tid, []) if m[0] <= start and end <= m[1]]
        out.append((site, op.name, max(enclosing)[2] if enclosing else None))
    return out


def _span_ns(span: Span) -> tuple[int, int]:
    """A span's microsecond floats as integer ns, so nesting compares exactly."""
    return round(span.start_us * 1000), round(span.end_us * 1000)
