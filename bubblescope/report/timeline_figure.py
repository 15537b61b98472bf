"""One decode step as a plotly timeline: host lane(s), GPU lane(s), idle gaps shaded by class, blocking
reads marked.

What a reader sees (issue 25): times relative to the step, in µs for a step under 10 ms and in ms
above (an axis to "1,000,000 µs" is unreadable); one distinct colour per gap class with a legend; the
name of every slice wide enough to hold it written on it (kernels by their short name); and only lanes
that hold something inside the drawn window (a nested host lane whose slices all lie before the GPU
interval was an empty band). Every string from the trace goes through `plot_text`.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from bubblescope.report.cells import blame_text, fmt_duration_ns
from bubblescope.report.figures import GAP_COLORS, _base_layout, _num, plot_text
from bubblescope.trace.kernel_names import short_kernel_name

SLICE_COLORS = {
    "user_annotation": "#c7d7ea",
    "gpu_user_annotation": "#c7d7ea",
    "python_function": "#d9e8d0",
    "cpu_op": "#6baed6",
    "cuda_runtime": "#31a354",
    "cuda_driver": "#74c476",
    "kernel": "#3182bd",
    "gpu_memcpy": "#e377c2",
    "gpu_memset": "#f7b6d2",
    "cuda_sync": "#d62728",
}
# Draw outer (long, enclosing) categories first so nested slices end up on top of them.
SLICE_DRAW_ORDER = [
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "cpu_op",
    "cuda_driver",
    "cuda_runtime",
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_sync",
]
# Nested host slices get their own lane per depth, up to this many (deeper ones share the last).
MAX_HOST_DEPTH_LANES = 4
BAR_WIDTH_OUTER = 0.8
BAR_WIDTH_STEP = 0.14
BAR_WIDTH_MIN = 0.25
# A window this long (µs) or longer is drawn in ms.
MS_AXIS_FROM_US = 10_000
# A slice at least this fraction of the window wide carries its name.
LABEL_FRACTION = 0.06
GAP_OPACITY = 0.5


def _slice_depths(slices: list[dict[str, Any]]) -> list[int]:
    """Nesting depth of each slice within its lane (0 = outermost), from start/end containment."""
    depths = [0] * len(slices)
    by_lane: dict[str, list[int]] = {}
    for index, sl in enumerate(slices):
        by_lane.setdefault(str(sl.get("lane")), []).append(index)
    for indices in by_lane.values():
        indices.sort(key=lambda i: (_num(slices[i].get("start_ns")), -_num(slices[i].get("dur_ns"))))
        open_ends_ns: list[float] = []
        for i in indices:
            start_ns = _num(slices[i].get("start_ns"))
            while open_ends_ns and open_ends_ns[-1] <= start_ns:
                open_ends_ns.pop()
            depths[i] = len(open_ends_ns)
            open_ends_ns.append(start_ns + _num(slices[i].get("dur_ns")))
    return depths


def depth_lane(lane: str, depth: int, host_lanes: set[str]) -> str:
    """The lane a slice is drawn on: a host slice nested `depth` deep gets `lane · depth N`."""
    if lane not in host_lanes or depth == 0:
        return lane
    return f"{lane} · depth {min(depth, MAX_HOST_DEPTH_LANES)}"


class _Axis:
    """The drawn window [origin, origin + span] and the unit its axis is labelled in."""

    def __init__(self, origin_ns: float, span_ns: float) -> None:
        self.origin_ns, self.span_ns = origin_ns, span_ns
        self.ns_per_unit, self.unit = (1e6, "ms") if span_ns >= MS_AXIS_FROM_US * 1e3 else (1e3, "µs")

    def at(self, t_ns: float) -> float:
        return (t_ns - self.origin_ns) / self.ns_per_unit

    def length(self, dur_ns: float) -> float:
        return dur_ns / self.ns_per_unit

    def shows(self, start_ns: float, dur_ns: float) -> bool:
        """True when [start, start + dur] overlaps the window (every slice when the span is unknown)."""
        if self.span_ns <= 0:
            return True
        return start_ns + dur_ns >= self.origin_ns and start_ns <= self.origin_ns + self.span_ns


def _gap_lanes(gap_lane: str, lanes: list[dict[str, Any]]) -> list[str]:
    """GPU lanes a gap shades: its own lane if drawn, else lanes of that device, else every GPU lane."""
    gpu_lanes = [str(lane.get("lane")) for lane in lanes if lane.get("kind") == "gpu"]
    if gap_lane in gpu_lanes:
        return [gap_lane]
    matching = [name for name in gpu_lanes if name.startswith(gap_lane + " ")]
    return matching or gpu_lanes


def _add_gap_traces(fig: go.Figure, timeline: dict[str, Any], axis: _Axis) -> None:
    lanes = timeline.get("lanes") or []
    grouped: dict[str, dict[str, list[Any]]] = {}
    for gap in timeline.get("gaps") or []:
        start_ns, dur_ns = _num(gap.get("start_ns")), _num(gap.get("dur_ns"))
        if not axis.shows(start_ns, dur_ns):
            continue
        cls = str(gap.get("class", "other"))
        hover = (
            f"<b>idle gap · {plot_text(cls)}</b><br>{fmt_duration_ns(dur_ns)} at "
            f"+{fmt_duration_ns(start_ns - axis.origin_ns)}"
            f"<br>blame: {plot_text(blame_text(gap.get('blame') or None))}"
        )
        for lane in _gap_lanes(str(gap.get("lane")), lanes):
            bucket = grouped.setdefault(cls, {"y": [], "x": [], "base": [], "hover": []})
            bucket["y"].append(plot_text(lane))
            bucket["x"].append(axis.length(dur_ns))
            bucket["base"].append(axis.at(start_ns))
            bucket["hover"].append(hover)
    # Legend entries in the classes' fixed order, so every page lists them alike.
    for cls in [c for c in GAP_COLORS if c in grouped] + [c for c in grouped if c not in GAP_COLORS]:
        bucket = grouped[cls]
        fig.add_trace(
            go.Bar(
                y=bucket["y"],
                x=bucket["x"],
                base=bucket["base"],
                orientation="h",
                name=f"gap: {plot_text(cls)}",
                width=0.95,
                opacity=GAP_OPACITY,
                marker={"color": GAP_COLORS.get(cls, "#bbbbbb"), "line": {"width": 0}},
                hovertext=bucket["hover"],
                hoverinfo="text",
                legendgroup="gaps",
            )
        )


def _label(sl: dict[str, Any], cat: str) -> str:
    name = str(sl.get("name") or "")
    return plot_text(short_kernel_name(name) if cat == "kernel" else name)


def _add_slice_traces(
    fig: go.Figure, slices: list[dict[str, Any]], axis: _Axis, host_lanes: set[str]
) -> list[str]:
    """Slices as bars, one trace per category, large ones labelled; returns the lanes it drew on."""
    depths = _slice_depths(slices)
    used: list[str] = []
    by_cat: dict[str, list[int]] = {}
    for index, sl in enumerate(slices):
        by_cat.setdefault(str(sl.get("cat", "other")), []).append(index)
    ordered = sorted(
        by_cat, key=lambda c: SLICE_DRAW_ORDER.index(c) if c in SLICE_DRAW_ORDER else len(SLICE_DRAW_ORDER)
    )
    label_from_ns = LABEL_FRACTION * axis.span_ns if axis.span_ns > 0 else float("inf")
    for cat in ordered:
        indices = sorted(by_cat[cat], key=lambda i: depths[i])
        rows = [slices[i] for i in indices]
        lanes = [depth_lane(str(slices[i].get("lane")), depths[i], host_lanes) for i in indices]
        used += [lane for lane in lanes if lane not in used]
        widths = [
            BAR_WIDTH_OUTER
            if str(slices[i].get("lane")) in host_lanes
            else max(BAR_WIDTH_OUTER - BAR_WIDTH_STEP * depths[i], BAR_WIDTH_MIN)
            for i in indices
        ]
        hover = [
            f"<b>{plot_text(sl.get('name'))}</b><br>{plot_text(cat)} · "
            f"{fmt_duration_ns(sl.get('dur_ns'))} at "
            f"+{fmt_duration_ns(_num(sl.get('start_ns')) - axis.origin_ns)}"
            for sl in rows
        ]
        fig.add_trace(
            go.Bar(
                y=[plot_text(lane) for lane in lanes],
                x=[axis.length(_num(sl.get("dur_ns"))) for sl in rows],
                base=[axis.at(_num(sl.get("start_ns"))) for sl in rows],
                width=widths,
                orientation="h",
                name=plot_text(cat),
                text=[_label(sl, cat) if _num(sl.get("dur_ns")) >= label_from_ns else "" for sl in rows],
                textposition="inside",
                insidetextanchor="middle",
                textfont={"size": 10},
                hovertext=hover,
                hoverinfo="text",
                marker={"color": SLICE_COLORS.get(cat, "#8c8c8c"), "line": {"width": 0.5, "color": "#fff"}},
            )
        )
    return used


def _add_sync_marks(fig: go.Figure, timeline: dict[str, Any], axis: _Axis, host_lane: str) -> None:
    syncs = [
        s
        for s in timeline.get("syncs") or []
        if isinstance(s, dict) and axis.shows(_num(s.get("start_ns")), _num(s.get("dur_ns")))
    ]
    if not syncs:
        return
    starts = [axis.at(_num(s.get("start_ns"))) for s in syncs]
    hover = [
        f"<b>blocking read · {plot_text(s.get('op'))}</b><br>{plot_text(s.get('site') or '—')}"
        f"<br>host blocked {fmt_duration_ns(s.get('dur_ns'))} at "
        f"+{fmt_duration_ns(_num(s.get('start_ns')) - axis.origin_ns)}"
        for s in syncs
    ]
    fig.add_trace(
        go.Scatter(
            x=starts,
            # A merged multi-rank timeline names each read's host lane; one rank's reads sit on its host.
            y=[plot_text(s.get("lane") or host_lane) for s in syncs],
            mode="markers",
            name="blocking read",
            hovertext=hover,
            hoverinfo="text",
            marker={
                "symbol": "triangle-down",
                "size": 14,
                "color": "#d62728",
                "line": {"width": 1, "color": "#fff"},
            },
        )
    )
    # One trace of dotted vertical lines (None breaks the line between reads): `add_vline` per read made
    # a 1000-read step take minutes to build, since each call re-validates every shape before it.
    line_x: list[float | None] = []
    line_y: list[float | None] = []
    for x in starts:
        line_x += [x, x, None]
        line_y += [0.0, 1.0, None]
    fig.add_trace(
        go.Scatter(
            x=line_x,
            y=line_y,
            yaxis="y2",
            mode="lines",
            line={"color": "#d62728", "width": 1, "dash": "dot"},
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.update_layout(yaxis2={"overlaying": "y", "range": [0, 1], "visible": False})


def _window(timeline: dict[str, Any]) -> tuple[_Axis, bool]:
    """The drawn window: the step's GPU interval (`gpu_start_ns`, `gpu_dur_ns`) when it has one, else
    the whole step; and whether it is the GPU interval."""
    # Aligned to the step's GPU interval: under host run-ahead the host window starts long before the
    # GPU work it launched, and a window spanning both showed empty GPU lanes and a step wider than TPOT.
    gpu_start_ns, gpu_dur_ns = _num(timeline.get("gpu_start_ns"), -1.0), _num(timeline.get("gpu_dur_ns"))
    if gpu_start_ns >= 0 and gpu_dur_ns > 0:
        return _Axis(gpu_start_ns, gpu_dur_ns), True
    return _Axis(_num(timeline.get("start_ns")), _num(timeline.get("dur_ns"))), False


def timeline_figure(timeline: dict[str, Any]) -> go.Figure:
    """One decode step: host lane, GPU lane(s), idle gaps shaded by class, blocking reads marked.

    Args:
        timeline: analysis/1 `timeline`: {start_ns, dur_ns, lanes[], slices[], gaps[], syncs[]}; times are
            ns from trace start, drawn from the start of the step's GPU interval (`gpu_start_ns`; the
            whole window's start when the timeline has none), the view spanning that interval.
    Returns:
        a horizontal-bar timeline with hover details for every slice, gap and read; host slices nested
        in others are drawn on their own `host · depth N` lanes; lanes with nothing in the window are
        left out.
    """
    axis, aligned = _window(timeline)
    lanes = [lane for lane in timeline.get("lanes") or [] if isinstance(lane, dict)]
    slices = [
        sl
        for sl in timeline.get("slices") or []
        if isinstance(sl, dict) and axis.shows(_num(sl.get("start_ns")), _num(sl.get("dur_ns")))
    ]
    host_lanes = {str(lane.get("lane")) for lane in lanes if lane.get("kind") == "host"}
    host_lane = next(iter(sorted(host_lanes)), str(lanes[0].get("lane")) if lanes else "host")
    fig = go.Figure()
    _add_gap_traces(fig, timeline, axis)
    used = _add_slice_traces(fig, slices, axis, host_lanes)
    drawn = set(used) | {plot_text(lane) for lane in used}
    drawn |= {str(y) for trace in fig.data if isinstance(trace, go.Bar) for y in (trace.y or ())}
    lane_names = [str(lane.get("lane")) for lane in lanes]
    lane_names += [str(sl.get("lane")) for sl in slices if str(sl.get("lane")) not in lane_names]
    for lane in sorted(used):
        if lane not in lane_names:
            # A depth lane sits right under the lanes of its host thread drawn so far.
            parent = lane.split(" · depth ")[0]
            at = max(i for i, name in enumerate(lane_names) if name.split(" · depth ")[0] == parent)
            lane_names.insert(at + 1, lane)
    # A lane with nothing in the window would be an empty band (the host lane keeps its read marks).
    lane_names = [n for n in lane_names if plot_text(n) in drawn or n in used or n == host_lane]
    _add_sync_marks(fig, timeline, axis, host_lane)
    fig.update_layout(
        barmode="overlay",
        bargap=0.1,
        legend={"orientation": "h", "y": -0.25},
        uniformtext={"minsize": 8, "mode": "hide"},
    )
    fig.update_xaxes(exponentformat="none", separatethousands=True)
    fig.update_yaxes(
        categoryorder="array", categoryarray=[plot_text(n) for n in lane_names], autorange="reversed"
    )
    if aligned:
        host_lead_ns = axis.origin_ns - _num(timeline.get("host_start_ns"), axis.origin_ns)
        note = (
            f" (the host window starts {fmt_duration_ns(host_lead_ns)} earlier)" if host_lead_ns > 0 else ""
        )
        fig.update_xaxes(title_text=f"{axis.unit} from the start of the step's GPU interval{note}")
    else:
        fig.update_xaxes(title_text=f"{axis.unit} from step start")
    if axis.span_ns > 0:
        fig.update_xaxes(range=[0, axis.length(axis.span_ns)])
    ranks = timeline.get("ranks")
    who = (
        f"ranks {', '.join(plot_text(r) for r in ranks)}"
        if isinstance(ranks, list) and len(ranks) > 1
        else f"rank {plot_text(timeline.get('rank', 0))}"
    )
    title = f"One decode step (step {plot_text(timeline.get('step'))}, {who})"
    return _base_layout(fig, title, 260 + 70 * max(len(lane_names), 1))
