"""`gemv_prefetch` reaches the output projections' launches, and only theirs (CPU, no kernels run)."""

from __future__ import annotations

from dataclasses import replace

from bubblescope.kernels.gemv import choose_config
from bubblescope.reference_model.fast.blocks import StepOptions, projection_config

OFF = StepOptions(use_pdl=True, fused_moe=True, bf16_gate=True, bf16_lm_head=True, eps=1e-6, mla_scale=0.1)


def test_projection_config_prefetches_only_under_the_switch() -> None:
    for out_features, in_features in ((2560, 4096), (2560, 6144), (1536, 4096)):
        plain = projection_config(out_features, in_features, OFF)
        fetched = projection_config(out_features, in_features, replace(OFF, gemv_prefetch=True))
        tiles = plain or choose_config(1, out_features, in_features)
        assert tiles.l2_prefetch == 0
        # Same strips and warps as without the switch (the kernel's own heuristic on a GPU): only the
        # prefetch differs, so the launch's programs and the products stay the same.
        assert fetched == replace(tiles, l2_prefetch=1)
