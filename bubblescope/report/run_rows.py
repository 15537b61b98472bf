"""A single run's report content as plain text: headline items, floor, switches, environment.

A RunRecord (docs/SCHEMAS.md) is shown by markdown.py, html_run.py and the console (run_console.py); each
takes its numbers from here so every surface shows the same ones. Also the ablation renderers, which show
the baseline run's reads and fix-first list. Nothing here imports plotly or torch.
"""

from __future__ import annotations

from typing import Any

from bubblescope.analysis.timed_idle import timed_step_ns_of
from bubblescope.report.cells import (
    NBSP,
    Rows,
    fmt_bytes,
    fmt_duration_ms,
    fmt_duration_ns,
    fmt_estimate,
    fmt_ms,
    fmt_number,
    num,
    plain,
    tpot_noise_note,
)
from bubblescope.report.reads_and_gaps_rows import NOT_MEASURED_NO_GPU
from bubblescope.report.spec_rows import expert_union_items

# Said under every headline TPOT so a reader knows which interval every surface shows.
INTERVAL_NOTE = (
    "_Intervals: 95% CI from a two-level bootstrap (repeats, then steps within them); an estimate whose "
    "interval holds zero or is wider than the effect is marked not resolved (docs/intervals.md)._"
)


def tpot_interval_ms(summary: dict[str, Any]) -> tuple[float | None, float | None]:
    """(lo, hi) of a RunRecord summary's TPOT interval, (None, None) when absent or malformed.

    The two-level interval (`tpot_ci95_two_level_ms`: repeats, then steps; what gate and ablate use)
    wherever the record has it, so one run shows one interval on every surface (docs/intervals.md).
    """
    for key in ("tpot_ci95_two_level_ms", "tpot_ci95_ms"):
        ci = summary.get(key)
        if isinstance(ci, list) and len(ci) == 2 and num(ci[0]) is not None and num(ci[1]) is not None:
            return num(ci[0]), num(ci[1])
    return None, None


def run_title(record: dict[str, Any]) -> str:
    workload = record.get("workload") or {}
    enabled = (record.get("switches") or {}).get("enabled") or []
    parts = [plain(workload.get("name"))]
    preset = record.get("preset") or workload.get("preset")
    if preset:
        parts.append(plain(preset))
    parts.append("switches: " + (plain(enabled) if enabled else "none"))
    return " · ".join(parts)


def run_summary_items(record: dict[str, Any], analysis: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label, value) headline numbers of a run."""
    summary = record.get("summary") or {}
    floor = record.get("floor") or {}
    lo_ms, hi_ms = tpot_interval_ms(summary)
    tpot_text = fmt_estimate(summary.get("tpot_ms"), lo_ms, hi_ms, "ms")
    tpot_text += tpot_noise_note(summary.get("tpot_ms"), lo_ms, hi_ms)
    stats = record.get("analysis") or (analysis or {}).get("summary") or {}
    ratio = num(floor.get("tpot_over_floor"))
    gpu_measured = stats.get("gpu_measured", (analysis or {}).get("gpu_measured")) is not False
    idle_text = fmt_duration_ns(stats.get("idle_ns_per_step")) if gpu_measured else NOT_MEASURED_NO_GPU
    measured = floor_measured(record)
    items = [
        ("TPOT (95% CI)", tpot_text),
        ("tokens/s", fmt_number(summary.get("tokens_per_s"), 1)),
        (
            "speed-of-light floor",
            fmt_ms(floor.get("floor_ms")) if measured or not floor else floor_unmeasured_text(record),
        ),
    ]
    # No measured floor, no ratio: a "TPOT ÷ floor —" card beside "floor: not measured" said nothing.
    items += [("TPOT ÷ floor", f"{ratio:.2f}×")] if ratio is not None and measured else []
    items += [
        ("blocking reads/step", plain(stats.get("blocking_reads_per_step"))),
        ("GPU idle/step", idle_text),
    ]
    profiled = num(stats.get("profiled_step_over_timed"))
    if profiled is not None:
        # How far the trace-derived numbers (gaps, reads) describe the timed steps.
        items.append(("profiled step ÷ timed step", f"{profiled:.2f}×"))
    return items + expert_union_items(record)


def floor_measured(record: dict[str, Any]) -> bool:
    """True when a run's floor means something: its bandwidth was given (--bandwidth) or measured on the
    CUDA device that ran. An assumed H200 bandwidth on a CPU run gives ratios like 258,279x floor."""
    floor = record.get("floor") or {}
    source = str(floor.get("bandwidth_source") or "")
    device = str((record.get("environment") or {}).get("device") or "")
    if num(floor.get("floor_ms")) is None:
        return False
    return source.startswith("given") or (source.startswith("measured") and device.startswith("cuda"))


def floor_unmeasured_text(record: dict[str, Any]) -> str:
    device = str((record.get("environment") or {}).get("device") or "")
    where = "on CPU" if not device.startswith("cuda") else "on this device"
    return f"not measured {where} (give --bandwidth)"


def floor_text(record: dict[str, Any]) -> str:
    """One line for consoles: the floor and TPOT ÷ floor, or why there is none."""
    floor = record.get("floor") or {}
    if not floor:
        return "floor: not recorded"
    if not floor_measured(record):
        return "floor: " + floor_unmeasured_text(record)
    return (
        f"floor {fmt_duration_ms(floor.get('floor_ms'))} ({fmt_bytes(floor.get('bytes_per_token'))}/token at "
        f"{plain(floor.get('bandwidth_gbps'))}{NBSP}GB/s, {plain(floor.get('bandwidth_source'))}) · "
        f"TPOT ÷ floor {num(floor.get('tpot_over_floor')) or 0:.2f}×"
    )


def record_syncs(record: dict[str, Any], analysis: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A run's blocking reads: the record's own list first (on CPU it alone holds the readbacks it
    counted from the trace), else the full analysis's."""
    own = (record.get("analysis") or {}).get("syncs")
    if isinstance(own, list) and own:
        return own
    syncs = (analysis or {}).get("syncs")
    return syncs if isinstance(syncs, list) else []


def tokens_per_step(record: dict[str, Any]) -> float:
    """Mean tokens per timed step of a RunRecord (1 for plain decoding, the accept length for spec)."""
    summary = record.get("summary") or {}
    tokens, steps, repeats = (num(summary.get(k)) for k in ("tokens", "steps", "repeats"))
    if tokens and steps and repeats:
        return tokens / (steps * repeats)
    return 1.0


def findings_analysis(record: dict[str, Any], analysis: dict[str, Any] | None) -> dict[str, Any]:
    """What the fix-first list reads for a run: its analysis, with the record's own reads when the record
    holds them (on CPU only the record has the readbacks counted from the trace)."""
    merged = dict(analysis or {})
    merged["syncs"] = record_syncs(record, analysis)
    # The timed step bounds every saving (findings.fix_first, timed_idle.bound_idle).
    merged["timed_step_ns"] = timed_step_ns_of(record)
    if not analysis:
        block = record.get("analysis") or {}
        merged["gpu_measured"] = block.get("gpu_measured", False)
        merged["summary"] = {
            "idle_by_class_ns_per_step": block.get("idle_by_class_ns_per_step") or {},
            "gpu_busy_ns_per_step": block.get("gpu_busy_ns_per_step"),
        }
    return merged


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else plain(value)


def switch_info_rows(record: dict[str, Any]) -> Rows:
    """The switches a run's workload offers, and which were on."""
    switches = record.get("switches") or {}
    enabled = {plain(name) for name in switches.get("enabled") or []}
    rows = [
        [
            plain(s.get("name")),
            "on" if plain(s.get("name")) in enabled else "off",
            plain(s.get("help")),
            plain(s.get("replaces")),
            _yes_no(s.get("usable")),
        ]
        for s in switches.get("available") or []
        if isinstance(s, dict)
    ]
    return ["switch", "on", "help", "replaces", "usable"], rows


def environment_rows(environment: dict[str, Any] | None) -> Rows:
    return ["key", "value"], [[str(k), plain(v)] for k, v in (environment or {}).items()]
