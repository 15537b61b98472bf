"""The router GEMV of a DSpark verify window at e256 shapes: its tiles (FusedMoEConfig.window_router_*).

A verify routes its 10 rows with the Triton GEMV's tensor-core path (choose_config: 16 x 128 tiles,
4 warps: 16 programs for the [256, 2560] bf16 router, each walking 20 K-tiles one after another) and
then a routing launch: 12.6 us per MoE layer for 1.3 MB in the round-2 DSpark trace on the H200, 40
layers. Here the GEMV alone at T = 10, 40 routers (one per MoE layer, each its own weights) captured in
one CUDA graph under PDL, median of replays per launch (bench_kernels.time_graph_us), for longer
K-tiles, other warps and the L2 prefetch before the PDL wait (GemvConfig.l2_prefetch). Checked first.

Usage: python3 benchmarks/bench_verify_router.py --out OUT   (GPU; writes verify_router.json)
       --dry-run: tiny shapes, checked not timed (CPU: TRITON_INTERPRET=1)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import torch
from bubblescope.kernels.gemv.ops import launch_gemv
from bubblescope.kernels.moe import FusedMoEConfig
from bubblescope.kernels.moe.launch import window_router_config

from bubblescope.files.atomic import write_json_atomic

# (rows, experts, hidden, layers)
E256 = (10, 256, 2560, 40)
DRY = (3, 32, 64, 2)
# label -> (window_router_block_k, window_router_warps, window_router_prefetch); 0 = choose_config's.
# The default since round 4 is bk512 w4 (FusedMoEConfig.window_router_block_k).
CANDIDATES = {
    "choose_config (round 3): bk128 w4": (0, 0, 0),
    "bk512 w4": (512, 0, 0),
    "bk256 w4": (256, 0, 0),
    "bk512 w8": (512, 8, 0),
    "bk1024 w8": (1024, 8, 0),
    "bk512 w4 + L2 prefetch": (512, 0, 1),
    "bk128 w4 + L2 prefetch": (0, 0, 1),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes, checked not timed")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not (args.dry_run and os.environ.get("TRITON_INTERPRET") == "1"):
        print("bench_verify_router: needs CUDA, or --dry-run with TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    rows, experts, hidden, layers = DRY if args.dry_run else E256
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    routers = [(torch.randn(experts, hidden, device=device) / hidden**0.5).to(dtype) for _ in range(layers)]
    x = torch.randn(rows, hidden, device=device).to(dtype)
    logits = torch.empty(rows, experts, device=device, dtype=torch.float32)
    want = x.float() @ routers[0].float().T
    results = []
    for label, (block_k, warps, prefetch) in CANDIDATES.items():
        cfg = FusedMoEConfig(
            window_router_block_k=block_k, window_router_warps=warps, window_router_prefetch=prefetch
        )
        gemv_config = window_router_config(rows, routers[0], cfg)
        pdl = cuda
        launch_gemv(x, routers[0], logits, gemv_config, pdl)
        err = float((logits - want).abs().max() / want.abs().max())
        row = {"case": label, "max_rel_err": err}
        if not args.dry_run:
            from bench_kernels import time_graph_us

            calls = [lambda r=r, c=gemv_config: launch_gemv(x, r, logits, c, True) for r in routers]
            row["us_per_layer"] = time_graph_us(calls)
            row["tbps"] = routers[0].numel() * routers[0].element_size() / (row["us_per_layer"] * 1e-6) / 1e12
        print(json.dumps(row), flush=True)
        results.append(row)
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
        "command": " ".join([sys.executable, *sys.argv]),
        "shape": {"rows": rows, "experts": experts, "hidden": hidden, "layers": layers},
        "results": results,
    }
    write_json_atomic(args.out / "verify_router.json", payload)
    return 1 if any(not row["max_rel_err"] < 1e-2 for row in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
