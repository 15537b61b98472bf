"""The per-call tracing model against the timed runs it stands in for (issue 23 §1), on committed H200 runs.

Each configuration of a committed ablation has a timed TPOT and a profiled window's trace. The timed run
gives the profiler's share of the profiled idle (`timed_idle.record_bound`: profiled idle - (TPOT x
tokens - GPU busy)); the analysis of the trace alone gives the model's estimate
(`summary.profiler_ns_per_step`, `detect.tracing_cost`), which is what a bare trace gets. This prints
both per configuration, µs per step, and their median ratio.

    python benchmarks/validate_tracing_model.py reports/samples/ablation-ling3-tiny-h200 [...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from bubblescope.analysis import analyze_traces
from bubblescope.timed_idle import bound_idle, timed_step_ns_of


def rows(folder: Path) -> list[dict]:
    out = []
    for trace in sorted((folder / "runs").glob("*.trace.json.gz")):
        record = json.loads(trace.with_name(trace.name.replace(".trace.json.gz", ".json")).read_text())
        analysis = analyze_traces([trace])
        timed = bound_idle(analysis, timed_step_ns_of(record))
        model = bound_idle(analysis)
        if not timed or not model:
            continue
        out.append(
            {
                "config": trace.name.removesuffix(".trace.json.gz"),
                "host_idle_us": timed["profiled_by_class_ns"]["host"] / 1e3,
                "timed_share_us": timed["profiler_ns"] / 1e3,
                "model_share_us": model["profiler_ns"] / 1e3,
                "profiled_over_timed": timed["profiled_over_timed"],
            }
        )
    return out


def main() -> None:
    for folder in map(Path, sys.argv[1:]):
        table = rows(folder)
        print(f"## {folder.name}")
        print("| config | host idle (profiled) | profiler share: timed | model | profiled/timed |")
        print("|---|---:|---:|---:|---:|")
        for row in table:
            print(
                f"| {row['config']} | {row['host_idle_us']:.1f} | {row['timed_share_us']:.1f} | "
                f"{row['model_share_us']:.1f} | {row['profiled_over_timed']:.3f} |"
            )
        big = [r for r in table if r["timed_share_us"] >= 100]
        if big:
            ratio = statistics.median(r["model_share_us"] / r["timed_share_us"] for r in big)
            print(f"\nmodel / timed share, median over the {len(big)} configs with >= 100 us: {ratio:.2f}\n")


if __name__ == "__main__":
    main()
