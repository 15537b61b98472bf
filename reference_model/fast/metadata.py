"""Decode metadata of the fast step: what changes from one token to the next, kept in device buffers.

Two raw values drive a step: the input token and the number of tokens consumed so far (`length`,
which is also the input token's position). From them "metadata preparation" derives what the
kernels read: the RoPE row of this position, the MLA cache slot to write and the rows to attend.

Who moves the raw values forward is what the switches change:
- `no_readback` off (a stock engine): the host reads the new token and the sequence length back
  from the device after every step (two blocking reads), builds the next step's raw values on the
  host and copies them in.
- `no_readback` on: `advance()` (two tiny device ops) writes the sampled token into the input slot
  and bumps the length on the device, so the host never needs the result before enqueuing the next
  step.
- `graph_metadata` off: `prepare()` (and `advance()`) run as eager ops between graph replays;
  on: they are captured inside the step graph.
"""

from __future__ import annotations

import torch

# Index of each raw value in `DecodeMetadata.raw` (one [2] int64 tensor, so one host copy fills both).
TOKEN, LENGTH = 0, 1


class DecodeMetadata:
    """Static device buffers for one batch-1 sequence, plus the RoPE tables they index.

    Args:
        rope_inv_freq: `[R/2]` fp32 inverse frequencies of the MLA rope dims.
        capacity: positions the latent caches hold (table rows).
        device: where the buffers live.

    Attributes:
        raw: `[2]` int64 [input token, length] (written by the host or by `advance`).
        positions: `[1]` int64 position of the input token (cache slot of its latent row).
        seq_lens: `[1]` int32 rows each MLA layer attends (length + 1).
        cos, sin: `[1, R/2]` fp32 rotary factors of this position.
        next_token: `[1]` int64 the step's greedy token (written by the lm_head kernel).
    """

    def __init__(self, rope_inv_freq: torch.Tensor, capacity: int, device: torch.device) -> None:
        # Same arithmetic as InterleavedRope: fp32 position x fp32 inverse frequency, then cos / sin.
        angles = torch.arange(capacity, device=device, dtype=torch.float32)[:, None] * rope_inv_freq.to(
            device
        )
        # [capacity, R/2]
        self.cos_table, self.sin_table = angles.cos(), angles.sin()
        self.raw = torch.zeros(2, dtype=torch.int64, device=device)
        self.positions = torch.zeros(1, dtype=torch.int64, device=device)
        self.seq_lens = torch.ones(1, dtype=torch.int32, device=device)
        half = rope_inv_freq.shape[0]
        self.cos = torch.ones(1, half, dtype=torch.float32, device=device)
        self.sin = torch.zeros(1, half, dtype=torch.float32, device=device)
        self.next_token = torch.zeros(1, dtype=torch.int64, device=device)

    @property
    def input_ids(self) -> torch.Tensor:
        """`[1]` int64 view of the input token."""
        return self.raw[TOKEN : TOKEN + 1]

    @property
    def length(self) -> torch.Tensor:
        """`[1]` int64 view of the tokens consumed so far."""
        return self.raw[LENGTH : LENGTH + 1]

    def prepare(self) -> None:
        """Derive positions, seq_lens and this position's rope row from `raw` (device ops only)."""
        self.positions.copy_(self.length)
        self.seq_lens.copy_(self.length + 1)
        torch.index_select(self.cos_table, 0, self.length, out=self.cos)
        torch.index_select(self.sin_table, 0, self.length, out=self.sin)

    def advance(self) -> None:
        """Next step's raw values from this step's result, on the device: token <- sampled, length += 1."""
        self.input_ids.copy_(self.next_token)
        self.length.add_(1)
