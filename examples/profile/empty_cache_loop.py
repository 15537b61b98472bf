"""A decode-like loop that calls `torch.cuda.empty_cache()` every step (a habit seen in serving code to
keep memory down): each call synchronises the device. Marks its steps with the bare
`bubblescope.step()`, so it runs unchanged with or without bubblescope profiling it:

    bubblescope profile --out runs/empty_cache -- python examples/profile/empty_cache_loop.py
"""

from __future__ import annotations

import sys

import torch

import bubblescope


def decode(weights: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    for weight in weights:
        hidden = torch.tanh(hidden @ weight)
    return hidden


def main(steps: int = 24) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    weights = torch.randn(8, 2048, 2048, device=device) / 45.0  # [layers, width, width]
    hidden = torch.randn(1, 2048, device=device)
    for _ in range(steps):
        bubblescope.step()
        hidden = decode(weights, hidden)
        # A transient 256 MiB working buffer, released to the caching allocator when it goes out of use.
        scratch = torch.randn(64 << 20 if device == "cuda" else 1 << 16, device=device)
        hidden = hidden + scratch[:2048] * 0
        del scratch
        if device == "cuda":
            torch.cuda.empty_cache()  # READ-empty-cache
    print("done", float(hidden.norm()), "reserved MiB after the loop:", torch.cuda.memory_reserved() >> 20 if device == "cuda" else 0)  # noqa: E501


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 24)
