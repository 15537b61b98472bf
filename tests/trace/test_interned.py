"""`columns.interned` factorizes exactly as `pandas.factorize` did before it (codes, first-seen order,
None as -1), so the tables it builds are unchanged."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bubblescope.trace.columns import interned

_LABELS = st.one_of(st.none(), st.text(max_size=6), st.integers(-3, 3), st.sampled_from([1.0, 2.5, -0.0]))


def _pandas(values: list) -> tuple[list[int], list]:
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return codes.tolist(), list(uniques)


@settings(max_examples=80, deadline=None)
@given(st.lists(_LABELS, max_size=40))
def test_same_codes_and_uniques_as_pandas(values: list) -> None:
    codes, uniques = interned(values)
    assert (codes.tolist(), uniques) == _pandas(values)


def test_one_repeated_object_and_none_first() -> None:
    values = (None, "kernel", "kernel", None, "cpu_op")
    codes, uniques = interned(values)
    assert codes.tolist() == [-1, 0, 0, -1, 1] and uniques == ["kernel", "cpu_op"]


def test_unhashable_value_raises_type_error() -> None:
    with pytest.raises(TypeError):
        interned(["a", ["b"]])
