"""Toy decode loop for the profile API tests: reads planted at lines marked `# READ-<name>`.

Usage: api_loop.py OUT FORM   (FORM: with | bare | module)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import fakelib  # noqa: E402

import bubblescope  # noqa: E402


def read_helper(values):
    return values.tolist()  # READ-helper-tolist


def one_token(state):
    logits = state * 2.0 + 1.0
    token = logits.argmax().item()  # READ-item
    read_helper(logits[:2])  # CALL-helper
    positions = torch.nonzero(logits > 2.0)  # READ-nonzero
    host = logits.cpu()  # READ-cpu
    fakelib.count_positive(logits)  # READ-lib-call
    wider = logits.to(torch.float64)  # not a read: dtype only
    state = state + wider.float() * 0 + positions.numel() * 0 + host[0] * 0
    return state + token * 0


def main(out, form):
    state = torch.arange(8, dtype=torch.float32)
    with bubblescope.profile(out=out, active=3, warmup=1, progress=False) as prof:
        for _ in range(6):
            if form == "with":
                with prof.step():
                    state = one_token(state)
            elif form == "bare":
                prof.step()
                state = one_token(state)
            else:
                bubblescope.step()
                state = one_token(state)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
