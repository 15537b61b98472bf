"""KDA's gated output norm of a DSpark verify window: the eager ops against one Triton launch.

The verify's KDA layer normalises its attention output per (token, head) row, scales by the norm
weight and gates by sigmoid(g) (reference_model.kda.gated_rms_norm): ~11 PyTorch kernels per layer,
25 us per layer in the round-2 DSpark trace on the H200. `verify_gated_norm` runs it as one launch
(kernels/kda_verify/gated_norm.py). Here both at the verify's shape (T = 10 tokens, 32 heads of 128,
bf16), 35 calls (one verify's KDA layers, each on its own buffers) captured in one CUDA graph, median
of replays per call (bench_kernels.time_graph_us); the kernel with and without PDL. Checked first.

Usage: python3 benchmarks/bench_verify_gated_norm.py --out OUT   (GPU; writes verify_gated_norm.json)
       --dry-run: checked, not timed (CPU: TRITON_INTERPRET=1)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import torch
from bench_kernels import time_graph_us
from bubblescope.kernels.kda_verify.gated_norm import gated_rms_norm_rows
from bubblescope.reference_model.kda import gated_rms_norm

from bubblescope.files.atomic import write_json_atomic

SHAPE = (1, 10, 32, 128)
LAYERS = 35
EPS = 1e-6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry-run", action="store_true", help="check only, fp32 (CPU: TRITON_INTERPRET=1)")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not (args.dry_run and os.environ.get("TRITON_INTERPRET") == "1"):
        print("bench_verify_gated_norm: needs CUDA, or --dry-run with TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    layers = [
        (
            torch.randn(SHAPE, device=device, dtype=dtype),
            torch.randn(SHAPE, device=device, dtype=dtype),
            torch.rand(SHAPE[-1], device=device, dtype=dtype) + 0.5,
        )
        for _ in range(LAYERS)
    ]
    o, gate, weight = layers[0]
    want = gated_rms_norm(o, gate, weight, EPS).float()
    got = gated_rms_norm_rows(o, gate, weight, EPS).float()
    err = float((got - want).abs().max() / want.abs().max())
    rows = {"max_rel_err": err}
    if args.dry_run:
        print(json.dumps(rows))
        return 0 if err < 1e-2 else 1
    rows["eager_us"] = time_graph_us([lambda a=a: gated_rms_norm(*a, EPS) for a in layers])
    for pdl in (False, True):
        calls = [lambda a=a, p=pdl: gated_rms_norm_rows(*a, EPS, use_pdl=p) for a in layers]
        rows[f"kernel{'_pdl' if pdl else ''}_us"] = time_graph_us(calls)
    payload = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "command": " ".join([sys.executable, *sys.argv]),
        "shape": list(SHAPE),
        "calls_per_graph": LAYERS,
        "results": rows,
    }
    write_json_atomic(args.out / "verify_gated_norm.json", payload)
    print(json.dumps(rows))
    print(
        f"gated norm per KDA layer: eager {rows['eager_us']:.2f} us, one launch {rows['kernel_us']:.2f} us "
        f"({rows['kernel_pdl_us']:.2f} with PDL); x {LAYERS} layers saves "
        f"{(rows['eager_us'] - rows['kernel_pdl_us']) * LAYERS:.0f} us per verify (err {err:.1e})"
    )
    return 0 if err < 1e-2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
