"""All-reduce for tensor-parallel decode: NCCL (the reference) and a one-shot over peer memory.

At batch 1 every all-reduce moves one hidden row (5 KB bf16 for Flash): its cost is latency, not
bandwidth. `make_all_reduce(kind, group)` returns the chosen implementation behind one signature.
"""

from bubblescope.kernels.allreduce.env import NO_MULTICAST_ENV, apply_no_multicast_env
from bubblescope.kernels.allreduce.naive import all_reduce_naive
from bubblescope.kernels.allreduce.ops import ALL_REDUCE_KINDS, AllReduceError, make_all_reduce

__all__ = [
    "ALL_REDUCE_KINDS",
    "AllReduceError",
    "NO_MULTICAST_ENV",
    "all_reduce_naive",
    "apply_no_multicast_env",
    "make_all_reduce",
]
