"""Is `fused_mla_glue`'s change of the ling3-tiny step a rounding (and the routing flips it can cause) or
a wrong result? (H200 2026-12-01: its first-step logits moved 8.9e-2 relative RMS from all-off.)

For each base setting (all off; pdl; fused_moe + pdl + bf16_gate) it runs one step with and without the
switch on the same weights and prompt and reports, per MoE layer in order, whether the routed expert ids
agree: a rounding-level change leaves every layer's ids equal up to a first near-tie flip (then later
layers may differ too); a wrong MLA output changes ids from the first MoE layer after the first MLA
layer. Then each MLA layer's glue is checked alone at the preset's shapes: the Triton launches against
the PyTorch ops they replace on the step's own inputs, in ulps.

Usage: python3 benchmarks/diag_mla_glue.py [--preset ling3-tiny] [--out OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from bubblescope.kernels.mla_glue import mla_out_gate, mla_q_absorb
from bubblescope.kernels.mla_glue.naive import mla_out_gate_naive, mla_q_absorb_naive
from bubblescope.reference_model.workload import make_workload

from bubblescope.files.atomic import write_json_atomic

BASES = {"off": frozenset(), "pdl": frozenset({"pdl"}), "fused": frozenset({"fused_moe", "pdl", "bf16_gate"})}


def first_step(workload, enabled: frozenset[str]) -> tuple[torch.Tensor, dict[int, list[int]]]:
    """(first step's logits, routed ids per MoE layer) after prepare(enabled)."""
    workload.prepare(enabled)
    workload.step()
    torch.cuda.synchronize()
    forward = workload.decoder.forward
    ids = {index: ws.ids[0].tolist() for index, ws in sorted(forward.workspaces.items())}
    return forward.logits.clone(), ids


def ulps(a: torch.Tensor, b: torch.Tensor) -> tuple[int, float]:
    """(max, share > 0) of the bf16 ulp distance between a and b."""

    def ordered(values: torch.Tensor) -> torch.Tensor:
        bits = values.contiguous().view(torch.int16).to(torch.int32)
        return torch.where(bits < 0, -(bits & 0x7FFF), bits)

    distance = (ordered(a) - ordered(b)).abs()
    return int(distance.max()), float((distance > 0).float().mean())


def glue_alone(workload, pdl: bool) -> list[dict]:
    """Each MLA layer's two launches vs the PyTorch ops on random inputs at the layer's shapes."""
    rows = []
    generator = torch.Generator(device="cuda").manual_seed(0)
    for layer in workload.decoder.pack.layers:
        pack = layer.attention
        if not hasattr(pack, "w_uk"):
            continue
        heads, nope, latent = pack.w_uk.shape
        q = torch.randn(heads, nope + 64, device="cuda", generator=generator)
        o_latent = torch.randn(1, heads, latent, device="cuda", generator=generator).to(pack.w_uk.dtype)
        gate = torch.randn(1, heads, device="cuda", generator=generator)
        got_q = mla_q_absorb(q, pack.w_uk, use_pdl=pdl)
        got_o = mla_out_gate(o_latent, pack.w_uv_t, gate, use_pdl=pdl)
        torch.cuda.synchronize()
        want_q = mla_q_absorb_naive(q, pack.w_uk)
        want_o = mla_out_gate_naive(o_latent, pack.w_uv_t, gate)
        rows.append(
            {
                "layer": layer.index,
                "shapes": [heads, nope, latent, pack.w_uv_t.shape[-1]],
                "w_uv_t_strides": list(pack.w_uv_t.stride()),
                "q_absorb_ulps_max_share": ulps(got_q.view_as(want_q), want_q),
                "out_gate_ulps_max_share": ulps(got_o.view_as(want_o), want_o),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="ling3-tiny")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("diag_mla_glue: needs a CUDA device", file=sys.stderr)
        return 2
    workload = make_workload(args.preset, device="cuda", seed=0, prompt_len=32, max_steps=8)
    report: dict = {"preset": args.preset, "bases": {}}
    for name, base in BASES.items():
        base_logits, base_ids = first_step(workload, base)
        logits, ids = first_step(workload, base | {"fused_mla_glue"})
        differing = [index for index in base_ids if ids[index] != base_ids[index]]
        error = float((logits.double() - base_logits.double()).norm() / base_logits.double().norm())
        report["bases"][name] = {
            "relative_rms": error,
            "moe_layers": list(base_ids),
            "layers_with_other_ids": differing,
            "first_difference": (
                {"layer": differing[0], "off": base_ids[differing[0]], "on": ids[differing[0]]}
                if differing
                else None
            ),
        }
        print(f"{name}: relative RMS {error:.2e}; MoE layers with other ids: {differing}")
    mla_layers = [layer.index for layer in workload.decoder.pack.layers if hasattr(layer.attention, "w_uk")]
    report["mla_layers"] = mla_layers
    report["glue_alone"] = {"plain": glue_alone(workload, False), "pdl": glue_alone(workload, True)}
    print(f"MLA layers {mla_layers}")
    for mode, rows in report["glue_alone"].items():
        for row in rows:
            print(
                f"glue alone {mode} layer {row['layer']}: q {row['q_absorb_ulps_max_share']} "
                f"out {row['out_gate_ulps_max_share']} shapes {row['shapes']} "
                f"w_uv_t strides {row['w_uv_t_strides']}"
            )
    if args.out is not None:
        write_json_atomic(args.out / "diag_mla_glue.json", report)
    print(json.dumps({k: v for k, v in report.items() if k != "glue_alone"})[:2000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
