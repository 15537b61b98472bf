"""The report in a real headless browser (Debian's chromium, offline): no JS errors, every figure drawn,
and a kernel named `</script><script>document.title='x'</script>` does not run.

`make test` installs chromium first (tools/ensure_browser.py); without it these tests skip, saying why.
"""

from __future__ import annotations

import html
import importlib.util
from pathlib import Path

import pytest

from bubblescope.report.html import render_inputs_html
from bubblescope.report.html_page import Page
from bubblescope.report.load_inputs import load_inputs
from tests.report.helpers import (
    ABLATION_DIR,
    HOSTILE_NAME,
    HOSTILE_RUN_DIR,
    HOSTILE_TRACE,
    chromium_path,
    load_in_chromium,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        chromium_path() is None,
        reason="chromium not installed (make test installs it via tools/ensure_browser.py, "
        "or: apt-get install chromium)",
    ),
]


def _figure_count(page: str) -> int:
    return page.count('<div class="figure" id="bs-fig-')


def test_hostile_run_page_loads_clean_and_title_survives(tmp_path: Path) -> None:
    page = render_inputs_html(load_inputs([HOSTILE_RUN_DIR]))
    path = tmp_path / "run.html"
    path.write_text(page)
    loaded = load_in_chromium(path)
    assert loaded.html_attr("data-js-errors") == "0", loaded.html_attr("data-js-first-error")
    assert loaded.uncaught_console_errors() == []
    assert loaded.body_attr("data-figures-rendered") == str(_figure_count(page)) == "2"
    title = loaded.title()
    assert title is not None and title != "x"
    assert html.unescape(title).startswith("bubblescope · Run: ling3 " + HOSTILE_NAME)


def test_ablation_and_trace_page_renders_every_figure(tmp_path: Path) -> None:
    inputs = [ABLATION_DIR, HOSTILE_RUN_DIR / "analysis.json"]
    if importlib.util.find_spec("bubblescope.analysis.traces") is not None:
        inputs.append(HOSTILE_TRACE)
    page = render_inputs_html(load_inputs(inputs))
    path = tmp_path / "all.html"
    path.write_text(page)
    loaded = load_in_chromium(path)
    assert loaded.html_attr("data-js-errors") == "0", loaded.html_attr("data-js-first-error")
    assert loaded.uncaught_console_errors() == []
    expected = _figure_count(page)
    assert expected >= 7
    assert loaded.body_attr("data-figures-rendered") == str(expected)
    assert loaded.title() == "bubblescope report"
    # plotly drew the timelines' lanes: the SVG holds the lane names as text.
    assert "GPU 0 stream 7" in loaded.dom


def test_controls_an_error_and_an_unescaped_name_are_seen(tmp_path: Path) -> None:
    """Controls: the page's error counter sees an uncaught error, and the raw hostile name (what an escaping
    bug would emit) does retitle the page, so the checks above can fail."""
    page = Page("control")
    page.add("<script>throw new Error('deliberate failure');</script>")
    page.add(f"<p>{HOSTILE_NAME}</p>")
    path = tmp_path / "control.html"
    path.write_text(page.render())
    loaded = load_in_chromium(path)
    assert loaded.html_attr("data-js-errors") == "1"
    assert "deliberate failure" in (loaded.html_attr("data-js-first-error") or "")
    assert loaded.title() == "x"


SAMPLES = sorted((Path(__file__).resolve().parents[2] / "reports" / "samples").glob("*/report.html"))


@pytest.mark.parametrize("page", SAMPLES, ids=[p.parent.name for p in SAMPLES])
def test_committed_sample_reports_load_clean_with_every_figure_drawn(page: Path) -> None:
    """The real H200 reports users open first: no JS error, every figure drawn (timelines included).

    An ablation's page draws the baseline's and the all-on timeline; a profile folder's small page (written
    by `bubblescope profile` on a machine without plotly) has one timeline section and tables only."""
    text = page.read_text(encoding="utf-8")
    if (page.parent / "ablation.json").is_file():
        assert text.count("<h2>One decode step") == 2, "baseline and all-on timelines"
        assert _figure_count(text) >= 2 + text.count("<h2>One decode step")
    else:
        assert text.count("<h2>One decode step") == 1
    loaded = load_in_chromium(page)
    assert loaded.html_attr("data-js-errors") == "0", loaded.html_attr("data-js-first-error")
    assert loaded.body_attr("data-figures-rendered") == str(_figure_count(text))
