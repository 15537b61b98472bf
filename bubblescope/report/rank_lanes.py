"""Every rank's lanes of one decode step in one timeline (tensor parallel).

A multi-rank analysis/1 has `timeline` (rank 0) and `rank_timelines` (every other rank, at rank 0's
step). Each rank's times count from that rank's own earliest event (ranks' clocks are not aligned in the
traces), so
the ranks are laid side by side by aligning each rank's GPU interval start with rank 0's: the figure
then shows, for the same step, how long each rank's GPU work took and where its gaps fall.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import num


def merged_timeline(analysis: dict[str, Any] | None) -> dict[str, Any] | None:
    """The timeline the report draws: every rank's lanes when the analysis has `rank_timelines`, else
    `timeline`.

    Args:
        analysis: analysis/1 dict (or None).

    Returns:
        a timeline dict in the `timeline` shape; with several ranks its lanes are named
        `rank R · <lane>`, each sync carries the lane of its rank's host, and `ranks` lists the ranks.
    """
    analysis = analysis or {}
    first, listed = analysis.get("timeline"), analysis.get("rank_timelines")
    listed = listed if isinstance(listed, list) else []
    others = [t for t in listed if isinstance(t, dict) and _entries(t, "slices")]
    if not others or not isinstance(first, dict) or not _entries(first, "slices"):
        return first
    return merge_rank_timelines([first, *others])


def _entries(timeline: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The dict entries of `timeline[key]`; nothing when it is not a list (a damaged file draws less)."""
    value = timeline.get(key)
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _shifted(entry: dict[str, Any], prefix: str, shift_ns: float, lane: str | None = None) -> dict[str, Any]:
    out = dict(entry)
    out["start_ns"] = (num(entry.get("start_ns")) or 0.0) + shift_ns
    out["lane"] = f"{prefix}{entry.get('lane') if lane is None else lane}"
    return out


def merge_rank_timelines(timelines: list[dict[str, Any]]) -> dict[str, Any]:
    """One timeline holding every rank's lanes, each rank shifted so its GPU interval starts with rank 0's.

    Args:
        timelines: one `timeline` dict per rank, rank 0 first (analysis/1 `timeline` + `rank_timelines`).

    Returns:
        a `timeline` dict: rank 0's step and windows, lanes/slices/gaps/syncs of every rank with lane
        names prefixed `rank R · `, `ranks` the rank numbers, `truncated` if any rank's was.
    """
    first = timelines[0]
    origin_ns = num(first.get("gpu_start_ns")) or 0.0
    kept = ("step", "start_ns", "dur_ns", "host_start_ns", "host_dur_ns", "gpu_start_ns")
    merged: dict[str, Any] = {key: first.get(key) for key in kept}
    merged.update(lanes=[], slices=[], gaps=[], syncs=[], ranks=[], truncated=False)
    gpu_end_ns = origin_ns
    for timeline in timelines:
        rank = timeline.get("rank", len(merged["ranks"]))
        prefix = f"rank {rank} · "
        shift_ns = origin_ns - (num(timeline.get("gpu_start_ns")) or 0.0)
        lanes = _entries(timeline, "lanes")
        host_lane = next((str(lane.get("lane")) for lane in lanes if lane.get("kind") == "host"), "host")
        merged["ranks"].append(rank)
        merged["lanes"] += [dict(lane, lane=f"{prefix}{lane.get('lane')}") for lane in lanes]
        for key in ("slices", "gaps"):
            merged[key] += [_shifted(e, prefix, shift_ns) for e in _entries(timeline, key)]
        merged["syncs"] += [_shifted(s, prefix, shift_ns, host_lane) for s in _entries(timeline, "syncs")]
        merged["truncated"] = merged["truncated"] or bool(timeline.get("truncated"))
        gpu_end_ns = max(gpu_end_ns, origin_ns + (num(timeline.get("gpu_dur_ns")) or 0.0))
    merged["gpu_dur_ns"] = gpu_end_ns - origin_ns
    return merged
