"""GPU: a real-size (ling3-tiny, ~16 GB bf16) checkpoint round trip without staging it on the host."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
import torch
from bubblescope.reference_model.checkpoint_writer import write_synthetic_checkpoint
from bubblescope.reference_model.config import LING3_TINY
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.loader import load_checkpoint

SHARD_BYTES = 1 << 30


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.gpu
def test_tiny_round_trip_on_cuda_streams_shards(tmp_path: Path) -> None:
    source = build_model(
        LING3_TINY, "cuda", seed=0, router_dtype=torch.bfloat16, lm_head_dtype=torch.bfloat16
    )
    total_bytes = sum(t.numel() * t.element_size() for t in source.state_dict().values())
    rss_before = _peak_rss_bytes()
    write_synthetic_checkpoint(source, tmp_path, max_shard_bytes=SHARD_BYTES)
    samples = {
        name: tensor.detach().clone()
        for name, tensor in source.state_dict().items()
        if name.endswith(("experts.7.down_proj.weight", "lm_head.weight", "attention.A_log"))
    }
    del source
    torch.cuda.empty_cache()
    target = build_model(
        LING3_TINY, "cuda", seed=1, router_dtype=torch.bfloat16, lm_head_dtype=torch.bfloat16
    )
    report = load_checkpoint(target, tmp_path)
    rss_growth = _peak_rss_bytes() - rss_before
    state = target.state_dict()
    for name, expected in samples.items():
        assert state[name].is_cuda
        assert torch.equal(state[name], expected), name
    assert report.bytes_read == total_bytes
    assert len(report.shards) >= total_bytes // SHARD_BYTES
    # One shard (writer) or one shard's pages (reader) at a time, never the ~16 GB checkpoint.
    assert rss_growth < 4 * SHARD_BYTES, f"host peak grew by {rss_growth / 1e9:.1f} GB"
