"""Cell formatters shared by every table surface (console, Markdown, HTML): numbers with units, and
Markdown table cells. Plain strings out; escaping for each surface lives in report/escape.py.
"""

from __future__ import annotations

import re
from typing import Any

from bubblescope.report.escape import md_text

Rows = tuple[list[str], list[list[str]]]
GAP_CLASSES = ("sync", "host", "launch", "dependency", "outside")
# Between a number and its unit, so that narrow table columns never split them.
NBSP = "\u00a0"
# Kernel names (C++ templates) can run to a thousand characters; a table cell shows the start.
NAME_CHARS_SHOWN = 160
# A report shows the worst gaps; the full list stays in analysis.json.
GAP_ROWS_SHOWN = 20
ESTIMATORS = [
    ("alone_ms", "alone"),
    ("removed_from_all_ms", "removed from all-on"),
    ("shapley_ms", "Shapley"),
    ("cumulative_ms", "cumulative (in order)"),
]


def num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def fmt_ms(value: Any, digits: int = 3) -> str:
    number = num(value)
    if number is None:
        return "—"
    # A floor of a tiny CPU preset is microseconds; fixed decimals would print 0.000.
    if 0 < abs(number) < 10 ** (1 - digits):
        return f"{number:.{digits}g}{NBSP}ms"
    return f"{number:.{digits}f}{NBSP}ms"


def fmt_duration_ns(value: Any) -> str:
    """A duration in ns as people read it: `812.4 µs` below a millisecond, `12.35 ms` above, `—` if absent.

    One spelling of the unit (µs) on every surface, never four decimals of ms.
    """
    number = num(value)
    if number is None:
        return "—"
    if abs(number) < 1e6:
        return f"{number / 1e3:.1f}{NBSP}µs"
    if abs(number) < 1e8:
        return f"{number / 1e6:.2f}{NBSP}ms"
    return f"{number / 1e6:,.0f}{NBSP}ms"


# A GPU number a trace without GPU activity could not measure is null (bubblescope.not_measured).
NOT_MEASURED = "not measured"


def fmt_measured_ns(value: Any) -> str:
    """`fmt_duration_ns` of a GPU time, saying `not measured` where it is null (a CPU run or trace)."""
    return NOT_MEASURED if value is None else fmt_duration_ns(value)


def fmt_duration_ms(value: Any) -> str:
    """`fmt_duration_ns` for a value in ms."""
    number = num(value)
    return "—" if number is None else fmt_duration_ns(number * 1e6)


# A TPOT whose 95% interval is wider than this fraction of it (each side) is called noisy on every surface.
NOISY_TPOT_FRACTION = 0.05


def tpot_noise_note(tpot_ms: Any, lo_ms: Any, hi_ms: Any) -> str:
    """` (noisy: ±12%)` when a TPOT's interval is wide relative to it, else an empty string."""
    tpot, lo, hi = num(tpot_ms), num(lo_ms), num(hi_ms)
    if tpot is None or lo is None or hi is None or tpot <= 0:
        return ""
    half = (hi - lo) / 2.0 / tpot
    return f" (noisy: ±{half:.0%})" if half > NOISY_TPOT_FRACTION else ""


def plural(count: Any, noun: str, plural_noun: str | None = None) -> str:
    """`1 step`, `8 steps`, `0.5 reads` (a count other than exactly one takes the plural)."""
    number = num(count)
    text = plain(count)
    return f"{text} {noun if number == 1 else (plural_noun or noun + 's')}"


def shorten(text: str, limit: int = NAME_CHARS_SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fmt_number(value: Any, decimals: int) -> str:
    number = num(value)
    return "—" if number is None else f"{number:.{decimals}f}"


def fmt_delta_ms(value: Any) -> str:
    number = num(value)
    return "—" if number is None else f"{number:+.3f}{NBSP}ms"


def fmt_range(lo: Any, hi: Any) -> str:
    """`lo – hi` with three decimals, or — when either end is missing."""
    lo_num, hi_num = num(lo), num(hi)
    return "—" if lo_num is None or hi_num is None else f"{lo_num:.3f} – {hi_num:.3f}"


def fmt_bytes(value: Any) -> str:
    """Decimal units, as HBM bandwidth is quoted (GB/s)."""
    number = num(value)
    if number is None:
        return "—"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(number) >= scale:
            return f"{number / scale:.2f} {unit}"
    return f"{number:.0f} B"


def fmt_interval(interval: Any) -> str:
    """`est [lo, hi]` of an {est, lo, hi} dict (ms), marked `not resolved` when it is noise."""
    if not isinstance(interval, dict) or num(interval.get("est")) is None:
        return "—"
    est, lo, hi = float(interval["est"]), num(interval.get("lo")), num(interval.get("hi"))
    bounds = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    text = f"{est:.3f}{bounds}"
    if not bounds or interval_resolved(interval):
        return text
    return f"not resolved (noise): {text}"


def interval_resolved(interval: Any) -> bool:
    """An {est, lo, hi} dict whose interval excludes zero and is narrower than the effect."""
    from bubblescope.stats import is_resolved

    if not isinstance(interval, dict):
        return False
    values = [num(interval.get(k)) for k in ("est", "lo", "hi")]
    return None not in values and is_resolved(*values)  # type: ignore[arg-type]


# The analysis writes blame texts with "934.0us" (no space, ASCII u); every surface says "934.0 µs".
_BARE_US_RE = re.compile(r"(\d)us\b")


def blame_text(value: Any) -> str:
    """A gap's blame (or a finding's site) as shown: `plain`, with "12.5us" spelled "12.5 µs"."""
    return _BARE_US_RE.sub("\\1" + NBSP + "µs", plain(value))


# A trace without GPU events (a CPU run) has no CUDA sync to find: its "0 reads" said the opposite of the
# run that recorded it, which counts the readback ops (`aten::item`, ...) that would block on a GPU.
READS_NOT_DETECTABLE = "not detectable (no GPU events; `bubblescope run` counts readback ops on CPU)"


def reads_undetectable(analysis: dict[str, Any]) -> bool:
    """True when the trace had no GPU activity and no read was found: its read count means nothing."""
    return analysis.get("gpu_measured") is False and not analysis.get("syncs")


def nothing_to_fix_text(analysis: dict[str, Any] | None) -> str:
    """What an empty fix-first list says: a trace without GPU events could not show reads or idle."""
    if isinstance(analysis, dict) and reads_undetectable(analysis):
        return "nothing found to fix: a trace without GPU events shows neither blocking reads nor GPU idle"
    return "nothing to fix first: no blocking reads and no idle worth a finding"


def plain(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(plain(item) for item in value) or "—"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def md_cell(value: Any) -> str:
    """One table cell: Markdown/HTML-significant characters escaped, on one line (see report/escape.py)."""
    return md_text(plain(value))


def md_table(rows: Rows, empty: str = "none") -> str:
    headers, body = rows
    if not body:
        return f"_{md_cell(empty)}_"
    lines = ["| " + " | ".join(md_cell(h) for h in headers) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in body]
    return "\n".join(lines)


def md_items(items: list[tuple[str, str]]) -> str:
    return md_table((["metric", "value"], [[label, value] for label, value in items]))


def steps_and_ranks(analysis: dict[str, Any]) -> tuple[int, int]:
    """(decode steps, ranks) of an analysis: its `steps[]` hold one entry per rank and step, so 2 ranks
    of 4 steps are 4 steps, not 8."""
    per_rank: dict[str, int] = {}
    for step in analysis.get("steps") or []:
        if isinstance(step, dict):
            key = plain(step.get("rank"))
            per_rank[key] = per_rank.get(key, 0) + 1
    if per_rank:
        return max(per_rank.values()), len(per_rank)
    steps = num((analysis.get("summary") or {}).get("steps"))
    return int(steps or 0), 1
