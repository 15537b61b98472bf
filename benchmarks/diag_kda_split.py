"""Which V splits of the KDA decode kernel give wrong or run-to-run different outputs on the GPU (issue 17).

2026-12-01, H200: v_splits=16 (8-column slices) and v_splits=8 with 8 warps failed the benchmark's
check against kda_decode_naive without PDL, in main's kernel and in the prefetching one alike, while
1, 2, 4 and 8 splits with 4 warps passed, and every split passed with PDL. Cause: a slice's v conv
window (`[V/NV, KW-1]`) is held by several warps at once when it is small, one warp stored the shifted
window while another had not yet read the old one, and nothing ordered the two (the kernel now stores
states only after a barrier). This script runs each (splits, warps) eagerly six times from the same
state, with and without PDL, and records the worst error against the reference and whether the six
results are bit-identical; then it times the cases the decoder uses (bench_kernels' graph timing).
The run in reports/samples/issue17-e256-h200/kda/run2 (commit 7a03758, before the barrier) also
tried a fence in every thread before the ticket: it cost 0.6-0.9 us and did not fix 16 splits.

Usage: python3 benchmarks/diag_kda_split.py --out OUT   (writes kda_split_diag.json there)
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch
from bubblescope.kernels.kda_decode import kda_decode, kda_decode_naive

from bubblescope.files.atomic import write_json_atomic

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
    for v_splits, warps in CONFIGS:
        for pdl in (False, True):
            row = {"v_splits": v_splits, "warps": warps, "pdl": pdl} | check_config(v_splits, warps, pdl)
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
    for name, build in cases.items():
        row = bench.run_case(name, build, ceiling_tbps)
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
