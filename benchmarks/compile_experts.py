"""Registers, stack, shared memory and barriers of the experts-launch candidates, compiled offline for
sm_90 (no GPU): the deep kernel (`deep_experts`: pairs in registers, or Triton's pipeliner) and the TMA
kernel (`tma_experts`: elementwise or tensor-core products), at the e256 decode tiles.

Why: one experts program per SM at 255 registers (the deep kernel) leaves 24 of 132 SMs idle at 108
programs, and no room beside the router launch under PDL; how many programs an SM holds (registers,
shared memory) and how many bytes each keeps in flight decide the stream. The device may run another
Triton version than this box: the numbers are this compiler's, a guide rather than the device's truth.

Usage: python3 benchmarks/compile_experts.py [--route-here]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from bubblescope.kernels.moe.paired_kernel import deep_experts_kernel
from bubblescope.kernels.moe.tma_kernel import tma_experts_kernel
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HIDDEN, INTER = 2560, 768
# H200 per SM: 65536 registers, 228 KB shared memory (227 KB to one program), at most 32 programs.
SM_REGISTERS, SM_SHARED = 65536, 233472
POINTERS = {"p_ids": "*i32", "p_weights": "*fp32", "p_logits": "*fp32", "p_bias": "*fp32", "p_y": "*fp32"}
COUNTERS = {"p_counter", "p_norm_counter"}
FLOATS = {"limit", "shared_limit", "scale", "eps"}
ROUTING = dict(TOP_K=8, SLOTS=9, N_GROUP=8, TOPK_GROUP=4, RENORMALIZE=True, BLOCK_G=8, BLOCK_PG=32,
               BLOCK_TOPK=8, NORM_EPILOGUE=False, NORM_CHUNK=1, NORM_CHUNKS=1, USE_PDL=True,
               EARLY_SHARED=True, DOT_FP32=False)  # fmt: skip
# (label, kernel, constexprs, warps): the decode tiles today and the TMA candidates of the sweep.
CANDIDATES = [
    ("deep pairs bi64 w8 (deep_experts)", deep_experts_kernel, dict(BLOCK_I=64, STAGES=0), 8),
    ("deep pipeliner s3 bi64 w8", deep_experts_kernel, dict(BLOCK_I=64, STAGES=3), 8),
    ("tma fma s4 bi64 w8", tma_experts_kernel, dict(BLOCK_I=64, STAGES=4, DOT=False), 8),
    ("tma fma s4 bi64 w8 x plain", tma_experts_kernel, dict(BLOCK_I=64, STAGES=4, X_DESC=False), 8),
    ("tma dot s4 bi64 w4 x plain", tma_experts_kernel, dict(BLOCK_I=64, STAGES=4, DOT=True, X_DESC=False), 4),
    ("tma fma s4 bi32 w4", tma_experts_kernel, dict(BLOCK_I=32, STAGES=4, DOT=False), 4),
    ("tma dot s4 bi64 w4", tma_experts_kernel, dict(BLOCK_I=64, STAGES=4, DOT=True), 4),
    ("tma dot s6 bi64 w4", tma_experts_kernel, dict(BLOCK_I=64, STAGES=6, DOT=True), 4),
    ("tma dot s4 bi32 w4", tma_experts_kernel, dict(BLOCK_I=32, STAGES=4, DOT=True), 4),
]


def cuobjdump() -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def signature_of(fn, constexprs: dict) -> dict[str, str]:
    block_i, block_d, block_dout = constexprs["BLOCK_I"], constexprs["BLOCK_D"], constexprs["BLOCK_DOUT"]
    descriptors = {"d_w13": f"tensordesc<bf16[{block_i},{block_d}]>",
                   "d_w2": f"tensordesc<bf16[{block_dout},{block_i}]>"}  # fmt: skip
    if constexprs.get("X_DESC"):
        descriptors["p_x"] = f"tensordesc<bf16[1,{block_d}]>"
    signature = {}
    for name in fn.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in descriptors:
            signature[name] = descriptors[name]
        elif name in COUNTERS:
            signature[name] = "*i32"
        elif name.startswith("p_"):
            signature[name] = POINTERS.get(name, "*bf16")
        else:
            signature[name] = "fp32" if name in FLOATS else "i32"
    return signature


def resources(fn, constexprs: dict, warps: int) -> dict[str, int]:
    """Registers, stack bytes, shared memory bytes and BAR.SYNC count of one sm_90 compile."""
    source = ASTSource(
        fn=fn,
        signature=signature_of(fn, constexprs),
        constexprs={(fn.arg_names.index(name),): value for name, value in constexprs.items()},
    )
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run([cuobjdump(), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
        sass = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    if found is None:
        raise SystemExit(f"cuobjdump printed no resource usage for {fn.__name__}")
    return dict(
        registers=int(found.group(1)),
        stack=int(found.group(2)),
        shared=int(kernel.metadata.shared),
        barriers=len(re.findall("BAR.SYNC", sass)),
        tma=len(re.findall("UTMALDG", sass)),
        wgmma=len(re.findall("HGMMA", sass)),
    )


def programs_per_sm(usage: dict[str, int], warps: int) -> int:
    """Programs one SM can hold at once, by registers (allocated per warp in 256s) and shared memory."""
    per_warp = -(-usage["registers"] * 32 // 256) * 256
    by_registers = SM_REGISTERS // (per_warp * warps)
    by_shared = SM_SHARED // max(usage["shared"] + 1024, 1)
    return min(by_registers, by_shared, 32)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--route-here", action="store_true", help="with routing_in_experts (ROUTE_HERE)")
    args = parser.parse_args()
    print(f"triton {triton.__version__}, sm_90, e256 (D {HIDDEN}, I {INTER}), ROUTE_HERE={args.route_here}")
    print(f"{'candidate':36s} {'reg':>4s} {'stack':>5s} {'smem KB':>7s} {'/SM':>4s} {'programs':>8s} "
          f"{'BAR':>4s} {'TMA':>4s} {'HGMMA':>5s}")  # fmt: skip
    for label, fn, tiles, warps in CANDIDATES:
        constexprs = {**ROUTING, "ROUTE_HERE": args.route_here, "BLOCK_D": 128, "BLOCK_DOUT": 128, **tiles}
        if fn is deep_experts_kernel:
            constexprs.pop("DOT_FP32")
        else:
            constexprs.setdefault("DOT", False)
            constexprs.setdefault("X_DESC", True)
        usage = resources(fn, constexprs, warps)
        programs = 9 * (INTER // tiles["BLOCK_I"])
        print(
            f"{label:36s} {usage['registers']:4d} {usage['stack']:5d} {usage['shared'] / 1024:7.1f} "
            f"{programs_per_sm(usage, warps):4d} {programs:8d} {usage['barriers']:4d} {usage['tma']:4d} "
            f"{usage['wgmma']:5d}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
