"""The decode GEMV variants `bench_gemv_2560.py` times and `compile_gemv.py` compiles (one list, so the
registers printed offline belong to the rows timed on the device).

Names: bn = rows per program (BLOCK_N), bk = columns per tile (BLOCK_K), w = warps, pf = L2 prefetch
mode before `gdc_wait` (kernels/gemv/prefetch.py: 1 plain, 2 evict_last), pairs = two tiles in flight
per program (kernel.py row_strip_2d_pairs). "base" is what the decoder ran for a 2560-row projection
until 2026-12-03 (640 programs of 4 rows x 512 columns); since then it runs "bn2 bk1024 w4"
(ops.NARROW_STRIP: 1280 programs), the fastest alone in the first H200 sweep (RESULTS.md, round 4).
"""

from __future__ import annotations

from bubblescope.kernels.gemv import GemvConfig

G = GemvConfig

ALONE_VARIANTS: dict[str, GemvConfig] = {
    "base bn4 bk512 w4": G(4, 512, 4),
    "bn4 bk512 w4 pf1": G(4, 512, 4, l2_prefetch=1),
    "bn4 bk512 w4 pf2": G(4, 512, 4, l2_prefetch=2),
    "bn4 bk512 w4 pairs": G(4, 512, 4, pairs=True),
    "bn4 bk512 w4 pairs pf1": G(4, 512, 4, l2_prefetch=1, pairs=True),
    "bn4 bk1024 w4 pf1": G(4, 1024, 4, l2_prefetch=1),
    "bn2 bk1024 w4": G(2, 1024, 4),
    "bn2 bk1024 w4 pf1": G(2, 1024, 4, l2_prefetch=1),
    "bn4 bk256 w4 pf1": G(4, 256, 4, l2_prefetch=1),
    "bn8 bk512 w4": G(8, 512, 4),
    "bn8 bk512 w4 pf1": G(8, 512, 4, l2_prefetch=1),
}

# In the KDA block chain (in_proj -> kda_decode -> o_proj -> add_rmsnorm): the old tiles, today's
# (bn2 bk1024), the prefetch modes, two tiles in flight; "none" (no o_proj) gives o_proj's marginal cost.
CHAIN_VARIANTS: tuple[str, ...] = (
    "base bn4 bk512 w4",
    "bn2 bk1024 w4",
    "bn4 bk512 w4 pf1",
    "bn4 bk512 w4 pf2",
    "bn4 bk512 w4 pairs",
    "bn4 bk512 w4 pairs pf1",
    "bn2 bk1024 w4 pf1",
)
