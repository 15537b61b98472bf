"""A minimal user workload for `bubblescope run --workload my_workload:make_workload`.

Run, from this folder (elsewhere: put this folder on PYTHONPATH, or install it):
    bubblescope run --workload my_workload:make_workload --toggles keep_on_device
    bubblescope ablate --workload my_workload:make_workload --all
    bubblescope gate --baseline reports/runs/<a> --current reports/runs/<b>

The protocol (bubblescope/workload.py): `name`, `device`, `switches()`, `prepare(enabled)`,
`step() -> tokens emitted`, `bytes_per_token(enabled)`; optional `reset()`, `tokens()`, `describe()`.
A fuller example with GPU-only switches: bubblescope/examples/toy_workload.py.
"""

from __future__ import annotations

import torch

from bubblescope.workload import SwitchInfo


class GreedyMLP:
    """A two-layer MLP "decoder" whose baseline reads each token back to the host."""

    name = "greedy-mlp"

    def __init__(
        self, hidden: int = 256, vocab: int = 1000, device: str | None = None, seed: int = 0
    ) -> None:
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        generator = torch.Generator().manual_seed(seed)
        # [vocab, hidden], [hidden, hidden], [hidden, vocab]
        self.embed = torch.randn(vocab, hidden, generator=generator).to(self.device)
        self.hidden_weight = (torch.randn(hidden, hidden, generator=generator) / hidden**0.5).to(self.device)
        self.head = (torch.randn(hidden, vocab, generator=generator) / hidden**0.5).to(self.device)
        self.keep_on_device = False
        self.reset()

    def switches(self) -> list[SwitchInfo]:
        return [
            SwitchInfo("keep_on_device", "feed the argmax straight back on the device", "a per-step .item()")
        ]

    def prepare(self, enabled: frozenset[str]) -> None:
        # Never rebuild weights here: ablate calls prepare() between configurations.
        self.keep_on_device = "keep_on_device" in enabled

    def reset(self) -> None:
        self.token = torch.zeros(1, dtype=torch.long, device=self.device)

    def step(self) -> int:
        hidden = torch.relu(self.embed[self.token] @ self.hidden_weight)
        next_token = torch.argmax(hidden @ self.head, dim=-1)
        if self.keep_on_device:
            self.token = next_token
        else:
            # What many serving loops do: the host needs the id, so the GPU drains every step.
            self.token = torch.tensor([int(next_token.item())], device=self.device)
        return 1

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        tensors = (self.hidden_weight, self.head)
        return sum(t.numel() * t.element_size() for t in tensors) + self.embed.shape[1] * 4


def make_workload(preset: str | None = None, device: str | None = None, seed: int = 0) -> GreedyMLP:
    """bubblescope calls this with the keywords it accepts: preset (unused here), device, seed."""
    return GreedyMLP(device=device, seed=seed)
