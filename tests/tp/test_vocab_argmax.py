"""Vocabulary-parallel argmax equals torch.argmax over the full row, ties to the lowest global id."""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.tp.comm import TPComm
from bubblescope.reference_model.tp.lm_head import vocab_parallel_argmax


class _RecordingComm(TPComm):
    """Stands in for the group: pass 1 records each rank's pairs, pass 2 returns all of them stacked."""

    def __init__(self, world_size: int, gathered: torch.Tensor | None = None) -> None:
        super().__init__(rank=0, world_size=world_size, device=torch.device("cpu"))
        self.gathered = gathered
        self.sent: torch.Tensor | None = None

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        self.sent = tensor.clone()
        return tensor.unsqueeze(0) if self.gathered is None else self.gathered


def _parallel_argmax(logits: torch.Tensor, world_size: int) -> list[torch.Tensor]:
    block = logits.shape[-1] // world_size
    sent = []
    for rank in range(world_size):
        recorder = _RecordingComm(world_size)
        vocab_parallel_argmax(logits[..., rank * block : (rank + 1) * block], rank * block, recorder)
        sent.append(recorder.sent)
    gathered = torch.stack(sent)
    results = []
    for rank in range(world_size):
        comm = _RecordingComm(world_size, gathered)
        local = logits[..., rank * block : (rank + 1) * block]
        results.append(vocab_parallel_argmax(local, rank * block, comm))
    return results


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_random_rows_match_torch_argmax(world_size):
    generator = torch.Generator().manual_seed(world_size)
    # [B, T, V]
    logits = torch.randn(2, 3, 12 * world_size, generator=generator)
    for result in _parallel_argmax(logits, world_size):
        assert torch.equal(result, logits.argmax(dim=-1))


def test_ties_across_ranks_go_to_the_lowest_global_index():
    logits = torch.zeros(1, 1, 16)
    # the same maximum in rank 1's block (ids 9, 12) and rank 3's block (id 13)
    logits[0, 0, [9, 12, 13]] = 5.0
    for result in _parallel_argmax(logits, 4):
        assert result.item() == 9 == logits.argmax(dim=-1).item()


def test_max_in_the_last_rank_and_fp32_values_survive_the_pairing():
    logits = torch.full((1, 8), -1.0)
    # two values one fp32 ulp apart must not be merged by the fp64 pairing
    logits[0, 2] = 1.0
    logits[0, 7] = torch.nextafter(torch.tensor(1.0), torch.tensor(2.0)).item()
    for result in _parallel_argmax(logits, 2):
        assert result.tolist() == [7]
