"""Where one decode step's GPU time goes against the floor, for a run recorded before runs carried bytes.

The breakdown itself is the product's (`bubblescope/floor/kernel_bandwidth.py`; `bubblescope run` attaches it
to every fast-path run and `bubblescope report` shows it): critical-path time per kernel family, the bytes
each family must read (`reference_model/kernel_bytes.py`), achieved TB/s and the excess over the copy
ceiling. This script rebuilds it for a run folder whose record predates the `kernel_bytes` block, from
the record's preset, switches, context and measured bandwidth, and prints it with the product's renderer.

Usage: python3 benchmarks/bench_step_breakdown.py RUN_DIR|RECORD.json [--bandwidth-gbps N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.kernel_bytes import rules_for
from bubblescope.reference_model.switches import LingSwitches
from rich.console import Console

from bubblescope.analysis.traces import analyze_traces
from bubblescope.floor.kernel_bandwidth import attach_kernel_bandwidth
from bubblescope.report.analysis_console import print_table
from bubblescope.report.bandwidth_rows import (
    BANDWIDTH_TITLE,
    bandwidth_rows,
    bandwidth_sentence,
    console_bandwidth_rows,
)


def breakdown_of_run(run_dir: Path, bandwidth_gbps: float | None = None) -> dict:
    """The analysis of a run's trace with the `bandwidth` block attached: RUN_DIR is a run folder
    (record.json, trace.json.gz) or one RunRecord of an ablation (runs/<key>.json beside its trace; an
    on-top workload's fixed switches, `describe.fixed_on`, count as enabled)."""
    record_path = run_dir if run_dir.is_file() else run_dir / "record.json"
    run_dir = record_path.parent
    record = json.loads(record_path.read_text())
    describe = record["workload"].get("describe") or {}
    enabled = set(record["switches"]["enabled"]) | set(describe.get("fixed_on") or [])
    switches = LingSwitches.from_names(frozenset(enabled))
    context_len = int(describe.get("prompt_len", 32)) + 1
    rules = rules_for(
        get_preset(record["preset"]), switches, context_len=context_len, path=describe.get("path", "fast")
    )
    floor = record.get("floor") or {}
    ceiling = bandwidth_gbps or floor.get("bandwidth_gbps")
    trace = run_dir / (record.get("trace") or "trace.json.gz")
    analysis = analyze_traces([trace])
    attach_kernel_bandwidth(
        analysis, trace, {"rules": rules, "ceiling_gbps": ceiling, "ceiling_source": "record"}
    )
    return analysis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "run_dir",
        type=Path,
        help="a `bubblescope run` folder of the fast path, or an ablation's runs/<key>.json",
    )
    parser.add_argument("--bandwidth-gbps", type=float, default=None, help="ceiling (default: the record's)")
    args = parser.parse_args(argv)
    try:
        analysis = breakdown_of_run(args.run_dir, args.bandwidth_gbps)
    except (OSError, KeyError, ValueError) as exc:
        print(f"bench_step_breakdown: cannot read {args.run_dir}: {exc}", file=sys.stderr)
        return 2
    if "bandwidth" not in analysis:
        print("bench_step_breakdown: no bytes model for this run (eager path or TP)", file=sys.stderr)
        return 2
    console = Console(width=120)
    print_table(console, BANDWIDTH_TITLE, console_bandwidth_rows(bandwidth_rows(analysis)))
    console.print(bandwidth_sentence(analysis))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
