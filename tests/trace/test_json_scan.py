"""json_scan finds where a JSON value or an event ends, across any window and feed split (issue 28)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bubblescope.trace import json_scan

# Strings full of what a scanner can trip on: quotes, backslashes, brackets.
tricky_text = st.text(alphabet=st.sampled_from(list('ab"\\[]{}, \n\u00e9')), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky_text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=json_values.filter(lambda v: isinstance(v, list | dict | str)),
    window=st.integers(1, 9),
    feed=st.integers(1, 50),
)
def test_value_end_matches_the_encoder(value, window: int, feed: int, monkeypatch_window) -> None:
    monkeypatch_window(window)
    text = json.dumps(value, ensure_ascii=False).encode()
    data = text + b', "next": [1]}'
    state = json_scan.ScanState()
    for start in range(0, len(data), feed):
        end = json_scan.value_end(data[start : start + feed], state)
        if end is not None:
            assert start + end == len(text), (text, start, end)
            return
    pytest.fail(f"no end found in {data!r}")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    events=st.lists(st.dictionaries(tricky_text, json_values, max_size=3), min_size=1, max_size=6),
    target=st.integers(0, 200),
    window=st.integers(1, 9),
)
def test_events_end_cuts_after_an_event_or_at_the_array_end(
    events, target: int, window: int, monkeypatch_window
) -> None:
    monkeypatch_window(window)
    texts = [json.dumps(e, ensure_ascii=False).encode() for e in events]
    buf = b"[" + b",".join(texts) + b"]"
    found = json_scan.events_end(buf, 1, 1 + target)
    ends, at = [], 1
    for text in texts:
        at += len(text)
        ends.append(at)
        at += 1
    expected = next(((end, False) for end in ends if end >= 1 + target), (len(buf) - 1, True))
    assert found == expected


def test_unbalanced_close_is_refused() -> None:
    with pytest.raises(ValueError, match="nothing open"):
        json_scan.value_end(b" ]", json_scan.ScanState())


@pytest.fixture
def monkeypatch_window():
    saved = json_scan.WINDOW_BYTES

    def set_window(size: int) -> None:
        json_scan.WINDOW_BYTES = size

    yield set_window
    json_scan.WINDOW_BYTES = saved
