"""Registers, stack and block barriers of the `kda_norm_in_oproj` kernels, compiled offline for sm_90.

Why: the o_proj GEMV needs its 640 programs resident (5 per SM: at most 96 registers per thread at 4 warps)
to keep its weight stream deep, and the prologue adds loads and math per x element; the KDA split kernel
loses its norm. Compiled with the decode step's launch constants on ling3-flash-e256 (H = 32, K = V = 128,
the 2560 x 4096 o_proj) with this box's Triton; the device may run another version (a guide, not its truth).

Usage: python3 benchmarks/compile_kda_norm.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import triton
from bubblescope.kernels.gemv.head_norm_prologue import gemv_head_norm_kernel
from bubblescope.kernels.kda_decode.split_kernel import kda_decode_split_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compile_norm_epilogue as offline  # noqa: E402

FP32_POINTERS = ("p_x", "p_sumsq", "p_state", "p_ws_o", "p_a_log", "p_dt_bias")
KDA = dict(KW=4, BLOCK_T=4, BLOCK_K=128, BLOCK_V=128, USE_PDL=True, PREFETCH_STATE=True)
PROLOGUE = dict(BLOCK_N=4, BLOCK_K=512, USE_PDL=True, EVICT_FIRST=False, PDL_TRIGGER=1, PREFETCH=0,
                PREFETCH_LINES=1, NORM_CHUNK=1, NORM_CHUNKS=1, USE_EPILOGUE=False, HEAD_DIM=128)  # fmt: skip


def main() -> int:
    offline.POINTERS.update({name: "*fp32" for name in FP32_POINTERS})
    offline.COUNTERS.add("p_ws_count")
    offline.FLOATS.update({"norm_eps", "lower_bound"})
    print(f"triton {triton.__version__}, sm_90")
    for splits in (4, 8):
        split = {**KDA, "NUM_V_SPLITS": splits, "BLOCK_VS": 128 // splits}
        variants = (("norm in kda (today)", False, False), ("un-normed, late ticket", True, False))
        for label, consumer, early in (*variants, ("un-normed, early ticket", True, True)):
            offline.POINTERS["p_out"] = "*fp32" if consumer else "*bf16"
            constants = {**split, "NORM_IN_CONSUMER": consumer, "EARLY_TICKET": early}
            usage = offline.resources(kda_decode_split_kernel, constants, 4, "*bf16")
            print(f"kda_decode_split_kernel nv{splits} {label:26s} 4 warps  {usage}")
        usage = offline.resources(gemv_head_norm_kernel, {**PROLOGUE, "PARTS": splits}, 4, "*bf16")
        print(f"gemv_head_norm_kernel P={splits} (2560 x 4096, bn4 bk512)    4 warps  {usage}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
