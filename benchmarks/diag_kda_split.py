"""Why some V splits of the KDA decode kernel give wrong, run-to-run different outputs on the H200 (issue 17).

2026-12-01, H200: v_splits=16 (8-column slices) and v_splits=8 with 8 warps failed the
benchmark's check against kda_decode_naive, in main's kernel and in the prefetching one alike, while
1, 2, 4 and 8 splits with 4 warps passed. This script runs each (splits, warps) eagerly six times from
the same state, with and without PDL, with and without a fence in every thread before the slice's
ticket (split_launch.FENCE_EACH_THREAD), and records the worst error against the reference and
whether the six results are bit-identical. Then it times the fence's cost on the cases the decoder
uses (bench_kernels' graph timing).

Usage: python3 benchmarks/diag_kda_split.py --out OUT   (writes kda_split_diag.json there)
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch
from bubblescope.kernels.kda_decode import kda_decode, kda_decode_naive, split_launch

from bubblescope.atomic import write_json_atomic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as bench  # noqa: E402

CONFIGS = ((16, 4), (16, 2), (8, 8), (8, 4), (4, 4))
RUNS = 6


def check_config(v_splits: int, warps: int, pdl: bool) -> dict:
    """Worst relative error vs the reference over RUNS calls from one state; are they bit-identical."""
    torch.manual_seed(0)
    acts, weights, state = bench.flash_kda_layer()
    initial = state.clone()
    want = kda_decode_naive(**acts, weights=weights, state=initial.clone())
    outs = []
    for _ in range(RUNS):
        for name in ("q_conv", "k_conv", "v_conv", "recurrent"):
            getattr(state, name).copy_(getattr(initial, name))
        out = kda_decode(
            **acts,
            weights=weights,
            state=state,
            use_pdl=pdl,
            num_warps=warps,
            v_splits=v_splits,
            prefetch_state=False,
        )
        outs.append(out.clone())
    torch.cuda.synchronize()
    return {
        "max_rel_err": max(bench.max_rel_diff(out, want) for out in outs),
        "bit_identical": all(torch.equal(out, outs[0]) for out in outs),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    checks = []
    for fence in (False, True):
        split_launch.FENCE_EACH_THREAD = fence
        for v_splits, warps in CONFIGS:
            for pdl in (False, True):
                row = {"v_splits": v_splits, "warps": warps, "pdl": pdl, "fence_each_thread": fence}
                row |= check_config(v_splits, warps, pdl)
                print(json.dumps(row), flush=True)
                checks.append(row)
    ceiling_tbps = bench.measure_copy_ceiling_tbps()
    timings = []
    cases = {
        "kda_decode H32 K128 v_splits=2": lambda: bench.case_kda(v_splits=2),
        "kda_decode H32 K128 v_splits=4": lambda: bench.case_kda(v_splits=4),
        "kda_decode H32 K128 v_splits=8": lambda: bench.case_kda(v_splits=8),
        "kda_decode H32 K128 v_splits=16": lambda: bench.case_kda(v_splits=16),
        "kda block gemvs only (in_proj + o_proj)": lambda: bench.case_kda_block(None),
        "kda block in_proj + kda_decode v_splits=1 + o_proj": lambda: bench.case_kda_block(1),
        "kda block in_proj + kda_decode v_splits=2 + o_proj": lambda: bench.case_kda_block(2),
        "kda block in_proj + kda_decode v_splits=4 + o_proj": lambda: bench.case_kda_block(4),
        "kda block in_proj + kda_decode v_splits=8 + o_proj": lambda: bench.case_kda_block(8),
    }
    for fence in (False, True):
        split_launch.FENCE_EACH_THREAD = fence
        for name, build in cases.items():
            row = bench.run_case(name, build, ceiling_tbps) | {"fence_each_thread": fence}
            print(json.dumps(row), flush=True)
            timings.append(row)
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "command": " ".join([sys.executable, *sys.argv]),
        "checks": checks,
        "timings": timings,
    }
    write_json_atomic(args.out / "kda_split_diag.json", payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
