"""Whole-process analysis speed and memory: `bubblescope analyze FILE --format json` against Holistic
Trace Analysis 0.5.0's `get_idle_time_breakdown`, on the real traces of >= 80 k events and on a >= 1.7 M
event file made by replicating a real trace's steps (`replicate_trace.replicate_steps`).

Usage:
    .venv/bin/python benchmarks/bench_analyze.py --hta-python .venv-hta/bin/python
        [--repeats 3] [--hta-repeats 3] [--copies 10] [--linearity] [--stages] [--real NAME ...]
        [--baseline-src DIR]

HTA lives in its own venv (`python3 -m venv .venv-hta && .venv-hta/bin/pip install
HolisticTraceAnalysis==0.5.0`): it pins its own pandas and pulls in Jupyter, so it is never a dependency.
Each measurement is a fresh process from interpreter start to exit: wall time (measured outside it), CPU
time (user + sys of the process and of every worker it waited for: on a shared box the wall clock
also counts other people's work) and peak RSS (the process' VmHWM, and its largest worker's). Medians of
`--repeats` runs. Before any timing, the replicated file's analysis is checked against the original's
(steps and blocking reads x copies): no speed claim without it.

`--linearity`: the real trace copied 2 and 8 times (a 4x file): the ratio of their times.
`--baseline-src DIR`: an older `bubblescope` package (`git archive SHA bubblescope | tar -x -C DIR`),
timed alternately with this checkout on every file (a "before" row under each row).
`--stages`: CPU seconds per stage of bubblescope (imports, read + decode, tables, detectors, reduce).
`--startup N`: `bubblescope analyze --help`, N runs (median), and the largest imports of one run
(`python -X importtime`, cumulative ms).
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from replicate_trace import replicate_steps  # noqa: E402

# The corpus' real traces of >= 80 k events (tests/data/real/manifest.json).
LARGE_REAL = ("tm_vllm_h100", "tm_vllm_mi300x", "hta_a100_torchrec_cudagraph")
REAL_DIRS = (REPO / "tests" / "data" / "real" / "files", REPO.parent / "shared" / "data" / "real_traces")

# Prepended to every child: at exit, one line "BENCH {json}" on stderr with the process' own numbers.
_REPORT_AT_EXIT = """
import atexit, json, resource, sys
def _bench_report():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kb = own.ru_maxrss
    try:
        with open("/proc/self/status") as status:
            peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        pass
    sys.stderr.write("\\nBENCH " + json.dumps({
        "cpu_s": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
        "peak_rss_mb": peak_kb / 1024, "worker_peak_rss_mb": kids.ru_maxrss / 1024}) + "\\n")
    sys.stderr.flush()
atexit.register(_bench_report)
"""
# `bubblescope ARGS...` as the console script runs it.
CLI_CHILD = (
    _REPORT_AT_EXIT
    + """
sys.argv = ["bubblescope", *sys.argv[1:]]
from bubblescope.cli import main
main()
"""
)
_HTA_CHILD = (
    _REPORT_AT_EXIT
    + """
import logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
# The rank that the trace itself names (HTA defaults to rank 0, absent from some real traces).
analyzer.get_idle_time_breakdown(ranks=sorted(analyzer.t.traces), visualize=False)
"""
)
# CPU seconds per stage, in one process (imports included).
_STAGES_CHILD = """
import json, sys, time
from pathlib import Path
t0 = time.process_time()
from bubblescope.analysis.traces import analyze_rank
from bubblescope.ranks.reduce import reduce_results
from bubblescope.ranks.results import summarize_rank
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
t2 = time.process_time()
rank = analyze_rank(tables, sys.argv[2] or None)
t3 = time.process_time()
result = summarize_rank(rank)
t4 = time.process_time()
reduce_results([result])
t5 = time.process_time()
print(json.dumps({"import": t1 - t0, "read+decode": decode[0], "tables": t2 - t1 - decode[0],
                  "detectors": t3 - t2, "per-rank result (blame)": t4 - t3, "reduce": t5 - t4}))
"""


def run_child(
    python: str,
    program: str,
    args: list[str],
    stdout: int | None = subprocess.DEVNULL,
    source: str | None = None,
) -> dict:
    """One fresh process: its BENCH numbers plus `wall_s` (and `stdout` when captured). `source`: a
    folder holding another `bubblescope` package to import instead of this checkout's."""
    env = {**os.environ, "PYTHONPATH": source} if source else None
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-c", program, *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=3600,
        # Not the checkout: `python -c` puts the working directory first on sys.path.
        cwd=tempfile.gettempdir(),
        env=env,
    )
    wall_s = time.perf_counter() - start
    lines = [line for line in done.stderr.splitlines() if line.startswith("BENCH ")]
    if done.returncode != 0 or not lines:
        tail = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("BENCH ")]
        return {"error": tail[-1] if tail else f"exit {done.returncode}"}
    return {"wall_s": wall_s, **json.loads(lines[-1][6:]), "stdout": done.stdout}


def measure(python: str, program: str, args: list[str], repeats: int) -> dict:
    """Medians of `repeats` runs (peak RSS: the largest), or {"error": ...}."""
    return summary([run_child(python, program, args) for _ in range(repeats)])


def measure_pair(args: list[str], repeats: int, baseline: str) -> tuple[dict, dict]:
    """This checkout and the `baseline` source, run alternately (new, old, new, old, ...) so that the
    shared box's drift lands on both alike: (ours, baseline's) medians."""
    ours, theirs = [], []
    for _ in range(repeats):
        ours.append(run_child(sys.executable, CLI_CHILD, args))
        theirs.append(run_child(sys.executable, CLI_CHILD, args, source=baseline))
    return summary(ours), summary(theirs)


def summary(runs: list[dict]) -> dict:
    """Medians of runs (peak RSS: the largest), or the first failure."""
    failed = [run for run in runs if "error" in run]
    if failed:
        return failed[0]
    return {
        "runs": len(runs),
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "worker_peak_rss_mb": max(r["worker_peak_rss_mb"] for r in runs),
    }


def analyze_args(path: Path, step_marker: str | None) -> list[str]:
    """`bubblescope analyze` arguments for `path` (JSON out, the corpus' step marker when it has one)."""
    return [
        "analyze",
        str(path),
        "--format",
        "json",
        *(["--step-marker", step_marker] if step_marker else []),
    ]


def step_marker_of(name: str) -> str | None:
    """The step marker the corpus' expected answers use for this real trace (None: the trace's own)."""
    expected = REPO / "tests" / "data" / "real" / name / "expected.json"
    return json.loads(expected.read_text()).get("step_marker") if expected.is_file() else None


def bubblescope_json(path: Path, step_marker: str | None) -> dict:
    """The analysis JSON of `path` (from the CLI, in a fresh process)."""
    run = run_child(sys.executable, CLI_CHILD, analyze_args(path, step_marker), stdout=subprocess.PIPE)
    if "error" in run:
        raise SystemExit(f"bubblescope failed on {path}: {run['error']}")
    return json.loads(run["stdout"])


def check_replication(original: Path, replicated: Path, copies: int, step_marker: str | None) -> None:
    """The replicated file's analysis has `copies` x the steps and blocking reads of the original's."""
    one, many = bubblescope_json(original, step_marker), bubblescope_json(replicated, step_marker)
    reads = [sum(s["count"] for s in result["syncs"]) for result in (one, many)]
    steps = [result["summary"]["steps"] for result in (one, many)]
    if steps[1] != copies * steps[0] or reads[1] != copies * reads[0]:
        raise SystemExit(f"replication check failed: steps {steps}, reads {reads} for {copies} copies")
    print(f"check: {replicated.name} has {copies}x the steps ({steps}) and reads ({reads}) of the original")


def count_events(path: Path) -> int:
    from replicate_trace import read_trace

    return len(read_trace(path)["traceEvents"])


def real_trace(name: str) -> Path:
    for folder in REAL_DIRS:
        if (folder / f"{name}.json.gz").is_file():
            return folder / f"{name}.json.gz"
    raise SystemExit(f"real trace {name} not found in {', '.join(map(str, REAL_DIRS))}")


def in_own_folder(path: Path, workdir: Path) -> Path:
    """A folder holding only `path` (HTA reads every trace of a folder)."""
    folder = workdir / f"hta_{path.name.split('.')[0]}"
    folder.mkdir(exist_ok=True)
    link = folder / path.name
    if not link.exists():
        link.symlink_to(path.resolve())
    return folder


def row(label: str, n_events: int, ours: dict, hta: dict | None) -> str:
    """One Markdown table row: bubblescope, HTA, ratios."""
    if "error" in ours:
        return f"| {label} | {n_events:,} | bubblescope failed: {ours['error']} |"
    cells = [
        label,
        f"{n_events:,}",
        f"{ours['cpu_s']:.2f} s ({ours['cpu_s'] / n_events * 1e6:.2f} µs/ev)",
        f"{ours['wall_s']:.2f} s",
        f"{ours['peak_rss_mb']:.0f} MB",
    ]
    if hta is None:
        cells += ["not run"] * 5
    elif "error" in hta:
        cells += [f"HTA failed: {hta['error'][:80]}", "", "", "", ""]
    else:
        cells += [
            f"{hta['cpu_s']:.2f} s",
            f"{hta['wall_s']:.2f} s",
            f"{hta['peak_rss_mb']:.0f} MB",
            f"**{hta['cpu_s'] / ours['cpu_s']:.1f}×** CPU, {hta['wall_s'] / ours['wall_s']:.1f}× wall",
            f"{ours['peak_rss_mb'] / hta['peak_rss_mb'] * 100:.0f} %",
        ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| trace | events | bubblescope CPU | wall | peak RSS | HTA CPU | HTA wall | HTA peak RSS "
    "| HTA / bubblescope | RSS bubblescope / HTA |\n|" + "---|" * 10
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", nargs="*", default=list(LARGE_REAL), help="manifest names of real traces")
    parser.add_argument("--replicate", default=LARGE_REAL[0], help="the real trace to copy")
    parser.add_argument("--copies", type=int, default=10, help="copies for the large file (0: none)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--hta-python", default=None, help="python of a venv with HolisticTraceAnalysis 0.5.0"
    )
    parser.add_argument("--hta-repeats", type=int, default=3)
    parser.add_argument("--hta-large-repeats", type=int, default=1, help="HTA runs on the replicated file")
    parser.add_argument("--linearity", action="store_true")
    parser.add_argument("--stages", action="store_true")
    parser.add_argument("--startup", type=int, default=0, help="time `analyze --help` this many times")
    parser.add_argument("--workdir", default=None)
    parser.add_argument(
        "--baseline-src",
        default=None,
        help="folder holding an older `bubblescope` package (git archive SHA bubblescope | tar -x -C DIR): "
        "timed alternately with this checkout, one row each",
    )
    args = parser.parse_args()
    if args.startup:
        startup(args.startup)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_analyze_"))
    workdir.mkdir(parents=True, exist_ok=True)
    source = real_trace(args.replicate)
    targets = [(name, real_trace(name), args.hta_repeats, step_marker_of(name)) for name in args.real]
    marker = step_marker_of(args.replicate)
    if args.copies:
        large = workdir / f"{args.replicate}_x{args.copies}.json.gz"
        if not large.exists():
            replicate_steps(source, large, args.copies)
        check_replication(source, large, args.copies, marker)
        targets.append((f"{args.replicate} × {args.copies}", large, args.hta_large_repeats, marker))
    print(
        f"cpus={os.cpu_count()}, date={time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.1f}\n\n{HEADER}",
        flush=True,
    )
    for label, path, hta_repeats, step_marker in targets:
        n_events = count_events(path)
        baseline = None
        if args.baseline_src:
            ours, baseline = measure_pair(analyze_args(path, step_marker), args.repeats, args.baseline_src)
        else:
            ours = measure(sys.executable, CLI_CHILD, analyze_args(path, step_marker), args.repeats)
        hta = None
        if args.hta_python and hta_repeats:
            hta_python = str(Path(args.hta_python).absolute())
            hta = measure(hta_python, _HTA_CHILD, [str(in_own_folder(path, workdir))], hta_repeats)
        print(row(label, n_events, ours, hta), flush=True)
        if baseline is not None:
            print(row(f"{label}, before (--baseline-src)", n_events, baseline, hta), flush=True)
        if args.stages:
            stages = subprocess.run(
                [sys.executable, "-c", _STAGES_CHILD, str(path), step_marker or ""],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            parts = ", ".join(f"{k} {v:.2f} s" for k, v in json.loads(stages).items())
            print(f"  stages (CPU, one run): {parts}", flush=True)
    if args.linearity:
        linearity(source, workdir, args.repeats, marker)


def startup(repeats: int) -> None:
    """`bubblescope analyze --help`: median wall and CPU of `repeats` runs, and the largest imports."""
    runs = [run_child(sys.executable, CLI_CHILD, ["analyze", "--help"]) for _ in range(repeats)]
    wall = statistics.median(r["wall_s"] for r in runs)
    cpu = statistics.median(r["cpu_s"] for r in runs)
    print(f"analyze --help: median of {repeats}: wall {wall:.3f} s, CPU {cpu:.3f} s", flush=True)
    timed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CLI_CHILD, "analyze", "--help"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    ).stderr.splitlines()
    top_level = []
    for line in timed:
        parts = line.split("|")
        # A top-level import is named after exactly one space; nested ones are indented further.
        if len(parts) == 3 and parts[1].strip().isdigit() and parts[2][1:2] not in (" ", ""):
            top_level.append((int(parts[1]) / 1000, parts[2].strip()))
    largest = ", ".join(f"{name} {ms:.0f}" for ms, name in sorted(top_level, reverse=True)[:8])
    print(f"  largest top-level imports (ms, cumulative, one run): {largest}", flush=True)


def linearity(source: Path, workdir: Path, repeats: int, step_marker: str | None) -> None:
    """CPU and wall of the 2-copy and 8-copy files, and their ratio (4x the events, 4x the gaps)."""
    measured = {}
    for copies in (2, 8):
        path = workdir / f"{source.name.split('.')[0]}_x{copies}.json.gz"
        if not path.exists():
            replicate_steps(source, path, copies)
        measured[copies] = (
            count_events(path),
            measure(sys.executable, CLI_CHILD, analyze_args(path, step_marker), repeats),
        )
    (n2, two), (n8, eight) = measured[2], measured[8]
    print(
        f"\nlinearity: {n2:,} events {two['cpu_s']:.2f} s CPU / {two['wall_s']:.2f} s wall, "
        f"{n8:,} events ({n8 / n2:.2f}x) {eight['cpu_s']:.2f} s CPU / {eight['wall_s']:.2f} s wall: "
        f"ratio {eight['cpu_s'] / two['cpu_s']:.2f} CPU, {eight['wall_s'] / two['wall_s']:.2f} wall; "
        f"peak RSS {two['peak_rss_mb']:.0f} -> {eight['peak_rss_mb']:.0f} MB",
        flush=True,
    )


if __name__ == "__main__":
    main()
