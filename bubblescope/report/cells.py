"""Cell formatters shared by every table surface (console, Markdown, HTML): numbers with units, and
Markdown table cells. Plain strings out; escaping for each surface lives in report/escape.py.
"""

from __future__ import annotations

import math
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


# A GPU number a trace without GPU activity could not measure is null (bubblescope.analysis.not_measured).
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


def fmt_range(lo: Any, hi: Any, max_decimals: int = 3) -> str:
    """`lo – hi` to the interval's resolution (`interval_decimals`), or — when either end is missing."""
    lo_num, hi_num = num(lo), num(hi)
    if lo_num is None or hi_num is None:
        return "—"
    decimals = interval_decimals(lo_num, hi_num, max_decimals)
    return f"{fmt_decimals(lo_num, decimals)} – {fmt_decimals(hi_num, decimals)}"


def fmt_bytes(value: Any) -> str:
    """Decimal units, as HBM bandwidth is quoted (GB/s)."""
    number = num(value)
    if number is None:
        return "—"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(number) >= scale:
            return f"{number / scale:.2f}{NBSP}{unit}"
    return f"{number:.0f}{NBSP}B"


# Decimals of an estimate without an interval (ms: to the µs).
DEFAULT_DECIMALS = 3


def interval_decimals(lo: Any, hi: Any, max_decimals: int = DEFAULT_DECIMALS) -> int:
    """Decimals that match an interval's resolution: two significant digits of its half-width.

    `[642.627, 1183.688]` (half-width 271) gives -1 (tens), `[3.498, 3.510]` gives 3 (capped at
    `max_decimals`); no interval or a zero-width one gives `max_decimals`.
    """
    lo_num, hi_num = num(lo), num(hi)
    if lo_num is None or hi_num is None or not math.isfinite(hi_num - lo_num) or hi_num <= lo_num:
        return max_decimals
    return min(max_decimals, 1 - math.floor(math.log10((hi_num - lo_num) / 2)))


def fmt_decimals(value: float, decimals: int, signed: bool = False) -> str:
    """`value` rounded to `decimals` (negative: to tens, hundreds), never printed with more."""
    # `or 0.0` turns a rounded -0.0 into 0.0: "-0.00" would claim a sign the estimate does not have.
    rounded = round(value, decimals) or 0.0
    return f"{rounded:{'+' if signed else ''}.{max(decimals, 0)}f}"


def fmt_estimate(est: Any, lo: Any = None, hi: Any = None, unit: str = "", signed: bool = False) -> str:
    """`est unit [lo, hi]` with every number to the interval's resolution (`interval_decimals`).

    The one spelling of an estimate with its interval on every surface: `TPOT 930 ms [640, 1180]`, not
    `931.563 ms [642.627, 1183.688]` for a ±29% interval. Without an interval: DEFAULT_DECIMALS.
    """
    est_num, lo_num, hi_num = num(est), num(lo), num(hi)
    if est_num is None:
        return "—"
    decimals = interval_decimals(lo_num, hi_num)
    text = fmt_decimals(est_num, decimals, signed) + (NBSP + unit if unit else "")
    if lo_num is None or hi_num is None:
        return text
    return f"{text} [{fmt_decimals(lo_num, decimals, signed)}, {fmt_decimals(hi_num, decimals, signed)}]"


def fmt_at_resolution(
    value: Any, lo: Any, hi: Any, unit: str = "", signed: bool = False, max_decimals: int = DEFAULT_DECIMALS
) -> str:
    """`value` alone, to the resolution of the interval [lo, hi] (a table with the interval in its own
    column)."""
    number = num(value)
    if number is None:
        return "—"
    decimals = interval_decimals(lo, hi, max_decimals)
    return fmt_decimals(number, decimals, signed) + (NBSP + unit if unit else "")


def fmt_percent(fraction: Any, decimals: int = 1, signed: bool = False) -> str:
    """A fraction as a percentage, `3.0%` (signed: `+3.0%` / `−3.0%`, the typographic minus), or —."""
    number = num(fraction)
    if number is None:
        return "—"
    return (fmt_decimals(number * 100.0, decimals, signed) + "%").replace("-", "−")


def fmt_change(ratio: Any, max_decimals: int = 1) -> str:
    """A ratio {est, lo, hi} (current / baseline) as a signed change in percent with its interval,
    digits to the interval's resolution as `fmt_estimate` writes every estimate: `+1.2% [−0.3, +2.6]`."""
    ratio = ratio if isinstance(ratio, dict) else {}
    est, lo, hi = (_percent_change(ratio.get(key)) for key in ("est", "lo", "hi"))
    if est is None:
        return "—"
    decimals = interval_decimals(lo, hi, max_decimals)
    text = fmt_decimals(est, decimals, signed=True) + "%"
    if lo is not None and hi is not None:
        text += f" [{fmt_decimals(lo, decimals, signed=True)}, {fmt_decimals(hi, decimals, signed=True)}]"
    return text.replace("-", "−")


def _percent_change(ratio: Any) -> float | None:
    number = num(ratio)
    return None if number is None else (number - 1.0) * 100.0


def fmt_ms_estimate(value_ms: Any, lo_ms: Any, hi_ms: Any) -> tuple[str, str]:
    """(value, `lo – hi unit`) of a duration in ms at its interval's resolution, in µs below 1 ms (as
    `fmt_duration_ns` switches units); the range is `—` without an interval."""
    value = num(value_ms)
    # At most 0.1 µs or 1 µs (3 decimals of ms): what `fmt_duration_ns` shows.
    scale, unit, most = (1e3, "µs", 1) if value is not None and abs(value) < 1 else (1.0, "ms", 3)
    lo, hi = (None if num(v) is None else num(v) * scale for v in (lo_ms, hi_ms))  # type: ignore[operator]
    shown = fmt_at_resolution(None if value is None else value * scale, lo, hi, unit, max_decimals=most)
    return shown, "—" if lo is None or hi is None else f"{fmt_range(lo, hi, most)}{NBSP}{unit}"


def fmt_interval(interval: Any) -> str:
    """`est [lo, hi]` of an {est, lo, hi} dict (ms), marked `not resolved` when it is noise."""
    if not isinstance(interval, dict) or num(interval.get("est")) is None:
        return "—"
    lo, hi = num(interval.get("lo")), num(interval.get("hi"))
    text = fmt_estimate(interval["est"], lo, hi)
    if lo is None or hi is None or interval_resolved(interval):
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
    """True when the trace had no GPU activity and no read was found: its read count means nothing. A
    profile's analysis made with the read tap (`read_sites`) counted the reads on CPU too: 0 is 0."""
    tapped = isinstance(analysis.get("read_sites"), dict)
    return analysis.get("gpu_measured") is False and not analysis.get("syncs") and not tapped


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


# A cell is numeric when it is a number with an optional unit, interval (`930 ms [640, 1180]`), range
# (`640 – 1180`) or ratio (`0/1`); HTML right-aligns such columns, Markdown marks them `---:`.
_NUMBER = r"[+\-−]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)"
_UNIT = r"(?:%|×|µs|ms|ns|s|GB/s|GB|MB|kB|B|/step)"
_QUANTITY = rf"{_NUMBER}(?:/{_NUMBER})?(?:[ \u00a0]?{_UNIT})?"
NUMERIC_CELL_RE = re.compile(
    rf"^{_QUANTITY}(?:[ \u00a0]\[{_QUANTITY},[ \u00a0]{_QUANTITY}\])?(?:[ \u00a0]–[ \u00a0]{_QUANTITY})?$"
)
EMPTY_CELL = "—"


def is_numeric_cell(cell: str) -> bool:
    return bool(NUMERIC_CELL_RE.match(cell.strip()))


def numeric_columns(body: list[list[str]]) -> list[bool]:
    """Per column: every cell a number or `—`, and at least one a number."""
    if not body:
        return []
    flags = []
    for col in range(len(body[0])):
        cells = [row[col] for row in body if row[col] != EMPTY_CELL]
        flags.append(bool(cells) and all(is_numeric_cell(cell) for cell in cells))
    return flags


def shown_columns(body: list[list[str]], n_columns: int) -> list[int]:
    """Indexes of the columns to show: a column that is `—` in every row says nothing and is left out
    (an "achieved GB/s" no kernel has)."""
    if not body:
        return list(range(n_columns))
    return [i for i in range(n_columns) if any(row[i] != "—" for row in body)]


def md_table(rows: Rows, empty: str = "none") -> str:
    headers, body = rows
    if not body:
        return f"_{md_cell(empty)}_"
    keep = shown_columns(body, len(headers))
    numeric = numeric_columns(body)
    rule = "|" + "".join(" ---: |" if numeric[i] else " --- |" for i in keep)
    lines = ["| " + " | ".join(md_cell(headers[i]) for i in keep) + " |", rule]
    lines += ["| " + " | ".join(md_cell(row[i]) for i in keep) + " |" for row in body]
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
