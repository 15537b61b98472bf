"""Tile/launch sweep of the decode kernels on one GPU, sized to finish in about two minutes.

Each candidate is checked against the torch reference first (bench_kernels' cases), then timed as
decode sees it: calls captured back to back in one CUDA graph, without and with PDL (median per call).
Rows are printed as JSON as they finish and written to OUT/sweep.json after every case, so a run cut
short still leaves its data; a compact table per group comes last.

Usage: python3 benchmarks/sweep_kernels.py --out DIR [--only TEXT]
Compile in parallel first (8 processes fill Triton's cache; their timings would interfere, so none):
  for i in 0 1 2 3 4 5 6 7; do python3 benchmarks/sweep_kernels.py --out D --warm-only --shard $i/8 &
  done; wait
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from bubblescope.kernels.gemv import GemvConfig
from bubblescope.kernels.moe import FusedMoEConfig

from bubblescope.files.atomic import write_json_atomic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as bench  # noqa: E402

BF16 = torch.bfloat16
G = GemvConfig


def gemv_cases() -> dict[str, Callable[[], dict]]:
    """(rows, N, K) -> configs (block_n, block_k, warps, acc_2d, evict_first, pdl_trigger)."""
    shapes = {
        (1, 4096, 2560): [G(8, 512, 4, False), G(8, 256, 4, False)]
        + [G(bn, bk, w) for bn in (4, 8, 16) for bk in (512, 1024) for w in (4, 8)]
        + [G(8, 512, 4, True, True), G(4, 1024, 4, True, True), G(8, 512, 4, pdl_trigger=0)]
        + [G(8, 512, 4, pdl_trigger=2)],
        (1, 2560, 4096): [G(8, 512, 4, False), G(8, 512, 4), G(4, 1024, 4), G(8, 1024, 8), G(4, 512, 4)],
        (1, 1536, 2560): [G(8, 512, 4, False), G(4, 512, 4), G(2, 1024, 4), G(4, 1024, 4), G(2, 512, 4)],
        (1, 512, 2560): [G(8, 512, 4, False), G(1, 512, 4), G(1, 1024, 4), G(2, 512, 4), G(2, 1024, 4)]
        + [G(1, 2048, 8), G(1, 256, 2)],
        (8, 4096, 2560): [G(16, 128, 4), G(16, 256, 4), G(32, 128, 4), G(16, 256, 8), G(32, 256, 8)]
        + [G(16, 512, 8), G(32, 512, 8), G(64, 128, 8)],
    }
    cases = {}
    for (rows, n, k), configs in shapes.items():
        for c in configs:
            tag = f"bn{c.block_n} bk{c.block_k} w{c.num_warps} a{int(c.acc_2d)}"
            tag += f" e{int(c.evict_first)} t{c.pdl_trigger}"
            cases[f"gemv {n}x{k} M={rows} {tag}"] = lambda r=rows, n=n, k=k, c=c: bench.case_gemv(r, n, k, c)
    return cases


def moe_cases() -> dict[str, Callable[[], dict]]:
    """(block_i, block_d, block_dout, warps, acc_2d) of the fused expert launch, bf16 router."""
    configs = [
        (32, 128, 64, 4, False),
        (16, 128, 128, 4, True),
        (16, 128, 64, 4, True),
        (16, 256, 128, 4, False),
        (8, 256, 128, 4, True),
        (8, 256, 256, 4, False),
        (16, 256, 128, 8, True),
        (32, 128, 128, 8, True),
        (8, 512, 128, 4, False),
        (16, 512, 256, 8, False),
        # Second round (no register spills at sm_90 per cuobjdump; not yet timed).
        (32, 128, 256, 8, True),
        (16, 128, 128, 8, True),
        (32, 64, 128, 4, True),
        (64, 64, 128, 8, True),
        (16, 256, 256, 8, True),
    ]
    cases = {}
    for bi, bd, bo, w, acc in configs:
        cfg = FusedMoEConfig(block_i=bi, block_d=bd, block_dout=bo, num_warps=w, acc_2d=acc)
        cases[f"moe fused bi{bi} bd{bd} bo{bo} w{w} a{int(acc)}"] = lambda c=cfg: bench.case_moe(
            True, BF16, c
        )
    return cases


def lm_head_cases() -> dict[str, Callable[[], dict]]:
    cases = {}
    for dtype, name, configs in (
        (BF16, "bf16", [None, G(8, 1024, 8), G(16, 512, 8), G(4, 1024, 4)]),
        (torch.float32, "fp32", [None, G(8, 512, 8), G(4, 512, 4)]),
    ):
        for cfg in configs:
            for programs in (264, 528, 1056) if cfg is None else (528,):
                tag = "default" if cfg is None else f"bn{cfg.block_n} bk{cfg.block_k} w{cfg.num_warps}"
                cases[f"lm_head {name} {tag} p{programs}"] = lambda d=dtype, c=cfg, p=programs: (
                    bench.case_lm_head(d, c, p)
                )
    return cases


def other_cases() -> dict[str, Callable[[], dict]]:
    return {
        "add_rmsnorm 2560": bench.case_rmsnorm,
        "kda_decode H32 K128": bench.case_kda,
        **{
            f"kda_decode H32 K128 nv{n} w{w}": lambda n=n, w=w: bench.case_kda(w, n)
            for n in (2, 4, 8)
            for w in (4, 8)
        },
        "mla_decode ctx 8192": lambda: bench.case_mla(8192),
        "mla_decode ctx 131072": lambda: bench.case_mla(131072),
        "moe unfused e256 bf16": lambda: bench.case_moe(False, BF16),
    }


def time_case(name: str, build: Callable[[], dict]) -> dict:
    case = build()
    row = bench.checked_row(name, case)
    if "error" in row:
        return row
    row["graph_us"] = bench.time_graph_us(case["calls"](False), replays=20)
    row["graph_pdl_us"] = bench.time_graph_us(case["calls"](True), replays=20)
    row["tbps"] = case["bytes"] / (min(row["graph_us"], row["graph_pdl_us"]) * 1e-6) / 1e12
    return row


def warm_case(build: Callable[[], dict]) -> dict:
    """Compile both launch variants (fills Triton's disk cache for the timing pass) without timing."""
    case = build()
    for pdl in (False, True):
        case["calls"](pdl)[0]()
    torch.cuda.synchronize()
    return {"warmed": True}


def print_table(rows: list[dict]) -> None:
    print(f"\n{'case':60s} {'graph':>8s} {'pdl':>8s} {'TB/s':>6s}")
    for row in rows:
        if "graph_us" not in row:
            print(f"{row['kernel']:60s} ERROR {row.get('error', '')[:60]}")
            continue
        print(f"{row['kernel']:60s} {row['graph_us']:8.2f} {row['graph_pdl_us']:8.2f} {row['tbps']:6.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for sweep.json")
    parser.add_argument("--only", default="", help="run only cases whose name contains this text")
    parser.add_argument(
        "--shard", default="0/1", help="I/N: take every N-th case from the I-th (parallel warm-up)"
    )
    parser.add_argument("--warm-only", action="store_true", help="compile the cases, time nothing")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("sweep_kernels: needs a CUDA device", file=sys.stderr)
        return 2
    cases = gemv_cases() | lm_head_cases() | moe_cases() | other_cases()
    rows: list[dict] = []
    meta = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "command": " ".join([sys.executable, *sys.argv]),
    }
    shard, shards = (int(part) for part in args.shard.split("/"))
    for index, (name, build) in enumerate(cases.items()):
        if args.only not in name or index % shards != shard:
            continue
        try:
            row = {"kernel": name} | (warm_case(build) if args.warm_only else time_case(name, build))
        except Exception as exc:  # one broken candidate must not stop the sweep
            traceback.print_exc(limit=2)
            row = {"kernel": name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        if not args.warm_only or "error" in row:
            print(json.dumps(row), flush=True)
        rows.append(row)
        torch.cuda.empty_cache()
        if not args.warm_only:
            write_json_atomic(args.out / "sweep.json", meta | {"results": rows})
    if not args.warm_only:
        print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
