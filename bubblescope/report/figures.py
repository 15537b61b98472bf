"""Plotly figure builders for the HTML report: pure functions, dicts from the JSON contracts in, figures out.

Every string that came from a trace or a record goes through `plot_text` before it reaches plotly:
plotly renders a subset of HTML in hover text, tick labels and legends, so a kernel named `<b>x</b>`
would be drawn bold (and a `<script>` would be a tag, not text). Entities it decodes back to text.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from bubblescope.report import escape
from bubblescope.report.ablation_cells import removed_idle_text
from bubblescope.report.cells import (
    ESTIMATORS,
    blame_text,
    fmt_at_resolution,
    fmt_estimate,
    fmt_range,
    interval_resolved,
)
from bubblescope.report.markdown import shown_estimators

GAP_COLORS = {
    "sync": "#d62728",
    "host": "#ff7f0e",
    "launch": "#e6c229",
    "dependency": "#9467bd",
    "outside": "#9e9e9e",
}
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
NS_PER_US = 1000.0
# Nested host slices get their own lane per depth, up to this many (deeper ones share the last).
MAX_HOST_DEPTH_LANES = 4
BAR_WIDTH_OUTER = 0.8
BAR_WIDTH_STEP = 0.14
BAR_WIDTH_MIN = 0.25


def plot_text(value: Any) -> str:
    """A string safe to hand to plotly as text: truncated, HTML-escaped so it is drawn literally."""
    return escape.plot_text(value)


def _num(value: Any, default: float = 0.0) -> float:
    """A float from a JSON number, `default` for null/missing/non-numeric."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def _base_layout(fig: go.Figure, title: str, height_px: int) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.01},
        height=height_px,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 50, "b": 40},
        hoverlabel={"align": "left"},
    )
    return fig


def waterfall_figure(waterfall: list[dict[str, Any]]) -> go.Figure:
    """TPOT waterfall: the baseline, each switch's cumulative delta in the stated order, and the end.

    Args:
        waterfall: ablation/1 `attribution.waterfall` rows: {step, tpot_ms, delta_ms?, lo, hi}.
    Returns:
        a figure with a Waterfall trace plus the 95% interval of each cumulative TPOT as error bars.
    """
    labels = [plot_text(row.get("step")) for row in waterfall]
    tpot_ms = [_num(row.get("tpot_ms")) for row in waterfall]
    lo_ms = [_num(row.get("lo"), tpot) for row, tpot in zip(waterfall, tpot_ms, strict=True)]
    hi_ms = [_num(row.get("hi"), tpot) for row, tpot in zip(waterfall, tpot_ms, strict=True)]
    measures = ["absolute"] + ["relative"] * (len(waterfall) - 1)
    values_ms = tpot_ms[:1] + [
        _num(row.get("delta_ms"), tpot_ms[i + 1] - tpot_ms[i]) for i, row in enumerate(waterfall[1:])
    ]
    texts = [
        fmt_at_resolution(v, lo_ms[0], hi_ms[0])
        if i == 0
        else fmt_at_resolution(v, waterfall[i].get("delta_lo"), waterfall[i].get("delta_hi"), signed=True)
        + _noise_mark(waterfall[i])
        for i, v in enumerate(values_ms)
    ]
    hover = [
        f"{label}<br>TPOT {fmt_at_resolution(tpot, lo, hi, 'ms')}<br>95% CI {fmt_range(lo, hi)} ms"
        for label, tpot, lo, hi in zip(labels, tpot_ms, lo_ms, hi_ms, strict=True)
    ]
    bar_labels = list(labels)
    if len(waterfall) > 1:
        # The closing total bar: where all switches in the stated order land.
        bar_labels.append("all on")
        measures.append("total")
        values_ms.append(tpot_ms[-1])
        texts.append(fmt_at_resolution(tpot_ms[-1], lo_ms[-1], hi_ms[-1]))
        hover.append(hover[-1])
    fig = go.Figure()
    fig.add_trace(
        go.Waterfall(
            x=bar_labels,
            y=values_ms,
            measure=measures,
            name="TPOT",
            hovertext=hover,
            hoverinfo="text",
            text=texts,
            textposition="outside",
            decreasing={"marker": {"color": "#2ca02c"}},
            increasing={"marker": {"color": "#d62728"}},
            totals={"marker": {"color": "#1f77b4"}},
            connector={"line": {"color": "#999", "dash": "dot"}},
        )
    )
    fig.add_trace(_interval_markers(labels, tpot_ms, lo_ms, hi_ms, hover[: len(labels)]))
    fig.update_yaxes(title_text="TPOT (ms)", rangemode="tozero")
    return _base_layout(fig, "TPOT waterfall (switches added in order)", 420)


def _noise_mark(row: dict[str, Any]) -> str:
    """` (noise)` on a waterfall bar whose Δ is not resolved (docs/intervals.md)."""
    delta = {"est": row.get("delta_ms"), "lo": row.get("delta_lo"), "hi": row.get("delta_hi")}
    if not isinstance(delta["lo"], int | float) or interval_resolved(delta):
        return ""
    return " (noise)"


def _interval_markers(
    labels: list[str], tpot_ms: list[float], lo_ms: list[float], hi_ms: list[float], hover: list[str]
) -> go.Scatter:
    """Dots at each cumulative TPOT with its 95% interval as asymmetric error bars."""
    return go.Scatter(
        x=labels,
        y=tpot_ms,
        mode="markers",
        name="95% CI",
        hovertext=hover,
        hoverinfo="text",
        marker={"color": "#333", "size": 5},
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [max(hi - t, 0.0) for hi, t in zip(hi_ms, tpot_ms, strict=True)],
            "arrayminus": [max(t - lo, 0.0) for lo, t in zip(lo_ms, tpot_ms, strict=True)],
        },
    )


def _removed_text(switch: dict[str, Any]) -> str:
    reads = switch.get("removed_reads_per_step") or {}
    parts = [f"−{_num(n):g} read/step at {plot_text(site)}" for site, n in reads.items() if _num(n)]
    # The same text as the tables' column: intervals, `not resolved`, and why it is not a timed saving.
    parts.append(f"GPU idle per profiled step: {plot_text(removed_idle_text(switch))}")
    return "<br>".join(parts)


def switch_deltas_figure(switches: list[dict[str, Any]], shapley_method: Any = None) -> go.Figure:
    """Per-switch TPOT saving with 95% intervals, one bar group per switch, one bar per estimator.

    An estimate that is noise (interval holds zero or is wider than the effect) is not drawn as a bar:
    its switch is labelled `not resolved`. Shapley from one sampled ordering equals the cumulative
    order, so it is not drawn as a separate estimate.

    Args:
        switches: ablation/1 `attribution.switches` rows; each estimator is {est, lo, hi} in ms.
        shapley_method: the attribution's `shapley_method`.
    Returns:
        horizontal grouped bars; the `alone` bar's hover names what the switch removed alone.
    """
    names = []
    for sw in switches:
        resolved = any(interval_resolved(sw.get(key)) for key, _ in ESTIMATORS)
        names.append(plot_text(sw.get("name")) + ("" if resolved else " (not resolved: noise)"))
    fig = go.Figure()
    for key, label in shown_estimators(shapley_method):
        rows = [sw.get(key) if interval_resolved(sw.get(key)) else None for sw in switches]
        if all(row is None for row in rows):
            continue
        est = [_num(row.get("est")) if row else 0.0 for row in rows]
        hi = [max(_num(row.get("hi"), e) - e, 0.0) if row else 0.0 for row, e in zip(rows, est, strict=True)]
        lo = [max(e - _num(row.get("lo"), e), 0.0) if row else 0.0 for row, e in zip(rows, est, strict=True)]
        hover = [
            f"<b>{name}</b> · {label}<br>saves {fmt_estimate(e, e - minus, e + plus, 'ms')} (95% CI)"
            + (f"<br>alone vs baseline: {_removed_text(sw)}" if key == "alone_ms" else "")
            for name, e, minus, plus, sw in zip(names, est, lo, hi, switches, strict=True)
        ]
        fig.add_trace(
            go.Bar(
                y=names,
                x=est,
                orientation="h",
                name=label,
                hovertext=hover,
                hoverinfo="text",
                error_x={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
            )
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="TPOT saving (ms, positive = faster)", zeroline=True)
    fig.update_yaxes(autorange="reversed")
    return _base_layout(fig, "Per-switch ΔTPOT with 95% intervals", 120 + 90 * max(len(switches), 1))


def speed_of_light_figure(rows: list[dict[str, Any]], floor_ms: float | None) -> go.Figure:
    """Measured TPOT against the speed-of-light floor (bytes per token ÷ HBM bandwidth).

    Args:
        rows: [{label, tpot_ms, lo, hi, floor_ms?}] one bar each (a run, or each ablation config); a
            row's own `floor_ms` (its switches may read fewer bytes) overrides `floor_ms`.
        floor_ms: the floor; None draws the bars without it.
    Returns:
        horizontal bars with 95% intervals, the floor (one line, or a marker per bar when the floors
        differ) and TPOT ÷ that bar's floor in each label.
    """
    floor_ms = _num(floor_ms) or None
    labels, tpot_ms, err_hi, err_lo, texts, row_floors = [], [], [], [], [], []
    for row in rows:
        tpot = _num(row.get("tpot_ms"))
        own_floor = _num(row.get("floor_ms")) or floor_ms
        labels.append(plot_text(row.get("label")))
        tpot_ms.append(tpot)
        row_floors.append(own_floor)
        err_hi.append(max(_num(row.get("hi"), tpot) - tpot, 0.0))
        err_lo.append(max(tpot - _num(row.get("lo"), tpot), 0.0))
        ratio = f" · {tpot / own_floor:.2f}× floor" if own_floor else ""
        texts.append(fmt_at_resolution(tpot, row.get("lo"), row.get("hi"), "ms") + ratio)
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=tpot_ms,
            orientation="h",
            name="TPOT",
            text=texts,
            # At the bar's start: at its end the whisker crossed the number, centred the floor line.
            textposition="inside",
            insidetextanchor="start",
            hovertext=[f"{lab}<br>{txt}" for lab, txt in zip(labels, texts, strict=True)],
            hoverinfo="text",
            marker={"color": "#1f77b4"},
            error_x={"type": "data", "symmetric": False, "array": err_hi, "arrayminus": err_lo},
        )
    )
    distinct_floors = {round(value, 6) for value in row_floors if value}
    if len(distinct_floors) > 1:
        fig.add_trace(
            go.Scatter(
                y=labels,
                x=row_floors,
                mode="markers",
                name="floor",
                marker={"color": "#2ca02c", "symbol": "line-ns-open", "size": 18, "line": {"width": 3}},
                hovertext=[
                    f"{lab}<br>floor {value:.3f} ms" for lab, value in zip(labels, row_floors, strict=True)
                ],
                hoverinfo="text",
            )
        )
    elif distinct_floors:
        floor_ms = next(iter(distinct_floors))
        fig.add_vline(
            x=floor_ms,
            line={"color": "#2ca02c", "width": 3, "dash": "dash"},
            annotation_text=f"floor {floor_ms:.3f} ms",
            annotation_position="top",
        )
    fig.update_xaxes(title_text="TPOT (ms)", rangemode="tozero")
    fig.update_yaxes(autorange="reversed")
    return _base_layout(fig, "Speed of light: TPOT vs bytes-per-token floor", 140 + 36 * max(len(rows), 1))


def idle_by_class_figure(rows: list[dict[str, Any]]) -> go.Figure:
    """GPU idle per step split by gap class, one stacked bar per run/config.

    Args:
        rows: [{label, idle_by_class_ns_per_step: {class: ns}}].
    """
    labels = [plot_text(row.get("label")) for row in rows]
    fig = go.Figure()
    for cls, color in GAP_COLORS.items():
        values_us = [_num((row.get("idle_by_class_ns_per_step") or {}).get(cls)) / NS_PER_US for row in rows]
        if not any(values_us):
            continue
        fig.add_trace(
            go.Bar(
                y=labels,
                x=values_us,
                orientation="h",
                name=cls,
                marker={"color": color},
                hovertemplate="%{y}<br>" + cls + ": %{x:.1f} µs/step<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="GPU idle per step (µs)")
    fig.update_yaxes(autorange="reversed")
    return _base_layout(fig, "GPU idle per step by cause", 140 + 36 * max(len(rows), 1))


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


def _gap_lanes(gap_lane: str, lanes: list[dict[str, Any]]) -> list[str]:
    """GPU lanes a gap shades: its own lane if drawn, else lanes of that device, else every GPU lane."""
    gpu_lanes = [str(lane.get("lane")) for lane in lanes if lane.get("kind") == "gpu"]
    if gap_lane in gpu_lanes:
        return [gap_lane]
    matching = [name for name in gpu_lanes if name.startswith(gap_lane + " ")]
    return matching or gpu_lanes


def _add_gap_traces(fig: go.Figure, timeline: dict[str, Any], origin_ns: float) -> None:
    lanes = timeline.get("lanes") or []
    grouped: dict[str, dict[str, list[Any]]] = {}
    for gap in timeline.get("gaps") or []:
        cls = str(gap.get("class", "other"))
        start_us = (_num(gap.get("start_ns")) - origin_ns) / NS_PER_US
        dur_us = _num(gap.get("dur_ns")) / NS_PER_US
        hover = (
            f"<b>idle gap · {plot_text(cls)}</b><br>{dur_us:.1f} µs at +{start_us:.1f} µs"
            f"<br>blame: {plot_text(blame_text(gap.get('blame') or None))}"
        )
        for lane in _gap_lanes(str(gap.get("lane")), lanes):
            bucket = grouped.setdefault(cls, {"y": [], "x": [], "base": [], "hover": []})
            bucket["y"].append(plot_text(lane))
            bucket["x"].append(dur_us)
            bucket["base"].append(start_us)
            bucket["hover"].append(hover)
    for cls, bucket in grouped.items():
        fig.add_trace(
            go.Bar(
                y=bucket["y"],
                x=bucket["x"],
                base=bucket["base"],
                orientation="h",
                name=f"gap: {plot_text(cls)}",
                width=0.95,
                opacity=0.35,
                marker={"color": GAP_COLORS.get(cls, "#bbbbbb"), "line": {"width": 0}},
                hovertext=bucket["hover"],
                hoverinfo="text",
                legendgroup="gaps",
            )
        )


def depth_lane(lane: str, depth: int, host_lanes: set[str]) -> str:
    """The lane a slice is drawn on: a host slice nested `depth` deep gets `lane · depth N`."""
    if lane not in host_lanes or depth == 0:
        return lane
    return f"{lane} · depth {min(depth, MAX_HOST_DEPTH_LANES)}"


def _add_slice_traces(
    fig: go.Figure, timeline: dict[str, Any], origin_ns: float, host_lanes: set[str]
) -> list[str]:
    """Slices as bars, one trace per category; returns the depth lanes it drew on."""
    slices = [sl for sl in timeline.get("slices") or [] if isinstance(sl, dict)]
    depths = _slice_depths(slices)
    used: list[str] = []
    by_cat: dict[str, list[int]] = {}
    for index, sl in enumerate(slices):
        by_cat.setdefault(str(sl.get("cat", "other")), []).append(index)
    ordered = sorted(
        by_cat, key=lambda c: SLICE_DRAW_ORDER.index(c) if c in SLICE_DRAW_ORDER else len(SLICE_DRAW_ORDER)
    )
    for cat in ordered:
        indices = sorted(by_cat[cat], key=lambda i: depths[i])
        rows = [slices[i] for i in indices]
        start_us = [(_num(sl.get("start_ns")) - origin_ns) / NS_PER_US for sl in rows]
        dur_us = [_num(sl.get("dur_ns")) / NS_PER_US for sl in rows]
        lanes = [depth_lane(str(slices[i].get("lane")), depths[i], host_lanes) for i in indices]
        used += [lane for lane in lanes if lane not in used]
        widths = [
            BAR_WIDTH_OUTER
            if str(slices[i].get("lane")) in host_lanes
            else max(BAR_WIDTH_OUTER - BAR_WIDTH_STEP * depths[i], BAR_WIDTH_MIN)
            for i in indices
        ]
        hover = [
            f"<b>{plot_text(sl.get('name'))}</b><br>{plot_text(cat)} · {d:.1f} µs at +{s:.1f} µs"
            for sl, s, d in zip(rows, start_us, dur_us, strict=True)
        ]
        fig.add_trace(
            go.Bar(
                y=[plot_text(lane) for lane in lanes],
                x=dur_us,
                base=start_us,
                width=widths,
                orientation="h",
                name=plot_text(cat),
                hovertext=hover,
                hoverinfo="text",
                marker={"color": SLICE_COLORS.get(cat, "#8c8c8c"), "line": {"width": 0.5, "color": "#fff"}},
            )
        )
    return used


def _add_sync_marks(fig: go.Figure, timeline: dict[str, Any], origin_ns: float, host_lane: str) -> None:
    syncs = [s for s in timeline.get("syncs") or [] if isinstance(s, dict)]
    if not syncs:
        return
    start_us = [(_num(s.get("start_ns")) - origin_ns) / NS_PER_US for s in syncs]
    hover = [
        f"<b>blocking read · {plot_text(s.get('op'))}</b><br>{plot_text(s.get('site') or '—')}"
        f"<br>host blocked {_num(s.get('dur_ns')) / NS_PER_US:.1f} µs at +{x:.1f} µs"
        for s, x in zip(syncs, start_us, strict=True)
    ]
    fig.add_trace(
        go.Scatter(
            x=start_us,
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
    for x_us in start_us:
        line_x += [x_us, x_us, None]
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


def timeline_figure(timeline: dict[str, Any]) -> go.Figure:
    """One decode step: host lane, GPU lane(s), idle gaps shaded by class, blocking reads marked.

    Args:
        timeline: analysis/1 `timeline`: {start_ns, dur_ns, lanes[], slices[], gaps[], syncs[]}; times are
            ns from trace start, drawn as µs from the start of the step's GPU interval (`gpu_start_ns`;
            the whole window's start when the timeline has none), the view spanning that interval.
    Returns:
        a horizontal-bar timeline with hover details for every slice, gap and read; host slices nested
        in others are drawn on their own `host · depth N` lanes.
    """
    # Aligned to the step's GPU interval: under host run-ahead the host window starts long before the
    # GPU work it launched, and a window spanning both showed empty GPU lanes and a step wider than TPOT.
    gpu_start_ns, gpu_dur_ns = _num(timeline.get("gpu_start_ns"), -1.0), _num(timeline.get("gpu_dur_ns"))
    aligned = gpu_start_ns >= 0 and gpu_dur_ns > 0
    origin_ns = gpu_start_ns if aligned else _num(timeline.get("start_ns"))
    lanes = [lane for lane in timeline.get("lanes") or [] if isinstance(lane, dict)]
    lane_names = [str(lane.get("lane")) for lane in lanes]
    for sl in timeline.get("slices") or []:
        if isinstance(sl, dict) and str(sl.get("lane")) not in lane_names:
            lane_names.append(str(sl.get("lane")))
    host_lane = next(
        (str(lane.get("lane")) for lane in lanes if lane.get("kind") == "host"),
        lane_names[0] if lane_names else "host",
    )
    host_lanes = {str(lane.get("lane")) for lane in lanes if lane.get("kind") == "host"}
    fig = go.Figure()
    _add_gap_traces(fig, timeline, origin_ns)
    for lane in sorted(_add_slice_traces(fig, timeline, origin_ns, host_lanes)):
        if lane not in lane_names:
            # A depth lane sits right under the lanes of its host thread drawn so far.
            parent = lane.split(" · depth ")[0]
            at = max(i for i, name in enumerate(lane_names) if name.split(" · depth ")[0] == parent)
            lane_names.insert(at + 1, lane)
    _add_sync_marks(fig, timeline, origin_ns, host_lane)
    fig.update_layout(barmode="overlay", bargap=0.1, legend={"orientation": "h", "y": -0.25})
    # A CPU step spans 100+ ms: plotly's default ticks read "140k" on a µs axis; say 140,000.
    fig.update_xaxes(exponentformat="none", separatethousands=True)
    fig.update_yaxes(
        categoryorder="array", categoryarray=[plot_text(n) for n in lane_names], autorange="reversed"
    )
    if aligned:
        host_lead_us = (gpu_start_ns - _num(timeline.get("host_start_ns"), gpu_start_ns)) / NS_PER_US
        note = f" (host window starts {host_lead_us:.1f} µs earlier: pan left)" if host_lead_us > 0 else ""
        fig.update_xaxes(title_text="µs from the start of the step's GPU interval" + note)
        fig.update_xaxes(range=[0, gpu_dur_ns / NS_PER_US])
    else:
        fig.update_xaxes(title_text="µs from step start")
        step_us = _num(timeline.get("dur_ns")) / NS_PER_US
        if step_us > 0:
            fig.update_xaxes(range=[0, step_us])
    ranks = timeline.get("ranks")
    who = (
        f"ranks {', '.join(plot_text(r) for r in ranks)}"
        if isinstance(ranks, list) and len(ranks) > 1
        else f"rank {plot_text(timeline.get('rank', 0))}"
    )
    title = f"One decode step (step {plot_text(timeline.get('step'))}, {who})"
    return _base_layout(fig, title, 260 + 70 * max(len(lane_names), 1))
