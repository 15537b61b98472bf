"""Registers, stack and block barriers of the `norm_epilogue` kernels, compiled offline for sm_90 (no GPU).

Why: a kernel's registers per thread decide how many of its programs an SM holds at once, and the decode
GEMV needs all of its grid resident to keep enough bytes in flight (640 programs of 4 warps for the
2560-row projections on 132 SMs: 5 per SM, i.e. at most 96 registers). The epilogue's code runs once, in
one program, but its registers count for every program of the launch. This compiles each kernel with
the launch constants the decode step uses on ling3-flash-e256 (all-on tiles) and prints what
`cuobjdump -res-usage` and the SASS say. The device may run another Triton version than this box: the
numbers are this compiler's, a guide rather than the device's truth.

Usage: python3 benchmarks/compile_norm_epilogue.py [--chunk 512]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from bubblescope.kernels.gemv.kernel import gemv_kernel
from bubblescope.kernels.gemv.norm_epilogue import gemv_norm_epilogue_kernel
from bubblescope.kernels.moe.fused_kernel import fused_experts_kernel
from bubblescope.kernels.moe.paired_kernel import deep_experts_kernel
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HIDDEN = 2560
# Argument types by name (the decode step's: bf16 activations and weights, fp32 MoE accumulator).
POINTERS = {"p_ids": "*i32", "p_weights": "*fp32", "p_logits": "*fp32", "p_bias": "*fp32"}
COUNTERS = {"p_counter", "p_norm_counter"}
FLOATS = {"limit", "shared_limit", "scale", "eps"}
ROUTING = dict(TOP_K=8, SLOTS=9, ROUTE_HERE=False, N_GROUP=8, TOPK_GROUP=4, RENORMALIZE=True, BLOCK_G=8,
               BLOCK_PG=32, BLOCK_TOPK=8)  # fmt: skip
GEMV = dict(BLOCK_M=1, BLOCK_N=4, BLOCK_K=512, USE_PDL=True, DOT_FP32=False, ACC_2D=True, EVICT_FIRST=False,
            PDL_TRIGGER=1)  # fmt: skip


def cuobjdump() -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def signature_of(fn, constexprs: dict, y_type: str) -> dict[str, str]:
    signature = {}
    for name in fn.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in COUNTERS:
            signature[name] = "*i32"
        elif name == "p_y":
            signature[name] = y_type
        elif name.startswith("p_"):
            signature[name] = POINTERS.get(name, "*bf16")
        else:
            signature[name] = "fp32" if name in FLOATS else "i32"
    return signature


def resources(fn, constexprs: dict, warps: int, y_type: str) -> str:
    """'REG r STACK s BAR.SYNC b' of one sm_90 compile."""
    source = ASTSource(
        fn=fn,
        signature=signature_of(fn, constexprs, y_type),
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
    return f"REG {found.group(1)} STACK {found.group(2)} BAR.SYNC {len(re.findall('BAR.SYNC', sass))}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk", type=int, default=512, help="epilogue chunk (NormEpilogue.chunks)")
    args = parser.parse_args()
    norm = dict(NORM_CHUNK=args.chunk, NORM_CHUNKS=triton.cdiv(HIDDEN, args.chunk))
    off = dict(NORM_CHUNK=1, NORM_CHUNKS=1)
    rows = [
        ("gemv_kernel (2560-row projection)", gemv_kernel, GEMV, 4, "*bf16"),
        ("gemv_norm_epilogue_kernel", gemv_norm_epilogue_kernel, {**GEMV, **norm}, 4, "*bf16"),
    ]
    for epilogue in (False, True):
        extra = {"NORM_EPILOGUE": epilogue, **(norm if epilogue else off)}
        label = "with" if epilogue else "without"
        deep = dict(BLOCK_I=64, BLOCK_D=128, BLOCK_DOUT=128, USE_PDL=True, STAGES=0, EARLY_SHARED=True)
        fused = dict(BLOCK_I=32, BLOCK_D=128, BLOCK_DOUT=128, USE_PDL=True, ACC_2D=True, EARLY_SHARED=True)
        rows.append(
            (
                f"deep_experts_kernel {label} epilogue",
                deep_experts_kernel,
                {**deep, **ROUTING, **extra},
                8,
                "*fp32",
            )
        )
        rows.append(
            (
                f"fused_experts_kernel {label} epilogue",
                fused_experts_kernel,
                {**fused, **ROUTING, **extra},
                8,
                "*fp32",
            )
        )
    print(f"triton {triton.__version__}, sm_90, epilogue chunk {args.chunk}")
    for label, fn, constexprs, warps, y_type in rows:
        print(f"{label:45s} {warps} warps  {resources(fn, constexprs, warps, y_type)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
