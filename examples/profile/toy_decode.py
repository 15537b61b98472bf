"""A toy decode loop, written without bubblescope in mind, to try profile → report → diff → gate on any
machine (CPU or GPU, a second or two): one token per call of `decode_one_token`, a stop check that
reads the device every step, and with `--extra-read` one more read per step (a logged `.item()`).

    bubblescope profile --out runs/toy --step-frame decode_one_token -- python examples/profile/toy_decode.py
    bubblescope profile --out runs/toy_extra --step-frame decode_one_token \
        -- python examples/profile/toy_decode.py --extra-read
    bubblescope diff runs/toy runs/toy_extra
    bubblescope gate --baseline runs/toy --current runs/toy_extra
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

VOCAB, WIDTH = 512, 256
EOS = VOCAB - 1


def decode_one_token(model: nn.Module, token: torch.Tensor) -> torch.Tensor:
    """[1] token id in, [1] next token id out (greedy)."""
    logits = model(token)  # [1, VOCAB]
    return logits.argmax(dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--extra-read", action="store_true", help="read the token's value every step")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, VOCAB))
    model = model.to(device).eval()
    token = torch.tensor([1], device=device)
    logged = []
    with torch.inference_mode():
        for _ in range(args.tokens):
            token = decode_one_token(model, token)
            if args.extra_read:
                logged.append(token.item())  # READ-extra
            if bool((token == EOS).any()):  # READ-stop
                break
    print(f"{args.tokens} steps, {len(logged)} tokens logged")


if __name__ == "__main__":
    main()
