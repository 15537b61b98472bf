"""Benchmark `fused_mla_glue`: the MLA head products as PyTorch ops vs the two kernels/mla_glue launches.

At ling3-flash-e256's MLA shapes (read from reference_model/config.py: 32 heads, nope 128, latent 512,
v 128, bf16), per MLA layer: the query side (`q.to(bf16)` + bmm with W_UK, vs `mla_q_absorb`), the output
side (sigmoid, bmm with W_UV^T, `.float()`, gate multiply, `.to(bf16)`, vs `mla_out_gate`) and both.
Each variant is checked first at the real shapes (the new launches' bf16 results at most one ulp from
the same rule summed in fp64, on at most 1 % of elements; the old ops' distance is reported beside
it), then timed as decode sees it:
16 calls, each on its own layer's weights (16 x 8 MB, past the 50 MB L2), captured back to back in
one CUDA graph, median of 50 replays per call, the new launches without and with PDL. All variants run
in one process, so their ratios are same-run ratios. A few tile choices of the new pair are swept.

Usage: python3 benchmarks/bench_mla_glue.py --out OUT   (writes OUT/mla_glue.json; a table last)
       python3 benchmarks/bench_mla_glue.py --out OUT --check-only   (no GPU: the checks on the
       Triton CPU interpreter, nothing timed)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from bubblescope.reference_model.config import LING3_FLASH_E256

from bubblescope.files.atomic import write_json_atomic

CALLS = 16
REPLAYS = 50
DTYPE = torch.bfloat16
# (block_r, block_v, num_warps) of the new pair: the default first, then the sweep.
CONFIGS = [(64, 16, 4), (32, 8, 4), (32, 16, 4), (128, 32, 4), (64, 16, 8), (128, 16, 8)]
# Checks: bf16 results at most this many ulps apart, on at most this fraction of elements (2: the gate
# multiply can carry a 1-ulp difference of the first rounding into a lower binade; the kernel test
# tests/kernels/test_mla_glue.py met it on the H200).
MAX_ULPS = 2
MAX_MISMATCH_FRACTION = 0.01


def load_kernels():
    """The kernels module, imported after TRITON_INTERPRET is set where there is no GPU."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import bubblescope.kernels.mla_glue as glue

    return glue


def make_layer(device: str, seed: int) -> dict[str, torch.Tensor]:
    """One MLA layer's inputs as the fast path holds them: W_UK / W_UV^T as views of kv_b_proj, q as
    rows of the fp32 projection, the gate logits as its last H columns, o_latent in bf16."""
    config = LING3_FLASH_E256
    heads, nope, rope = config.num_attention_heads, config.qk_nope_head_dim, config.qk_rope_head_dim
    latent, value = config.kv_lora_rank, config.v_head_dim
    generator = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, device=device) * scale

    # [H * (nope + v), r] -> [H, nope + v, r] -> W_UK [H, nope, r], W_UV^T [H, r, v] (packing.py)
    kv_b = randn(heads * (nope + value), latent, scale=latent**-0.5).to(DTYPE).unflatten(0, (heads, -1))
    w_uk, w_uv = kv_b.split([nope, value], dim=1)
    # [1, H*(nope + rope) + H]: q rows then the gate logits (the rest of the projection is not read here)
    proj = randn(1, heads * (nope + rope) + heads)
    return {
        "q": proj[0, : heads * (nope + rope)].view(heads, nope + rope),
        "gate": proj[:, heads * (nope + rope) :],
        "w_uk": w_uk,
        "w_uv_t": w_uv.transpose(1, 2),
        "o_latent": randn(1, heads, latent).to(DTYPE),
    }


def old_q_side(layer: dict[str, torch.Tensor]) -> torch.Tensor:
    """The fast path's PyTorch ops before the attention (blocks.py, fused_mla_glue off)."""
    heads, nope, latent = layer["w_uk"].shape
    return torch.bmm(layer["q"][:, None, :nope].to(DTYPE), layer["w_uk"]).view(1, heads, latent)


def old_out_side(layer: dict[str, torch.Tensor]) -> torch.Tensor:
    """The fast path's PyTorch ops after the attention, the head gate's sigmoid included."""
    heads, latent, _ = layer["w_uv_t"].shape
    gate = torch.sigmoid(layer["gate"])
    heads_out = torch.bmm(layer["o_latent"].view(heads, 1, latent), layer["w_uv_t"]).view(1, heads, -1)
    return (heads_out.float() * gate[..., None]).to(DTYPE).view(1, -1)


def variants(glue, config) -> dict[str, tuple[Callable, Callable]]:
    """side -> (old ops of one layer, new launch(es) of one layer taking use_pdl)."""

    def new_q(layer, pdl):
        return glue.mla_q_absorb(layer["q"], layer["w_uk"], use_pdl=pdl, config=config)

    def new_out(layer, pdl):
        return glue.mla_out_gate(
            layer["o_latent"], layer["w_uv_t"], layer["gate"], use_pdl=pdl, config=config
        )

    def new_both(layer, pdl):
        return new_q(layer, pdl), new_out(layer, pdl)

    return {
        "q_side": (old_q_side, new_q),
        "out_side": (old_out_side, new_out),
        "both": (lambda layer: (old_q_side(layer), old_out_side(layer)), new_both),
    }


def ordered_bits(values: torch.Tensor) -> torch.Tensor:
    """bf16 values as integers in value order (adjacent bf16 values differ by 1), int32."""
    bits = values.contiguous().view(torch.int16).to(torch.int32)
    return torch.where(bits < 0, -(bits & 0x7FFF), bits)


def exact_sides(layer: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Both sides with fp64 sums and the torch path's roundings: the rule both paths should follow
    (cuBLAS may reduce bf16 products in reduced precision, so the old ops are not the yardstick)."""
    heads, nope, _ = layer["w_uk"].shape
    q_latent = torch.einsum("hn,hnr->hr", layer["q"][:, :nope].to(DTYPE).double(), layer["w_uk"].double())
    heads_out = torch.einsum("hr,hrv->hv", layer["o_latent"][0].double(), layer["w_uv_t"].double())
    gated = heads_out.to(DTYPE).float() * torch.sigmoid(layer["gate"][0])[:, None]
    return {"q_side": q_latent.to(DTYPE).view(1, heads, -1), "out_side": gated.to(DTYPE).view(1, -1)}


def ulps_apart(got: torch.Tensor, want: torch.Tensor) -> dict[str, object]:
    ulps = (ordered_bits(got) - ordered_bits(want)).abs()
    return {"max_ulps": int(ulps.max()), "mismatch_fraction": float((ulps > 0).float().mean())}


def check(glue, layer: dict[str, torch.Tensor], config) -> dict[str, object]:
    """New launches vs the fp64-summed rule at the real shapes (gates the timing), and the old ops
    vs the same rule (for information: how far the PyTorch path itself rounds from it)."""
    result: dict[str, object] = {}
    exact = exact_sides(layer)
    for side, (old, new) in variants(glue, config).items():
        if side == "both":
            continue
        new_vs_exact = ulps_apart(new(layer, False), exact[side])
        result[side] = {
            "new_vs_exact": new_vs_exact,
            "old_vs_exact": ulps_apart(old(layer), exact[side]),
            "ok": new_vs_exact["max_ulps"] <= MAX_ULPS
            and new_vs_exact["mismatch_fraction"] <= MAX_MISMATCH_FRACTION,
        }
    return result


def bytes_per_layer(layer: dict[str, torch.Tensor], side: str) -> int:
    """Weight bytes a side streams (activations are a few KB)."""
    sizes = {"q_side": layer["w_uk"].numel(), "out_side": layer["w_uv_t"].numel()}
    weights = sum(sizes.values()) if side == "both" else sizes[side]
    return weights * layer["w_uk"].element_size()


def time_config(glue, layers: list[dict[str, torch.Tensor]], config, with_old: bool) -> list[dict]:
    """Rows for one tile choice: per side, old ops (once) and the new launch(es) without / with PDL."""
    # GPU only: importing the kernel benchmarks' timer here cannot pre-empt load_kernels' interpreter switch.
    from bench_kernels import time_graph_us

    rows = []
    for side, (old, new) in variants(glue, config).items():
        row = {
            "side": side,
            "config": list(config.__dict__.values()),
            "bytes": bytes_per_layer(layers[0], side),
        }
        if with_old:
            row["old_us"] = time_graph_us(
                [lambda layer=layer, old=old: old(layer) for layer in layers], replays=REPLAYS
            )
        for label, pdl in (("new_us", False), ("new_pdl_us", True)):
            row[label] = time_graph_us(
                [lambda layer=layer, pdl=pdl, new=new: new(layer, pdl) for layer in layers], replays=REPLAYS
            )
        best_us = min(row["new_us"], row["new_pdl_us"])
        row["new_tbps"] = row["bytes"] / (best_us * 1e-6) / 1e12
        if with_old:
            row["speedup"] = row["old_us"] / best_us
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"\n{'side':9s} {'config':16s} {'old us':>8s} {'new us':>8s} {'pdl us':>8s} {'TB/s':>6s} {'x':>6s}")
    for row in rows:
        old = row.get("old_us", float("nan"))
        print(
            f"{row['side']:9s} {str(row['config']):16s} {old:8.2f} {row['new_us']:8.2f} "
            f"{row['new_pdl_us']:8.2f} {row['new_tbps']:6.2f} {row.get('speedup', float('nan')):6.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for mla_glue.json")
    parser.add_argument("--check-only", action="store_true", help="run the correctness checks only")
    parser.add_argument("--no-sweep", action="store_true", help="time the default tiles only")
    args = parser.parse_args(argv)
    has_gpu = torch.cuda.is_available()
    if not has_gpu and not args.check_only:
        print(
            "bench_mla_glue: timing needs a CUDA device (--check-only runs the checks on the CPU)",
            file=sys.stderr,
        )
        return 2
    glue = load_kernels()
    device = "cuda" if has_gpu else "cpu"
    default = glue.MLAGlueConfig(*CONFIGS[0]) if has_gpu else None
    checks = check(glue, make_layer(device, seed=0), default)
    print(json.dumps({"checks": checks}), flush=True)
    payload: dict[str, object] = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if has_gpu else "cpu (Triton interpreter)",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "command": " ".join([sys.executable, *sys.argv]),
        "preset": LING3_FLASH_E256.name,
        "calls_per_graph": CALLS,
        "replays": REPLAYS,
        "checks": checks,
        "results": [],
    }
    failed = [side for side, result in checks.items() if not result["ok"]]
    if failed or args.check_only:
        write_json_atomic(args.out / "mla_glue.json", payload)
        if failed:
            print(f"bench_mla_glue: check failed on {', '.join(failed)}: nothing timed", file=sys.stderr)
            return 1
        print(f"checks passed; wrote {args.out / 'mla_glue.json'}")
        return 0
    layers = [make_layer(device, seed) for seed in range(CALLS)]
    rows: list[dict] = []
    for index, tiles in enumerate(CONFIGS[: 1 if args.no_sweep else None]):
        rows += time_config(glue, layers, glue.MLAGlueConfig(*tiles), with_old=index == 0)
        payload["results"] = rows
        write_json_atomic(args.out / "mla_glue.json", payload)
    print_table(rows)
    print(f"wrote {args.out / 'mla_glue.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
