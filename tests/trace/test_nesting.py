"""NestingIndex parents with zero-length ranges, as integer-µs traces write them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bubblescope.trace.nesting import NestingIndex


def test_zero_length_ranges_do_not_steal_the_children_of_their_neighbours() -> None:
    # From HTA's torchrec trace: aten::resolve_neg [47, 47] beside aten::to [47, 90] whose
    # _to_copy [48, 89] > copy_ [52, 88] holds the DtoH copy; a resolve_conj [45, 45] before them.
    table = pd.DataFrame(
        {
            "name": pd.Categorical(
                [
                    "forward",
                    "aten::to",
                    "aten::resolve_neg",
                    "aten::_to_copy",
                    "aten::copy_",
                    "aten::resolve_conj",
                ]
            ),
            "start_ns": [0, 47, 47, 48, 52, 45],
            "end_ns": [100, 90, 47, 89, 88, 45],
        }
    )
    index = NestingIndex(table)
    parent_of = {
        str(index.names[i]): (str(index.names[p]) if p >= 0 else None)
        for i, p in enumerate(index.parent.tolist())
    }
    assert parent_of["aten::copy_"] == "aten::_to_copy"
    assert parent_of["aten::_to_copy"] == "aten::to"
    assert parent_of["aten::to"] == "forward"
    assert parent_of["aten::resolve_conj"] == "forward"
    assert str(index.names[index.innermost(55, 60)]) == "aten::copy_"


def _same(a: NestingIndex, b: NestingIndex) -> bool:
    return all(
        (getattr(a, key) == getattr(b, key)).all() and getattr(a, key).dtype == getattr(b, key).dtype
        for key in ("starts", "ends", "names", "parent")
    )


def test_indexes_by_thread_equal_one_index_per_filtered_table(shared_dir: Path) -> None:
    from bubblescope.trace.load import stream_trace
    from bubblescope.trace.nesting import indexes_by_thread, nesting_parents
    from bubblescope.trace.tables import build_tables_streamed

    # A real trace with ops on one thread and Python frames on two.
    streamed = stream_trace(shared_dir / "data" / "real_traces" / "tl_hf_qwen05_h100.json.gz")
    tables = build_tables_streamed(streamed.chunks(), lambda: streamed.meta, streamed.path, rank=0)
    for table in (tables.ops, tables.frames):
        tids = set(table["tid"].astype(str)) | {"no such thread"}
        fast = indexes_by_thread(table, tids)
        assert len(fast) == len(tids) - 1 >= 1
        for tid, index in fast.items():
            rows = table[(table["tid"] == tid).to_numpy()]
            assert _same(index, NestingIndex(rows)), tid
            # Given in index order (as Kineto writes these) or reversed, the index is the one a sort
            # gives: ranges by start, longest first, stable among equal pairs.
            starts, ends = rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy()
            names = np.asarray(rows["name"].astype(str), dtype=object)
            for flip in (slice(None), slice(None, None, -1)):
                given = NestingIndex.of_arrays(starts[flip], ends[flip], names[flip])
                order = np.lexsort((-ends[flip], starts[flip]))
                assert (given.starts == starts[flip][order]).all() and (given.ends == ends[flip][order]).all()
                assert (given.names == names[flip][order]).all()
                assert (given.parent == nesting_parents(given.starts, given.ends)).all()
