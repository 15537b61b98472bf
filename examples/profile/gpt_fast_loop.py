"""A gpt-fast-style decode loop profiled with the Python API: `torch.compile(mode="reduce-overhead")`
decode of a tiny model, and one `.item()` per token (the host reads each token to decide whether to
stop), exactly the habit that leaves the GPU idle while the host waits.

    python examples/profile/gpt_fast_loop.py --out runs/gpt_fast [--no-compile] [--no-read-sites]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

import bubblescope


class TinyDecoder(nn.Module):
    """Embedding -> a few MLP blocks with a running state -> logits. [1] token id in, [1, vocab] out."""

    def __init__(self, vocab: int = 4096, width: int = 1024, layers: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)) for _ in range(layers))  # noqa: E501
        self.head = nn.Linear(width, vocab)

    def forward(self, token: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.embed(token) + state  # [1, width]
        for block in self.blocks:
            hidden = hidden + block(hidden)
        return self.head(hidden), hidden


def decode_one_token(model: nn.Module, token: torch.Tensor, state: torch.Tensor):
    logits, state = model(token, state)
    return logits.argmax(dim=-1), state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="runs/gpt_fast")
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--no-read-sites", action="store_true")
    parser.add_argument("--active", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=4)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = TinyDecoder().to(device, dtype).eval()
    step_fn = decode_one_token if args.no_compile else torch.compile(decode_one_token, mode="reduce-overhead")
    token = torch.tensor([1], device=device)
    state = torch.zeros(1, 1024, device=device, dtype=dtype)
    emitted = []
    with torch.inference_mode(), bubblescope.profile(
        out=args.out, active=args.active, warmup=args.warmup, read_sites=not args.no_read_sites
    ) as prof:
        for _ in range(args.tokens):
            prof.step()
            token, state = step_fn(model, token, state)
            # CUDA graphs reuse their output buffers: keep copies across calls (as gpt-fast does).
            token, state = token.clone(), state.clone()
            next_id = token.item()  # READ-token
            emitted.append(next_id)
            if next_id == -1:
                break
        started = time.perf_counter()
    print(f"{len(emitted)} tokens; session closed in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
