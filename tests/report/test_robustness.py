"""Property: any field of a contract document replaced by any JSON value (or a hostile string) still
renders as HTML and Markdown, with no exception and no markup injected."""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bubblescope.report.html import render_ablation_html, render_run_html
from bubblescope.report.load_inputs import load_inputs, read_json_document
from bubblescope.report.markdown import ablation_markdown, run_markdown
from tests.report.helpers import ABLATION_DIR, HOSTILE_NAME, HOSTILE_RUN_DIR

RECORD = read_json_document(HOSTILE_RUN_DIR / "record.json")
ANALYSIS = read_json_document(HOSTILE_RUN_DIR / "analysis.json")
(ABLATION_INPUT,) = load_inputs([ABLATION_DIR])

# No shrinking: a rendering failure prints its drawn values at once; shrinking a page render takes minutes.
FAST_PHASES = [Phase.explicit, Phase.reuse, Phase.generate]
# Each example renders whole pages (plotly figures included); raise this for a longer local hunt.
EXAMPLES = int(os.environ.get("BUBBLESCOPE_REPORT_FUZZ_EXAMPLES", "8"))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from([HOSTILE_NAME, "<img src=x onerror=alert(1)>", "a|b\nc", "\u2028"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location in a JSON document, as a tuple of keys/indices."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node[:4]):
            found += _paths(value, (*prefix, index))
    return found


def _mutate(doc: dict, data: st.DataObject, rounds: int = 3) -> dict:
    doc = copy.deepcopy(doc)
    for _ in range(rounds):
        paths = _paths(doc)
        if not paths:
            break
        path = paths[data.draw(st.integers(0, len(paths) - 1), label="path index")]
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = data.draw(json_values, label=f"value at {path}")
    return doc


def _assert_no_injection(page: str) -> None:
    lowered = page.lower()
    assert lowered.count("<script") == lowered.count("</script>") in (2, 4)
    assert "<img" not in lowered


@settings(
    max_examples=EXAMPLES, deadline=None, phases=FAST_PHASES, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_mutated_run_renders(data: st.DataObject) -> None:
    record, analysis = _mutate(RECORD, data), _mutate(ANALYSIS, data)
    _assert_no_injection(render_run_html(record, analysis))
    markdown = run_markdown(record, analysis)
    assert "<script" not in markdown.lower() and "<img" not in markdown.lower()


@settings(
    max_examples=EXAMPLES, deadline=None, phases=FAST_PHASES, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_mutated_ablation_renders(data: st.DataObject) -> None:
    ablation = _mutate(ABLATION_INPUT.ablation, data, rounds=4)
    records = {key: _mutate(rec, data, rounds=1) for key, rec in list(ABLATION_INPUT.records.items())[:2]}
    _assert_no_injection(render_ablation_html(ablation, records))
    assert "<script" not in ablation_markdown(ablation, records).lower()
