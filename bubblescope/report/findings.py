"""What to fix first: one ranked list of findings from a `bubblescope.analysis/1` dict.

Every surface (console, HTML, Markdown, and `findings[]` in `analyze --format json`) opens with this
list. Each finding names the place to look, the expected saving per token if it were fixed, and a hint.
Savings are in *timed* terms (`timed_idle.bound_idle`): the profiled window's idle less the profiler's
own share, so their sum never exceeds the timed step's idle (TPOT x tokens per step - GPU busy per
step). Without a timed step (a bare trace) the profiler's share is the per-call estimate and every
saving says it is an estimate. Sources, each read from the analysis (rendering side only):

* a host-blocking read site: its GPU bubble per step (`syncs[].bubble_ns` per read x reads per typical
  step); all read sites together stay within the timed `sync` idle;
* `launch`, `dependency` and `host` idle: the timed idle of that class per step (typical-step means, so
  the classes add up to the timed idle), with what the host was doing (the largest such gap's blame);
* kernels far below the bandwidth ceiling (`kernels[]` rows with achieved bandwidth): GPU *busy* time,
  bounded by the busy time, not by the idle (`bound` says which).

A finding the bound cuts says so (`cut_from_ns_per_token`: what the profiled window showed). The tool's
own and torch.profiler's synchronizes are never reads (`detect.host_syncs`), and `is_tool_site` still
drops any read whose site is bubblescope's timing code.

`fix_first` is the one entry point: h23-ablate's predicted-vs-measured table calls it (or
`timed_idle.bound_idle` directly) with the all-off run's analysis and timed step.
"""

from __future__ import annotations

import re
from typing import Any

from bubblescope.analysis.timed_idle import bound_idle
from bubblescope.detect.tracing_cost import GRAPH_NODE_ADDED_NS
from bubblescope.report.cells import blame_text, fmt_duration_ns, num

# Sites of the synchronize calls bubblescope itself makes around the profiled and timed windows.
TOOL_SITE_RE = re.compile(
    r"^(profiled|timed)\.py\(\d+\): (profile_window|_time_repeat_cuda|_time_repeat_host|run_timed)$"
)
# A finding worth less than this per step is noise on any surface (a tenth of a microsecond).
MIN_SAVING_NS = 100
# A kernel using less than this fraction of the bandwidth ceiling is listed (when bytes are known).
LOW_BANDWIDTH_FRACTION = 0.5
DEFAULT_SHOWN = 8
PDL_OR_FUSION = "enable PDL (programmatic dependent launch) or fuse the small kernels"
CLASS_HINTS = {
    "launch": (
        "kernel launch latency between back-to-back kernels",
        "capture the decode step in a CUDA graph (torch.compile mode='reduce-overhead'), " + PDL_OR_FUSION,
    ),
    "dependency": (
        "a stream waited on another stream or event",
        "overlap or reorder the cross-stream work, or put it on one stream",
    ),
    "host": (
        "the host was late issuing work",
        "move the CPU work off the decode loop's critical path, or capture the step in a CUDA graph",
    ),
}
# The same classes when the step already replays as a CUDA graph: capture is done, say what is left.
GRAPH_HINTS = {
    "launch": "the step is already a CUDA graph: this is kernel-to-kernel latency inside it; "
    + PDL_OR_FUSION,
    "host": "the step is already a CUDA graph: the host time is around its launch ({launch}); tracing "
    "inflates a graph launch's host time (about {added} per graph node in H200 traces; the timed bound "
    "takes that out when a timed step exists): launch the next replay before the host work between "
    "steps, or shorten that work",
    "read": "; the step replays as a CUDA graph, so the read runs outside the graph between replays: "
    "launch the next replay before reading, or keep the value on device inside the graph",
}
GRAPH_LAUNCH_RE = re.compile(r"(cuda|hip)GraphLaunch(?:\s+(\d+(?:\.\d+)?\s*(?:µs|us|ms)))?")


def is_tool_site(site: Any) -> bool:
    """True for the synchronize bubblescope itself makes (never a user's finding)."""
    return bool(TOOL_SITE_RE.match(str(site or "")))


def replays_graphs(analysis: dict[str, Any]) -> bool:
    """True when the profiled steps replay CUDA/HIP graphs: at least one graph launch per step."""
    launches = sum(
        num(d.get("graph_launches")) or 0 for d in analysis.get("devices") or [] if isinstance(d, dict)
    )
    steps = num((analysis.get("summary") or {}).get("steps")) or len(analysis.get("steps") or [])
    return launches > 0 and launches >= max(steps, 1)


def _sync_findings(analysis: dict[str, Any], budget_ns: float, graphs: bool) -> list[dict[str, Any]]:
    """Read sites; their savings share the timed `sync` idle (`budget_ns` per step)."""
    measured = analysis.get("gpu_measured") is not False
    out = []
    for sync in analysis.get("syncs") or []:
        if not isinstance(sync, dict) or is_tool_site(sync.get("site")):
            continue
        count, per_step = num(sync.get("count")) or 0.0, num(sync.get("per_step")) or 0.0
        if per_step <= 0:
            continue
        profiled = None
        if measured and count > 0:
            profiled = (num(sync.get("bubble_ns")) or 0.0) / count * per_step
        op = sync.get("op") or sync.get("api") or "read"
        hint = str(sync.get("hint") or "") + (GRAPH_HINTS["read"] if graphs else "")
        out.append(
            _finding(
                "blocking read",
                f"{op}, {per_step:g} per step",
                str(sync.get("site") or "unknown site"),
                profiled,
                hint,
            )
        )
    _share_budget([f for f in out if f["profiled_ns"] is not None], budget_ns)
    return out


def _finding(
    kind: str, what: str, site: str, profiled_ns: float | None, hint: str, bound: str = "idle"
) -> dict:
    return {
        "kind": kind,
        "what": what,
        "site": site,
        "profiled_ns": profiled_ns,
        "ns": profiled_ns,
        "hint": hint,
        "bound": bound,
    }


def _share_budget(findings: list[dict[str, Any]], budget_ns: float) -> None:
    """Scale the findings' per-step savings down together so they sum to at most `budget_ns`."""
    total = sum(f["ns"] for f in findings)
    if total > budget_ns:
        keep = budget_ns / total if total > 0 else 0.0
        for finding in findings:
            finding["ns"] *= keep


def _top_blame(analysis: dict[str, Any], cls: str) -> str | None:
    gaps = [g for g in analysis.get("gaps_top") or [] if isinstance(g, dict) and g.get("class") == cls]
    if not gaps:
        return None
    largest = max(gaps, key=lambda g: num(g.get("dur_ns")) or 0.0)
    return blame_text(largest.get("blame") or "") or None


def _idle_findings(analysis: dict[str, Any], bound: dict[str, Any], graphs: bool) -> list[dict[str, Any]]:
    out = []
    for cls, (what, hint) in CLASS_HINTS.items():
        profiled = bound["profiled_by_class_ns"][cls]
        if profiled < MIN_SAVING_NS:
            continue
        blame = _top_blame(analysis, cls)
        site = f"covered by: {blame}" if cls == "host" and blame else (blame or "every step")
        in_graph_launch = bool(blame and GRAPH_LAUNCH_RE.search(blame))
        if cls == "launch" and (graphs or "graph replay" in (blame or "")):
            hint = GRAPH_HINTS["launch"]
        elif cls == "host" and (graphs or in_graph_launch):
            hint = _graph_host_hint(blame)
        finding = _finding(f"{cls} idle", what, site, profiled, hint)
        finding["ns"] = bound["idle_by_class_ns"][cls]
        out.append(finding)
    return out


def _graph_host_hint(blame: str | None) -> str:
    """The host hint of a graph-replayed step, naming the graph launch's own time in this trace."""
    match = GRAPH_LAUNCH_RE.search(blame or "")
    launch = (
        f"{match.group(1)}GraphLaunch {match.group(2)} here"
        if match and match.group(2)
        else "cudaGraphLaunch"
    )
    return GRAPH_HINTS["host"].format(launch=launch, added=fmt_duration_ns(GRAPH_NODE_ADDED_NS))


def _kernel_findings(analysis: dict[str, Any], busy_ns: float | None) -> list[dict[str, Any]]:
    out = []
    for kernel in analysis.get("kernels") or []:
        if not isinstance(kernel, dict):
            continue
        fraction, per_step_ns = num(kernel.get("bandwidth_fraction")), num(kernel.get("ns_per_step"))
        if fraction is None or per_step_ns is None or fraction >= LOW_BANDWIDTH_FRACTION:
            continue
        # Reaching the ceiling would take its time down to fraction x today's: GPU busy time, not idle.
        out.append(
            _finding(
                "slow kernel",
                f"{fraction:.0%} of the bandwidth ceiling",
                str(kernel.get("name")),
                per_step_ns * (1.0 - fraction),
                "memory-bound at batch size 1: check the access pattern, tile sizes and dtype",
                bound="busy",
            )
        )
    if busy_ns is not None:
        _share_budget(out, busy_ns)
    return out


def fix_first(
    analysis: dict[str, Any] | None,
    tokens_per_step: float = 1.0,
    limit: int = DEFAULT_SHOWN,
    *,
    timed_step_ns: float | None = None,
) -> list[dict[str, Any]]:
    """Ranked findings, largest expected saving first (those without a measured saving last).

    Args:
        analysis: a `bubblescope.analysis/1` dict (None or empty: no findings). It may carry
            `timed_step_ns` (a run's TPOT x tokens per step; `report.run_rows.findings_analysis` puts the
            record's there, a profiled own loop that timed its steps may write it).
        tokens_per_step: mean tokens per decode step (speculative decoding > 1), so savings are per token.
        limit: most findings returned.
        timed_step_ns: the timed step, ns (wins over the analysis' own). None and none in the analysis:
            the per-call tracing model bounds the savings, marked estimates.

    Returns:
        [{rank, kind, what, site, saving_ns_per_token (float, or None: not measured), hint,
          bound ("idle": within the timed idle, all of them together; "busy": GPU busy time),
          estimate (True: no timed step, the profiler's share from the per-call model),
          cut_from_ns_per_token (what the profiled window showed, when the timed bound cut it; else None)}].
        Sum of saving_ns_per_token over the "idle" findings <= the timed idle per step / tokens_per_step.
    """
    if not isinstance(analysis, dict):
        return []
    tokens = tokens_per_step if tokens_per_step and tokens_per_step > 0 else 1.0
    bound = bound_idle(analysis, timed_step_ns)
    graphs = replays_graphs(analysis)
    findings = _sync_findings(analysis, bound["idle_by_class_ns"]["sync"] if bound else 0.0, graphs)
    if bound:
        findings += _idle_findings(analysis, bound, graphs)
        # Typical-step means add up; the read sites' shares and the classes together stay in the bound.
        _share_budget(
            [f for f in findings if f["bound"] == "idle" and f["ns"] is not None], bound["timed_idle_ns"]
        )
    findings += _kernel_findings(analysis, bound["gpu_busy_ns"] if bound else None)
    out = []
    for f in findings:
        saving = f["ns"] / tokens if f["ns"] is not None else None
        if saving is not None and saving < MIN_SAVING_NS / tokens:
            continue
        cut = f["profiled_ns"] is not None and f["ns"] is not None and f["ns"] < f["profiled_ns"] - 1e-6
        out.append(
            {
                "kind": f["kind"],
                "what": f["what"],
                "site": f["site"],
                "saving_ns_per_token": saving,
                "hint": f["hint"],
                "bound": f["bound"],
                "estimate": bool(bound and bound["estimate"]),
                "cut_from_ns_per_token": f["profiled_ns"] / tokens if cut else None,
            }
        )
    out.sort(key=lambda f: (f["saving_ns_per_token"] is None, -(f["saving_ns_per_token"] or 0.0)))
    return [{"rank": i, **f} for i, f in enumerate(out[:limit], start=1)]


def with_findings(analysis: dict[str, Any], tokens_per_step: float = 1.0) -> dict[str, Any]:
    """`analysis` with `findings` (the whole fix-first list) and `idle_bound` (`timed_idle.bound_idle`)
    added: what `analyze --format json` and `bubblescope.analyze(...).to_dict()` hold."""
    analysis["findings"] = fix_first(analysis, tokens_per_step, limit=1_000_000)
    analysis["idle_bound"] = bound_idle(analysis)
    return analysis


def fix_first_caption(analysis: dict[str, Any] | None, timed_step_ns: float | None = None) -> str:
    """The line under the list on every surface: which steps it describes, the profiled-over-timed
    ratio and the profiler's share left out ('' without a GPU measurement)."""
    bound = bound_idle(analysis, timed_step_ns) if isinstance(analysis, dict) else None
    if not bound:
        return ""
    steps = (
        f"profiled steps: {bound['typical_steps']} of {bound['steps']} (warm-up/outlier steps left out)"
        if bound["steps"] is not None
        else "profiled steps: the run's profiled window"
    )
    profiler = fmt_duration_ns(bound["profiler_ns"])
    if bound["source"] == "timed":
        return (
            f"{steps}; profiled step {fmt_duration_ns(bound['profiled_step_ns'])} = "
            f"{bound['profiled_over_timed']:.2f}x the timed {fmt_duration_ns(bound['timed_step_ns'])}: "
            f"{profiler}/step of idle is the profiler's (tracing), never offered as a saving; savings are "
            f"bounded by the timed idle, {fmt_duration_ns(bound['timed_idle_ns'])}/step"
        )
    return (
        f"{steps}; no timed step: savings are estimates, bounded by the profiled idle less the profiler's "
        f"estimated share ({profiler}/step, per-call tracing model measured on the H200), never offered"
    )


def _saving_cell(finding: dict[str, Any]) -> str:
    saving = finding["saving_ns_per_token"]
    if saving is None:
        return "not measured (no GPU)"
    text = fmt_duration_ns(saving)
    if finding.get("cut_from_ns_per_token") is not None:
        text += f" (cut from {fmt_duration_ns(finding['cut_from_ns_per_token'])} profiled: timed bound)"
    if finding.get("bound") == "busy":
        text += " of GPU busy"
    elif finding.get("estimate"):
        text += " (estimate)"
    return text


def fix_first_rows(findings: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The fix-first list as (headers, rows) of plain strings for every table surface."""
    headers = ["#", "finding", "where", "saving / token", "fix"]
    rows = [
        [str(f["rank"]), f"{f['kind']}: {f['what']}", f["site"], _saving_cell(f), f["hint"]] for f in findings
    ]
    return headers, rows


FIX_FIRST_TITLE = "What to fix first (expected saving per token if fixed, bounded by the timed step's idle)"
