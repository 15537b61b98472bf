"""The HTML report: every input kind renders, hostile strings stay text, plotly.js inlined once, offline."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from bubblescope.report import figures, timeline_figure
from bubblescope.report.html import (
    render_ablation_html,
    render_inputs_html,
    render_run_html,
    render_trace_html,
)
from bubblescope.report.html_page import script_safe_json
from bubblescope.report.load_inputs import load_inputs, read_json_document
from tests.report.helpers import ABLATION_DIR, HOSTILE_NAME, HOSTILE_RUN_DIR, MINIMAL_RUN_FILE

PLOTLY_MARKER = "plotly.js v"


def _figure_specs(page: str) -> list[dict]:
    match = re.search(r'<script type="application/json" id="bs-figures">(.*?)</script>', page, re.S)
    assert match, "page has no figure data block"
    return json.loads(match.group(1))


def _assert_script_safe(page: str) -> None:
    lowered = page.lower()
    assert "</script><script>" not in lowered
    assert "<script>document.title" not in lowered
    # Every <script> that opens is closed by the page's own markup: a hostile name adds neither.
    assert lowered.count("<script") == lowered.count("</script>")


@pytest.fixture(scope="module")
def ablation_page() -> str:
    (item,) = load_inputs([ABLATION_DIR])
    return render_ablation_html(item.ablation, item.records, item.analyses)


@pytest.fixture(scope="module")
def hostile_run_page() -> str:
    record = read_json_document(HOSTILE_RUN_DIR / "record.json")
    analysis = read_json_document(HOSTILE_RUN_DIR / "analysis.json")
    return render_run_html(record, analysis)


def test_ablation_page_has_every_section(ablation_page: str) -> None:
    for heading in (
        "TPOT waterfall",
        "Per-switch ΔTPOT",
        "Speed of light",
        "One decode step: baseline (base)",
        "One decode step: all switches on (all)",
        "Host-blocking reads (baseline)",
        "Environment",
    ):
        assert heading in ablation_page, heading
    specs = _figure_specs(ablation_page)
    # waterfall, per-switch deltas, speed of light, idle by class, two timelines
    assert len(specs) == 6
    waterfall = specs[0]["data"][0]
    assert waterfall["type"] == "waterfall"
    assert waterfall["measure"] == ["absolute", "relative", "relative", "relative", "total"]
    deltas = specs[1]["data"]
    assert [trace["name"] for trace in deltas] == [label for _, label in figures.ESTIMATORS]
    fused = deltas[0]["y"].index("fused_moe")
    assert deltas[0]["x"][fused] == pytest.approx(3.52)
    assert deltas[0]["error_x"]["array"][fused] == pytest.approx(0.06)
    assert "pending" in ablation_page and "only_no_readback" in ablation_page
    assert "reference_model/moe.py(88): route: 40" in ablation_page


def test_plotly_js_inlined_once_and_no_network(ablation_page: str) -> None:
    assert ablation_page.count(PLOTLY_MARKER) == 1
    assert not re.search(r"<script[^>]*\bsrc=", ablation_page, re.I)
    assert not re.search(r"<link[^>]*\bhref=", ablation_page, re.I)
    # (the plotly.js bundle itself names cdn.plot.ly for geo topojson, which these figures never load)
    assert not re.search(r"<(img|iframe)[^>]*\bsrc=", ablation_page, re.I)
    assert len(ablation_page) < 8_000_000


def test_hostile_names_stay_text(hostile_run_page: str, ablation_page: str) -> None:
    for page in (hostile_run_page, ablation_page):
        _assert_script_safe(page)
    # In markup the name appears HTML-escaped (title, h1, tables) ...
    assert html.escape(HOSTILE_NAME) in hostile_run_page
    title = re.search(r"<title>(.*?)</title>", hostile_run_page).group(1)
    assert html.unescape(title).startswith("bubblescope · Run: ling3 " + HOSTILE_NAME)
    # ... and inside figure JSON it decodes to plotly-escaped text, so plotly draws it literally.
    timeline = _figure_specs(hostile_run_page)[1]
    hovers = [h for trace in timeline["data"] for h in trace.get("hovertext") or []]
    assert any(html.escape(HOSTILE_NAME, quote=False) in h for h in hovers)
    assert not any(HOSTILE_NAME in h for h in hovers)


def test_script_safe_json_escapes_breakout_characters() -> None:
    text = script_safe_json({"k": HOSTILE_NAME + " & \u2028\u2029 <!--"})
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"k": HOSTILE_NAME + " & \u2028\u2029 <!--"}


def test_plotly_own_to_html_cannot_break_out_of_its_script() -> None:
    """plotly escapes `<`/`>` in its JSON; checked so that a plotly upgrade that stops shows up here."""
    fig = go.Figure(go.Bar(x=[1.0], y=[HOSTILE_NAME], hovertext=[HOSTILE_NAME], name=HOSTILE_NAME))
    fig.update_layout(title=HOSTILE_NAME)
    page = pio.to_html(fig, include_plotlyjs=False, full_html=True)
    _assert_script_safe(page)


def test_run_page_sections_and_numbers(hostile_run_page: str) -> None:
    for text in (
        "7.590\u00a0ms",
        "2.465 ms",
        "3.08×",
        "Host-blocking reads",
        "aten::item",
        "cudaStreamSynchronize",
        "keep the value on device",
        "NVIDIA H200",
        "580.95.05",
        "Largest GPU idle gaps",
    ):
        assert text in hostile_run_page, text
    specs = _figure_specs(hostile_run_page)
    assert len(specs) == 2  # speed of light, timeline
    floor_shapes = specs[0]["layout"]["shapes"]
    assert floor_shapes[0]["x0"] == pytest.approx(2.465)


def test_timeline_figure_lanes_gaps_and_reads() -> None:
    analysis = read_json_document(HOSTILE_RUN_DIR / "analysis.json")
    timeline = analysis["timeline"]
    fig = figures.timeline_figure(timeline)
    names = [trace.name for trace in fig.data]
    assert {"gap: sync", "gap: host", "gap: launch", "kernel", "cuda_runtime", "blocking read"} <= set(names)
    sync_gap = next(trace for trace in fig.data if trace.name == "gap: sync")
    step_start_ns = timeline["start_ns"]
    expected = [g for g in timeline["gaps"] if g["class"] == "sync"][0]
    assert sync_gap.base[0] == pytest.approx((expected["start_ns"] - step_start_ns) / 1000)
    assert sync_gap.x[0] == pytest.approx(expected["dur_ns"] / 1000)
    # the gap's lane "GPU 0" is drawn on that device's stream lane
    assert sync_gap.y[0] == "GPU 0 stream 7"
    read = next(trace for trace in fig.data if trace.name == "blocking read")
    assert read.y[0] == "host" and read.x[0] == pytest.approx(
        (timeline["syncs"][0]["start_ns"] - step_start_ns) / 1000
    )
    # Nested host slices sit on their own depth lanes, right under their thread's lane.
    lanes = list(fig.layout.yaxis.categoryarray)
    assert lanes[0] == "host" and lanes[-1] == "GPU 0 stream 7"
    assert all(lane.startswith("host · depth ") for lane in lanes[1:-1])


def test_nested_slices_get_narrower_bars() -> None:
    slices = [
        {"lane": "host", "name": "outer", "start_ns": 0, "dur_ns": 100, "cat": "cpu_op"},
        {"lane": "host", "name": "inner", "start_ns": 10, "dur_ns": 50, "cat": "cpu_op"},
        {"lane": "host", "name": "innermost", "start_ns": 20, "dur_ns": 5, "cat": "cpu_op"},
        {"lane": "host", "name": "after", "start_ns": 100, "dur_ns": 5, "cat": "cpu_op"},
    ]
    assert timeline_figure._slice_depths(slices) == [0, 1, 2, 0]
    assert [timeline_figure.depth_lane("host", d, {"host"}) for d in (0, 1, 2, 9)] == [
        "host",
        "host · depth 1",
        "host · depth 2",
        f"host · depth {timeline_figure.MAX_HOST_DEPTH_LANES}",
    ]
    assert timeline_figure.depth_lane("GPU 0", 3, {"host"}) == "GPU 0"


def test_minimal_record_renders_without_optional_sections() -> None:
    record = read_json_document(MINIMAL_RUN_FILE)
    page = render_run_html(record, None)
    assert "no floor recorded" in page and "no timeline" in page and "no host-blocking reads" in page
    assert PLOTLY_MARKER not in page and "data-figures-rendered" not in page.split("<body>")[0]


def test_tolerates_sparse_documents() -> None:
    """Optional fields missing or null anywhere: still a page, never an exception."""
    sparse_record = {
        "schema": "bubblescope.run/1",
        "summary": {"tpot_ms": 1.0, "tpot_ci95_ms": [1.0]},
        "floor": {"floor_ms": None},
        "analysis": {"syncs": [{"site": None}]},
        "switches": None,
    }
    assert "Run:" in render_run_html(
        sparse_record, {"schema": "bubblescope.analysis/1", "timeline": {"slices": []}}
    )
    sparse_ablation = {"schema": "bubblescope.ablation/1", "configs": [{"key": "base", "enabled": []}]}
    page = render_ablation_html(sparse_ablation, {"base": sparse_record})
    assert "no attribution yet" in page
    partial = {
        "schema": "bubblescope.ablation/1",
        "configs": [],
        "attribution": {
            "switches": [{"name": "pdl", "alone_ms": {"est": 0.1}}],
            "waterfall": [{"step": "baseline", "tpot_ms": 2.0}],
        },
    }
    assert "pdl" in render_ablation_html(partial, {})
    trace_page = render_trace_html({"schema": "bubblescope.analysis/1", "gpu_measured": False})
    assert "no GPU activity in the trace" in trace_page


def test_several_inputs_make_one_page() -> None:
    page = render_inputs_html(load_inputs([ABLATION_DIR, HOSTILE_RUN_DIR, HOSTILE_RUN_DIR / "analysis.json"]))
    assert page.count("<h1>") == 3 and page.count(PLOTLY_MARKER) == 1
    assert "<title>bubblescope report</title>" in page
    ids = [spec["id"] for spec in _figure_specs(page)]
    assert len(ids) == len(set(ids)) == 6 + 2 + 1
    for fig_id in ids:
        assert f'<div class="figure" id="{fig_id}"></div>' in page
    _assert_script_safe(page)


def test_report_writes_nothing_next_to_inputs(tmp_path: Path) -> None:
    before = sorted(p.name for p in HOSTILE_RUN_DIR.iterdir())
    render_inputs_html(load_inputs([HOSTILE_RUN_DIR]))
    assert sorted(p.name for p in HOSTILE_RUN_DIR.iterdir()) == before
