"""Cells of the ablation tables that carry their own interval and reason: removed idle, predictions.

Shared by every surface (console, HTML, Markdown) so one estimate reads the same everywhere.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import NBSP, NOT_MEASURED, fmt_duration_ns, num, plain

REMOVED_IDLE_HEADER = "alone: removed GPU idle per profiled step (95% CI)"
TIMED_IDLE_HEADER = "alone: removed GPU idle per timed step (µs, 95% CI)"
# Below this an idle difference is printed as nothing: 0.05 µs is under the trace's resolution.
_SHOWN_US = 0.05


def _us_interval(cls: str, row: dict[str, Any]) -> str:
    # µs throughout (not fmt_duration_ns, which switches to ms): the interval shares the estimate's unit.
    est, lo, hi = (num(row.get(k)) for k in ("est", "lo", "hi"))
    text = f"{cls} {est or 0.0:.1f}{NBSP}µs"
    return text + (f" [{lo:.1f}, {hi:.1f}]" if lo is not None and hi is not None else "")


def timed_idle_text(switch: dict[str, Any]) -> str:
    """Idle per timed step the switch removed alone: `120.3 µs [40.1, 300.2]`, `not resolved (noise): ...`
    where the interval holds zero, `not measured` without a GPU (ablate.removed_idle.timed_removal)."""
    block = switch.get("removed_idle_per_step")
    if not isinstance(block, dict):
        return "—"
    if block.get("measured") is False:
        return NOT_MEASURED
    timed = block.get("timed_us")
    if not isinstance(timed, dict) or num(timed.get("est")) is None:
        return "—"
    est, lo, hi = (num(timed.get(k)) for k in ("est", "lo", "hi"))
    text = f"{est:.1f}{NBSP}µs" + (f" [{lo:.1f}, {hi:.1f}]" if lo is not None and hi is not None else "")
    return text if timed.get("resolved") else f"not resolved (noise): {text}"


def removed_idle_text(switch: dict[str, Any]) -> str:
    """What a switch removed alone, per profiled step: `host 972.0 µs [930.1, 1010.2]`, classes whose
    interval holds zero listed as `not resolved`, then why the removal is not a timed saving, if so.

    A record without a GPU says `not measured`; an ablation written before the intervals existed shows
    its point values and says that they have none.
    """
    block = switch.get("removed_idle_per_step")
    if not isinstance(block, dict):
        return _legacy_text(switch.get("removed_idle_us_per_step"))
    if block.get("measured") is False:
        return NOT_MEASURED
    by_class = block.get("by_class_us")
    if not isinstance(by_class, dict):
        return plain(block.get("note"))
    shown, unresolved = [], []
    for cls, row in by_class.items():
        if not isinstance(row, dict) or num(row.get("est")) is None:
            continue
        if row.get("resolved"):
            shown.append(_us_interval(cls, row))
        elif abs(num(row.get("est")) or 0.0) >= _SHOWN_US:
            unresolved.append(cls)
    parts = shown + ([f"not resolved: {', '.join(unresolved)}"] if unresolved else [])
    text = "; ".join(parts) or "none"
    return text + (f" ({block['note']})" if block.get("note") else "")


def _legacy_text(idle_us: Any) -> str:
    if not isinstance(idle_us, dict):
        return "—"
    parts = [
        f"{cls} {fmt_duration_ns(value * 1e3)}"
        for cls, us in idle_us.items()
        if (value := num(us)) and abs(value) >= _SHOWN_US
    ]
    return ("; ".join(parts) + " (no interval: re-analyse with `ablate --reanalyze`)") if parts else "—"


def removed_idle_note(switches: list[dict[str, Any]] | None) -> str | None:
    """Which steps the removed-idle column describes (the baseline's window), said once under the table."""
    for switch in switches or []:
        steps = (switch.get("removed_idle_per_step") or {}).get("steps")
        if isinstance(steps, dict) and steps.get("baseline"):
            return (
                "Removed GPU idle per timed step: the change of (TPOT × tokens per step − GPU busy), with "
                "the TPOT interval. Per profiled step, by class: baseline median − switched median over each "
                f"run's typical profiled steps (baseline: {plain(steps['baseline'])}); window-to-window "
                "spread is not in that interval, and it is a timed saving only where ΔTPOT alone agrees (the "
                "cell says why not)."
            )
    return None
