"""A folder of many rank traces: `bubblescope analyze FOLDER` one rank after another, on the local
process pool, on a Dask LocalCluster, and (optionally) the same work on Ray, whole process each.

Usage:
    .venv/bin/python benchmarks/bench_ranks.py [--ranks 64 256] [--source tl_hf_qwen05_h100] [--jobs 2]
        [--repeats 1] [--ray-python .venv-ray/bin/python]

The rank files are the real trace `--source` with shifted ids and `distributedInfo.rank`
(`replicate_trace.write_ranks`). Each row is a fresh process (see bench_analyze.py: wall outside it,
CPU of it and every worker it waited for, peak RSS of the client and of its largest worker). Before the
timings, the pool's and Dask's JSON is checked to be identical to the serial run's on the smallest folder.

Ray (`python3 -m venv .venv-ray && .venv-ray/bin/pip install ray pandas msgspec`, never a dependency)
runs the same per-rank function (`rank_pool._rank_result`) as Ray tasks with this checkout on
PYTHONPATH, and the same reduce; it is here to choose between the two engines by measurement.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_analyze import _REPORT_AT_EXIT, CLI_CHILD, real_trace, run_child  # noqa: E402
from replicate_trace import write_ranks  # noqa: E402

_RAY_CHILD = (
    _REPORT_AT_EXIT
    + """
import ray
from bubblescope.ranks.pool import _rank_result, _tasks
from bubblescope.ranks.reduce import reduce_results
from bubblescope.trace.load import expand_trace_paths
ray.init(num_cpus=int(sys.argv[2]), include_dashboard=False, log_to_driver=False)
remote = ray.remote(num_cpus=1)(_rank_result)
from bubblescope.trace.source import trace_file_cap
with trace_file_cap(int(sys.argv[3])):
    files = expand_trace_paths([sys.argv[1]])
results = ray.get([remote.remote(task) for task in _tasks(files, None, None)])
print(json.dumps(reduce_results(results), indent=1))
ray.shutdown()
"""
)


def analyze_args(folder: Path, *extra: str) -> list[str]:
    # --max-files: the folder's every rank (the default cap is 128 files).
    ranks = len(list(folder.glob("*.json.gz")))
    return ["analyze", str(folder), "--format", "json", "--max-files", str(ranks), *extra]


def check_identical(folder: Path, jobs: int) -> None:
    """Serial, pool and Dask give the same JSON on `folder`."""
    outputs = {}
    for name, extra in (
        ("serial", ["--jobs", "1"]),
        ("pool", ["--jobs", str(jobs)]),
        ("dask", ["--executor", "dask", "--jobs", str(jobs)]),
    ):
        run = run_child(sys.executable, CLI_CHILD, analyze_args(folder, *extra), stdout=-1)
        if "error" in run:
            raise SystemExit(f"{name} failed: {run['error']}")
        outputs[name] = run["stdout"]
    if not outputs["serial"] == outputs["pool"] == outputs["dask"]:
        raise SystemExit(f"check failed: serial, pool and Dask JSON differ on {folder}")
    print(f"check: serial, pool and Dask JSON identical on {folder.name} ({len(outputs['serial'])} bytes)")


def timed(python: str, program: str, args: list[str], repeats: int, env_path: str | None = None) -> dict:
    if env_path:
        os.environ["PYTHONPATH"] = env_path
    try:
        runs = [run_child(python, program, args) for _ in range(repeats)]
    finally:
        os.environ.pop("PYTHONPATH", None)
    failed = [run for run in runs if "error" in run]
    if failed:
        return failed[0]
    return {
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "worker_peak_rss_mb": max(r["worker_peak_rss_mb"] for r in runs),
    }


def print_row(ranks: int, name: str, result: dict) -> None:
    if "error" in result:
        print(f"| {ranks} | {name} | failed: {result['error'][:100]} |", flush=True)
        return
    print(
        f"| {ranks} | {name} | {result['wall_s']:.1f} s ({result['wall_s'] / ranks * 1000:.0f} ms/rank) "
        f"| {result['cpu_s']:.1f} s ({result['cpu_s'] / ranks * 1000:.0f} ms/rank) "
        f"| {result['peak_rss_mb']:.0f} MB | {result['worker_peak_rss_mb']:.0f} MB |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", nargs="*", type=int, default=[64, 256])
    parser.add_argument("--source", default="tl_hf_qwen05_h100")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--serial-up-to", type=int, default=64, help="time --jobs 1 up to this many ranks")
    parser.add_argument("--ray-python", default=None)
    parser.add_argument("--skip-check", action="store_true", help="(when already checked on these files)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_ranks_"))
    source = real_trace(args.source)
    folders = {}
    for ranks in args.ranks:
        folders[ranks] = workdir / f"ranks{ranks}"
        if not (folders[ranks] / f"rank{ranks - 1:05d}.trace.json.gz").exists():
            write_ranks(source, folders[ranks], ranks)
    if not args.skip_check:
        check_identical(folders[min(args.ranks)], args.jobs)
    print(
        f"cpus={os.cpu_count()}, jobs={args.jobs}, "
        f"date={time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.1f}, source {source.name}\n\n"
        "| ranks | executor | wall | CPU (client + workers) | client peak RSS | largest worker peak RSS |\n"
        "|---|---|---|---|---|---|",
        flush=True,
    )
    for ranks, folder in folders.items():
        rows = [("local pool", ["--jobs", str(args.jobs)]), ("dask LocalCluster", ["--executor", "dask"])]
        if ranks <= args.serial_up_to:
            rows.insert(0, ("serial (--jobs 1)", ["--jobs", "1"]))
        for name, extra in rows:
            extra = [*extra, "--jobs", str(args.jobs)] if name.startswith("dask") else extra
            print_row(
                ranks, name, timed(sys.executable, CLI_CHILD, analyze_args(folder, *extra), args.repeats)
            )
        if args.ray_python:
            ray_python = str(Path(args.ray_python).absolute())
            print_row(
                ranks,
                "ray (local)",
                timed(
                    ray_python, _RAY_CHILD, [str(folder), str(args.jobs), str(ranks)], args.repeats, str(REPO)
                ),
            )


if __name__ == "__main__":
    main()
