"""Peak memory and time of bubblescope per hostile input kind, at two sizes (issue 28).

Each kind (tests/hostile/large_inputs.py) is written to a temporary folder at a small and a large size
and read by a fresh `python -m bubblescope` process; its peak RSS comes from wait4's rusage, its time
from the wall clock, median of `--repeats`. For each kind the table gives both points, the cost per
unit between them (the constant of a linear fit through the two) and the time ratio against the size
ratio (1.0 = linear). `--issue-sizes` also runs the sizes of issue 28's report, which are refused
by a budget: those rows show how long the refusal takes and what it costs.

    .venv/bin/python benchmarks/bench_hostile.py [--repeats 3] [--issue-sizes] [--only KIND ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile import large_inputs as gen  # noqa: E402


@dataclass
class Kind:
    """One input kind: how to write it at a size, what command reads it, and the size's unit."""

    name: str
    unit: str
    write: Callable[[Path, int], Path]
    command: Callable[[Path], list[str]]
    sizes: tuple[int, int]
    issue_size: int | None = None


def _analyze(path: Path) -> list[str]:
    return ["analyze", str(path), "--format", "json"]


def _gate(path: Path) -> list[str]:
    return ["gate", "--baseline", str(path), "--current", str(path), "--format", "json"]


KINDS = [
    Kind("events", "event", lambda p, n: gen.many_events(p / "t.json", n), _analyze, (200_000, 800_000)),
    Kind("gaps", "event", lambda p, n: gen.many_gaps(p / "t.json", n), _analyze, (200_000, 800_000)),
    Kind(
        "orphan kernels",
        "kernel",
        lambda p, n: gen.orphan_kernels(p / "t.json", n),
        _analyze,
        (200_000, 800_000),
        3_000_000,
    ),
    Kind(
        "metadata bytes",
        "byte",
        lambda p, n: gen.metadata_strings(p / "t.json", n),
        _analyze,
        (30 << 20, 120 << 20),
        180 << 20,
    ),
    Kind(
        "nested metadata bytes",
        "byte",
        lambda p, n: gen.metadata_nested(p / "t.json", n),
        _analyze,
        (15 << 20, 60 << 20),
    ),
    Kind(
        "args bytes",
        "byte",
        lambda p, n: gen.args_bytes(p / "t.json", n, as_list=False),
        _analyze,
        (25 << 20, 100 << 20),
    ),
    Kind("ranks", "rank", lambda p, n: gen.many_ranks(p / "r", n, 20_000), _analyze, (4, 16)),
    Kind("files", "file", lambda p, n: gen.many_files(p / "f", n), _analyze, (32, 128), 50_000),
    Kind(
        "gzip members",
        "member",
        lambda p, n: gen.gzip_members(p / "t.json.gz", n),
        _analyze,
        (1_000, 8_000),
        5_000_000,
    ),
    Kind(
        "record repeats",
        "repeat",
        lambda p, n: gen.record_repeats(p / "record.json", n),
        _gate,
        (250, 1_000),
        200_000,
    ),
]


@dataclass
class Run:
    exit_code: int
    seconds: float
    peak_rss_mb: float
    last_line: str


def run_once(args: list[str], timeout_s: float) -> Run:
    """`python -m bubblescope <args>` under GNU time, whose %M is the child's own peak RSS (wait4's
    ru_maxrss of a direct child would start from this process's peak: Linux keeps it across fork+exec)."""
    with tempfile.TemporaryDirectory() as scratch:
        peak_file, err_file = Path(scratch) / "peak", Path(scratch) / "err"
        start = time.perf_counter()
        with open(err_file, "wb") as err:
            try:
                proc = subprocess.run(
                    [
                        "/usr/bin/time",
                        "-f",
                        "%M",
                        "-o",
                        str(peak_file),
                        sys.executable,
                        "-m",
                        "bubblescope",
                        *args,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    cwd=REPO,
                    env={**os.environ, "PYTHONPATH": str(REPO)},
                    timeout=timeout_s,
                )
                code = proc.returncode
            except subprocess.TimeoutExpired:
                code = 124
        seconds = time.perf_counter() - start
        text = peak_file.read_text().split() if peak_file.exists() else []
        peak_kb = float(text[-1]) if text and text[-1].isdigit() else float("nan")
        lines = err_file.read_text(errors="replace").strip().splitlines()
    return Run(code, seconds, peak_kb / 1024, lines[-1][:140] if lines else "")


def measure(kind: Kind, size: int, repeats: int, timeout_s: float) -> Run:
    """Median time and peak RSS of `repeats` runs on one input of `size` (written once, then deleted)."""
    folder = Path(tempfile.mkdtemp(prefix="bench_hostile_"))
    try:
        path = kind.write(folder, size)
        runs = [run_once(kind.command(path), timeout_s) for _ in range(repeats)]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return Run(
        runs[0].exit_code,
        statistics.median(r.seconds for r in runs),
        statistics.median(r.peak_rss_mb for r in runs),
        runs[0].last_line,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--issue-sizes", action="store_true", help="also the refused sizes of issue 28")
    parser.add_argument("--only", nargs="*", help="kind names to run (default: all)")
    options = parser.parse_args()
    kinds = [k for k in KINDS if not options.only or k.name in options.only]
    print(
        f"# bench_hostile: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
        f"median of {options.repeats}"
    )
    print("| kind | size | exit | time s | peak RSS MB | per unit (time, RSS) | time ratio / size ratio |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for kind in kinds:
        small, large = (measure(kind, size, options.repeats, options.timeout) for size in kind.sizes)
        ratio = kind.sizes[1] / kind.sizes[0]
        span = kind.sizes[1] - kind.sizes[0]
        per_us = (large.seconds - small.seconds) / span * 1e6
        per_bytes = (large.peak_rss_mb - small.peak_rss_mb) * (1 << 20) / span
        for size, run in zip(kind.sizes, (small, large), strict=True):
            print(
                f"| {kind.name} | {size:,} | {run.exit_code} | {run.seconds:.2f} | {run.peak_rss_mb:.0f} | "
                + (
                    f"{per_us:.3g} µs, {per_bytes:.3g} B per {kind.unit} | "
                    f"{(large.seconds / small.seconds) / ratio:.2f} |"
                    if run is large
                    else " | |"
                )
            )
        sys.stdout.flush()
    if options.issue_sizes:
        print("\n| kind (issue 28 size) | size | exit | time s | peak RSS MB | message |")
        print("|---|---:|---:|---:|---:|---|")
        for kind in kinds:
            if kind.issue_size is None:
                continue
            run = measure(kind, kind.issue_size, 1, options.timeout)
            print(
                f"| {kind.name} | {kind.issue_size:,} | {run.exit_code} | {run.seconds:.2f} | "
                f"{run.peak_rss_mb:.0f} | {run.last_line} |"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
