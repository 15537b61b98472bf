"""The self-contained HTML report: one file, plotly.js inlined once, opens offline.

Safety: every string from a trace or record is escaped with `escape.html_text` (report/escape.py)
before it enters markup, and all JSON placed inside a `<script>` goes through `script_safe_json` (`<`,
`>`, `&`, U+2028/9 become \\uXXXX), so a kernel named `</script><script>...` stays text. Plotly's own
hover/labels get `figures.plot_text`.

Browser hooks (used by the headless-browser test and handy when debugging a page): the `<html>` element
counts uncaught errors in `data-js-errors` (first message in `data-js-first-error`), and `<body>` gets
`data-figures-rendered="N"` once every `Plotly.newPlot` promise has resolved.

Table rows come from markdown.py (`*_rows`), so the HTML and Markdown reports show the same numbers.
"""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go

from bubblescope.report import figures
from bubblescope.report.ablation_bandwidth import families_html
from bubblescope.report.ablation_cells import removed_idle_note
from bubblescope.report.ablation_rows import (
    ablation_summary_items,
    ablation_title,
    config_key_with_role,
    config_rows,
    switch_rows,
)
from bubblescope.report.bandwidth_rows import BANDWIDTH_TITLE, bandwidth_rows, bandwidth_sentence
from bubblescope.report.cells import NBSP, fmt_bytes, nothing_to_fix_text, num, plain
from bubblescope.report.escape import html_text
from bubblescope.report.findings import FIX_FIRST_TITLE, fix_first, fix_first_caption, fix_first_rows
from bubblescope.report.html_tables import TABLE_CSS, esc, table_html
from bubblescope.report.kernel_overlap import kernel_overlap_note
from bubblescope.report.kernel_rows import kernel_rows, kernel_sort_keys
from bubblescope.report.load_inputs import conform_ablation, conform_analysis, conform_run
from bubblescope.report.predicted_rows import PREDICTED_NOTE, PREDICTED_TITLE, predicted_rows
from bubblescope.report.profile_sections import profile_sections_html
from bubblescope.report.rank_lanes import merged_timeline
from bubblescope.report.reads_and_gaps_rows import gap_rows, gaps_heading, gpu_measured_of, sync_rows
from bubblescope.report.run_rows import (
    INTERVAL_NOTE,
    environment_rows,
    findings_analysis,
    floor_measured,
    floor_unmeasured_text,
    record_syncs,
    run_summary_items,
    run_title,
    switch_info_rows,
    tokens_per_step,
    tpot_interval_ms,
)
from bubblescope.report.tp_rows import (
    SECTION_TITLE,
    ablation_slowest_text,
    ablation_tp_rows,
    rank_rows,
    slowest_rank_text,
    tp_of,
    tp_summary_items,
)
from bubblescope.report.trace_rows import device_rows, trace_summary_items, trace_title, trace_warnings
from bubblescope.report.views_html import views_html

JS_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_safe_json(obj: Any) -> str:
    """JSON text that cannot end or open a `<script>` element or break a JS string literal."""
    text = json.dumps(obj, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in JS_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


# ---- Markup ----


class Page:
    """Collects sections and figures; `render()` returns the whole self-contained document."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: list[str] = []
        self.figure_specs: list[dict[str, Any]] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def heading(self, text: str) -> None:
        """An `<h1>` for one input; the first one also names the page when the page has no title yet."""
        if not self.title:
            self.title = f"bubblescope · {text}"
        self.parts.append(f"<h1>{esc(text)}</h1>")

    def figure(self, fig: go.Figure) -> None:
        fig_id = f"bs-fig-{len(self.figure_specs)}"
        spec = json.loads(fig.to_json())
        self.figure_specs.append(
            {
                "id": fig_id,
                "data": spec.get("data", []),
                "layout": spec.get("layout", {}),
                "config": {"responsive": True, "displaylogo": False},
            }
        )
        self.parts.append(f'<div class="figure" id="{fig_id}"></div>')

    def figure_or_note(self, fig: go.Figure, note: str) -> None:
        """The figure, or `note` in its place when it would draw nothing (bare axes say nothing)."""
        if figures.draws_something(fig):
            self.figure(fig)
        else:
            self.add(f'<p class="muted">{esc(note)}</p>')

    def render(self) -> str:
        scripts = ""
        if self.figure_specs:
            scripts = (
                f"<script>{_plotly_js()}</script>\n"
                '<script type="application/json" id="bs-figures">'
                f"{script_safe_json(self.figure_specs)}</script>\n"
                f"<script>{RENDER_JS}{SORT_JS}</script>"
            )
        else:
            scripts = f"<script>document.body.dataset.figuresRendered = '0';{SORT_JS}</script>"

        body = "\n".join(self.parts)
        title = self.title or "bubblescope report"
        return (
            f'<!DOCTYPE html>\n<html lang="en" data-js-errors="0">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html_text(title)}</title>\n<script>{ERROR_HOOK_JS}</script>\n"
            f"<style>{STYLE_CSS}{TABLE_CSS}</style>\n</head>\n<body>\n{body}\n{scripts}\n</body>\n</html>\n"
        )


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    source = get_plotlyjs()
    # The bundled library never contains this today; if a future build did, inlining would cut the page.
    if "</script" in source.lower():
        raise RuntimeError("plotly.js bundle contains '</script'; cannot inline it safely")
    return source


ERROR_HOOK_JS = """
(function(){var root=document.documentElement;function note(msg){
var n=parseInt(root.dataset.jsErrors||'0',10)+1;root.dataset.jsErrors=String(n);
if(!root.dataset.jsFirstError){root.dataset.jsFirstError=String(msg).slice(0,300);}}
window.addEventListener('error',function(e){note(e.message||e);});
window.addEventListener('unhandledrejection',function(e){note(e.reason||'unhandled rejection');});})();
"""
RENDER_JS = """
(function(){var specs=JSON.parse(document.getElementById('bs-figures').textContent);
var jobs=specs.map(function(s){return Plotly.newPlot(s.id,s.data,s.layout,s.config);});
Promise.all(jobs).then(function(){var n=0;specs.forEach(function(s){
if(document.getElementById(s.id).querySelector('.main-svg')){n+=1;}});
document.body.dataset.figuresRendered=String(n);});})();
"""
# Click a header of a `table.sortable` to sort by that column (numbers by value), again to reverse.
SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th,col){th.style.cursor='pointer';
th.addEventListener('click',function(){var body=th.closest('table').tBodies[0];
var down=th.dataset.dir!=='desc';th.dataset.dir=down?'desc':'asc';
var rows=Array.prototype.slice.call(body.rows);rows.sort(function(a,b){
var x=a.cells[col].dataset.sort,y=b.cells[col].dataset.sort,nx=parseFloat(x),ny=parseFloat(y);
var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:String(x).localeCompare(String(y));return down?-c:c;});
rows.forEach(function(r){body.appendChild(r);});});});
"""
STYLE_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1280px;
color:#222;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px;overflow-wrap:anywhere}
h2{overflow-wrap:anywhere;border-bottom:2px solid #eee;padding-bottom:4px;margin-top:36px}
.sub{color:#666;margin-top:0;overflow-wrap:anywhere}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:150px;background:#fafafa}
.card .label{font-size:.8em;color:#666}.card .value{font-size:1.25em;font-weight:600}
.warn{color:#8a5a00;background:#fff7e0;padding:6px 10px;border-radius:4px}
.figure{margin:8px 0 20px 0}.muted{color:#888}code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
"""


def fix_first_html(page: Page, analysis: dict[str, Any] | None, per_step_tokens: float = 1.0) -> None:
    """The fix-first section, first under each input's heading."""
    page.add(f"<h2>{esc(FIX_FIRST_TITLE)}</h2>")
    page.add(table_html(fix_first_rows(fix_first(analysis, per_step_tokens)), nothing_to_fix_text(analysis)))
    caption = fix_first_caption(analysis)
    if caption:
        page.add(f'<p class="sub">{esc(caption)}</p>')


def kernels_html(page: Page, analysis: dict[str, Any] | None) -> None:
    """The per-kernel table (sortable), when the analysis has kernels."""
    kernels = (analysis or {}).get("kernels") or []
    if not kernels:
        return
    page.add(f"<h2>Kernels by GPU time ({len(kernels)})</h2>")
    note = kernel_overlap_note(analysis)
    if note:
        page.add(f'<p class="sub">{esc(note)}</p>')
    rows = kernel_rows(kernels)
    # The short name in the cell, the full demangled name on hover (and in analysis.json).
    titles = {rows[0].index("kernel"): [plain(k.get("name")) for k in kernels if isinstance(k, dict)]}
    page.add(table_html(rows, titles=titles, sort_keys=kernel_sort_keys(kernels)))
    breakdown = bandwidth_rows(analysis)
    if breakdown[1]:
        page.add(f"<h2>{esc(BANDWIDTH_TITLE)}</h2>")
        page.add(f'<p class="sub">{esc(bandwidth_sentence(analysis))}</p>')
        page.add(table_html(breakdown))


def cards_html(items: list[tuple[str, str]]) -> str:
    cards = "".join(
        f'<div class="card"><div class="label">{esc(label)}</div><div class="value">{esc(value)}</div></div>'
        for label, value in items
    )
    return f'<div class="cards">{cards}</div>'


def warnings_html(warnings: list[Any] | None) -> str:
    return "".join(f'<p class="warn">{esc(w)}</p>' for w in warnings or [])


def _timeline_section(
    page: Page, analysis: dict[str, Any] | None, heading: str, profiled_over_timed: Any = None
) -> None:
    timeline = merged_timeline(analysis)
    page.add(f"<h2>{esc(heading)}</h2>")
    if num(profiled_over_timed) is not None:
        # The trace's steps ran under the profiler; say how far they describe the timed ones.
        page.add(
            f'<p class="sub">profiled step ÷ timed step: {num(profiled_over_timed):.2f}× '
            "(gaps and busy times describe the profiled steps, TPOT the timed ones)</p>"
        )
    if not isinstance(timeline, dict) or not timeline.get("slices"):
        # An analysed trace is not "no analysed trace": a profile page leaves its timeline out on purpose
        # (and says why), an analysis without steps has nothing to draw.
        if not analysis:
            why = ": the run has no analysed trace"
        else:
            why = " on this page" if analysis.get("steps") else ": the analysis found no step"
        page.add(f'<p class="muted">no timeline{why}</p>')
        return
    if timeline.get("truncated"):
        page.add('<p class="warn">timeline truncated: the step has more slices than the report draws</p>')
    if len(timeline.get("ranks") or []) > 1:
        page.add(
            '<p class="sub">every rank at the same step; each rank\'s lanes start at its own GPU interval '
            "(the ranks' trace clocks are not aligned)</p>"
        )
    page.figure(figures.timeline_figure(timeline))


def add_run_sections(
    page: Page, record: dict[str, Any], analysis: dict[str, Any] | None, warnings: list[str] | None = None
) -> None:
    """Append a RunRecord's sections: headline, floor, timeline, reads, gaps, switches, environment."""
    record, analysis = conform_run(record), conform_analysis(analysis)
    page.heading(f"Run: {run_title(record)}")
    page.add(
        f'<p class="sub">recorded {esc(record.get("created_utc"))} · '
        f"settings {esc(json.dumps(record.get('settings') or {}))}</p>"
    )
    page.add(
        warnings_html(
            list(warnings or [])
            + ([record["analysis"]["note"]] if (record.get("analysis") or {}).get("note") else [])
        )
    )
    fix_first_html(page, findings_analysis(record, analysis), tokens_per_step(record))
    page.add(cards_html(run_summary_items(record, analysis)))
    page.add(f'<p class="sub">{esc(INTERVAL_NOTE.strip("_"))}</p>')
    _tp_run_section(page, record)
    summary, floor = record.get("summary") or {}, record.get("floor") or {}
    page.add("<h2>Speed of light</h2>")
    if floor and not floor_measured(record):
        page.add(f'<p class="muted">floor: {esc(floor_unmeasured_text(record))}</p>')
    elif num(summary.get("tpot_ms")) is not None and floor:
        ci = tpot_interval_ms(summary)
        page.figure(
            figures.speed_of_light_figure(
                [{"label": "measured TPOT", "tpot_ms": summary["tpot_ms"], "lo": ci[0], "hi": ci[1]}],
                floor.get("floor_ms"),
            )
        )
        page.add(
            f'<p class="sub">{esc(fmt_bytes(floor.get("bytes_per_token")))} per token ÷ '
            f"{esc(floor.get('bandwidth_gbps'))}{NBSP}GB/s "
            f"({esc(floor.get('bandwidth_source'))})</p>"
        )
    else:
        page.add('<p class="muted">no floor recorded for this run</p>')
    _timeline_section(
        page, analysis, "One decode step", (record.get("analysis") or {}).get("profiled_step_over_timed")
    )
    page.add("<h2>Host-blocking reads</h2>")
    page.add(
        table_html(
            sync_rows(record_syncs(record, analysis), gpu_measured_of(record)), "no host-blocking reads"
        )
    )
    kernels_html(page, analysis)
    views_html(page, analysis)
    if analysis and analysis.get("gaps_top"):
        page.add(f"<h2>{esc(gaps_heading(analysis['gaps_top']))}</h2>")
        page.add(table_html(gap_rows(analysis["gaps_top"])))
    page.add("<h2>Switches</h2>")
    page.add(table_html(switch_info_rows(record), "no switches"))
    page.add("<h2>Environment</h2>")
    page.add(table_html(environment_rows(record.get("environment")), "not recorded"))


def _tp_run_section(page: Page, record: dict[str, Any]) -> None:
    """Per-rank table of a tensor-parallel run, and which rank is slowest and why."""
    tp = tp_of(record)
    if tp is None:
        return
    page.add(f"<h2>{esc(SECTION_TITLE)}</h2>")
    page.add(cards_html(tp_summary_items(tp)))
    page.add(f'<p class="sub">{esc(slowest_rank_text(tp))}</p>')
    page.add(table_html(rank_rows(tp)))


def add_ablation_sections(
    page: Page,
    ablation: dict[str, Any],
    records: dict[str, dict[str, Any]],
    analyses: dict[str, dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
) -> None:
    """Append an ablation's sections: attribution, waterfall, per-switch ΔTPOT, configs, timelines."""
    ablation, records = conform_ablation(ablation, records)
    analyses = {k: conform_analysis(v) or {} for k, v in (analyses or {}).items()}
    attribution = ablation.get("attribution") or {}
    page.heading(ablation_title(ablation))
    page.add(
        f'<p class="sub">switches in order: {esc(ablation.get("order") or ablation.get("toggles"))} · '
        f"Shapley: {esc(attribution.get('shapley_method'))}</p>"
    )
    page.add(warnings_html(warnings))
    base_key = config_key_with_role(ablation, "baseline")
    base_record = records.get(base_key or "") or {}
    fix_first_html(
        page, findings_analysis(base_record, analyses.get(base_key or "")), tokens_per_step(base_record)
    )
    page.add(cards_html(ablation_summary_items(attribution)))
    page.add(f'<p class="sub">{esc(INTERVAL_NOTE.strip("_"))}</p>')
    if not attribution:
        page.add('<p class="warn">no attribution yet: the ablation has not finished</p>')
    if attribution.get("waterfall"):
        page.figure(figures.waterfall_figure(attribution["waterfall"]))
    page.add("<h2>Per-switch ΔTPOT and what it removed</h2>")
    if attribution.get("switches"):
        page.figure_or_note(
            figures.switch_deltas_figure(attribution["switches"], attribution.get("shapley_method")),
            "no switch's ΔTPOT is resolved: every interval holds zero or is wider than the effect "
            "(the table below has the estimates)",
        )
    page.add(
        table_html(
            switch_rows(attribution.get("switches"), attribution.get("shapley_method")),
            "no per-switch attribution",
        )
    )
    if idle_note := removed_idle_note(attribution.get("switches")):
        page.add(f'<p class="sub">{esc(idle_note)}</p>')
    if attribution.get("predicted_vs_measured"):
        page.add(f"<h2>{esc(PREDICTED_TITLE)}</h2>")
        page.add(f'<p class="sub">{esc(PREDICTED_NOTE)}</p>')
        page.add(table_html(predicted_rows(attribution["predicted_vs_measured"])))
    all_key = config_key_with_role(ablation, "all_on")
    _ablation_config_sections(page, ablation, records, base_key)
    page.add(families_html(ablation, analyses, base_key))
    for key, label in ((base_key, "baseline"), (all_key, "all switches on")):
        if key is not None and key in analyses:
            ratio = ((records.get(key) or {}).get("analysis") or {}).get("profiled_step_over_timed")
            _timeline_section(page, analyses[key], f"One decode step: {label} ({key})", ratio)
    page.add("<h2>Host-blocking reads (baseline)</h2>")
    page.add(
        table_html(
            sync_rows(record_syncs(base_record, analyses.get(base_key or "")), gpu_measured_of(base_record)),
            "no host-blocking reads",
        )
    )
    page.add("<h2>Environment (baseline run)</h2>")
    page.add(table_html(environment_rows(base_record.get("environment")), "not recorded"))


def _ablation_config_sections(
    page: Page, ablation: dict[str, Any], records: dict[str, dict[str, Any]], base_key: str | None
) -> None:
    rows, idle_rows = [], []
    for config in ablation.get("configs") or []:
        record = records.get(str(config.get("key")))
        if not record:
            continue
        summary = record.get("summary") or {}
        ci = tpot_interval_ms(summary)
        # Each configuration has its own floor: bf16 router / lm_head switches read fewer bytes. An assumed
        # bandwidth (a CPU run) gives no floor at all.
        own_floor = (record.get("floor") or {}).get("floor_ms") if floor_measured(record) else None
        rows.append(
            {
                "label": config.get("key"),
                "tpot_ms": summary.get("tpot_ms"),
                "lo": ci[0],
                "hi": ci[1],
                "floor_ms": own_floor,
            }
        )
        stats = record.get("analysis") or {}
        if stats.get("idle_by_class_ns_per_step") and stats.get("gpu_measured") is not False:
            idle_rows.append(
                {"label": config.get("key"), "idle_by_class_ns_per_step": stats["idle_by_class_ns_per_step"]}
            )
    base_record = records.get(base_key or "") or {}
    floor_ms = (base_record.get("floor") or {}).get("floor_ms") if floor_measured(base_record) else None
    page.add("<h2>Speed of light per configuration</h2>")
    if rows and (floor_ms is not None or any(row["floor_ms"] is not None for row in rows)):
        page.figure(figures.speed_of_light_figure(rows, num(floor_ms)))
    elif rows:
        # Bars without a floor compare nothing with the speed of light; the table has every TPOT.
        page.add(f'<p class="muted">no floor: {esc(floor_unmeasured_text(base_record))}</p>')
    if idle_rows:
        page.figure_or_note(
            figures.idle_by_class_figure(idle_rows),
            "no GPU idle measured in any configuration (no GPU events in their traces)",
        )
    page.add(table_html(config_rows(ablation, records), "no configurations"))
    tp_rows = ablation_tp_rows(ablation, records)
    if tp_rows[1]:
        page.add(f"<h2>{esc(SECTION_TITLE)} per configuration</h2>")
        page.add(f'<p class="sub">{esc(ablation_slowest_text(ablation, records))}</p>')
        page.add(table_html(tp_rows))


def add_trace_sections(page: Page, analysis: dict[str, Any]) -> None:
    """Append a bare trace's analysis: headline, timeline, blocking reads, gaps, devices."""
    analysis = conform_analysis(analysis) or {}
    page.heading(f"Trace: {trace_title(analysis)}")
    page.add(f'<p class="sub">steps from {esc(analysis.get("step_source"))}</p>')
    page.add(warnings_html(trace_warnings(analysis)))
    fix_first_html(page, analysis)
    page.add(cards_html(trace_summary_items(analysis)))
    _timeline_section(page, analysis, "One decode step")
    page.add("<h2>Host-blocking reads</h2>")
    page.add(
        table_html(sync_rows(analysis.get("syncs"), gpu_measured_of(analysis)), "no host-blocking reads")
    )
    kernels_html(page, analysis)
    views_html(page, analysis)
    page.add(f"<h2>{esc(gaps_heading(analysis.get('gaps_top')))}</h2>")
    page.add(table_html(gap_rows(analysis.get("gaps_top")), "no idle gaps"))
    page.add("<h2>Devices</h2>")
    page.add(table_html(device_rows(analysis), "no GPU activity in the trace"))


def render_run_html(record: dict[str, Any], analysis: dict[str, Any] | None) -> str:
    """Whole HTML page for one RunRecord (`bubblescope.run/1`) and its optional analysis/1."""
    page = Page("")
    add_run_sections(page, record, analysis)
    return page.render()


def render_ablation_html(
    ablation: dict[str, Any],
    records: dict[str, dict[str, Any]],
    analyses: dict[str, dict[str, Any]] | None = None,
) -> str:
    """Whole HTML page for an ablation/1 document, its RunRecords and optional analyses by config key."""
    page = Page("")
    add_ablation_sections(page, ablation, records, analyses)
    return page.render()


def render_trace_html(analysis: dict[str, Any]) -> str:
    """Whole HTML page for a bare trace's analysis/1: timeline, blocking reads, gaps."""
    page = Page("")
    add_trace_sections(page, analysis)
    return page.render()


def render_inputs_html(inputs: list[Any]) -> str:
    """One page for everything `bubblescope report` was given (load_inputs.load_inputs output), in order."""
    from bubblescope.report.load_inputs import AblationInput, ProfileInput, RunInput, TraceInput

    page = Page("" if len(inputs) == 1 else "bubblescope report")
    for item in inputs:
        if isinstance(item, RunInput):
            add_run_sections(page, item.record, item.analysis, item.warnings)
        elif isinstance(item, AblationInput):
            add_ablation_sections(page, item.ablation, item.records, item.analyses, item.warnings)
        elif isinstance(item, TraceInput):
            add_trace_sections(page, item.analysis)
            # A profile's timed TPOT and, for any analysis made with the read tap, each read's call chain.
            profile = item if isinstance(item, ProfileInput) else None
            page.add(
                profile_sections_html(item.analysis, profile and profile.record, profile and profile.warnings)
            )
    return page.render()
