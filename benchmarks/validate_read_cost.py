"""Issue 14 §1: what a blocking `.item()` per step really costs, against what the analysis predicts.

A decode-like step is a CUDA graph of `--layers` GEMVs (bf16, hidden x hidden weights, each larger than
L2, so each kernel streams its weight from HBM; ~1-2 ms per step on an H200) ending in an argmax. After
the step the host does `factor x GPU step` of busy work (a calibrated pure-Python loop: one Python call
per step, so the profiler's Python tracer adds one event, not thousands). Two loops:

    read   replay; tok = out.item()                          (the host waits for the step to finish)
    fix    replay; pinned[i].copy_(out, non_blocking=True); event[i].record();
           event[i-1].synchronize(); tok = pinned[i-1].item()  (wait for the PREVIOUS step: run-ahead)

Each loop is timed without the profiler (wall time over `--steps` steps between two synchronizes;
`--repeats` repeats interleaved read/fix per factor; medians; the saving is the median of the per-repeat
paired differences). Then a short window of each is profiled (CPU+CUDA, with_stack, CUDA sync events,
each step in `record_function("bubblescope.step")`) and saved gzipped; the profiled step period over the
timed step is the profiler's own overhead.

Usage:
    python benchmarks/validate_read_cost.py --record OUT_DIR [--factors 0.1,0.5,1,2,5] [--tiny]
        (on the GPU; runs on CPU with --tiny to check the flow: no graph, no events, no bubbles)
    python benchmarks/validate_read_cost.py --analyze OUT_DIR
        (anywhere bubblescope is installed: predicted cost per step = sum(syncs[].bubble_ns) of the read
        window's analysis / (steps - 1) (the window's last read has no step after it), less the
        profiler's own overhead where it lands in `sync` time, vs the measured saving; writes
        OUT_DIR/validation.json and prints the table; also prints an independent reference computed from
        the raw trace events with the bounded rule of issue 14 §1, min(lost lead, following host-bound
        idle), to tell the rule from its code)

The recording needs only torch (the device has no plotly/orjson); `--analyze` never imports torch.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

SCHEMA = "bubblescope.validate_read_cost/1"
TIMINGS_FILE = "timings.json"
VALIDATION_FILE = "validation.json"
TOLERANCE = 0.25
DEFAULT_FACTORS = (0.1, 0.5, 1.0, 2.0, 5.0)


class UsageError(Exception):
    """Bad arguments or a folder that holds no recording: one line, exit 2."""


# ---------------------------------------------------------------------------------------------------
# Shared by benchmarks/record_h200_loops.py: host busy work, the profiler, gzip.


def spin(iterations: int) -> int:
    """Host busy work: a pure-Python loop (no calls inside, so the profiler records one frame)."""
    total = 0
    for i in range(iterations):
        total += i
    return total


def calibrate_spin(repeats: int = 7, iterations: int = 200_000) -> float:
    """Nanoseconds per `spin` iteration on this host (median of `repeats`)."""
    spin(iterations)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        spin(iterations)
        samples.append((time.perf_counter_ns() - t0) / iterations)
    return statistics.median(samples)


def profiler_settings(torch) -> dict:
    """torch.profiler arguments of ARCHITECTURE §4: CPU+CUDA, Python stacks, CUDA sync events."""
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    settings: dict = {"activities": activities, "with_stack": True, "record_shapes": False}
    try:
        settings["experimental_config"] = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    except (AttributeError, TypeError):  # older torch: no sync events; the trace says so by their absence
        pass
    return settings


def export_gz(prof, path_gz: Path) -> int:
    """Export a finished profile as gzipped Chrome trace; returns the compressed size in bytes."""
    raw = path_gz.with_suffix("")  # x.json.gz -> x.json
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path_gz, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    return path_gz.stat().st_size


def environment(torch) -> dict:
    cuda = torch.cuda.is_available()
    return {
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
    }


def write_json(path: Path, data: dict) -> None:
    """Write via a temporary file and a rename (the device copy has no bubblescope.files.atomic need)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------------
# Recording (needs torch).


class DecodeStep:
    """The graph-replayed step: `layers` GEMVs over `n_weights` rotating weights, then argmax."""

    def __init__(self, torch, hidden: int, layers: int, n_weights: int = 4) -> None:
        self.torch = torch
        self.cuda = torch.cuda.is_available()
        device = "cuda" if self.cuda else "cpu"
        dtype = torch.bfloat16 if self.cuda else torch.float32
        gen = torch.Generator(device=device).manual_seed(0)
        scale = 1.0 / math.sqrt(hidden)
        self.weights = [
            (torch.randn(hidden, hidden, device=device, generator=gen, dtype=torch.float32) * scale).to(dtype)
            for _ in range(n_weights)
        ]
        self.x = torch.randn(1, hidden, device=device, generator=gen, dtype=torch.float32).to(dtype)
        self.layers = layers
        self.graph = None
        self.out = self.body()
        if self.cuda:
            self._capture()

    def body(self):
        torch = self.torch
        h = self.x
        for i in range(self.layers):
            h = torch.nn.functional.linear(h, self.weights[i % len(self.weights)])
        return h.argmax(dim=-1)

    def _capture(self) -> None:
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.body()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.body()
        torch.cuda.synchronize()

    def replay(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.out = self.body()


class _HostEvent:
    """CPU stand-in for torch.cuda.Event (the CPU flow check has nothing to wait for)."""

    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass


class Loops:
    """The read loop and the run-ahead fix over one DecodeStep."""

    def __init__(self, torch, step: DecodeStep) -> None:
        self.torch = torch
        self.step = step
        cuda = step.cuda
        self.pinned = [torch.empty(step.out.shape, dtype=step.out.dtype, pin_memory=cuda) for _ in range(2)]
        self.events = [torch.cuda.Event() if cuda else _HostEvent() for _ in range(2)]

    def sync(self) -> None:
        if self.step.cuda:
            self.torch.cuda.synchronize()

    def read_step(self, index: int, host_iters: int) -> int:
        self.step.replay()
        token = self.step.out.item()
        spin(host_iters)
        return token

    def fix_step(self, index: int, host_iters: int) -> int:
        self.step.replay()
        slot = index % 2
        self.pinned[slot].copy_(self.step.out, non_blocking=True)
        self.events[slot].record()
        token = -1
        if index > 0:
            self.events[1 - slot].synchronize()
            token = int(self.pinned[1 - slot].item())
        spin(host_iters)
        return token

    def run(self, variant: str, steps: int, host_iters: int) -> float:
        """Wall ns per step over `steps` steps, from an idle device to the last step's GPU work done."""
        body = self.read_step if variant == "read" else self.fix_step
        body(0, host_iters)  # warm this variant's path (pinned copy, event) outside the timing
        self.sync()
        t0 = time.perf_counter_ns()
        for index in range(steps):
            body(index, host_iters)
        self.sync()
        return (time.perf_counter_ns() - t0) / steps


def gpu_step_ns(torch, step: DecodeStep, replays: int, repeats: int) -> list[float]:
    """Back-to-back graph replays timed with CUDA events (wall time on CPU): ns per step, per repeat."""
    samples = []
    for _ in range(repeats):
        if step.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(replays):
                step.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e6 / replays)
        else:
            t0 = time.perf_counter_ns()
            for _ in range(replays):
                step.replay()
            samples.append((time.perf_counter_ns() - t0) / replays)
    return samples


def profile_window(torch, loops: Loops, variant: str, steps: int, host_iters: int, path_gz: Path) -> dict:
    """Profile `steps` steps of one loop; returns the trace name, size and the profiled step period."""
    from torch.profiler import profile, record_function

    body = loops.read_step if variant == "read" else loops.fix_step
    for index in range(3):  # warm the loop so the window opens on a steady state
        body(index, host_iters)
    ends = []
    with profile(**profiler_settings(torch)) as prof:
        for index in range(steps):
            with record_function("bubblescope.step"):
                body(index + 3, host_iters)
            ends.append(time.perf_counter_ns())
        loops.sync()
    size = export_gz(prof, path_gz)
    # Step period from the end of the first step to the end of the last: the first step also pays the
    # profiler's start, and under run-ahead a step's end marks when its host part ended.
    period = (ends[-1] - ends[0]) / max(len(ends) - 1, 1)
    return {"trace": path_gz.name, "trace_bytes": size, "steps": steps, "step_ns": period}


def record(args: argparse.Namespace) -> dict:
    import torch

    out = Path(args.record)
    out.mkdir(parents=True, exist_ok=True)
    step = DecodeStep(torch, args.hidden, args.layers)
    loops = Loops(torch, step)
    ns_per_iter = calibrate_spin()
    gpu_samples = gpu_step_ns(torch, step, replays=20, repeats=args.repeats)
    gpu_ns = statistics.median(gpu_samples)
    print(
        f"GPU step {gpu_ns / 1e3:.1f} us ({args.layers} GEMVs, hidden {args.hidden}); "
        f"spin {ns_per_iter:.2f} ns/iter"
    )
    rows = []
    for factor in args.factors:
        host_ns = factor * gpu_ns
        iters = max(int(host_ns / ns_per_iter), 0)
        t0 = time.perf_counter_ns()
        spin(iters)
        measured_host = time.perf_counter_ns() - t0
        rows.append(
            {
                "factor": factor,
                "host_work_ns": int(host_ns),
                "host_work_measured_ns": measured_host,
                "spin_iterations": iters,
                "read": {"step_ns_repeats": []},
                "fix": {"step_ns_repeats": []},
            }
        )
    for repeat in range(args.repeats):
        for row in rows:
            # Alternate which variant goes first so slow drift (clocks, other tenants) cancels.
            order = ("read", "fix") if repeat % 2 == 0 else ("fix", "read")
            for variant in order:
                row[variant]["step_ns_repeats"].append(loops.run(variant, args.steps, row["spin_iterations"]))
    timings = {
        "schema": SCHEMA,
        **environment(torch),
        "config": {
            "hidden": args.hidden,
            "layers": args.layers,
            "steps": args.steps,
            "repeats": args.repeats,
            "profile_steps": args.profile_steps,
            "factors": list(args.factors),
        },
        "gpu_step_ns": gpu_ns,
        "gpu_step_ns_repeats": gpu_samples,
        "spin_ns_per_iteration": ns_per_iter,
        "rows": rows,
    }
    for row in rows:
        for variant in ("read", "fix"):
            row[variant]["step_ns_median"] = statistics.median(row[variant]["step_ns_repeats"])
        diffs = [
            r - f for r, f in zip(row["read"]["step_ns_repeats"], row["fix"]["step_ns_repeats"], strict=True)
        ]
        row["saving_ns_repeats"] = diffs
        row["saving_ns"] = statistics.median(diffs)
    # Saved before profiling and after each profiled row: a run cut short keeps what it measured.
    write_json(out / TIMINGS_FILE, timings)
    for row in rows:
        row["profiled"] = {}
        for variant in ("read", "fix"):
            name = f"{variant}_x{row['factor']:g}.json.gz"
            window = profile_window(
                torch, loops, variant, args.profile_steps, row["spin_iterations"], out / name
            )
            window["overhead"] = window["step_ns"] / row[variant]["step_ns_median"]
            row["profiled"][variant] = window
        write_json(out / TIMINGS_FILE, timings)
        print(
            f"host x{row['factor']:g}: read {row['read']['step_ns_median'] / 1e3:.1f} us, "
            f"fix {row['fix']['step_ns_median'] / 1e3:.1f} us, saving {row['saving_ns'] / 1e3:.1f} us; "
            f"profiled/timed read {row['profiled']['read']['overhead']:.3f} "
            f"fix {row['profiled']['fix']['overhead']:.3f}"
        )
    write_json(out / TIMINGS_FILE, timings)
    return timings


# ---------------------------------------------------------------------------------------------------
# Analysis (never imports torch).


def load_timings(folder: Path) -> dict:
    path = folder / TIMINGS_FILE
    try:
        timings = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: not found (record first: --record {folder})") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable timings ({exc})") from None
    if not isinstance(timings, dict) or timings.get("schema") != SCHEMA:
        raise UsageError(f"{path}: not a {SCHEMA} file")
    return timings


def raw_events(path: Path) -> list[dict]:
    try:
        with gzip.open(path, "rt") as handle:
            data = json.load(handle)
    except (OSError, ValueError, EOFError) as exc:
        raise UsageError(f"{path}: unreadable trace ({exc})") from None
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def _ns(us) -> int:
    return int(round(float(us) * 1000))


def bounded_reference(path: Path, read_names: tuple[str, ...], overhead_ns: float = 0.0) -> dict:
    """Issue 14 §1 applied by hand to raw events, independent of bubblescope's code.

    Per read R = [r0, r1] (an op or runtime call named in `read_names`, inside a bubblescope.step):
    d = end of the last GPU op that ended by r1; X = the first GPU op to start at or after d, launched
    by the call whose correlation id it carries. R drained the device iff r0 <= d and X's launch call
    began after d (else X was already queued: no drain, cost 0). Lost lead L = d - r0; host-bound idle
    = [d, end of X's launch call); cost = min(L, host-bound idle). `overhead_ns` (the profiler's own
    cost per step, measured) is taken off the host-bound idle first: without the profiler the host
    would have been that much quicker. Returns means per read (`cost_ns` without, `cost_corrected_ns`
    with the overhead taken off).
    """
    events = raw_events(path)
    launches = {
        e["args"]["correlation"]: (_ns(e["ts"]), _ns(float(e["ts"]) + float(e.get("dur", 0))))
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gpu = sorted(
        (_ns(e["ts"]), _ns(float(e["ts"]) + float(e.get("dur", 0))), e.get("args", {}).get("correlation"))
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    steps = [
        (_ns(s["ts"]), _ns(float(s["ts"]) + float(s["dur"])))
        for s in events
        if s.get("name") == "bubblescope.step" and s.get("cat") == "user_annotation"
    ]
    reads = sorted(
        (_ns(e["ts"]), _ns(float(e["ts"]) + float(e["dur"])))
        for e in events
        if e.get("name") in read_names
        and e.get("cat") in ("cpu_op", "cuda_runtime")
        and any(a <= _ns(e["ts"]) <= b for a, b in steps)
    )
    costs, corrected, leads, idles, drained = [], [], [], [], 0
    for r0, r1 in reads:
        ended = [end for start, end, _ in gpu if end <= r1]
        nxt = [(start, corr) for start, end, corr in gpu if ended and start >= max(ended)]
        if not ended or not nxt:
            continue  # nothing ran before it, or the window's last read (the profile ends after it)
        drain = max(ended)
        x_start, x_corr = min(nxt, key=lambda g: g[0])
        x_launch = launches.get(x_corr)
        lead = max(drain - r0, 0)
        if x_launch is None or x_launch[0] <= drain or lead == 0:
            costs.append(0)
            corrected.append(0)
            leads.append(lead)
            idles.append(0)
            continue
        drained += 1
        host_idle = max(min(x_launch[1], x_start) - drain, 0)
        costs.append(min(lead, host_idle))
        corrected.append(min(lead, max(host_idle - overhead_ns, 0)))
        leads.append(lead)
        idles.append(host_idle)
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    return {
        "reads": len(costs),
        "drained": drained,
        "cost_ns": mean(costs),
        "cost_corrected_ns": mean(corrected),
        "lead_ns": mean(leads),
        "host_idle_ns": mean(idles),
    }


def predicted_from_analysis(path: Path) -> dict:
    """Predicted saving from bubblescope's analysis: sum of syncs[].bubble_ns over the window's steps.

    `bubble_ns_per_step` divides by the steps less one: the window's last read is followed by the
    profiler's closing synchronize, not by a step, so its idle is not in the trace (dividing by all
    steps would understate the cost by 1/steps). `bubble_ns_per_all_steps` is the plain quotient.
    """
    from bubblescope.analysis.traces import analyze_traces

    analysis = analyze_traces([path])
    n_steps = len(analysis["steps"])
    bubble = sum(s["bubble_ns"] for s in analysis["syncs"])
    return {
        "bubble_ns_per_step": bubble / max(n_steps - 1, 1),
        "bubble_ns_per_all_steps": bubble / max(n_steps, 1),
        "blocked_ns_per_step": sum(s["blocked_ns"] for s in analysis["syncs"]) / max(n_steps, 1),
        "reads_per_step": analysis["summary"]["blocking_reads_per_step"],
        "sync_idle_ns_per_step": analysis["summary"]["idle_by_class_ns_per_step"]["sync"],
        "host_idle_ns_per_step": analysis["summary"]["idle_by_class_ns_per_step"]["host"],
        "steps": n_steps,
        "read_apis": sorted({s["api"] for s in analysis["syncs"]}),
    }


def analyze(folder: Path) -> dict:
    """Predicted vs measured per host-work factor (main writes it to DIR/validation.json).

    The profiler slows the host (`overhead_ns` = profiled read step - timed read step, measured in the
    same run), and in the read loop that time lands in the idle after the read. The prediction is
    compared with and without it taken off: `predicted_corrected_ns` = predicted - max(0, overhead -
    host idle per step), i.e. the overhead first fills the idle the analysis already calls `host`.
    """
    timings = load_timings(folder)
    rows = []
    for row in timings["rows"]:
        if len(row.get("profiled", {})) < 2:
            print(f"host x{row['factor']:g}: not profiled (the recording stopped early); skipped")
            continue
        read_trace = folder / row["profiled"]["read"]["trace"]
        fix_trace = folder / row["profiled"]["fix"]["trace"]
        for trace in (read_trace, fix_trace):
            if not trace.is_file():
                raise UsageError(f"{trace}: trace named in {TIMINGS_FILE} is missing")
        overhead = max(row["profiled"]["read"]["step_ns"] - row["read"]["step_ns_median"], 0.0)
        read = predicted_from_analysis(read_trace)
        fix = predicted_from_analysis(fix_trace)
        reference = bounded_reference(read_trace, ("aten::item",), overhead)
        fix_reference = bounded_reference(fix_trace, ("cudaEventSynchronize",))
        measured = row["saving_ns"]
        predicted = read["bubble_ns_per_step"]
        corrected = max(predicted - max(overhead - read["host_idle_ns_per_step"], 0.0), 0.0)

        def ratio(value: float, measured: float = measured) -> float:
            return value / measured if measured > 0 else float("nan")

        rows.append(
            {
                "factor": row["factor"],
                "host_work_ns": row["host_work_measured_ns"],
                "gpu_step_ns": timings["gpu_step_ns"],
                "read_step_ns": row["read"]["step_ns_median"],
                "fix_step_ns": row["fix"]["step_ns_median"],
                "measured_saving_ns": measured,
                "profiler_overhead_ns": overhead,
                "predicted_ns": predicted,
                "predicted_ratio": ratio(predicted),
                "predicted_corrected_ns": corrected,
                "ratio": ratio(corrected),
                "within_tolerance": bool(abs(ratio(corrected) - 1.0) <= TOLERANCE),
                "fix_residual_bubble_ns": fix["bubble_ns_per_step"],
                "reference_bounded_ns": reference["cost_ns"],
                "reference_corrected_ns": reference["cost_corrected_ns"],
                "reference_ratio": ratio(reference["cost_corrected_ns"]),
                "fix_reference_bounded_ns": fix_reference["cost_ns"],
                "profiled_over_timed_read": row["profiled"]["read"]["overhead"],
                "profiled_over_timed_fix": row["profiled"]["fix"]["overhead"],
                "analysis_read": read,
                "analysis_fix": fix,
                "reference_read": reference,
                "reference_fix": fix_reference,
            }
        )
    result = {
        "schema": "bubblescope.validate_read_cost.analysis/1",
        "recorded": {k: timings.get(k) for k in ("created_utc", "device", "torch", "python", "command")},
        "tolerance": TOLERANCE,
        "rows": rows,
        "all_within_tolerance": bool(rows) and all(r["within_tolerance"] for r in rows),
        "reference_all_within_tolerance": bool(rows)
        and all(abs(r["reference_ratio"] - 1.0) <= TOLERANCE for r in rows),
    }
    return result


def _us(ns: float) -> str:
    return "nan" if ns != ns else f"{ns / 1e3:.0f}"


def print_table(result: dict) -> None:
    print(f"recorded {result['recorded']['created_utc']} on {result['recorded']['device']}")
    print(
        "| host work us | GPU step us | read / fix step us | measured saving us | profiler overhead us "
        "| predicted us (ratio) | predicted - overhead us | ratio | bounded rule by hand, - overhead us "
        "(ratio) | fix: analysis / by hand us |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        print(
            f"| {_us(r['host_work_ns'])} | {_us(r['gpu_step_ns'])} "
            f"| {_us(r['read_step_ns'])} / {_us(r['fix_step_ns'])} | {_us(r['measured_saving_ns'])} "
            f"| {_us(r['profiler_overhead_ns'])} | {_us(r['predicted_ns'])} ({r['predicted_ratio']:.2f}) "
            f"| {_us(r['predicted_corrected_ns'])} "
            f"| {r['ratio']:.2f}{'' if r['within_tolerance'] else ' (off)'} "
            f"| {_us(r['reference_corrected_ns'])} ({r['reference_ratio']:.2f}) "
            f"| {_us(r['fix_residual_bubble_ns'])} / {_us(r['fix_reference_bounded_ns'])} |"
        )
    verdict = "all within" if result["all_within_tolerance"] else "NOT all within"
    reference = "all within" if result["reference_all_within_tolerance"] else "NOT all within"
    print(
        f"installed analysis, predicted - overhead vs measured: {verdict} {result['tolerance']:.0%}; "
        f"bounded rule applied by hand to the raw events: {reference} {result['tolerance']:.0%}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", metavar="OUT_DIR", help="time and profile the loops (GPU)")
    mode.add_argument("--analyze", metavar="DIR", help="predicted vs measured from a recording")
    parser.add_argument(
        "--factors",
        default=",".join(f"{f:g}" for f in DEFAULT_FACTORS),
        help="host work after the read, in multiples of the GPU step",
    )
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=40)
    parser.add_argument("--steps", type=int, default=60, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile-steps", type=int, default=10)
    parser.add_argument("--tiny", action="store_true", help="CPU flow check: hidden 64, 4 layers, few steps")
    args = parser.parse_args(argv)
    try:
        args.factors = [float(f) for f in args.factors.split(",") if f.strip()]
    except ValueError:
        raise UsageError(f"--factors: not a comma-separated list of numbers: {args.factors!r}") from None
    if not args.factors or any(f < 0 or not math.isfinite(f) for f in args.factors):
        raise UsageError("--factors: give one or more non-negative numbers")
    if args.tiny:
        args.hidden, args.layers, args.steps, args.repeats, args.profile_steps = 64, 4, 5, 2, 4
    for name in ("hidden", "layers", "steps", "repeats", "profile_steps"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')}: must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        if args.record:
            record(args)
        else:
            folder = Path(args.analyze)
            if not folder.is_dir():
                raise UsageError(f"{folder}: not a folder")
            result = analyze(folder)
            try:
                write_json(folder / VALIDATION_FILE, result)
            except OSError as exc:
                raise UsageError(f"{folder / VALIDATION_FILE}: cannot write ({exc.strerror})") from None
            print_table(result)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # bubblescope's own errors (a bad trace) keep the one-line contract
        if type(exc).__name__.endswith("Error") and hasattr(exc, "exit_code"):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
