"""Blame text for GPU idle gaps: the host work that overlapped a host gap, the read that caused a sync
gap, the device-side cause of a launch or dependency gap."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bubblescope.detect.host_blame import HostBlame, queued_blame

if TYPE_CHECKING:
    from bubblescope.ranks.analysis import RankAnalysis


def gap_blamer(rank: RankAnalysis, window_ns: tuple[int, int] | None = None):
    """Gap row -> blame text. `window_ns` limits host blame to ranges overlapping it (faster)."""
    many = gap_blames(rank, window_ns)

    def blame(row) -> str:
        return many(pd.DataFrame([row]))[0]

    return blame


def gap_blames(rank: RankAnalysis, window_ns: tuple[int, int] | None = None):
    """Gap rows (DataFrame) -> blame text of each, host blame done once for all of them (linear)."""
    blamers: dict[str, HostBlame] = {}
    sites = dict(zip(rank.reads["read_id"].tolist(), rank.reads["site"].tolist(), strict=True))
    origin = rank.tables.origin_ns

    def host_blame(tid: str) -> HostBlame:
        if tid not in blamers:
            tables = rank.tables
            blamers[tid] = HostBlame(tables.ops, tables.frames, tid, window_ns, tables.runtime)
        return blamers[tid]

    def blame_all(gaps: pd.DataFrame) -> list[str]:
        classes = gaps["class"].to_numpy()
        out = [""] * len(gaps)
        host_rows = np.flatnonzero((classes == "host") | (classes == "outside"))
        # Each host gap is blamed on the thread that launched its closing op (the launching thread
        # of the rank for a trailing gap or an unmatched op): backward runs on autograd's thread.
        tids = gaps["next_tid"].to_numpy()[host_rows] if "next_tid" in gaps else np.full(len(host_rows), "")
        tids = np.where(tids == "", rank.host_tid, tids).astype(str)
        for tid in np.unique(tids).tolist():
            rows = host_rows[tids == tid]
            texts = host_blame(tid).blame_many(
                gaps["start_ns"].to_numpy()[rows].astype(np.int64),
                gaps["end_ns"].to_numpy()[rows].astype(np.int64),
            )
            for j, text in zip(rows.tolist(), texts, strict=True):
                out[j] = text
        n = len(gaps)
        read_ids = gaps["read_id"].to_numpy()
        streams = gaps["next_stream"].to_numpy()
        graph = gaps["graph"].to_numpy() if "graph" in gaps else np.zeros(n, dtype=bool)
        wait_api = gaps["wait_api"].to_numpy() if "wait_api" in gaps else np.full(n, "", dtype=object)
        wait_ns = gaps["wait_call_ns"].to_numpy() if "wait_call_ns" in gaps else np.full(n, -1)
        evidence = gaps["evidence"].to_numpy() if "evidence" in gaps else np.full(n, "", dtype=object)
        prev_streams = gaps["prev_stream"].to_numpy() if "prev_stream" in gaps else np.full(n, -2)
        for j in np.flatnonzero((classes != "host") & (classes != "outside")).tolist():
            if classes[j] == "sync":
                out[j] = sites.get(int(read_ids[j]), "blocking read")
                continue
            waited = int(wait_ns[j])
            out[j] = queued_blame(
                str(classes[j]),
                int(streams[j]),
                bool(graph[j]),
                str(wait_api[j] or ""),
                (waited - origin) / 1000 if waited >= 0 else None,
                str(evidence[j] or ""),
                int(prev_streams[j]),
            )
        return out

    return blame_all
