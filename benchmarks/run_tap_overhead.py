"""Cost of the read tap inside `run`/`ablate`'s profiled window, tap on vs off in the same process.

`run` and `ablate` reuse `bubblescope profile`'s read tap (capture/user_reads.py) for their profiled
window only; timed steps never run with it (tests/capture/test_run_read_sites.py checks that step by
step). This measures what the tap adds to the profiled steps: the host wall time of each recorded
step of `profile_window`, with `read_calls_path` (tap on) and without (tap off), alternating over
`--repeats` rounds; median over the recorded steps of a round, then median over rounds, and the
same-run ratio on/off. A sanity check on CPU (the toy workload's planted `.item()` reads); the H200
figure for the tap is in RESULTS.md "Read tap overhead".

    python benchmarks/run_tap_overhead.py [--preset tiny] [--steps 32] [--repeats 7] [--switches planted_sync]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bubblescope.capture.profiled import profile_window
from bubblescope.examples.toy_workload import make_workload


def window_step_ns(workload: Any, steps: int, tap_on: bool, folder: Path) -> list[int]:
    """Host ns of each recorded step of one profiled window (the window's unrecorded step 0 left out)."""
    durations: list[int] = []
    step = workload.step

    def timed_step() -> int:
        start_ns = time.perf_counter_ns()
        tokens = step()
        durations.append(time.perf_counter_ns() - start_ns)
        return tokens

    workload.step = timed_step
    try:
        profile_window(
            workload,
            steps=steps,
            warmup=0,
            trace_path=folder / "trace.json.gz",
            read_calls_path=folder / "read_calls.json.gz" if tap_on else None,
        )
    finally:
        workload.step = step
    return durations[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--switches", default="planted_sync")
    args = parser.parse_args()
    workload = make_workload(args.preset, device="cpu")
    enabled = frozenset(s for s in args.switches.split(",") if s)
    workload.prepare(enabled)
    medians: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        window_step_ns(workload, args.steps, True, Path(tmp))  # warm the profiler and the tap once
        for _ in range(args.repeats):
            for mode in ("off", "on"):
                ns = window_step_ns(workload, args.steps, mode == "on", Path(tmp))
                medians[mode].append(statistics.median(ns))
    off, on = statistics.median(medians["off"]), statistics.median(medians["on"])
    result = {
        "preset": args.preset,
        "switches": sorted(enabled),
        "steps": args.steps,
        "repeats": args.repeats,
        "off_us_per_step": round(off / 1e3, 1),
        "on_us_per_step": round(on / 1e3, 1),
        "ratio_on_over_off": round(on / off, 3),
        "rounds_off_us": [round(x / 1e3, 1) for x in medians["off"]],
        "rounds_on_us": [round(x / 1e3, 1) for x in medians["on"]],
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
