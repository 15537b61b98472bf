"""How `bubblescope report` scales with blocking reads in one step (issue 18 §2: one `add_vline` per read
made a 1000-read step take 247 s to render; the target is linear time and <= 10 s for 10 k reads).

Builds one step holding N `.item()` reads (each: item ops, a pinned copy, a stream synchronize, then a
kernel), then times analysis and HTML rendering separately, median of --repeats.

    python benchmarks/report_scaling.py --reads 1000 10000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bubblescope.analysis.traces import analyze_traces  # noqa: E402
from bubblescope.report.html import render_trace_html  # noqa: E402
from tests.trace.builder import TraceBuilder  # noqa: E402

US = 1000
ITEM_OPS = ["aten::item", "aten::_local_scalar_dense"]
PERIOD_US = 40


def build_trace(reads: int, path: Path) -> Path:
    """One `bubblescope.step` with `reads` read-then-kernel cycles of 40 µs each."""
    builder = TraceBuilder()
    builder.annotation("bubblescope.step", 0, reads * PERIOD_US * US)
    builder.frame("/home/user/app.py(12): step", 0, reads * PERIOD_US * US)
    for index in range(reads):
        t = index * PERIOD_US * US
        builder.kernel(f"k{index % 7}", (t + 1 * US, t + 2 * US), (t + 3 * US, t + 10 * US))
        builder.blocking_read(
            ITEM_OPS,
            (t + 12 * US, t + 30 * US),
            (t + 13 * US, t + 14 * US),
            (t + 15 * US, t + 16 * US),
            (t + 14 * US, t + 28 * US),
        )
    return builder.write(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for reads in args.reads:
            trace = build_trace(reads, Path(folder) / f"reads{reads}.json")
            analyse_s, render_s = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                analysis = analyze_traces([trace])
                analyse_s.append(time.perf_counter() - start)
                start = time.perf_counter()
                page = render_trace_html(analysis)
                render_s.append(time.perf_counter() - start)
            row = {
                "reads": reads,
                "reads_found": analysis["summary"]["blocking_reads_per_step"],
                "analyse_s_median": statistics.median(analyse_s),
                "render_s_median": statistics.median(render_s),
                "page_bytes": len(page.encode()),
            }
            results.append(row)
            print(json.dumps(row))


if __name__ == "__main__":
    main()
