"""Merging a finished TP job's per-rank records: trace names, one analysis over all ranks, the `tp` block.

`run --tp` (launch_tp.py) merges its ranks' `rank<r>.json` into `record.json`, and `ablate --tp`
(ablate/tp.py) does the same per configuration, so the merge lives apart from either launcher. It runs in
the launching process after every rank has finished; nothing here imports torch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bubblescope.errors import BubblescopeError
from bubblescope.files.atomic import write_json_atomic
from bubblescope.records.run_record import RunRecord, load_record, save_record


def rank_summary(rank: int, record: RunRecord, record_name: str, prefix: str = "") -> dict[str, Any]:
    """One entry of `tp.ranks`: where the rank's files are, and its per-step numbers.

    Args:
        record_name: the rank's record, relative to the folder of the merged (rank 0) record.
        prefix: the rank's folder relative to the merged record's (e.g. "../rank1/runs/"), put before
            the trace and analysis file names the rank's record gives relative to its own folder.
    """
    analysis = record.get("analysis") or {}
    trace, analysis_file = record.get("trace"), record.get("analysis_file")
    return {
        "rank": rank,
        "record": record_name,
        "trace": prefix + trace if trace else None,
        "analysis_file": prefix + analysis_file if analysis_file else None,
        "device": (record.get("workload", {}).get("describe") or {}).get("device"),
        "tpot_ms": record["summary"]["tpot_ms"],
        "gpu_busy_ns_per_step": analysis.get("gpu_busy_ns_per_step"),
        "idle_ns_per_step": analysis.get("idle_ns_per_step"),
        "blocking_reads_per_step": analysis.get("blocking_reads_per_step"),
    }


def slowest_rank(ranks: list[dict[str, Any]]) -> int:
    """The rank with the most GPU work per step when measured (the one the others wait for in each
    all-reduce), else the one with the largest TPOT on its own timeline."""
    if all(isinstance(r["gpu_busy_ns_per_step"], int) and r["gpu_busy_ns_per_step"] > 0 for r in ranks):
        return max(ranks, key=lambda r: r["gpu_busy_ns_per_step"])["rank"]
    return max(ranks, key=lambda r: r["tpot_ms"])["rank"]


def tp_block(record0: RunRecord, ranks: list[dict[str, Any]], backend: str) -> dict[str, Any]:
    """The `tp` block of a merged record (schema: docs/SCHEMAS.md, tensor-parallel runs)."""
    describe = record0.get("workload", {}).get("describe") or {}
    return {
        "world_size": len(ranks),
        "backend": backend,
        "allreduce": (describe.get("tp") or {}).get("allreduce"),
        "timing_rank": 0,
        "ranks": ranks,
        "slowest_rank": slowest_rank(ranks),
    }


def analyze_all(
    out_dir: Path, traces: list[str], name: str = "analysis.json"
) -> tuple[str | None, str | None]:
    """`out_dir/name`: one analysis over every rank's trace together (paths relative to out_dir);
    returns (file name or None, warning or None)."""
    from bubblescope.capture.profiled import STEP_MARKER

    try:
        from bubblescope.analysis.traces import analyze_traces

        full = analyze_traces([str(out_dir / name) for name in traces], step_marker=STEP_MARKER)
    except (ImportError, BubblescopeError) as exc:
        return None, f"per-rank analysis of all traces skipped: {exc}"
    except Exception as exc:  # noqa: BLE001 - the measurement is done; keep it and say what failed
        return None, f"per-rank analysis failed ({type(exc).__name__}: {exc})"
    write_json_atomic(out_dir / name, full)
    return name, None


def _move_read_calls(old_trace: Path, new_trace: Path) -> None:
    """The read tap's calls follow their trace's new name (`profiling.run_sites.read_calls_path`)."""
    from bubblescope.profiling.run_sites import read_calls_path

    old_calls = read_calls_path(old_trace)
    if old_calls.is_file():
        os.replace(old_calls, read_calls_path(new_trace))


def merge_rank_records(out_dir: Path, world_size: int, backend: str) -> tuple[RunRecord, list[str]]:
    """Name each rank's trace `trace.rank<r>.json.gz`, analyse them together, write `record.json`.

    Returns:
        (the merged record: rank 0's, plus `tp` and `traces`; notices).
    """
    notices: list[str] = []
    records = [load_record(out_dir / f"rank{rank}.json") for rank in range(world_size)]
    traces: list[str] = []
    for rank, record in enumerate(records):
        if record.get("trace"):
            name = f"trace.rank{rank}.json.gz"
            os.replace(out_dir / record["trace"], out_dir / name)
            _move_read_calls(out_dir / record["trace"], out_dir / name)
            record["trace"] = name
            save_record(record, out_dir / f"rank{rank}.json")
            traces.append(name)
    ranks = [rank_summary(rank, record, f"rank{rank}.json") for rank, record in enumerate(records)]
    merged = dict(records[0])
    if traces:
        merged["analysis_file"], warning = analyze_all(out_dir, traces)
        notices += [warning] if warning else []
    merged["traces"] = traces
    merged["tp"] = tp_block(records[0], ranks, backend)
    save_record(merged, out_dir / "record.json")
    return merged, notices
