"""Every table of an analysis or a diff as CSV, one table per CSV text (`--format csv --table NAME`).

CSV is for machines, so the cells are the JSON's raw values (integer ns, fractions, full kernel
names), not the formatted text of the other surfaces; a nested dict becomes `key.sub` columns
(`idle_by_class_ns.sync`) and lists inside a row are left out (a device's `streams`: `--format json`
has them). Every string passes through `escape.csv_cell`, so a kernel named `=HYPERLINK(...)` stays
text in a spreadsheet.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from bubblescope.errors import ConfigError
from bubblescope.report.escape import csv_cell

Table = list[dict[str, Any]]

ANALYSIS_TABLES: dict[str, Callable[[dict[str, Any]], Table]] = {
    "steps": lambda a: a.get("steps") or [],
    "kernels": lambda a: a.get("kernels") or [],
    "kernel-categories": lambda a: a.get("kernel_categories") or [],
    "host-ops": lambda a: a.get("host_ops") or [],
    "reads": lambda a: a.get("syncs") or [],
    "gaps": lambda a: a.get("gaps_top") or [],
    "devices": lambda a: a.get("devices") or [],
}


def _changes(block: dict[str, Any] | None, keys: tuple[str, ...]) -> Table:
    """Rows of a diff block's `added` / `removed` / `changed` lists, each with its `change`."""
    return [
        {"change": key, **row}
        for key in keys
        for row in (block or {}).get(key) or []
        if isinstance(row, dict)
    ]


def _idle_rows(diff: dict[str, Any]) -> Table:
    return [
        {"class": cls, **values}
        for cls, values in (diff.get("idle_per_step") or {}).items()
        if isinstance(values, dict)
    ]


def _switch_rows(diff: dict[str, Any]) -> Table:
    return [
        {
            "name": s.get("name"),
            "baseline_alone_ms": s.get("baseline_alone_ms"),
            "current_alone_ms": s.get("current_alone_ms"),
        }
        for s in diff.get("switches") or []
        if isinstance(s, dict)
    ]


DIFF_TABLES: dict[str, Callable[[dict[str, Any]], Table]] = {
    "reads": lambda d: _changes(d.get("reads"), ("added", "removed")),
    "kernels": lambda d: _changes(d.get("kernels"), ("added", "removed", "changed")),
    "idle": _idle_rows,
    "switches": _switch_rows,
}


def _flat(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


def table_csv(rows: Table) -> str:
    """CSV text of JSON rows: a header of every column (first-seen order), then one line per row."""
    flat = [_flat(row) for row in rows]
    columns: dict[str, None] = {}
    for row in flat:
        columns.update(dict.fromkeys(row))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in columns])
    for row in flat:
        writer.writerow([csv_cell(row.get(c)) for c in columns])
    return buffer.getvalue()


def pick_table(tables: dict[str, Callable[[dict[str, Any]], Table]], name: str | None, what: str) -> Callable:
    """The table `name` of `tables`, or a one-line error naming the choices."""
    choices = ", ".join(tables)
    if name is None:
        raise ConfigError(f"--format csv writes one table: give --table, one of {choices}")
    if name not in tables:
        raise ConfigError(f"--table {name!r} is not a table of {what}: one of {choices}")
    return tables[name]


def analysis_csv(analysis: dict[str, Any], name: str | None) -> str:
    """One table of a `bubblescope.analysis/1` dict as CSV (`ANALYSIS_TABLES`)."""
    return table_csv(pick_table(ANALYSIS_TABLES, name, "analyze")(analysis))


def diff_csv(diff: dict[str, Any], name: str | None) -> str:
    """One table of a `bubblescope.diff/1` dict as CSV (`DIFF_TABLES`)."""
    return table_csv(pick_table(DIFF_TABLES, name, "diff")(diff))
