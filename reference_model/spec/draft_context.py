"""What a draft model sees after each verify (or after prefill), all of it on the device."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch


@dataclass
class DraftContext:
    """The last target pass, handed to the draft so it can propose the next block.

    Attributes:
        final_hidden: [1, T, D] target hidden after model.norm at `positions`.
        captured: target layer index -> [1, T, D] residual stream after that layer (DSpark).
        positions: [1, T] int64 device positions of the window (prefill: 0..P-1; verify: p..p+B).
        next_tokens: [T] int64: entry i is the token at positions[i] + 1 for i <= last; -1 past it.
            next_tokens[last] is the new anchor (the bonus token of the verify).
        last: 0-d int64 device index of the last committed position in this window.
        key_len: host upper bound on positions[last] + 1 (attention windows; never read from device).
    """

    final_hidden: torch.Tensor
    positions: torch.Tensor
    next_tokens: torch.Tensor
    last: torch.Tensor
    key_len: int
    captured: dict[int, torch.Tensor] = field(default_factory=dict)

    def anchor(self) -> torch.Tensor:
        """[1] the token the next verify starts with."""
        return self.next_tokens.index_select(0, self.last.view(1))

    def anchor_position(self) -> torch.Tensor:
        """[1, 1] the anchor's position (= committed length)."""
        return self.positions.index_select(1, self.last.view(1)) + 1


class Draft(Protocol):
    """A draft model: proposes `block` tokens after the anchor, on the device, without host reads."""

    block: int
    kind: str
    capture_layers: tuple[int, ...]

    def propose(self, context: DraftContext) -> torch.Tensor:
        """-> [1, block] int64 drafted tokens for positions anchor_position + 1 ..."""
        ...

    def key_slack(self) -> int:
        """Extra positions past context.key_len the draft writes (cache capacity planning)."""
        ...
