"""Toy script for the `bubblescope profile` CLI tests; written without bubblescope in mind.

Usage: cli_loop.py N_TOKENS MODE   (MODE: ok | raise | exit3 | explicit | marker)
"""

import sys

import torch


def decode_one_token(state):
    nxt = state.roll(1) + 1.0
    done = bool(nxt.max() > 1000.0)  # READ-bool
    return nxt, done


def sample_ids(state):
    return state[:3].long().tolist()  # READ-tolist


def main():
    n_tokens, mode = int(sys.argv[1]), sys.argv[2]
    state = torch.zeros(16)
    for index in range(n_tokens):
        if mode == "explicit":
            import bubblescope

            bubblescope.step()
        with torch.profiler.record_function(f"decode_step_{index}"):
            state, done = decode_one_token(state)
            sample_ids(state)  # CALL-sample
        if mode == "raise" and index == n_tokens - 2:
            raise RuntimeError("planted failure at token " + str(index))  # RAISE
    assert __name__ == "__main__"
    if mode == "exit3":
        sys.exit(3)


if __name__ == "__main__":
    main()  # CALL-main
