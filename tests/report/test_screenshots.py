"""The report's first screen in headless Chromium at 1400 px and 800 px: no numeric cell broken over
two lines, no cell whose text spills out of it, no two headings / cards / tables / figures of the first
screen overlapping, no page wider than the window (issue 25: "2.3 µ s", "385. 1 µs", a row "1 0").

One browser launch for everything: a harness page holds each report twice, in iframes 1400 and 800 px
wide (`srcdoc`, so the harness can read their DOM), waits until every figure is drawn, measures the
DOM, writes what it found into `<body data-checks>` and is screenshotted in the same launch. Set
BUBBLESCOPE_SCREENSHOT_DIR to keep the screenshot (to look at it).
"""

from __future__ import annotations

import html
import json
import os
import shutil
from pathlib import Path

import pytest

from bubblescope.report.html import render_inputs_html
from bubblescope.report.load_inputs import load_inputs
from tests.report.helpers import HOSTILE_RUN_DIR, chromium_path, load_in_chromium

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(chromium_path() is None, reason="chromium not installed (tools/ensure_browser.py)"),
]

H200_TRACE = Path(__file__).resolve().parents[1] / "data" / "ling3_tiny_h200" / "base.trace.json.gz"
# A PDL run: its kernel table carries the kernel-overlap line (report/kernel_overlap.py), a long sentence.
PDL_TRACE = (
    Path(__file__).resolve().parents[2]
    / "reports/samples/ablation-issue17-round2-e256-h200/runs/base.trace.json.gz"
)
WIDTHS_PX = (1400, 800)
SCREEN_PX = 1000
GAP_PX = 20

# Runs in the harness once every frame has drawn its figures; `checks[label]` lists what is wrong.
CHECK_JS = """
function boxesOverlap(a, b) {
  var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
  var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
  return w > 1 && h > 1;
}
function checkFrame(frame) {
  var doc = frame.contentDocument, win = frame.contentWindow, problems = [], numeric = 0;
  doc.querySelectorAll('td.num, th.num').forEach(function (cell) {
    numeric += 1;
    var range = doc.createRange();
    range.selectNodeContents(cell);
    var tops = {};
    Array.prototype.forEach.call(range.getClientRects(), function (r) { tops[Math.round(r.top)] = 1; });
    if (Object.keys(tops).length > 1) problems.push('numeric cell on two lines: ' + cell.textContent);
  });
  doc.querySelectorAll('td, th, .card').forEach(function (cell) {
    if (cell.scrollWidth > cell.clientWidth + 1)
      problems.push('text spills out of: ' + cell.textContent.slice(0, 60));
  });
  var blocks = Array.prototype.filter.call(
    doc.querySelectorAll('h1, h2, p, .card, .table-wrap, .figure'),
    function (el) { var r = el.getBoundingClientRect(); return r.height > 0 && r.top < win.innerHeight; });
  for (var i = 0; i < blocks.length; i++) {
    for (var j = i + 1; j < blocks.length; j++) {
      var a = blocks[i], b = blocks[j];
      if (a.contains(b) || b.contains(a)) continue;
      if (boxesOverlap(a.getBoundingClientRect(), b.getBoundingClientRect()))
        problems.push('overlap: ' + a.tagName + ' "' + a.textContent.slice(0, 40) + '" / ' +
                      b.tagName + ' "' + b.textContent.slice(0, 40) + '"');
    }
  }
  if (doc.documentElement.scrollWidth > win.innerWidth + 1)
    problems.push('page wider than the window: ' + doc.documentElement.scrollWidth + ' px');
  return {problems: problems, numeric_cells: numeric, first_screen_blocks: blocks.length,
          figures: doc.body.dataset.figuresRendered};
}
function whenDrawn() {
  var frames = Array.prototype.slice.call(document.querySelectorAll('iframe'));
  var ready = frames.every(function (f) {
    return f.contentDocument && f.contentDocument.body && f.contentDocument.body.dataset.figuresRendered; });
  if (!ready) { setTimeout(whenDrawn, 100); return; }
  var checks = {};
  frames.forEach(function (f) { checks[f.id] = checkFrame(f); });
  document.body.dataset.checks = JSON.stringify(checks);
}
whenDrawn();
"""


def _harness(pages: dict[str, str]) -> tuple[str, tuple[int, int]]:
    """A page with each report in an iframe per width, in rows of WIDTHS_PX; and its window size."""
    frames, top = [], 0
    for name, page in pages.items():
        left = 0
        for width in WIDTHS_PX:
            frames.append(
                f'<iframe id="{name}@{width}" style="position:absolute;left:{left}px;top:{top}px;border:0;'
                f'background:#fff;width:{width}px;height:{SCREEN_PX}px" '
                f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
            )
            left += width + GAP_PX
        top += SCREEN_PX + GAP_PX
    size = (sum(WIDTHS_PX) + GAP_PX * len(WIDTHS_PX), top)
    body = "".join(frames)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0;background:#555">'
        f"{body}<script>{CHECK_JS}</script></body></html>",
        size,
    )


# What the checks must catch (so they can fail): the old `overflow-wrap:anywhere` cell that split
# "385.1 µs", a number too wide for its card, and two cards drawn over each other.
CONTROL_PAGE = (
    '<!DOCTYPE html><html><body data-figures-rendered="0"><table><tr>'
    '<td class="num" style="width:30px;max-width:30px;overflow-wrap:anywhere">385.1 µs</td></tr></table>'
    '<div class="card" style="width:40px;white-space:nowrap;overflow:hidden">1183.688 ms</div>'
    '<div class="card" style="position:absolute;top:0;left:0;width:200px;height:200px">over</div>'
    "</body></html>"
)


def test_first_screen_at_1400_and_800_px_has_no_broken_number_and_no_overlap(tmp_path: Path) -> None:
    # One report of a real H200 trace and a run with hostile names: the first screen is the trace's,
    # the numeric-cell and spill checks cover the whole page (plotly.js is parsed once per frame).
    # The trace sits under a long directory: its absolute path is the page's title (CI's checkout path
    # is longer than a developer's, and an unbroken path once made the page 934 px wide at 800 px).
    deep = tmp_path / ("a_checkout_directory_whose_name_is_long_" * 3) / "tests" / "data"
    deep.mkdir(parents=True)
    trace = deep / H200_TRACE.name
    shutil.copy(H200_TRACE, trace)
    report = render_inputs_html(load_inputs([trace, HOSTILE_RUN_DIR, PDL_TRACE]))
    assert "Kernels overlap (PDL or concurrent streams)" in report
    pages = {"report": report, "control": CONTROL_PAGE}
    harness, size = _harness(pages)
    path = tmp_path / "harness.html"
    path.write_text(harness, encoding="utf-8")
    shot = tmp_path / "first_screen.png"
    loaded = load_in_chromium(path, screenshot=shot, window_px=size, dump_dom=True)
    keep = os.environ.get("BUBBLESCOPE_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)
    checks = json.loads(html.unescape(loaded.body_attr("data-checks") or "null"))
    assert checks is not None, "the harness never saw every figure drawn"
    assert set(checks) == {f"{name}@{width}" for name in pages for width in WIDTHS_PX}
    control = " | ".join(checks.pop("control@800")["problems"] + checks.pop("control@1400")["problems"])
    for kind in ("numeric cell on two lines: 385.1", "text spills out of: 1183.688", "overlap: DIV"):
        assert kind in control, f"the check misses {kind!r}: {control}"
    for label, found in checks.items():
        assert found["numeric_cells"] > 10, label
        assert found["first_screen_blocks"] >= 4 and int(found["figures"]) >= 3, label
        assert found["problems"] == [], f"{label}: {found['problems'][:5]}"
    assert shot.stat().st_size > 10_000
