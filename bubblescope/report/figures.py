"""Plotly figure builders for the HTML report: pure functions, dicts from the JSON contracts in, figures out.

Every string that came from a trace or a record goes through `plot_text` before it reaches plotly:
plotly renders a subset of HTML in hover text, tick labels and legends, so a kernel named `<b>x</b>`
would be drawn bold (and a `<script>` would be a tag, not text). Entities it decodes back to text.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from bubblescope.report import escape
from bubblescope.report.ablation_cells import removed_idle_text, timed_idle_text
from bubblescope.report.ablation_rows import shown_estimators
from bubblescope.report.cells import (
    ESTIMATORS,
    fmt_at_resolution,
    fmt_estimate,
    fmt_range,
    interval_resolved,
)

# One hue per gap class, far apart (host orange and launch yellow read as one colour when shaded).
GAP_COLORS = {
    "sync": "#d62728",
    "host": "#ff7f0e",
    "launch": "#17becf",
    "dependency": "#9467bd",
    "outside": "#7f7f7f",
}
NS_PER_US = 1000.0


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
    parts.append(f"GPU idle per timed step: {plot_text(timed_idle_text(switch))}")
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


def draws_something(fig: go.Figure) -> bool:
    """True when some trace of `fig` has a non-zero value (else the figure is bare axes)."""
    for trace in fig.data:
        for values in (getattr(trace, "x", None), getattr(trace, "y", None)):
            if values is not None and any(isinstance(v, int | float) and v for v in values):
                return True
    return False


def timeline_figure(timeline: dict[str, Any]) -> go.Figure:
    """One decode step's timeline (report/timeline_figure.py, where it is drawn)."""
    from bubblescope.report.timeline_figure import timeline_figure as draw

    return draw(timeline)
