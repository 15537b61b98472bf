"""Where `analyze` spends its time on a step with many blocking reads (issue 18 §2), stage by stage.

Builds the trace of `benchmarks/report_scaling.py` (one `bubblescope.step` holding N `.item()` reads)
and reports the median over --repeats of the process CPU seconds of: `analyze_ranks` (load + tables +
detectors), each detector inside it, `analysis_dict` (summary, host blame, top gaps) and the timeline
inside that. CPU time, not wall time, because the shared box's load moves wall time by 2-3x.

    python benchmarks/analysis_stages.py --reads 10000 --repeats 3
    python benchmarks/analysis_stages.py --tree /tmp/old-checkout   # the same on another source tree

--tree imports bubblescope from that folder instead (e.g. `git archive <commit> | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _cpu_timed(name: str, fn, spent: dict[str, float]):
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.process_time() - start

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=None, help="import bubblescope from this source tree")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "benchmarks"))
    sys.path.insert(0, str(REPO))
    from report_scaling import build_trace  # the trace builder of the committed tree

    if args.tree is not None:
        # An editable install's finder would win over sys.path: drop it, then put the tree first.
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
        for name in [m for m in sys.modules if m == "bubblescope" or m.startswith("bubblescope.")]:
            del sys.modules[name]
        sys.path.insert(0, str(args.tree.resolve()))
    import bubblescope.analysis.traces as analysis
    import bubblescope.detect.registry as registry

    spent: dict[str, float] = {}
    analysis.build_timeline = _cpu_timed("timeline", analysis.build_timeline, spent)
    registry.DETECTORS = tuple(
        registry.Detector(d.name, d.finds, _cpu_timed(d.name, d.run, spent)) for d in registry.DETECTORS
    )
    with tempfile.TemporaryDirectory() as folder:
        trace = str(build_trace(args.reads, Path(folder) / f"reads{args.reads}.json"))
        analysis.analysis_dict(analysis.analyze_ranks([trace]))  # warm: imports, caches
        runs = []
        for _ in range(args.repeats):
            spent.clear()
            start = time.process_time()
            ranks = analysis.analyze_ranks([trace])
            middle = time.process_time()
            result = analysis.analysis_dict(ranks)
            dict_s = time.process_time() - middle
            runs.append({"analyze_ranks": middle - start, "analysis_dict": dict_s, **spent})
    row = {key: round(statistics.median(run[key] for run in runs), 3) for key in runs[0]}
    row.update(
        reads=args.reads,
        reads_found=result["summary"]["blocking_reads_per_step"],
        source=str(Path(analysis.__file__).parent.parent),
    )
    print(json.dumps(row))


if __name__ == "__main__":
    main()
