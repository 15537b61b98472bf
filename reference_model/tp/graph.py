"""A TP decode step captured in one CUDA graph, collectives included, at a fixed cache position.

The eager cache advances a host-side length, so a captured step always writes the same position: the
graph is a check (replayed once from the captured state it must give the eager token) and a timer
(replayed repeatedly it does one step's work — every GEMV, both all-reduces per layer, the
vocabulary-parallel argmax — with no host in the loop). The CUDA-graph decode loop that advances
positions on device belongs to the fast path; this shows the collectives capture.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..cache import ModelCache
from ..live_graphs import track
from ..model import LingForCausalLM
from .decode import tp_decode_step

WARMUP_STEPS = 2


@dataclass
class CapturedStep:
    """A captured decode step.

    Attributes:
        graph: replay() runs the step.
        token_ids: [1, 1] static input (write the token to feed before replaying).
        next_ids: [1] static output: the greedy id the replay produced.
        snapshot: the cache as it was before the step (restore() puts it back).
    """

    graph: torch.cuda.CUDAGraph
    token_ids: torch.Tensor
    next_ids: torch.Tensor
    cache: ModelCache
    snapshot: ModelCache

    def restore(self) -> None:
        """Put the cache back to its state before the captured step (addresses kept)."""
        self.cache.copy_(self.snapshot)


@torch.no_grad()
def capture_decode_step(model: LingForCausalLM, cache: ModelCache, token_id: int) -> CapturedStep:
    """Capture `tp_decode_step(model, [[token_id]], cache)` in a CUDA graph; every rank must call it.

    Warm-up steps run eagerly first on the capture stream (NCCL communicators and symmetric-memory
    buffers are made there, in lockstep on every rank); the cache is restored after each, and after
    the capture, so the graph's first replay continues exactly where the eager loop stands.

    Args:
        model: a TP model on CUDA.
        cache: its decode state after prefill (and any steps); left unchanged on return.
        token_id: the token to feed (the last one generated).
    """
    device = model.model.word_embeddings.weight.device
    token_ids = torch.tensor([[token_id]], device=device)
    snapshot = cache.clone()
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(WARMUP_STEPS):
            tp_decode_step(model, token_ids, cache)
            cache.copy_(snapshot)
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = track(torch.cuda.CUDAGraph())
    # thread_local: NCCL's watchdog thread may query events while this thread captures.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        next_ids = tp_decode_step(model, token_ids, cache)
    cache.copy_(snapshot)
    return CapturedStep(graph, token_ids, next_ids, cache, snapshot)


def time_replays_ms(step: CapturedStep, replays: int) -> list[float]:
    """Device ms of each of `replays` back-to-back replays (the cache is restored afterwards)."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
    events[0].record()
    for index in range(replays):
        step.graph.replay()
        events[index + 1].record()
    events[-1].synchronize()
    step.restore()
    return [events[i].elapsed_time(events[i + 1]) for i in range(replays)]
