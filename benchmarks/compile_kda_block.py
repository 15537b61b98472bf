"""Registers, stack, barriers and L2 prefetches of the KDA block kernel, compiled offline for sm_90 (no GPU).

Why: the one-launch kernel's grid is every program the GPU holds at once, so its registers per thread
decide the grid (65536 / (32 x 4 warps x registers) programs per SM), and the phases' peaks add up in
one kernel: phase 1's GEMV accumulator, the phase-2 state slice and the phase-3 tile held across the
barriers. This compiles PHASE 0 (one launch) and the three single-phase variants with the decode
step's launch constants on ling3-flash-e256 (H = 32, K = V = 128, 4 V splits, the GEMVs' 8 x 512 and
4 x 512 strips) and prints what `cuobjdump -res-usage` and the SASS say. The device may run another
Triton version than this box: the numbers are this compiler's, a guide, not the device's truth.

Usage: python3 benchmarks/compile_kda_block.py [--out-block-n 4]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from bubblescope.kernels.kda_block.kernel import kda_block_kernel
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

FP32_POINTERS = {"p_a_log", "p_dt_bias", "p_state", "p_ws_o"}
INT_POINTERS = {"p_ws_count", "p_barrier"}
FLOATS = {"lower_bound", "scale", "eps"}
# Integer arguments that are not multiples of 16 at Flash shapes (none today: H = 32, K = V = 128).
SCALARS: set[str] = set()
FLASH = dict(NUM_V_SPLITS=4, KW=4, BLOCK_T=4, BLOCK_K=128, BLOCK_V=128, BLOCK_VS=32, IN_BLOCK_N=8,
             IN_BLOCK_K=512, OUT_BLOCK_K=512, PREFETCH_LINES=256, USE_PDL=True)  # fmt: skip


def cuobjdump() -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def signature(constexprs: dict) -> dict[str, str]:
    kinds = {}
    for name in kda_block_kernel.arg_names:
        if name in constexprs:
            kinds[name] = "constexpr"
        elif name in FP32_POINTERS:
            kinds[name] = "*fp32"
        elif name in INT_POINTERS:
            kinds[name] = "*i32"
        elif name.startswith("p_"):
            kinds[name] = "*bf16"
        else:
            kinds[name] = "fp32" if name in FLOATS else "i32"
    return kinds


def resources(constexprs: dict, max_registers: int | None = None) -> str:
    """'REG r STACK s BAR.SYNC b ATOMS a PREFETCH p' of one sm_90 compile (4 warps)."""
    kinds = signature(constexprs)
    # What the runtime specialises on at these shapes: 16-byte aligned pointers, every size and
    # stride a multiple of 16 (the scalar ones excepted), so the weight loads vectorise as on the GPU.
    aligned = {
        (index,): [["tt.divisibility", 16]]
        for index, name in enumerate(kda_block_kernel.arg_names)
        if kinds[name] not in ("constexpr", "fp32") and name not in SCALARS
    }
    source = ASTSource(
        fn=kda_block_kernel,
        signature=kinds,
        constexprs={(kda_block_kernel.arg_names.index(n),): v for n, v in constexprs.items()},
        attrs=aligned,
    )
    kernel = triton.compile(
        source,
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": 4, **({"maxnreg": max_registers} if max_registers else {})},
    )
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run([cuobjdump(), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
        sass = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    if found is None:
        raise SystemExit("cuobjdump printed no resource usage")
    registers = int(found.group(1))
    per_sm = 65536 // (((registers * 32 + 255) // 256) * 256 * 4)
    return (
        f"REG {registers} (<= {per_sm} programs/SM) STACK {found.group(2)} "
        f"BAR.SYNC {len(re.findall('BAR.SYNC', sass))} ATOM {len(re.findall(r'ATOMG|RED', sass))} "
        f"L2 prefetch {len(re.findall('CCTL', sass))} (PTX {kernel.asm['ptx'].count('prefetch.global.L2')})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-block-n", type=int, default=4, help="o_proj strip rows (decoder GEMV: 4)")
    args = parser.parse_args()
    base = {**FLASH, "OUT_BLOCK_N": args.out_block_n}
    print(f"triton {triton.__version__}, sm_90, 4 warps, o_proj strips of {args.out_block_n} rows")
    for label, extra in (
        ("PHASE 0 (one launch), L2 prefetch", {"PHASE": 0, "L2_PREFETCH": True}),
        ("PHASE 0 (one launch), no L2 prefetch", {"PHASE": 0, "L2_PREFETCH": False}),
        ("PHASE 0, L2 prefetch, 16-row in_proj strips", {"PHASE": 0, "L2_PREFETCH": True, "IN_BLOCK_N": 16}),
        (
            "PHASE 0, L2 prefetch, 4x1024 in_proj strips",
            {"PHASE": 0, "L2_PREFETCH": True, "IN_BLOCK_N": 4, "IN_BLOCK_K": 1024},
        ),
        ("PHASE 1 (in_proj strips)", {"PHASE": 1, "L2_PREFETCH": False}),
        ("PHASE 2 (KDA slice)", {"PHASE": 2, "L2_PREFETCH": False}),
        ("PHASE 3 (o_proj strips)", {"PHASE": 3, "L2_PREFETCH": False}),
    ):
        print(f"{label:46s} {resources({**base, **extra})}")
    capped = {**base, "PHASE": 0, "L2_PREFETCH": True}
    print(f"{'PHASE 0, L2 prefetch, maxnreg 128':46s} {resources(capped, max_registers=128)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
