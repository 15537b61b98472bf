"""Registers, stack and the PDL order of the decode GEMV's variants, compiled offline for sm_90 (no GPU).

Why: the 2560-row projections need all of their 640 programs (4 warps, 4-row strips) resident at once,
5 per SM, i.e. <= 96 registers; a tile or prefetch variant that costs more registers loses programs,
not just time. For each `benchmarks/bench_gemv_2560.py` variant this compiles `gemv_kernel` with the
decode step's launch constants (bf16, one row, PDL on) and prints registers, stack, how many
`prefetch.global.L2` the PTX holds and whether they all come before `griddepcontrol.wait` (the point of
`GemvConfig.l2_prefetch`: the strip is requested while the previous kernel still runs). This box's Triton may
differ from the device's (3.6): a guide, not the device's truth.

Usage: python3 benchmarks/compile_gemv.py
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from bubblescope.kernels.gemv.kernel import gemv_kernel
from bubblescope.kernels.gemv.ops import prefetch_constants
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemv_2560_variants import ALONE_VARIANTS  # noqa: E402


def cuobjdump() -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def compile_variant(config) -> str:
    """'REG r STACK s, p prefetches, all before wait: yes/no' of one sm_90 compile."""
    constexprs = dict(
        BLOCK_M=1,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        USE_PDL=True,
        DOT_FP32=False,
        ACC_2D=config.acc_2d,
        EVICT_FIRST=config.evict_first,
        PDL_TRIGGER=config.pdl_trigger,
        **prefetch_constants(config),
        PAIRS=config.pairs,
    )
    signature = {
        name: "constexpr" if name in constexprs else ("*bf16" if name.startswith("p_") else "i32")
        for name in gemv_kernel.arg_names
    }
    source = ASTSource(
        fn=gemv_kernel,
        signature=signature,
        constexprs={(gemv_kernel.arg_names.index(n),): v for n, v in constexprs.items()},
    )
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": config.num_warps})
    ptx = kernel.asm["ptx"]
    prefetches = [m.start() for m in re.finditer(r"prefetch\.global\.L2", ptx)]
    wait = ptx.find("griddepcontrol.wait")
    before = "yes" if prefetches and wait > max(prefetches) else ("-" if not prefetches else "NO")
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run([cuobjdump(), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    if found is None:
        raise SystemExit("cuobjdump printed no resource usage")
    registers, stack = found.groups()
    return f"REG {registers:>3s} STACK {stack}  prefetch PTX {len(prefetches):3d}  before wait {before}"


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    print(
        f"triton {triton.__version__}, sm_90, bf16 weights, one row, PDL (N and K are not compile constants)"
    )
    for name, config in ALONE_VARIANTS.items():
        print(f"{name:28s} {config.num_warps} warps  {compile_variant(config)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
