"""The per-call tracing model against the timed runs it stands in for (issue 23 §1), on committed H200 runs.

Each configuration of a committed ablation has a timed TPOT and a profiled window's trace. The timed run
gives the profiler's share of the profiled idle (`timed_idle.record_bound`: profiled idle - (TPOT x
tokens - GPU busy)); the analysis of the trace alone gives the model's estimate
(`summary.profiler_ns_per_step`, `detect.tracing_cost`), which is what a bare trace gets. This prints
both per configuration, µs per step, and their median ratio; and the least-squares fit of the traced
`cudaGraphLaunch` duration over the graph's node count across every trace in the folders (the source of
`tracing_cost.GRAPH_NODE_ADDED_NS`).

    python benchmarks/validate_tracing_model.py reports/samples/ablation-ling3-tiny-h200 [...] [--fit]
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from bubblescope.analysis.timed_idle import bound_idle, timed_step_ns_of
from bubblescope.analysis.traces import analyze_traces


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


def graph_launch_fit(folders: list[Path]) -> tuple[float, float, int]:
    """(intercept us, us per node, launches) of traced cudaGraphLaunch duration over node count."""
    points = []
    for trace in sorted(t for folder in folders for t in folder.rglob("*trace*.json.gz")):
        with gzip.open(trace, "rt") as handle:
            events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
        launches = {
            e["args"].get("correlation"): e["dur"]
            for e in events
            if "GraphLaunch" in e["name"] and e.get("cat") in ("cuda_runtime", "cuda_driver")
        }
        nodes = Counter(
            e["args"].get("correlation")
            for e in events
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and e["args"].get("correlation") in launches
        )
        points += [(nodes[c], dur) for c, dur in launches.items() if nodes[c]]
    if not points:
        return 0.0, 0.0, 0
    xy = np.asarray(points, dtype=float)
    design = np.vstack([np.ones(len(xy)), xy[:, 0]]).T
    intercept, slope = np.linalg.lstsq(design, xy[:, 1], rcond=None)[0]
    return float(intercept), float(slope), len(xy)


def main() -> None:
    folders = [Path(a) for a in sys.argv[1:] if not a.startswith("--")]
    if "--fit" in sys.argv:
        intercept, slope, n = graph_launch_fit(folders)
        print(f"traced cudaGraphLaunch = {intercept:.1f} us + {slope:.3f} us x nodes ({n} launches)\n")
    for folder in folders:
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
