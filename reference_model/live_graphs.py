"""Every CUDA graph the reference model captures, so a TP rank can release them before it leaves its group.

A live graph that captured an NCCL collective keeps the communicator in use: `destroy_process_group()`
(`ncclCommDestroy`) then waits forever (pytorch/pytorch#115388). Here that was a TP=2 fast-path run
that decoded every token, wrote its results and never exited. `tp.distributed.shutdown()` therefore
resets every tracked graph first. Graphs are held weakly, so one its owner has dropped leaves by itself.
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

_Graph = TypeVar("_Graph")
_live: weakref.WeakSet[Any] = weakref.WeakSet()


def track(graph: _Graph) -> _Graph:
    """Register a just-made CUDA graph (anything with `reset()`); returns it, for `g = track(CUDAGraph())`."""
    _live.add(graph)
    return graph


def release_all() -> int:
    """Reset every tracked graph that is still alive (its owner can no longer replay it); how many."""
    graphs = list(_live)
    for graph in graphs:
        graph.reset()
    _live.clear()
    return len(graphs)
