"""Each TP rank loads only its blocks of a safetensors checkpoint and gets the random build's shard."""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.checkpoint_writer import write_synthetic_checkpoint
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.init import build_model
from bubblescope.reference_model.tp.build import build_tp_model
from bubblescope.reference_model.tp.comm import TPComm

from bubblescope.errors import CheckpointError


@pytest.fixture(scope="module")
def debug_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    # small shards so the rank reads blocks across several files
    write_synthetic_checkpoint(
        build_model(get_preset("debug"), "cpu", seed=0), folder, max_shard_bytes=200_000
    )
    return folder


@pytest.mark.parametrize("world_size", [2, 4])
def test_rank_loads_exactly_its_shard(debug_checkpoint, world_size):
    for rank in range(world_size):
        comm = TPComm(rank=rank, world_size=world_size, device=torch.device("cpu"))
        loaded = build_tp_model(get_preset("debug"), comm, checkpoint=debug_checkpoint).state_dict()
        drawn = build_tp_model(get_preset("debug"), comm, seed=0).state_dict()
        assert loaded.keys() == drawn.keys()
        for name, tensor in drawn.items():
            assert torch.equal(loaded[name], tensor), f"rank {rank}/{world_size}: {name} differs"


def test_checkpoint_of_another_shape_is_refused_in_one_line(tmp_path):
    small = get_preset("debug").with_(name="debug-narrow", moe_intermediate_size=16)
    write_synthetic_checkpoint(build_model(small, "cpu", seed=0), tmp_path)
    comm = TPComm(rank=0, world_size=2, device=torch.device("cpu"))
    with pytest.raises(
        CheckpointError,
        match=r"experts\.0\.\w+_proj\.weight: checkpoint shape \[\d+, \d+\], this model needs .*split on dim",
    ):
        build_tp_model(get_preset("debug"), comm, checkpoint=tmp_path)
