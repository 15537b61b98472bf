"""Each configuration's kernel families against the floor, side by side: what explains a switch's result.

One row per kernel family (the analyses' `bandwidth.families`, bubblescope/floor/kernel_bandwidth.py), one
column per configuration with its critical-path time per step and achieved TB/s, and for every configuration
but the baseline its change against the baseline. A switch that fuses work into a family renames it
("GEMV … down" becomes "GEMV … down + add/RMSNorm"): a name that is another's plus " + …" is the same row,
shown as "GEMV … down [+ add/RMSNorm]", so the fused kernel's time is compared with the kernel it replaced.
Rendering only.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from bubblescope.report.bandwidth_rows import LAUNCH_PATH_HEADERS, launch_path_cells, terabytes_per_s
from bubblescope.report.cells import NBSP, NOT_MEASURED, Rows, md_cell, md_table, num, plain
from bubblescope.report.console import print_rows
from bubblescope.report.escape import console_text as escape
from bubblescope.report.html_tables import esc, table_html

FAMILIES_TITLE = "Kernel families against the floor, per configuration"
FAMILIES_NOTE = (
    "Per configuration: the family's critical-path time per step (mean of the run's typical profiled "
    "steps, as in its own breakdown) · achieved TB/s of the bytes the family must read. Δ = configuration − "
    "baseline (negative = less GPU time). These are means of a few profiled steps with no interval: the "
    "TPOT intervals above say which savings are resolved. [+ …]: the part of the name some configurations "
    "add, where a switch fuses that work into the family. A family a configuration does not launch counts "
    "0 µs there; a run without a kernel-bytes model is not measured."
)
# A fused variant's name is the family's name plus this separator and what it took in.
_FUSED = " + "


def _families(analysis: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """The analysis' family rows by name; None without a `bandwidth` block (not measured)."""
    block = (analysis or {}).get("bandwidth")
    if not isinstance(block, dict):
        return None
    return {str(row.get("family")): row for row in block.get("families") or [] if isinstance(row, dict)}


def _ordered_keys(ablation: dict[str, Any], base_key: str | None) -> list[str]:
    """Baseline first, then the configurations in the manifest's (the Configurations table's) order."""
    keys = [str(config.get("key")) for config in ablation.get("configs") or [] if isinstance(config, dict)]
    return ([base_key] if base_key in keys else []) + [key for key in keys if key != base_key]


def _row_names(names: list[str]) -> dict[str, str]:
    """Each family name → the shortest name it extends by " + …" (itself where none): one row per group."""
    groups = {}
    for name in names:
        roots = [other for other in names if name.startswith(other + _FUSED)]
        groups[name] = min(roots, key=len) if roots else name
    return groups


def _row_label(root: str, names: list[str]) -> str:
    suffixes = sorted({name[len(root) + len(_FUSED) :] for name in names if name != root})
    return plain(root) + "".join(f" [+ {plain(suffix)}]" for suffix in suffixes)


def _cell(row: dict[str, Any] | None, measured: bool) -> str:
    if not measured:
        return NOT_MEASURED
    critical = num((row or {}).get("critical_ns"))
    if row is None or critical is None:
        return "not launched"
    text = f"{critical / 1e3:,.1f}{NBSP}µs"
    achieved = num(row.get("achieved_gbps"))
    return text if achieved is None else f"{text} · {terabytes_per_s(achieved)}{NBSP}TB/s"


def _delta(row: dict[str, Any] | None, base: dict[str, Any] | None) -> str:
    change = (num((row or {}).get("critical_ns")) or 0.0) - (num((base or {}).get("critical_ns")) or 0.0)
    # A change under the shown resolution has no sign: "−0.0 µs" would claim a direction.
    text = f"{change / 1e3:+,.1f}" if abs(change) >= 50 else "0.0"
    return text.replace("-", "−") + f"{NBSP}µs"


def family_table(
    ablation: dict[str, Any], analyses: dict[str, dict[str, Any]] | None, base_key: str | None
) -> Rows:
    """Headers and rows of the section; no rows when no configuration's analysis has a `bandwidth` block.

    Rows: the baseline's families by excess over the ceiling (time where it has none), largest first, then
    families only other configurations launch, by their largest time. Cells are plain text.
    """
    keys = _ordered_keys(ablation, base_key)
    by_key = {key: _families((analyses or {}).get(key)) for key in keys}
    # Without a baseline there is nothing to compare with: no Δ columns.
    compared = base_key in keys
    headers = ["family"]
    for key in keys:
        headers += [key, f"Δ {key}"] if compared and key != base_key else [key]
    if not keys or all(families is None for families in by_key.values()):
        return headers, []
    names = list(dict.fromkeys(name for fams in by_key.values() for name in fams or {}))
    group_of = _row_names(names)
    # Per row: the configuration's family row (None where it launches none of the row's families).
    rows: dict[str, dict[str, dict[str, Any] | None]] = {}
    for key, families in by_key.items():
        for name, row in (families or {}).items():
            rows.setdefault(group_of[name], {})[key] = row
    base = by_key.get(base_key or "")

    def order(root: str) -> tuple[int, float]:
        base_row = rows[root].get(base_key or "")
        if base is not None and base_row is not None:
            excess = num(base_row.get("excess_ns"))
            return 0, -(excess if excess is not None else num(base_row.get("critical_ns")) or 0.0)
        return 1, -max(num((row or {}).get("critical_ns")) or 0.0 for row in rows[root].values())

    body = []
    for root in sorted(rows, key=order):
        label = _row_label(root, [name for name in names if group_of[name] == root])
        cells = [label]
        base_row = rows[root].get(base_key or "")
        for key in keys:
            measured = by_key[key] is not None
            cells.append(_cell(rows[root].get(key), measured))
            if compared and key != base_key:
                both = measured and base is not None
                cells.append(_delta(rows[root].get(key), base_row) if both else NOT_MEASURED)
        body.append(cells)
    return headers, body


def families_markdown(
    ablation: dict[str, Any], analyses: dict[str, dict[str, Any]] | None, base_key: str | None
) -> list[str]:
    """The section in Markdown (heading, note, table); nothing without a `bandwidth` block."""
    table = family_table(ablation, analyses, base_key)
    if not table[1]:
        return []
    return [f"### {FAMILIES_TITLE}", f"_{md_cell(FAMILIES_NOTE)}_", md_table(table)]


def families_html(
    ablation: dict[str, Any], analyses: dict[str, dict[str, Any]] | None, base_key: str | None
) -> str:
    """The section as HTML (heading, note, sortable table); '' without a `bandwidth` block."""
    table = family_table(ablation, analyses, base_key)
    if not table[1]:
        return ""
    return f'<h2>{esc(FAMILIES_TITLE)}</h2><p class="sub">{esc(FAMILIES_NOTE)}</p>' + table_html(table)


def print_families(
    console: Console,
    ablation: dict[str, Any],
    records: dict[str, dict[str, Any]],
    analyses: dict[str, dict[str, Any]] | None,
    base_key: str | None,
) -> None:
    """The section on the console (stacked as blocks where the table is wider than the console), with each
    configuration's launches and launch gap per step: the console has no Configurations table."""
    headers, rows = family_table(ablation, analyses, base_key)
    if not rows:
        return
    print_rows(console, FAMILIES_TITLE, headers, rows)
    console.print(escape(FAMILIES_NOTE))
    keys = _ordered_keys(ablation, base_key)
    launches = launch_path_cells([records.get(key) or {} for key in keys])
    if launches is not None:
        body = [[key, *cells] for key, cells in zip(keys, launches, strict=True)]
        print_rows(console, "Kernel launches and launch gap per step", ["config", *LAUNCH_PATH_HEADERS], body)
