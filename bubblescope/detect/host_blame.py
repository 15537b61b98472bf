"""Detector helper: name what the host was doing during a GPU idle gap, and why a queued op waited.

Heuristic for host-bound gaps, by time on the launching thread: every recorded range that overlaps the
gap without enclosing all of it (the work that ran in it) is a candidate: Python frames, ATen ops,
user annotations (`record_function`, `enumerate(DataLoader)#...__next__`, NVTX ranges written as
annotations) and runtime calls (a long `cudaFree`/`hipFree`, a first kernel launch that loads its
module, stream/event creation, `cudaStreamQuery` polling). Blame names the work, not the wrapper: each
outermost candidate of a kind is named by its deepest descendant that still covers more than half of
that candidate's time in the gap (with the descendant's overlap), so a loop body's frame spanning the
gap names the function it spent the gap in. The top three names by summed overlap are named. When only
enclosing ranges exist, the innermost one is named ("host in ..."); when the named work covers less
than half the gap, the innermost enclosing range is added ("rest: host in ..."). Only when nothing at
all was recorded on the thread during the gap does the text say so. Step markers (`ProfilerStep#N`,
`bubblescope.*`) and `## ... ##` annotations (torchrec / DDP wrappers around whole phases) are never
named as the work; when they are all that covered a gap, blame names the innermost of them and says so.

Kineto's Python frames carry the line a function was entered at, its `def` line (see
`trace.nesting.site_text`); blame says so instead of presenting it as the line that ran.

Linear: each range partially overlaps at most the gap holding its start and the one holding its end,
so candidates are found with two `searchsorted` over the sorted gaps, walked down with one vectorised
step per nesting level and summed with one groupby, whatever the number of gaps (`blame_many`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bubblescope.trace import runtime_names as rt
from bubblescope.trace.nesting import NestingIndex, is_user_frame, site_text
from bubblescope.trace.tables import category_mask

TOP_BLAME_ENTRIES = 3
# A kernel launch call this long is the driver loading the kernel's module (lazy loading), not launch
# overhead: named as such so the user does not hunt for a slow launch path.
MODULE_LOAD_LAUNCH_NS = 1_000_000
_MARKER_PREFIXES = ("ProfilerStep#", "bubblescope.", "## ")
NOTHING_RECORDED = "host (nothing recorded on the launching thread during the gap)"


def _runtime_labels(names: np.ndarray, durs_ns: np.ndarray) -> np.ndarray:
    """Blame label of each runtime call: a poll spin is `polling (...)`, a kernel launch this long is
    the driver loading the kernel's module. Names are tested once per distinct name. [n] object."""
    labels = np.asarray(names, dtype=object).copy()
    if not len(labels):
        return labels
    codes, distinct = pd.factorize(labels)
    distinct = [str(n) for n in distinct]
    polling = np.asarray([rt.is_poll(n) and "Query" in n for n in distinct], dtype=bool)[codes]
    launch = np.asarray([rt.is_kernel_launch(n) for n in distinct], dtype=bool)[codes]
    labels[polling] = [f"polling ({n})" for n in labels[polling].tolist()]
    module_load = launch & ~polling & (np.asarray(durs_ns) >= MODULE_LOAD_LAUNCH_NS)
    labels[module_load] = [f"{n} (module load)" for n in labels[module_load].tolist()]
    return labels


def _frame_sites(names: np.ndarray, open_at_start: np.ndarray) -> np.ndarray:
    """`site_text` of each frame, computed once per distinct (name, open at start). [n] object."""
    if not len(names):
        return np.zeros(0, dtype=object)
    codes, distinct = pd.factorize(np.asarray(names, dtype=object))
    entered = np.asarray([site_text(str(n), False) for n in distinct], dtype=object)
    already_open = np.asarray([site_text(str(n), True) for n in distinct], dtype=object)
    return np.where(open_at_start, already_open[codes], entered[codes])


class HostBlame:
    """Blame strings for gaps of one rank's host thread.

    Args:
        ops: host op table (cpu_op and user_annotation rows).
        frames: Python frame table.
        tid: the thread that launches GPU work.
        window_ns: only ranges overlapping this [start, end) are kept (default: all).
        runtime: runtime/driver call table (default: none).
    """

    def __init__(
        self,
        ops: pd.DataFrame,
        frames: pd.DataFrame,
        tid: str,
        window_ns: tuple[int, int] | None = None,
        runtime: pd.DataFrame | None = None,
    ) -> None:
        ops = ops[(ops["tid"] == tid).to_numpy()]
        ignored = category_mask(ops["name"], lambda n: n.startswith(_MARKER_PREFIXES))
        # Markers and `## ... ##` ranges are never named as the work, but they did cover the gap: when
        # nothing else was recorded, blame says which of them held it instead of "nothing recorded".
        self._ignored = NestingIndex(ops[ignored])
        ops = ops[~ignored]
        frames = frames[(frames["tid"] == tid).to_numpy()]
        first_frame_ns = int(frames["start_ns"].min()) if len(frames) else 0
        frames = frames[category_mask(frames["name"], is_user_frame)]
        runtime = runtime[(runtime["tid"] == tid).to_numpy()] if runtime is not None else None
        tables = [frames, ops] + ([runtime] if runtime is not None else [])
        if window_ns is not None:
            tables = [
                t[((t["end_ns"] > window_ns[0]) & (t["start_ns"] < window_ns[1])).to_numpy()] for t in tables
            ]
        indexes = [NestingIndex(t) for t in tables]
        frame_index = indexes[0]
        names: list[np.ndarray] = [
            _frame_sites(frame_index.names, frame_index.starts <= first_frame_ns),
            np.asarray(indexes[1].names, dtype=object),
        ]
        if runtime is not None:
            run = indexes[2]
            names.append(_runtime_labels(run.names, run.ends - run.starts))
        offsets = np.cumsum([0] + [len(i.starts) for i in indexes])
        self._names = np.concatenate(names) if names else np.zeros(0, dtype=object)
        self._starts = np.concatenate([i.starts for i in indexes]).astype(np.int64)
        self._ends = np.concatenate([i.ends for i in indexes]).astype(np.int64)
        # Parents in the concatenated numbering, so that nested ranges of one kind are not counted twice.
        self._parent = np.concatenate(
            [
                np.where(i.parent >= 0, i.parent + off, -1)
                for i, off in zip(indexes, offsets[:-1], strict=True)
            ]
        ).astype(np.int64)
        self._indexes = indexes
        self._offsets = offsets
        self._is_frame = np.arange(len(self._names)) < offsets[1]

    def blame(self, start_ns: int, end_ns: int) -> str:
        """'a.py(3): f 12.1us; aten::copy_ 4.0us' for the host work inside [start_ns, end_ns)."""
        return self.blame_many(np.asarray([start_ns]), np.asarray([end_ns]))[0]

    def blame_many(self, starts_ns: np.ndarray, ends_ns: np.ndarray) -> list[str]:
        """Blame text of each gap [starts_ns[i], ends_ns[i]) (gaps need not be sorted). [n] str."""
        n_gaps = len(starts_ns)
        if not n_gaps:
            return []
        starts_ns = np.asarray(starts_ns, dtype=np.int64)
        ends_ns = np.asarray(ends_ns, dtype=np.int64)
        order = np.argsort(starts_ns, kind="stable")
        g0, g1 = starts_ns[order], ends_ns[order]
        pairs_range, pairs_gap, overlap = self._named_pairs(g0, g1)
        texts = np.full(n_gaps, "", dtype=object)
        if len(pairs_range):
            frame = pd.DataFrame({"gap": pairs_gap, "name": self._names[pairs_range], "ns": overlap})
            summed = frame.groupby(["gap", "name"], sort=False)["ns"].sum().reset_index()
            gap_of = summed["gap"].to_numpy()
            ns_of = summed["ns"].to_numpy()
            by_size = np.lexsort((-ns_of, gap_of))
            gap_of, ns_of, name_of = gap_of[by_size], ns_of[by_size], summed["name"].to_numpy()[by_size]
            first = np.concatenate(([True], gap_of[1:] != gap_of[:-1]))
            group_start = np.maximum.accumulate(np.where(first, np.arange(len(gap_of)), 0))
            keep = (np.arange(len(gap_of)) - group_start) < TOP_BLAME_ENTRIES
            parts: dict[int, list[str]] = {}
            largest: dict[int, int] = {}
            for gap, name, ns in zip(
                gap_of[keep].tolist(), name_of[keep].tolist(), ns_of[keep].tolist(), strict=True
            ):
                parts.setdefault(gap, []).append(f"{name} {ns / 1000:.1f}us")
                largest.setdefault(gap, ns)
            enclosing = self._enclosing_texts(g0, g1)
            for gap, names in parts.items():
                text = "; ".join(names)
                # The named work is a small part of the gap: say what held the host the rest of it.
                if 2 * largest[gap] < int(g1[gap] - g0[gap]):
                    text += f"; rest: {enclosing[gap]}"
                texts[gap] = text
        empty = np.flatnonzero(texts == "")
        if len(empty):
            texts[empty] = self._enclosing_texts(g0[empty], g1[empty])
        out = np.empty(n_gaps, dtype=object)
        out[order] = texts
        return out.tolist()

    def _named_pairs(self, g0: np.ndarray, g1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(range, gap, overlap ns) of the ranges to name: each outermost range of a kind that overlaps
        the gap without enclosing it, replaced by its deepest descendant that still covers more than half
        of that range's time in the gap.

        Those descendants form one chain (two disjoint ranges cannot both hold more than half), so the
        walk takes, level by level, the child with the largest overlap while it keeps more than half:
        one vectorised step per nesting level, over the pairs still walking.
        """
        empty = np.zeros(0, dtype=np.int64)
        n_ranges, n_gaps = len(self._starts), len(g0)
        if not n_ranges:
            return empty, empty, empty
        # The gap holding each range's start (g0 <= s < g1) and the one holding its end (g0 < e <= g1):
        # a range overlaps a gap without enclosing it only there.
        by_start = np.searchsorted(g0, self._starts, side="right") - 1
        by_end = np.searchsorted(g0, self._ends, side="left") - 1
        ranges = np.concatenate((np.arange(n_ranges), np.arange(n_ranges)))
        gaps = np.concatenate((by_start, by_end))
        safe = np.maximum(gaps, 0)
        s, e = self._starts[ranges], self._ends[ranges]
        overlap = np.minimum(e, g1[safe]) - np.maximum(s, g0[safe])
        encloses = (s <= g0[safe]) & (e >= g1[safe])
        keep = (gaps >= 0) & (overlap > 0) & ~encloses
        keys = np.unique(ranges[keep] * n_gaps + gaps[keep])
        ranges, gaps = keys // n_gaps, keys % n_gaps
        overlap = np.minimum(self._ends[ranges], g1[gaps]) - np.maximum(self._starts[ranges], g0[gaps])
        # Every child of a candidate that overlaps the gap is a candidate too (it cannot enclose a gap
        # its parent does not), so parent links stay inside the pair set.
        parent = self._parent[ranges]
        parent_keys = np.maximum(parent, 0) * n_gaps + gaps
        parent_pos = np.searchsorted(keys, parent_keys)
        has_parent = (parent >= 0) & (parent_pos < len(keys))
        has_parent &= keys[np.minimum(parent_pos, len(keys) - 1)] == parent_keys
        # Per (parent, gap): the child pair with the largest overlap.
        children = np.flatnonzero(has_parent)
        by_parent = children[np.lexsort((-overlap[children], parent_pos[children]))]
        heads = np.ones(len(by_parent), dtype=bool)
        heads[1:] = parent_pos[by_parent][1:] != parent_pos[by_parent][:-1]
        best_child = np.full(len(keys), -1, dtype=np.int64)
        best_child[parent_pos[by_parent][heads]] = by_parent[heads]
        roots = np.flatnonzero(~has_parent)
        named = roots.copy()
        walking = np.arange(len(roots))
        while len(walking):
            child = best_child[named[walking]]
            found = child >= 0
            walking, child = walking[found], child[found]
            # More than half of the outermost range's time in the gap: at most one child per level.
            go = 2 * overlap[child] > overlap[roots[walking]]
            walking, child = walking[go], child[go]
            named[walking] = child
        return ranges[named], gaps[named], overlap[named]

    def _enclosing_texts(self, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
        """Per gap, the innermost range of any kind enclosing it (frames first on equal starts), or
        that nothing was recorded. [n] object."""
        best = np.full(len(g0), -1, dtype=np.int64)
        best_start = np.full(len(g0), np.iinfo(np.int64).min, dtype=np.int64)
        for index, offset in zip(self._indexes, self._offsets[:-1], strict=True):
            j = index.innermost_many(g0, g1)
            found = j >= 0
            start = np.where(found, index.starts[np.maximum(j, 0)] if len(index.starts) else 0, best_start)
            better = found & (start > best_start)
            best[better] = j[better] + int(offset)
            best_start[better] = start[better]
        out = np.full(len(g0), NOTHING_RECORDED, dtype=object)
        has = best >= 0
        out[has] = np.asarray([f"host in {name}" for name in self._names[best[has]].tolist()], dtype=object)
        for k in np.flatnonzero(~has).tolist():
            name = self._ignored_cover(int(g0[k]), int(g1[k]))
            if name:
                out[k] = f"host in {name} (no op, frame or runtime call recorded inside it during the gap)"
        return out

    def _ignored_cover(self, start_ns: int, end_ns: int) -> str:
        """The innermost marker or `## ... ##` range enclosing [start_ns, end_ns), else the one overlapping
        it most; '' when none does."""
        index = self._ignored
        if not len(index.starts):
            return ""
        j = index.innermost(start_ns, end_ns)
        if j >= 0:
            return str(index.names[j])
        overlap = np.minimum(index.ends, end_ns) - np.maximum(index.starts, start_ns)
        best = int(np.argmax(overlap))
        return str(index.names[best]) if overlap[best] > 0 else ""


def queued_blame(
    gap_class: str,
    next_stream: int,
    graph: bool,
    wait_api: str = "",
    wait_call_us: float | None = None,
    evidence: str = "",
    prev_stream: int = -2,
) -> str:
    """Blame text for `launch` / `dependency` gaps, whose cause is on the device side.

    Args:
        gap_class: "launch" | "dependency" (others are returned as they are).
        next_stream: stream of the op that ended the gap.
        graph: the op belongs to a graph replay.
        wait_api: the stream-wait call seen before the op's launch ("" when none).
        wait_call_us: when that call began, µs from the trace start.
        evidence: the gap's `evidence` (`detect.idle_gaps`): "wait", "stream", "module load",
            "long queue" or "".
        prev_stream: stream of the op whose end opened the gap (-2: none).
    """
    if gap_class == "dependency":
        if wait_api:
            at = f" at {wait_call_us:.1f}us" if wait_call_us is not None else ""
            return f"stream {next_stream} waited on an event ({wait_api}{at})"
        if prev_stream >= 0:
            return f"stream {next_stream} waited on stream {prev_stream} (its op ended as the gap began)"
        return f"stream {next_stream} waited on another stream"
    if gap_class == "launch":
        if evidence == "module load":
            return "module load tail: a kernel launch call loaded its module (over 1 ms, first call)"
        if evidence == "long queue":
            # No wait call and no other stream: nothing in the trace says what it waited on.
            return (
                f"queued over 1 ms on stream {next_stream} with no stream wait or other-stream op in "
                "the trace (work not traced, another process, or driver-side delay)"
            )
        return "launch latency in a graph replay" if graph else "kernel-to-kernel launch latency"
    return gap_class
