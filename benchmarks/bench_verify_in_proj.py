"""A DSpark verify's KDA input projections at e256 shapes: six GEMMs + a stack vs ONE over the packed weight.

The verify's KDA layer projects its 10 window rows with six nn.Linear calls (q, k, v, f, g, b) and
stacks q/k/v (reference_model/spec/kda_verify_layer.py): 5 cuBLAS GEMMs of 7.5-7.8 us and one of
8.5 us per layer in the round-2 DSpark trace on the H200 (21 MB each: ~2.7 TB/s), 35 layers.
`verify_fused_in_proj` runs one GEMM over the fast path's packed `[5W + H, D]` weight (105 MB) and
slices its output. Here, at T = 10 rows, bf16: today's six + stack, the one GEMM on cuBLAS (F.linear,
what the switch runs) and on the Triton GEMV's tensor-core path (kernels/gemv, M > 1: choose_config),
with and without PDL; 35 layers' weights, one call each, captured in one CUDA graph; median of
replays per layer (bench_kernels.time_graph_us). Each variant checked against the six first.

Usage: python3 benchmarks/bench_verify_in_proj.py --out OUT   (GPU; writes verify_in_proj.json)
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
import torch.nn.functional as F
from bubblescope.kernels.gemv import gemv

from bubblescope.files.atomic import write_json_atomic

# (rows T, hidden D, heads H, head dim V, layers)
E256 = (10, 2560, 32, 128, 35)
DRY = (3, 64, 2, 16, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes, checked not timed")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not (args.dry_run and os.environ.get("TRITON_INTERPRET") == "1"):
        print("bench_verify_in_proj: needs CUDA, or --dry-run with TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    rows, hidden, heads, head_dim, layers = DRY if args.dry_run else E256
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    width = heads * head_dim
    widths = [width] * 5 + [heads]
    packed = [
        torch.randn(sum(widths), hidden, device=device, dtype=dtype) / hidden**0.5 for _ in range(layers)
    ]
    # The six projections' weights are views of the packed one, as after fast/packing.fuse_rows.
    split = [list(weight.split(widths)) for weight in packed]
    x = torch.randn(1, rows, hidden, device=device, dtype=dtype)

    def six(parts):
        qkv = torch.stack([F.linear(x, parts[0]), F.linear(x, parts[1]), F.linear(x, parts[2])], dim=2)
        return qkv, F.linear(x, parts[3]), F.linear(x, parts[4]), F.linear(x, parts[5])

    variants = {
        "six GEMMs + stack (today)": lambda i: six(split[i]),
        "one GEMM, cuBLAS (the switch)": lambda i: F.linear(x, packed[i]),
        "one GEMM, Triton gemv M>1": lambda i: gemv(x[0], packed[i]),
        "one GEMM, Triton gemv M>1, PDL": lambda i: gemv(x[0], packed[i], use_pdl=True),
    }
    want = torch.cat([six(split[0])[0].flatten(2), *six(split[0])[1:]], dim=-1).float().view(rows, -1)
    results = []
    for label, call in variants.items():
        got = call(0)
        got = got.float().view(rows, -1) if isinstance(got, torch.Tensor) else want
        err = float((got - want).abs().max() / want.abs().max())
        row = {"case": label, "max_rel_err": err}
        if not args.dry_run:
            from bench_kernels import time_graph_us

            row["us_per_layer"] = time_graph_us([lambda i=i, c=call: c(i) for i in range(layers)])
            row["tbps"] = packed[0].numel() * packed[0].element_size() / (row["us_per_layer"] * 1e-6) / 1e12
        print(json.dumps(row), flush=True)
        results.append(row)
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
        "command": " ".join([sys.executable, *sys.argv]),
        "shape": {"rows": rows, "hidden": hidden, "heads": heads, "head_dim": head_dim, "layers": layers},
        "results": results,
    }
    write_json_atomic(args.out / "verify_in_proj.json", payload)
    bad = [row["case"] for row in results if not row["max_rel_err"] < 2e-2]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
