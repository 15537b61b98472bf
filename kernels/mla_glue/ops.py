"""Launchers and public entry points of the absorbed-MLA head products (validation, output, grid)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
from bubblescope.kernels._pdl import is_interpreting, launch_options, resolve_pdl
from bubblescope.kernels.gemv.checks import (
    FLOAT_DTYPES,
    KernelInputError,
    check_dtype,
    check_powers_of_two,
    check_same_device,
)
from bubblescope.kernels.mla_glue.kernel import mla_out_gate_kernel, mla_q_absorb_kernel

# The whole reduction axis sits in one block (no loop), so it must fit the registers of a program.
MAX_NOPE = 256
MAX_LATENT = 1024


@dataclass(frozen=True)
class MLAGlueConfig:
    """Tiles of the two launches: q_absorb programs cover block_r latent columns of one head,
    out_gate programs block_v value columns of one head."""

    block_r: int = 64
    block_v: int = 16
    num_warps: int = 4


def choose_config(heads: int, latent: int, value: int) -> MLAGlueConfig:
    """Default tiles: Ling's 32 heads x 512 / 64 and x 128 / 16 give 256 programs of 16 KB of weights
    each (~2 per SM of the H200). The interpreter's cost is per program: whole rows there."""
    if is_interpreting():
        return MLAGlueConfig(block_r=triton.next_power_of_2(latent), block_v=triton.next_power_of_2(value))
    return MLAGlueConfig()


def check_config(config: MLAGlueConfig, op: str) -> None:
    check_powers_of_two(op, config, ("block_r", "block_v", "num_warps"))


def check_out(
    out: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, op: str
) -> None:
    """A caller's `out` must have the result's shape, dtype and device, and be contiguous."""
    if tuple(out.shape) != shape or out.dtype != dtype or out.device != device or not out.is_contiguous():
        raise KernelInputError(
            f"{op}: out must be contiguous {list(shape)} {dtype} on {device}; "
            f"got {list(out.shape)} {out.dtype} on {out.device}"
        )


def check_q_absorb_inputs(q: torch.Tensor, w_uk: torch.Tensor, op: str = "mla_q_absorb") -> None:
    """q `[H, >= nope]` (unit last stride), w_uk `[H, nope, r]` (unit last stride), float, one device."""
    if q.dim() != 2 or w_uk.dim() != 3:
        raise KernelInputError(
            f"{op}: q must be [H, nope + rope] and w_uk [H, nope, r]; "
            f"got {list(q.shape)} and {list(w_uk.shape)}"
        )
    heads, nope, latent = w_uk.shape
    if q.shape[0] != heads or q.shape[1] < nope:
        raise KernelInputError(
            f"{op}: q must be [{heads}, >= {nope}] for w_uk {list(w_uk.shape)}; got {list(q.shape)}"
        )
    if nope > MAX_NOPE or latent > MAX_LATENT:
        raise KernelInputError(f"{op}: needs nope <= {MAX_NOPE}, r <= {MAX_LATENT}; got {nope}, {latent}")
    check_dtype("q", q, FLOAT_DTYPES, op)
    check_dtype("w_uk", w_uk, FLOAT_DTYPES, op)
    check_same_device(op, q=q, w_uk=w_uk)
    if q.stride(1) != 1 or w_uk.stride(2) != 1:
        raise KernelInputError(f"{op}: q and w_uk need a contiguous last dimension")


def check_out_gate_inputs(
    o_latent: torch.Tensor, w_uv_t: torch.Tensor, gate: torch.Tensor, op: str = "mla_out_gate"
) -> None:
    """o_latent `[1, H, r]` or `[H, r]`, w_uv_t `[H, r, v]` (one unit stride), gate H fp32 logits."""
    if w_uv_t.dim() != 3:
        raise KernelInputError(f"{op}: w_uv_t must be [H, r, v]; got {list(w_uv_t.shape)}")
    heads, latent, _ = w_uv_t.shape
    if latent > MAX_LATENT:
        raise KernelInputError(f"{op}: needs r <= {MAX_LATENT}; got {latent}")
    if o_latent.numel() != heads * latent or o_latent.shape[-2:] != (heads, latent) or o_latent.dim() > 3:
        raise KernelInputError(f"{op}: o_latent must be [1, {heads}, {latent}]; got {list(o_latent.shape)}")
    if gate.numel() != heads or gate.shape[-1] != heads:
        raise KernelInputError(
            f"{op}: gate must hold {heads} head logits ([1, {heads}]); got {list(gate.shape)}"
        )
    check_dtype("o_latent", o_latent, FLOAT_DTYPES, op)
    check_dtype("w_uv_t", w_uv_t, FLOAT_DTYPES, op)
    check_dtype("gate", gate, FLOAT_DTYPES, op)
    check_same_device(op, o_latent=o_latent, w_uv_t=w_uv_t, gate=gate)
    if o_latent.stride(-1) != 1 or gate.stride(-1) != 1:
        raise KernelInputError(f"{op}: o_latent and gate need a contiguous last dimension")
    if 1 not in (w_uv_t.stride(1), w_uv_t.stride(2)):
        raise KernelInputError(f"{op}: w_uv_t needs a unit stride along r or v")


def mla_q_absorb(
    q: torch.Tensor,
    w_uk: torch.Tensor,
    use_pdl: bool = False,
    config: MLAGlueConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """W_UK folded into the query, one launch: q_latent[h] = q[h, :nope].to(dtype) @ w_uk[h].

    Args:
        q: `[H, nope + rope]` queries (fp32 projection rows, or the q LoRA output); only the first
            nope columns are read, each rounded to w_uk's dtype first.
        w_uk: `[H, nope, r]` (a view of kv_b_proj; unit stride along r).
        use_pdl: Programmatic Dependent Launch where supported.
        config: tiles; default `choose_config`.
        out: optional contiguous `[1, H, r]` destination in w_uk's dtype (CUDA-graph friendly).
    Returns:
        `[1, H, r]` in w_uk's dtype (fp32 accumulation, one rounding).
    """
    op = "mla_q_absorb"
    check_q_absorb_inputs(q, w_uk, op)
    heads, nope, latent = w_uk.shape
    shape = (1, heads, latent)
    if out is None:
        out = torch.empty(shape, dtype=w_uk.dtype, device=w_uk.device)
    check_out(out, shape, w_uk.dtype, w_uk.device, op)
    config = config or choose_config(heads, latent, 1)
    check_config(config, op)
    pdl = resolve_pdl(use_pdl, w_uk.device)
    mla_q_absorb_kernel[(heads, triton.cdiv(latent, config.block_r))](
        q,
        w_uk,
        out,
        nope,
        latent,
        q.stride(0),
        w_uk.stride(0),
        w_uk.stride(1),
        out.stride(1),
        BLOCK_N=triton.next_power_of_2(nope),
        BLOCK_R=config.block_r,
        USE_PDL=pdl,
        MANUAL_RNE=is_interpreting(),
        num_warps=config.num_warps,
        **launch_options(pdl),
    )
    return out


def mla_out_gate(
    o_latent: torch.Tensor,
    w_uv_t: torch.Tensor,
    gate: torch.Tensor,
    use_pdl: bool = False,
    config: MLAGlueConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """W_UV folded into the output and the head gate, one launch.

    gated[0, h*v : (h+1)*v] = dtype(dtype(o_latent[h] @ w_uv_t[h]) * sigmoid(gate[h])), dtype = w_uv_t's.

    Args:
        o_latent: `[1, H, r]` (or `[H, r]`) attention output before W_UV, unit last stride.
        w_uv_t: `[H, r, v]` (the transposed view of kv_b_proj's W_UV; unit stride along r or v).
        gate: the H head-gate logits (`[1, H]`, fp32 from the projection).
        use_pdl: Programmatic Dependent Launch where supported.
        config: tiles; default `choose_config`.
        out: optional contiguous `[1, H*v]` destination in w_uv_t's dtype.
    Returns:
        `[1, H*v]` in w_uv_t's dtype: the input of the MLA dense projection.
    """
    op = "mla_out_gate"
    check_out_gate_inputs(o_latent, w_uv_t, gate, op)
    heads, latent, value = w_uv_t.shape
    shape = (1, heads * value)
    if out is None:
        out = torch.empty(shape, dtype=w_uv_t.dtype, device=w_uv_t.device)
    check_out(out, shape, w_uv_t.dtype, w_uv_t.device, op)
    config = config or choose_config(heads, latent, value)
    check_config(config, op)
    pdl = resolve_pdl(use_pdl, w_uv_t.device)
    mla_out_gate_kernel[(heads, triton.cdiv(value, config.block_v))](
        o_latent,
        w_uv_t,
        gate,
        out,
        latent,
        value,
        o_latent.stride(-2),
        w_uv_t.stride(0),
        w_uv_t.stride(1),
        w_uv_t.stride(2),
        BLOCK_V=config.block_v,
        BLOCK_R=triton.next_power_of_2(latent),
        USE_PDL=pdl,
        PRECISE_SIGMOID=not is_interpreting(),
        MANUAL_RNE=is_interpreting(),
        num_warps=config.num_warps,
        **launch_options(pdl),
    )
    return out
