"""Find what encloses a host call: the ATen op around it and the user's Python line that made it.

Host ranges on one thread nest like a call stack. `NestingIndex` sorts one thread's ranges, derives
each range's parent with one stack pass, and answers "innermost range enclosing [start, end]" with a
binary search plus a short walk up the parents: O(log n + depth) per query, no per-query scan.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from bubblescope.trace.tables import category_labels

# Frames of these are library plumbing; the site a user can act on is the first frame outside them.
_LIBRARY_PREFIXES = (
    "torch/",
    "triton/",
    "numpy/",
    "pandas/",
    "typing.py",
    "contextlib.py",
    "functools.py",
    "threading.py",
    "bubblescope/capture/",
    "<",
)
_LIBRARY_PARTS = ("site-packages/", "dist-packages/", "/torch/", "/lib/python3")
_FRAME_NAME = re.compile(r"^(?P<path>.*?)\((?P<line>\d+)\): (?P<func>.*)$")


class NestingIndex:
    """Ranges of one thread, nested.

    Args:
        table: rows with `name`, `start_ns`, `end_ns` (one thread's ops or frames).
    """

    def __init__(self, table: pd.DataFrame) -> None:
        # Copies: the index may keep its arrays as given, and they must not be views of the table.
        starts = table["start_ns"].to_numpy(copy=True)
        ends = table["end_ns"].to_numpy(copy=True)
        self._index(starts, ends, category_labels(table["name"]))

    @classmethod
    def of_arrays(cls, starts: np.ndarray, ends: np.ndarray, names: np.ndarray) -> NestingIndex:
        """The index of ranges given as [n] start and end ns and [n] object names, in any order (the
        index may keep the arrays themselves)."""
        index = cls.__new__(cls)
        index._index(starts, ends, names)
        return index

    def _index(self, starts: np.ndarray, ends: np.ndarray, names: np.ndarray) -> None:
        if _in_index_order(starts, ends):
            # Kineto often writes a thread's Python frames in this order already (1.06 M of them in the
            # 1.79 M-event benchmark file): the sort and three gathers would only copy them.
            self.starts, self.ends, self.names = starts, ends, names
        else:
            order = np.lexsort((-ends, starts))
            self.starts = starts[order]
            self.ends = ends[order]
            self.names = names[order]
        self.parent = _parents(self.starts, self.ends)

    def innermost(self, start_ns: int, end_ns: int) -> int:
        """Index of the innermost range with start <= start_ns and end >= end_ns, or -1."""
        j = int(np.searchsorted(self.starts, start_ns, side="right")) - 1
        while j >= 0 and self.ends[j] < end_ns:
            j = int(self.parent[j])
        return j

    def innermost_many(self, starts_ns: np.ndarray, ends_ns: np.ndarray) -> np.ndarray:
        """`innermost` for many queries at once: one searchsorted, then one vectorised step up the
        parents per nesting level still needed. [n] int64, -1 where no range encloses."""
        j = np.searchsorted(self.starts, starts_ns, side="right").astype(np.int64) - 1
        while True:
            short = (j >= 0) & (self.ends[np.maximum(j, 0)] < ends_ns) if len(self.ends) else j >= 0
            if not short.any():
                return np.where(j >= 0, j, -1) if len(self.ends) else np.full(len(starts_ns), -1)
            j[short] = self.parent[j[short]]

    def outermost_since(self, j: int, since_ns: int) -> int:
        """Walk up from range `j` to the outermost ancestor that still starts at or after `since_ns`."""
        while j >= 0 and self.parent[j] >= 0 and self.starts[self.parent[j]] >= since_ns:
            j = int(self.parent[j])
        return j

    def first_user_ancestor(self, j: int) -> int:
        """Walk up from frame `j` to the first frame that is the user's code, or -1."""
        while j >= 0 and not is_user_frame(self.names[j]):
            j = int(self.parent[j])
        return j


def _in_index_order(starts: np.ndarray, ends: np.ndarray) -> bool:
    """Sorted by start, longest first among equal starts: `np.lexsort((-ends, starts))` is the identity
    (lexsort is stable, so equal pairs keep their order)."""
    if len(starts) < 2:
        return True
    later, same = starts[1:] > starts[:-1], starts[1:] == starts[:-1]
    return bool((later | (same & (ends[1:] <= ends[:-1]))).all())


def nesting_parents(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """[n] index of each range's parent (-1 for none); ranges sorted by start, longest first."""
    return _parents(starts, ends)


def _parents(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Parent of each range (sorted by start, longest first), vectorised.

    A range's depth is how many earlier ranges are still open at its start; its parent is the latest
    earlier range one level up. One pass per depth level, not per range.
    """
    n = len(starts)
    parent = np.full(n, -1, dtype=np.int64)
    if not n:
        return parent
    closed = np.searchsorted(np.sort(ends), starts, side="right")
    # A zero-length range at t (`aten::resolve_neg` in integer-µs traces) "ends" at t: it must not count
    # as an earlier range closed before itself or before the zero-length ranges after it at t. They
    # sort last among the ranges starting at t, so those to discount are the ones from i on.
    # `starts` is sorted, so ranges starting at the same t are runs: found with one diff, no sort.
    new_group = np.empty(n, dtype=bool)
    new_group[0] = True
    np.not_equal(starts[1:], starts[:-1], out=new_group[1:])
    group_first = np.flatnonzero(new_group)
    group_of = np.cumsum(new_group) - 1
    group_end = np.append(group_first[1:], n)[group_of]
    zero_per_group = np.add.reduceat((ends == starts).astype(np.int64), group_first)
    first_zero = group_end - zero_per_group[group_of]
    closed -= np.maximum(group_end - np.maximum(np.arange(n), first_zero), 0)
    depth = np.maximum(np.arange(n) - closed, 0)
    # Depths are small: as int16 numpy's stable sort is a radix sort (8 vs 50 ms for 1 M ranges).
    order = np.argsort(depth.astype(np.int16) if depth.max() < 2**15 else depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(depth.max() + 2))
    for level in range(1, depth.max() + 1):
        here = order[bounds[level] : bounds[level + 1]]
        above = order[bounds[level - 1] : bounds[level]]
        pos = np.searchsorted(above, here) - 1
        parent[here] = np.where(pos >= 0, above[np.maximum(pos, 0)], -1)
    return parent


def is_user_frame(name: str) -> bool:
    """True for a Python frame in the user's code (not torch, not site-packages, not a builtin)."""
    if name.startswith(_LIBRARY_PREFIXES):
        return False
    return not any(part in name for part in _LIBRARY_PARTS)


def short_site(frame_name: str) -> str:
    """'/home/u/proj/run.py(12): main' -> 'run.py(12): main' (the schema's `site` form)."""
    match = _FRAME_NAME.match(frame_name)
    if not match:
        return frame_name
    base = match["path"].rsplit("/", 1)[-1]
    return f"{base}({match['line']}): {match['func']}"


def site_text(frame_name: str, open_at_start: bool) -> str:
    """A Kineto Python frame as a site, saying honestly which line its number is.

    Kineto names a frame `path(line): func`. For a function entered while tracing, `line` is where
    the function was entered: its `def` line, not the line that blocked. Only frames already open
    when tracing began carry the line they were executing.

    Args:
        frame_name: the frame event's name.
        open_at_start: the frame was open when tracing began (its start is the thread's first frame
            start).

    Returns:
        'run.py(12): main' for a frame open at start, 'step_readback (decode.py, def line 70)' for
        any other frame, the name unchanged when it is not of that form.
    """
    match = _FRAME_NAME.match(frame_name)
    if not match:
        return frame_name
    base = match["path"].rsplit("/", 1)[-1]
    if open_at_start:
        return f"{base}({match['line']}): {match['func']}"
    return f"{match['func']} ({base}, def line {match['line']})"


def indexes_by_thread(table: pd.DataFrame, tids: set[str]) -> dict[str, NestingIndex]:
    """One NestingIndex per thread in `tids` that has rows in `table`.

    A thread's rows are picked by the categorical `tid` column's codes and only the three columns the
    index reads are taken: a DataFrame filter per thread copied every column (0.08 s per thread of the
    1.06 M Python frames of the 1.79 M-event benchmark file).
    """
    out: dict[str, NestingIndex] = {}
    if not len(table):
        return out
    if not isinstance(table["tid"].dtype, pd.CategoricalDtype):
        # Tables made by hand (the loader's `tid` is always categorical).
        for tid in tids:
            rows = table[(table["tid"] == tid).to_numpy()]
            if len(rows):
                out[tid] = NestingIndex(rows)
        return out
    tid_codes = table["tid"].cat.codes.to_numpy()
    code_of = {str(label): code for code, label in enumerate(table["tid"].cat.categories)}
    starts, ends = table["start_ns"].to_numpy(), table["end_ns"].to_numpy()
    name_codes = table["name"].cat.codes.to_numpy()
    labels = np.asarray([str(label) for label in table["name"].cat.categories] + [""], dtype=object)
    for tid in tids:
        rows = np.flatnonzero(tid_codes == code_of[tid]) if tid in code_of else ()
        if len(rows):
            out[tid] = NestingIndex.of_arrays(starts[rows], ends[rows], labels[name_codes[rows]])
    return out
