"""Tensor-parallel report content: the per-rank table of a run and the per-configuration rank spread
of an ablation, as plain-text rows (escaped at render time, like every other `*_rows`).

Reads the `tp` block `run --tp` and `ablate --tp` write into rank 0's RunRecord: world_size, backend,
allreduce, timing_rank, ranks [{rank, device, tpot_ms, gpu_busy_ns_per_step, idle_ns_per_step,
blocking_reads_per_step, ...}], slowest_rank. A malformed block degrades to '—', never a crash.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import Rows, fmt_duration_ns, fmt_ms, md_cell, md_items, md_table, num, plain
from bubblescope.report.load_inputs import conform_document

TP_SHAPE = {"ranks": [dict]}
SECTION_TITLE = "Tensor-parallel ranks"


def tp_of(record: Any) -> dict[str, Any] | None:
    """The record's `tp` block with `ranks` a list of dicts, or None when it has none."""
    tp = record.get("tp") if isinstance(record, dict) else None
    if not isinstance(tp, dict):
        return None
    tp = conform_document(tp, TP_SHAPE)
    return tp if tp.get("ranks") else None


def _busy_values(ranks: list[dict[str, Any]]) -> list[float]:
    """GPU busy per step of every rank, or [] unless every rank has a positive one (GPU measured)."""
    values = [num(r.get("gpu_busy_ns_per_step")) for r in ranks]
    return [v for v in values if v is not None] if all(v and v > 0 for v in values) else []


def rank_rows(tp: dict[str, Any]) -> Rows:
    """One row per rank: device, TPOT on its own timeline, GPU busy / idle / reads per step."""
    headers = ["rank", "device", "TPOT (own timeline)", "GPU busy/step", "idle/step", "reads/step", "slowest"]
    slowest = tp.get("slowest_rank")
    # A CPU trace has no GPU timeline: its zero busy / idle would read as "no work", so say so.
    measured = bool(_busy_values(tp["ranks"]))

    def gpu_us(value: Any) -> str:
        return fmt_duration_ns(value) if measured else "not measured"

    rows = [
        [
            plain(r.get("rank")),
            plain(r.get("device")),
            fmt_ms(r.get("tpot_ms")),
            gpu_us(r.get("gpu_busy_ns_per_step")),
            gpu_us(r.get("idle_ns_per_step")),
            plain(r.get("blocking_reads_per_step")),
            "slowest" if r.get("rank") == slowest and slowest is not None else "",
        ]
        for r in tp["ranks"]
    ]
    return headers, rows


def slowest_rank_text(tp: dict[str, Any]) -> str:
    """Which rank is slowest and why, in one sentence."""
    ranks, slowest = tp["ranks"], tp.get("slowest_rank")
    busy = _busy_values(ranks)
    if slowest is None:
        return "slowest rank not recorded"
    timing = f"TPOT is rank {plain(tp.get('timing_rank', 0))}'s step loop, all ranks in lockstep"
    if busy:
        return (
            f"rank {plain(slowest)} is the slowest: it has the most GPU work per step "
            f"({fmt_duration_ns(max(busy))} vs {fmt_duration_ns(min(busy))} on the least busy rank), so "
            f"the other ranks wait for it in each all-reduce; {timing}"
        )
    return (
        f"rank {plain(slowest)} is the slowest by TPOT on its own timeline (GPU busy per step not "
        f"measured, so not by GPU work); {timing}"
    )


def tp_summary_items(tp: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) headline lines of a TP run."""
    return [
        ("world size", f"{plain(tp.get('world_size'))} ({plain(tp.get('backend'))})"),
        ("all-reduce", plain(tp.get("allreduce"))),
        ("slowest rank", plain(tp.get("slowest_rank"))),
    ]


def busy_spread_text(ranks: list[dict[str, Any]]) -> str:
    """`min – max µs (+x%)` of GPU busy per step across ranks, or — when not measured."""
    busy = _busy_values(ranks)
    if not busy:
        return "—"
    spread = (max(busy) - min(busy)) / max(busy) * 100.0
    return f"{fmt_duration_ns(min(busy))} – {fmt_duration_ns(max(busy))} ({spread:.1f}% spread)"


def ablation_tp_rows(ablation: dict[str, Any], records: dict[str, dict[str, Any]]) -> Rows:
    """Per configuration with a `tp` block: world size, slowest rank, its TPOT, GPU busy spread."""
    headers = ["config", "ranks", "slowest rank", "slowest rank TPOT", "GPU busy/step across ranks"]
    rows = []
    for config in ablation.get("configs") or []:
        tp = tp_of(records.get(str(config.get("key"))))
        if tp is None:
            continue
        slowest = tp.get("slowest_rank")
        own = next((r for r in tp["ranks"] if r.get("rank") == slowest), {})
        rows.append(
            [
                plain(config.get("key")),
                plain(tp.get("world_size")),
                plain(slowest),
                fmt_ms(own.get("tpot_ms")),
                busy_spread_text(tp["ranks"]),
            ]
        )
    return headers, rows


def tp_markdown(record: dict[str, Any]) -> list[str]:
    """The "Tensor-parallel ranks" Markdown section of a record with a `tp` block (nothing otherwise)."""
    tp = tp_of(record)
    if tp is None:
        return []
    return [
        f"### {SECTION_TITLE}",
        md_items(tp_summary_items(tp)),
        md_cell(slowest_rank_text(tp)),
        md_table(rank_rows(tp)),
    ]


def ablation_slowest_text(ablation: dict[str, Any], records: dict[str, dict[str, Any]]) -> str | None:
    """The slowest-rank sentence of the first configuration with a `tp` block (the baseline comes
    first), labelled with its key: why one rank sets the pace of every configuration."""
    for config in ablation.get("configs") or []:
        tp = tp_of(records.get(str(config.get("key"))))
        if tp is not None:
            return f"{plain(config.get('key'))}: {slowest_rank_text(tp)}"
    return None


def ablation_tp_markdown(ablation: dict[str, Any], records: dict[str, dict[str, Any]]) -> list[str]:
    """Per configuration of a TP ablation: slowest rank and GPU busy spread (nothing without `tp`)."""
    rows = ablation_tp_rows(ablation, records)
    if not rows[1]:
        return []
    return [
        f"### {SECTION_TITLE} per configuration",
        md_cell(ablation_slowest_text(ablation, records)),
        md_table(rows),
    ]
