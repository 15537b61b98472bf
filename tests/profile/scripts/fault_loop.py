"""Toy script for the profiled-script fault tests; it ends its process in the way MODE names.

Usage: fault_loop.py N_TOKENS MODE
MODE: os_exit (os._exit(7) mid-run) | sigterm (SIGTERM to itself) | fork (a child runs the loop too
and exits 5; the parent waits and exits 0) | thread (a non-daemon thread still running at the end)
| segv (a segmentation fault) | hold (sleeps, so a second profile of the same folder can run).
"""

import os
import signal
import sys
import threading
import time

import torch


def decode_one_token(state):
    return state.roll(1) + 1.0


def main():
    n_tokens, mode = int(sys.argv[1]), sys.argv[2]
    state = torch.zeros(16)
    child = os.fork() if mode == "fork" else None
    for index in range(n_tokens):
        state = decode_one_token(state)
        float(state.sum())
        if index == n_tokens - 2:
            if mode == "os_exit":
                os._exit(7)
            if mode == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            if mode == "segv":
                import ctypes

                ctypes.string_at(0)
            if mode == "hold":
                time.sleep(float(os.environ.get("HOLD_S", "3")))
    if child == 0:
        sys.exit(5)
    if child:
        _, status = os.waitpid(child, 0)
        print(f"child exited {os.waitstatus_to_exitcode(status)}")
    if mode == "thread":
        threading.Thread(target=lambda: (time.sleep(0.5), print("thread done")), daemon=False).start()


if __name__ == "__main__":
    main()
