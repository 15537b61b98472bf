"""The profile page escapes trace strings through `report.escape`, like every other surface."""

from bubblescope.report.profile_page import render_profile_html


def test_profile_page_escapes_markup_controls_and_lone_surrogates() -> None:
    analysis = {
        "syncs": [
            {
                "site": "step.py(3): f\ud800<script>",
                "read_at": "lib.py(9): g",
                "op": "aten::item",
                "per_step": 1,
                "count": 1,
                "blocked_ns": 1000,
                "bubble_ns": 0,
                "stack": ["caller\ud800"],
            }
        ],
        "warnings": ["title\x1b]0;owned\x07"],
        "summary": {"steps": 1},
    }
    page = render_profile_html(analysis, timeline=False)
    # A lone surrogate would make writing the page fail; controls would reach a terminal `cat`.
    page.encode("utf-8")
    assert "f\\ud800&lt;script&gt;" in page and "<script>" not in page.split("step.py(3)")[1][:40]
    assert "\x1b" not in page and "\x07" not in page
