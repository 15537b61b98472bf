"""Time load + analysis of real public traces and of a synthetic decode-like Kineto trace of >= 1 M
events; report µs/event and peak RSS, and (optionally) the same for Holistic Trace Analysis on the same
files in the same run.

Usage:
    .venv/bin/python benchmarks/bench_analyze.py [--events 1700000] [--repeats 3]
        [--real /work/traces/hta/df_index_resolver ...] [--baseline-src DIR]
        [--hta-python /work/traces/hta-venv/bin/python]

Rows per file: bubblescope as installed; with `--baseline-src DIR`, the analysis from another source
tree (e.g. an older commit: `git archive <sha> bubblescope | tar -x -C DIR`); with `--hta-python`, HTA
0.5.0's `get_idle_time_breakdown` (in its own venv, never a dependency). `--real` takes folders that
hold one trace file each (HTA reads a folder); `--skip-synthetic` leaves the synthetic file out.

Each measurement runs in a fresh subprocess. Peak RSS is the child's VmHWM (/proc/self/status), not
ru_maxrss: Linux carries ru_maxrss over exec from the forked parent, which holds the generated trace.

The trace mimics an eager decode loop profiled with `with_stack=True`: per kernel a Python frame, an
ATen op pair, a cudaLaunchKernel, the kernel and an ac2g flow event; per step a `bubblescope.step`
annotation and one `.item()` read (memcpy + stream sync + cuda_sync row). A correctness check on a
small trace of the same generator runs first: no speed claim without it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNELS_PER_STEP = 160
EVENTS_PER_KERNEL = 6
BASE_US = 5_156_338_342_787.0

# Wall and CPU seconds both: on a shared machine the wall clock also counts other people's work.
_REPORT = """
usage = resource.getrusage(resource.RUSAGE_SELF)
peak_kb = usage.ru_maxrss
try:
    with open("/proc/self/status") as status:
        peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    pass
# Worker processes (HTA may parse in a pool) count too: their CPU time and their peak RSS.
children = resource.getrusage(resource.RUSAGE_CHILDREN)
out = {"seconds": time.perf_counter() - t0,
       "cpu_seconds": usage.ru_utime + usage.ru_stime - cpu0 + children.ru_utime + children.ru_stime,
       "peak_rss_mb": max(peak_kb, children.ru_maxrss) / 1024}
"""
# Both bubblescope children end alike: counts from `result`, the result itself to argv[2] when given.
_ANALYSIS_TAIL = """
out.update(steps=result["summary"]["steps"], reads=sum(s["count"] for s in result["syncs"]))
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as handle:
        json.dump(result, handle, sort_keys=True)
print(json.dumps(out))
"""
_ANALYZE_CHILD = (
    """
import json, resource, sys, time
t0 = time.perf_counter()
cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
from bubblescope.analysis import analyze_traces
result = analyze_traces([sys.argv[1]])
"""
    + _REPORT
    + _ANALYSIS_TAIL
)
# Where bubblescope's time goes, stage by stage (CPU seconds), streamed as `analyze_traces` streams:
# read + decode is the time spent getting each next chunk; tables is the rest of loading (bucketing,
# columns, joining, and freeing each chunk's events).
_STAGES_CHILD = """
import json, sys, time
from pathlib import Path
t0 = time.process_time()
import numpy, pandas
from bubblescope.analysis import analysis_dict, analyze_rank
from bubblescope.trace.load import gc_paused, stream_trace
from bubblescope.trace.tables import build_tables_streamed
t1 = time.process_time()
path = Path(sys.argv[1])
streamed = stream_trace(path)
decode = [0.0]
def timed(chunks):
    while True:
        start = time.process_time()
        chunk = next(chunks, None)
        decode[0] += time.process_time() - start
        if chunk is None:
            return
        yield chunk
with gc_paused():
    tables = build_tables_streamed(timed(streamed.chunks()), lambda: streamed.meta, path, rank=0)
t3 = time.process_time()
rank = analyze_rank(tables)
t4 = time.process_time()
analysis_dict([rank])
t5 = time.process_time()
# Two parts of analysis_dict, run again on their own: the top gaps' host blame and the timeline.
import bubblescope.analysis as A
A._top_gaps(rank)
t6 = time.process_time()
A.build_timeline(rank, lambda window: A.gap_blames(rank, window))
t7 = time.process_time()
print(json.dumps({"import": t1 - t0, "read+decode": decode[0], "tables": t3 - t1 - decode[0],
                  "detectors": t4 - t3, "analysis_dict": t5 - t4,
                  "(of which top-gap blame)": t6 - t5, "(of which timeline)": t7 - t6}))
"""


_HTA_CHILD = (
    """
import json, resource, sys, time, logging
logging.disable(logging.CRITICAL)
t0 = time.perf_counter()
cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
# The rank that the trace itself names (HTA defaults to rank 0, absent from some real traces).
analyzer.get_idle_time_breakdown(ranks=sorted(analyzer.t.traces), visualize=False)
"""
    + _REPORT
    + """
print(json.dumps(out))
"""
)


def write_decode_trace(path: Path, min_events: int) -> int:
    """Write a decode-like trace with at least `min_events` events; returns the event count."""
    events: list[str] = []
    host_us = 0.0
    gpu_free_us = 0.0
    corr = 0
    step = 0
    pid, tid = 426, 426
    while len(events) < min_events:
        step_start = host_us
        step_events: list[str] = []
        for k in range(KERNELS_PER_STEP):
            corr += 1
            launch_us = host_us + 3.217
            run_start = max(gpu_free_us + 1.061, launch_us + 7.5)
            run_us = 2.0 + (k % 7) * 1.613
            step_events += [
                _x(
                    "python_function",
                    f"model.py({100 + k % 20}): forward",
                    pid,
                    tid,
                    host_us,
                    11.0,
                    f'"Python id": {corr}, "Python parent id": null',
                ),
                _x("cpu_op", "aten::linear", pid, tid, host_us + 0.5, 10.0, '"External id": 1'),
                _x("cpu_op", "aten::mm", pid, tid, host_us + 1.0, 9.0, '"External id": 2'),
                _x("cuda_runtime", "cudaLaunchKernel", pid, tid, launch_us, 5.123, f'"correlation": {corr}'),
                _x(
                    "kernel",
                    f"gemv_kernel_{k % 13}",
                    0,
                    7,
                    run_start,
                    run_us,
                    f'"device": 0, "stream": 7, "correlation": {corr}',
                ),
                f'{{"ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {BASE_US + launch_us:.3f}, '
                f'"cat": "ac2g", "name": "ac2g"}}',
            ]
            gpu_free_us = run_start + run_us
            host_us += 11.5
        corr += 1
        copy_us = max(host_us + 2.0, gpu_free_us)
        step_events += [
            _x(
                "cpu_op",
                "aten::item",
                pid,
                tid,
                host_us,
                max(40.0, copy_us - host_us + 8.0),
                '"External id": 3',
            ),
            _x("cuda_runtime", "cudaMemcpyAsync", pid, tid, host_us + 1.0, 3.0, f'"correlation": {corr}'),
            _x(
                "gpu_memcpy",
                "Memcpy DtoH (Device -> Pinned)",
                0,
                7,
                copy_us,
                1.4,
                f'"device": 0, "stream": 7, "correlation": {corr}, "bytes": 8',
            ),
            _x(
                "cuda_runtime",
                "cudaStreamSynchronize",
                pid,
                tid,
                host_us + 4.0,
                max(copy_us - host_us, 2.0),
                f'"correlation": {corr + 1}',
            ),
            _x(
                "cuda_sync",
                "Stream Sync",
                0,
                7,
                host_us + 4.5,
                max(copy_us - host_us - 1.0, 1.0),
                f'"cuda_sync_kind": "Stream Sync", "stream": 7, "correlation": {corr + 1}, "device": 0',
            ),
        ]
        corr += 1
        host_us = max(host_us + 41.0, copy_us + 9.0)
        gpu_free_us = copy_us + 1.4
        events.append(
            _x(
                "user_annotation",
                "bubblescope.step",
                pid,
                tid,
                step_start,
                host_us - step_start,
                f'"External id": {step}',
            )
        )
        events.extend(step_events)
        step += 1
        host_us += 5.0
    header = '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic"}], "traceEvents": [\n'
    with open(path, "w") as handle:
        handle.write(header)
        handle.write(",\n".join(events))
        handle.write("\n]}\n")
    return len(events)


def _x(cat: str, name: str, pid: int, tid: int, ts_us: float, dur_us: float, args: str) -> str:
    return (
        f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid}, '
        f'"ts": {BASE_US + ts_us:.3f}, "dur": {dur_us:.3f}, "args": {{{args}}}}}'
    )


def _run_child(
    python: str, program: str, target: Path, extra_path: str | None = None, *extra_args: str
) -> dict:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [python, "-c", program, str(target), *extra_args],
        capture_output=True,
        text=True,
        timeout=3600,
        env=env,
        # Not the checkout: `python -c` puts the working directory first on sys.path, which would
        # shadow a --baseline-src tree given through PYTHONPATH.
        cwd=tempfile.gettempdir(),
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_correctness(workdir: Path) -> None:
    """The small trace of the same generator: every step found and one read per step."""
    small = workdir / "small.json"
    write_decode_trace(small, 5000)
    result = _run_child(sys.executable, _ANALYZE_CHILD, small)
    expected_steps = -(-5000 // (KERNELS_PER_STEP * EVENTS_PER_KERNEL + 6))
    if result.get("steps") != expected_steps or result.get("reads") != expected_steps:
        raise SystemExit(f"correctness check failed: {result} (expected {expected_steps} steps and reads)")


def count_events(folder: Path) -> tuple[Path, int]:
    """The one trace file in `folder` and its number of events (read with the standard library)."""
    import gzip

    (path,) = [p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz"))]
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return path, len(doc["traceEvents"] if isinstance(doc, dict) else doc)


def time_rows(
    label: str, n_events: int, rows: list[tuple[str, str, str, Path, str | None, int]]
) -> dict[str, float]:
    """Run each row's child `repeats` times; print and return median CPU seconds per row label."""
    cpu_by_label = {}
    for name, python, program, target, extra_path, repeats in rows:
        runs = [_run_child(python, program, target, extra_path) for _ in range(repeats)]
        if any("error" in r for r in runs):
            print(f"{label} | {name}: failed: {next(r for r in runs if 'error' in r)['error']}")
            continue
        wall = statistics.median(r["seconds"] for r in runs)
        cpu = statistics.median(r["cpu_seconds"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        cpu_by_label[name] = cpu
        print(
            f"{label} | {name}: median of {len(runs)}: "
            f"wall {wall:.2f} s = {wall / n_events * 1e6:.2f} µs/event, "
            f"CPU {cpu:.2f} s = {cpu / n_events * 1e6:.2f} µs/event, peak RSS {rss:.0f} MB",
            flush=True,
        )
    if "HTA idle_time_breakdown" in cpu_by_label and "bubblescope" in cpu_by_label:
        ratio = cpu_by_label["HTA idle_time_breakdown"] / cpu_by_label["bubblescope"]
        print(f"{label} | HTA CPU time / bubblescope CPU time = {ratio:.1f}x", flush=True)
    return cpu_by_label


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_700_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hta-python", default=None, help="python of a venv with HolisticTraceAnalysis")
    parser.add_argument("--hta-repeats", type=int, default=1)
    parser.add_argument("--baseline-src", default=None, help="also time the bubblescope package in DIR")
    parser.add_argument("--real", nargs="*", default=[], help="folders holding one real trace each")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--stages", action="store_true", help="also time each stage once (CPU)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_analyze_"))
    workdir.mkdir(parents=True, exist_ok=True)
    check_correctness(workdir)
    print(f"cpus={os.cpu_count()}, date={time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    targets = []
    for folder in map(Path, args.real):
        path, n_events = count_events(folder)
        targets.append((folder, path, n_events))
    if not args.skip_synthetic:
        trace_dir = workdir / "trace"
        trace_dir.mkdir(exist_ok=True)
        trace = trace_dir / "rank0.json"
        targets.append((trace_dir, trace, write_decode_trace(trace, args.events)))
    for folder, path, n_events in targets:
        label = f"{path.name} ({n_events} events, {path.stat().st_size / 1e6:.1f} MB)"
        rows = [("bubblescope", sys.executable, _ANALYZE_CHILD, path, None, args.repeats)]
        if args.baseline_src:
            rows.append(
                (
                    f"bubblescope from {args.baseline_src}",
                    sys.executable,
                    _ANALYZE_CHILD,
                    path,
                    args.baseline_src,
                    args.repeats,
                )
            )
        if args.hta_python:
            rows.append(
                ("HTA idle_time_breakdown", args.hta_python, _HTA_CHILD, folder, None, args.hta_repeats)
            )
        time_rows(label, n_events, rows)
        if args.stages:
            stages = _run_child(sys.executable, _STAGES_CHILD, path)
            parts = ", ".join(f"{k} {v:.2f} s ({v / n_events * 1e6:.2f} µs/event)" for k, v in stages.items())
            print(f"{label} | bubblescope stages (CPU): {parts}", flush=True)


if __name__ == "__main__":
    main()
