"""What to fix first: one ranked list of findings from a `bubblescope.analysis/1` dict.

Every surface (console, HTML, Markdown) opens with this list. Each finding names the place to look, the
expected saving per token if it were fixed, and a hint. Sources, each read from the analysis (rendering
side only; the analysis computes the numbers):

* a host-blocking read site: its GPU bubble per step (`syncs[].bubble_ns` per read × reads per step),
  bounded by the median step's whole `sync` idle, so a warm-up step's long bubble cannot dominate;
* `launch` and `dependency` idle: the median over steps of that class's idle per step;
* `host` idle: the median per step, with what the host was doing instead (the largest such gap's blame);
* kernels far below the bandwidth ceiling, where the analysis' `kernels[]` rows carry achieved bandwidth.

Medians over steps, not means: one warm-up or outlier step never ranks first. The tool's own
`synchronize` (around the profiled window) is never listed.
"""

from __future__ import annotations

import re
from statistics import median
from typing import Any

from bubblescope.report.cells import blame_text, fmt_duration_ns, num

# Sites of the synchronize calls bubblescope itself makes around the profiled and timed windows.
TOOL_SITE_RE = re.compile(
    r"^(profiled|timed)\.py\(\d+\): (profile_window|_time_repeat_cuda|_time_repeat_host|run_timed)$"
)
# A finding worth less than this per step is noise on any surface (a tenth of a microsecond).
MIN_SAVING_NS = 100
# A kernel using less than this fraction of the bandwidth ceiling is listed (when bytes are known).
LOW_BANDWIDTH_FRACTION = 0.5
DEFAULT_SHOWN = 8
CLASS_HINTS = {
    "launch": (
        "kernel launch latency between back-to-back kernels",
        "capture the decode step in a CUDA graph (torch.compile mode='reduce-overhead'), enable PDL, or "
        "fuse the small kernels",
    ),
    "dependency": (
        "a stream waited on another stream or event",
        "overlap or reorder the cross-stream work, or put it on one stream",
    ),
    "host": (
        "the host was late issuing work",
        "move the CPU work off the decode loop's critical path, or capture the step in a CUDA graph",
    ),
}


def is_tool_site(site: Any) -> bool:
    """True for the synchronize bubblescope itself makes (never a user's finding)."""
    return bool(TOOL_SITE_RE.match(str(site or "")))


def _median_class_ns(analysis: dict[str, Any], cls: str) -> float:
    """Median over steps of one idle class per step (the summary's mean when there are no steps)."""
    values = [
        num(s["idle_by_class_ns"].get(cls))
        for s in analysis.get("steps") or []
        if isinstance(s, dict) and isinstance(s.get("idle_by_class_ns"), dict)
    ]
    values = [v for v in values if v is not None]
    if values:
        return float(median(values))
    summary = analysis.get("summary") if isinstance(analysis.get("summary"), dict) else {}
    by_class = summary.get("idle_by_class_ns_per_step")
    return (num(by_class.get(cls)) if isinstance(by_class, dict) else None) or 0.0


def _sync_findings(analysis: dict[str, Any], tokens_per_step: float) -> list[dict[str, Any]]:
    measured = analysis.get("gpu_measured") is not False
    bound_ns = _median_class_ns(analysis, "sync")
    out = []
    for sync in analysis.get("syncs") or []:
        if not isinstance(sync, dict) or is_tool_site(sync.get("site")):
            continue
        count, per_step = num(sync.get("count")) or 0.0, num(sync.get("per_step")) or 0.0
        if per_step <= 0:
            continue
        saving = None
        if measured and count > 0:
            per_read_ns = (num(sync.get("bubble_ns")) or 0.0) / count
            saving = min(per_read_ns * per_step, bound_ns) / tokens_per_step
        op = sync.get("op") or sync.get("api") or "read"
        out.append(
            {
                "kind": "blocking read",
                "what": f"{op}, {per_step:g} per step",
                "site": str(sync.get("site") or "unknown site"),
                "saving_ns_per_token": saving,
                "hint": str(sync.get("hint") or ""),
            }
        )
    return out


def _top_blame(analysis: dict[str, Any], cls: str) -> str | None:
    gaps = [g for g in analysis.get("gaps_top") or [] if isinstance(g, dict) and g.get("class") == cls]
    if not gaps:
        return None
    largest = max(gaps, key=lambda g: num(g.get("dur_ns")) or 0.0)
    return blame_text(largest.get("blame") or "") or None


def _idle_findings(analysis: dict[str, Any], tokens_per_step: float) -> list[dict[str, Any]]:
    if analysis.get("gpu_measured") is False:
        return []
    out = []
    for cls, (what, hint) in CLASS_HINTS.items():
        ns = _median_class_ns(analysis, cls)
        if ns < MIN_SAVING_NS:
            continue
        blame = _top_blame(analysis, cls)
        site = f"covered by: {blame}" if cls == "host" and blame else (blame or "every step")
        out.append(
            {
                "kind": f"{cls} idle",
                "what": what,
                "site": site,
                "saving_ns_per_token": ns / tokens_per_step,
                "hint": hint,
            }
        )
    return out


def _kernel_findings(analysis: dict[str, Any], tokens_per_step: float) -> list[dict[str, Any]]:
    out = []
    for kernel in analysis.get("kernels") or []:
        if not isinstance(kernel, dict):
            continue
        fraction, per_step_ns = num(kernel.get("bandwidth_fraction")), num(kernel.get("ns_per_step"))
        if fraction is None or per_step_ns is None or fraction >= LOW_BANDWIDTH_FRACTION:
            continue
        out.append(
            {
                "kind": "slow kernel",
                "what": f"{fraction:.0%} of the bandwidth ceiling",
                "site": str(kernel.get("name")),
                # Reaching the ceiling would take its time down to fraction × today's.
                "saving_ns_per_token": per_step_ns * (1.0 - fraction) / tokens_per_step,
                "hint": "memory-bound at batch size 1: check the access pattern, tile sizes and dtype",
            }
        )
    return out


def fix_first(
    analysis: dict[str, Any] | None, tokens_per_step: float = 1.0, limit: int = DEFAULT_SHOWN
) -> list[dict[str, Any]]:
    """Ranked findings, largest expected saving first (those without a measured saving last).

    Args:
        analysis: a `bubblescope.analysis/1` dict (None or empty: no findings).
        tokens_per_step: mean tokens per decode step (speculative decoding > 1), so savings are per token.
        limit: most findings returned.
    Returns:
        [{rank, kind, what, site, saving_ns_per_token (float or None), hint}].
    """
    if not isinstance(analysis, dict):
        return []
    tokens = tokens_per_step if tokens_per_step and tokens_per_step > 0 else 1.0
    findings = (
        _sync_findings(analysis, tokens)
        + _idle_findings(analysis, tokens)
        + _kernel_findings(analysis, tokens)
    )
    findings = [
        f for f in findings if f["saving_ns_per_token"] is None or f["saving_ns_per_token"] >= MIN_SAVING_NS
    ]
    findings.sort(key=lambda f: (f["saving_ns_per_token"] is None, -(f["saving_ns_per_token"] or 0.0)))
    return [{"rank": i, **f} for i, f in enumerate(findings[:limit], start=1)]


def fix_first_rows(findings: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The fix-first list as (headers, rows) of plain strings for every table surface."""
    headers = ["#", "finding", "where", "saving / token", "fix"]
    rows = [
        [
            str(f["rank"]),
            f"{f['kind']}: {f['what']}",
            f["site"],
            fmt_duration_ns(f["saving_ns_per_token"])
            if f["saving_ns_per_token"] is not None
            else "not measured (no GPU)",
            f["hint"],
        ]
        for f in findings
    ]
    return headers, rows


# Medians over steps (module docstring), so the figures can differ from the per-step means beside them.
FIX_FIRST_TITLE = "What to fix first (expected saving per token if fixed, in the median step)"
