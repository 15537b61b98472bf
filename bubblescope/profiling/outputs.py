"""What a `bubblescope.profile` session leaves under `out`, each file written atomically:

- `trace.json.gz`   the recorded window (Kineto/Chrome trace; opens in Perfetto)
- `analysis.json`   `bubblescope.analysis/1` with the read tap's exact lines merged in (read_sites.py)
- `report.html`     the trace report plus a table of where each blocking read is called from
- `profile.json`    the `bubblescope.profile/1` record (docs/SCHEMAS.md): settings, steps, exit, files
- `read_calls.json.gz` the read tap's calls with their stacks (to redo the analysis from the trace)

A failing analysis or report never loses the trace: the record names what failed in one line.
"""

from __future__ import annotations

import datetime as _dt
import platform
from pathlib import Path
from typing import Any

from bubblescope.errors import BubblescopeError
from bubblescope.files.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic
from bubblescope.profiling.timing import attach_timed, timed_block

SCHEMA = "bubblescope.profile/1"
TOP_READS = 20


def call_dicts(calls: list[Any]) -> list[dict[str, Any]]:
    """The tap's ReadCalls (code objects) as plain dicts, innermost frame first."""
    from bubblescope.capture.user_frames import frame_class

    out = []
    for call in calls:
        frames = [
            {
                "file": code.co_filename,
                "line": int(line),
                "function": code.co_name,
                "qualname": getattr(code, "co_qualname", code.co_name),
                "class": frame_class(code.co_filename),
            }
            for code, line in call.frames
        ]
        out.append(
            {"read_id": call.read_id, "op": call.op, "kind": call.kind, "step": call.step, "frames": frames}
        )
    return out


def reanalyze(folder: str | Path, *, timeline: bool = True) -> dict[str, Any]:
    """Redo `analysis.json` and `report.html` of a profile folder from its trace, read_calls.json.gz and
    profile.json (after an analysis fix, or to draw the page here when the GPU machine lacked plotly),
    and refresh the analysis-derived fields of `profile.json` (`summary`, `step_source`, `reads`; a
    notice says when). Run, session and environment fields are kept.

    python -c "import sys; from bubblescope.profiling.outputs import reanalyze; reanalyze(sys.argv[1])" DIR

    Args:
        folder: the profile folder (`bubblescope profile --out`).
        timeline: draw the one-step timeline in report.html (inlines plotly.js: ~5 MB).

    Returns:
        the new analysis/1 dict.
    """
    import json

    from bubblescope.profiling.load import analysis_from_trace
    from bubblescope.report.profile_page import render_profile_html

    out = Path(folder)
    record = json.loads((out / "profile.json").read_text())
    notices: list[str] = []
    analysis = analysis_from_trace(out, record, notices)
    write_json_atomic(out / "analysis.json", analysis)
    write_text_atomic(out / "report.html", render_profile_html(analysis, record, timeline=timeline))
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    record.update(
        summary=analysis.get("summary"),
        step_source=analysis.get("step_source"),
        reads=_read_entries(analysis.get("syncs") or []),
        notices=[*(record.get("notices") or []), *notices, f"re-analysed from trace.json.gz at {when}"],
    )
    write_json_atomic(out / "profile.json", record)
    return analysis


def write_outputs(session: Any) -> dict[str, Any]:
    """Write everything a finished session has; returns {"files", "notices", "summary_line", "analysis"}."""
    out = Path(session.out)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str | None] = {"trace": None, "analysis": None, "report": None}
    notices: list[str] = []
    analysis = None
    timed = _timed(session, notices)
    if session.trace_bytes is not None:
        write_bytes_atomic(out / "trace.json.gz", session.trace_bytes)
        files["trace"] = "trace.json.gz"
        analysis = _analysis(session, out / "trace.json.gz", notices)
    elif session.steps_recorded == 0:
        notices.append(
            f"no step was recorded ({session.steps_started} steps started, warm-up {session.warmup}): "
            "call prof.step()/bubblescope.step() once per iteration, or pass --step-frame/--step-marker"
        )
    if analysis is not None:
        attach_timed(analysis, timed)
        write_json_atomic(out / "analysis.json", analysis)
        files["analysis"] = "analysis.json"
        files["report"] = _report(analysis, {"timed": timed}, out, notices)
    if session.steps_recorded and session.steps_recorded < session.active and not session.record_all:
        notices.append(f"only {session.steps_recorded} of {session.active} active steps ran before the end")
    record = _record(session, files, notices, analysis, timed)
    write_json_atomic(out / "profile.json", record)
    return {
        "files": files,
        "notices": notices,
        "analysis": analysis,
        "summary_line": "\n".join([_summary_line(record, out), *read_lines(record)]),
    }


def _analysis(session: Any, trace_path: Path, notices: list[str]) -> dict[str, Any] | None:
    from bubblescope.profiling.read_sites import analyze_with_read_sites

    calls = call_dicts(session._tap.state.calls) if session._tap is not None else []
    # Kept beside the trace so the analysis can be redone later (`analyze_with_read_sites`).
    write_json_atomic(trace_path.parent / "read_calls.json.gz", calls, indent=None)
    try:
        return analyze_with_read_sites(
            trace_path,
            calls,
            cuda_run=session._on_cuda,
            step_marker=session.step_marker,
            drop_last_step=session.trailing_step_dropped,
        )
    except BubblescopeError as exc:
        notices.append(f"analysis refused the trace: {exc}")
    except Exception as exc:  # noqa: BLE001 - the trace is written; say what failed, keep going
        notices.append(f"analysis failed ({type(exc).__name__}: {exc}); the trace is kept")
    return None


def _timed(session: Any, notices: list[str]) -> dict[str, Any] | None:
    """The `timed` block of a session that timed steps (None otherwise), with a notice when short."""
    if not session.timed:
        return None
    samples_ns, host_ns = session.timed_samples or ([], [])
    if len(samples_ns) < session.timed:
        notices.append(f"only {len(samples_ns)} of {session.timed} timed steps ran before the end")
    return timed_block(samples_ns, host_ns, on_cuda=session._on_cuda)


def _report(analysis: dict[str, Any], record: dict[str, Any], out: Path, notices: list[str]) -> str | None:
    from bubblescope.report.profile_page import render_profile_html

    try:
        html = render_profile_html(analysis, record)
    except Exception as exc:  # noqa: BLE001 - the analysis is written; say why the page is not
        notices.append(f"report.html skipped ({type(exc).__name__}: {exc})")
        return None
    write_text_atomic(out / "report.html", html)
    return "report.html"


def _record(
    session: Any,
    files: dict,
    notices: list[str],
    analysis: dict[str, Any] | None,
    timed: dict[str, Any] | None,
) -> dict[str, Any]:
    import torch

    device = torch.cuda.get_device_name() if session._on_cuda and torch.cuda.is_initialized() else "cpu"
    syncs = (analysis or {}).get("syncs") or []
    return {
        "schema": SCHEMA,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": session.command,
        "environment": {"python": platform.python_version(), "torch": torch.__version__, "device": device},
        "settings": {
            "warmup": session.warmup,
            "active": session.active,
            "timed": session.timed,
            "read_sites": session.read_sites,
            "record_all": session.record_all,
            "step_marker": session.step_marker,
        },
        "steps": {
            "started": session.steps_started,
            "recorded": session.steps_recorded,
            "trailing_step_dropped": session.trailing_step_dropped,
        },
        "exit": {"code": session.exit_code, "error": session.error},
        "timed": timed,
        "files": files,
        "summary": (analysis or {}).get("summary"),
        "step_source": (analysis or {}).get("step_source"),
        "reads": _read_entries(syncs),
        "notices": notices,
    }


def _read_entries(syncs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The record's `reads`: the first TOP_READS syncs[] rows, the fields a user reads first."""
    keys = ("site", "read_at", "op", "kind", "count", "per_step", "blocked_ns", "bubble_ns", "line")
    return [{k: s.get(k) for k in keys} for s in syncs[:TOP_READS]]


SHOWN_READS = 5


def read_lines(record: dict[str, Any]) -> list[str]:
    """What the user reads first: each blocking read's line, count per step and cost per step.

    `  1.0/step  blocked 13.2 µs  GPU idle 129.0 µs  gpt_fast_loop.py(64): main [aten::item]`
    """
    steps = max(int((record.get("summary") or {}).get("steps") or 0), 1)
    lines = []
    for read in record["reads"][:SHOWN_READS]:
        if not read.get("per_step"):
            continue
        where = (
            read["site"]
            if read.get("read_at") in (None, read["site"])
            else f"{read['site']} → {read['read_at']}"
        )
        cost = ""
        if read.get("blocked_ns") or read.get("bubble_ns"):
            blocked_us = (read.get("blocked_ns") or 0) / steps / 1e3
            idle_us = (read.get("bubble_ns") or 0) / steps / 1e3
            cost = f"  blocked {blocked_us:.1f} µs  GPU idle {idle_us:.1f} µs"
        lines.append(f"  {read['per_step']}/step{cost}  {where} [{read['op']}]")
    return lines


def _summary_line(record: dict[str, Any], out: Path) -> str:
    summary = record.get("summary") or {}
    reads = record["reads"]
    recorded = record["steps"]["recorded"]
    if record["settings"].get("record_all") and summary.get("steps"):
        # The whole run was recorded; the analysis cut it into steps (markers, or one whole-run step).
        recorded = summary["steps"]
    text = f"bubblescope: {recorded} steps recorded"
    if summary:
        text += f", {summary.get('blocking_reads_per_step', 0)} blocking reads/step"
    if reads:
        top = reads[0]
        where = (
            top["site"] if top.get("read_at") in (None, top["site"]) else f"{top['site']} → {top['read_at']}"
        )
        text += f"; top: {where} ({top['per_step']}/step)"
    timed = record.get("timed")
    if timed:
        lo, hi = timed["tpot_ci95_ms"]
        clock = "" if timed["timing"] == "cuda-events" else ", CPU times"
        text += (
            f"; TPOT {timed['tpot_ms']:.3f} ms [{lo:.3f}, {hi:.3f}] over {timed['steps']} timed steps{clock}"
        )
    target = record["files"]["report"] or record["files"]["analysis"] or "profile.json"
    return f"{text} -> {out / target}"
