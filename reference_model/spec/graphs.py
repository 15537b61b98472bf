"""CUDA graphs of the speculative step: [verify + accept + commit] and [draft], replayed back to back.

Two graphs (the draft's cost is measured between them with CUDA events): graph 1 reads the static
anchor / drafted / position buffers, writes the KDA and MLA caches and leaves the emitted tokens,
the accepted count and the draft context in static graph-pool tensors; graph 2 reads that context
and writes the next drafted block. The MLA / DSpark attention window is a fixed bucket of
positions (MIN_BUCKET, doubled and the graphs re-captured whenever the sequence outgrows it), so
replays have static shapes and a step never attends over much more than twice its context.
Without no_readback the host still owns the positions: it copies them into the static positions
buffer before each replay (the stock metadata path) and reads the result after it.

The first WARMUP_STEPS steps after construction run eagerly on a side stream (they are real steps:
they compile every Triton kernel and settle the allocator), then both graphs are captured; capture
records kernels without running them, so no state changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from bubblescope.errors import ConfigError

from ..live_graphs import track

if TYPE_CHECKING:
    from .decoder import SpecDecoder, _Pending

WARMUP_STEPS = 2
MIN_BUCKET = 1024


class SpecGraphs:
    """The captured step of one SpecDecoder (one per switch setting).

    Args:
        decoder: must be on CUDA and run its MoE on kernels (the eager MoE reads the host).
    """

    def __init__(self, decoder: SpecDecoder) -> None:
        if decoder.device.type != "cuda":
            raise ConfigError("CUDA graphs of the speculative step need a CUDA device")
        if decoder.moe_runner is None:
            raise ConfigError(
                "CUDA graphs of the speculative step need the kernel MoE (verify_moe.KernelMoE)"
            )
        window = decoder.block + 1
        self.window = window
        # [1, T] static positions of the verify window
        self.positions = torch.zeros(1, window, dtype=torch.long, device=decoder.device)
        self.offsets = torch.arange(window, device=decoder.device).view(1, window)
        self.verify_graph: torch.cuda.CUDAGraph | None = None
        self.draft_graph: torch.cuda.CUDAGraph | None = None
        self.outputs: tuple[torch.Tensor, torch.Tensor, object] | None = None
        self.drafted: torch.Tensor | None = None
        self.routing_record: torch.Tensor | None = None
        self.steps_run = 0
        self.capacity_limit = decoder.capacity - decoder.draft.key_slack()
        self.key_len = min(MIN_BUCKET, self.capacity_limit)
        self.captures = 0

    def _fill_positions(self, decoder: SpecDecoder) -> None:
        """Device advance (inside the graph) with no_readback; else the host copies its counter over."""
        if decoder.no_readback:
            self.positions.copy_(decoder._position.view(1, 1) + self.offsets)

    def _host_positions(self, decoder: SpecDecoder) -> None:
        if not decoder.no_readback:
            self.positions.copy_(decoder._host_positions(self.window))

    def _eager_step(self, decoder: SpecDecoder, key_len: int) -> _Pending:
        side = torch.cuda.Stream(decoder.device)
        side.wait_stream(torch.cuda.current_stream(decoder.device))
        with torch.cuda.stream(side):
            self._fill_positions(decoder)
            emitted, accepted, context = decoder.verify_body(self.positions, key_len)
            decoder._drafted.copy_(decoder.draft.propose(context))
        torch.cuda.current_stream(decoder.device).wait_stream(side)
        return decoder._to_host(emitted, accepted)

    def _capture(self, decoder: SpecDecoder, key_len: int) -> None:
        probe = decoder.routing_probe
        recorded = len(probe.records) if probe is not None else 0
        self.verify_graph = track(torch.cuda.CUDAGraph())
        with torch.cuda.graph(self.verify_graph, capture_error_mode=decoder.capture_error_mode):
            self._fill_positions(decoder)
            self.outputs = decoder.verify_body(self.positions, key_len)
        self.draft_graph = track(torch.cuda.CUDAGraph())
        with torch.cuda.graph(
            self.draft_graph, pool=self.verify_graph.pool(), capture_error_mode=decoder.capture_error_mode
        ):
            self.drafted = decoder.draft.propose(self.outputs[2])
            decoder._drafted.copy_(self.drafted)
        # The routing ids recorded while capturing live in a static graph tensor that every replay
        # rewrites: keep it, and file a copy of it after each replay (one small device copy).
        self.routing_record = None
        if probe is not None and len(probe.records) > recorded:
            self.routing_record = probe.records[-1]
            del probe.records[recorded:]

    def _bucket(self, needed: int) -> int:
        """The attention window for a step needing `needed` positions; grows (and drops the graphs)."""
        if needed > self.key_len:
            while self.key_len < needed:
                self.key_len *= 2
            self.key_len = min(self.key_len, self.capacity_limit)
            self.verify_graph = self.draft_graph = None
            self.outputs = self.drafted = None
        return self.key_len

    def step(self, decoder: SpecDecoder, needed: int) -> _Pending:
        """One speculative step: eager warm-up, then capture, then two replays per step.

        Args:
            needed: the host bound on positions this step may attend to (decoder._key_len()).
        """
        key_len = self._bucket(needed)
        self._host_positions(decoder)
        if self.verify_graph is None and self.steps_run < WARMUP_STEPS:
            self.steps_run += 1
            return self._eager_step(decoder, key_len)
        if self.verify_graph is None:
            self._capture(decoder, key_len)
            self.captures += 1
        self.verify_graph.replay()
        if decoder.draft_timing:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self.draft_graph.replay()
            end.record()
            decoder.draft_events.append((start, end))
        else:
            self.draft_graph.replay()
        if self.routing_record is not None:
            decoder.routing_probe.records.append(self.routing_record.clone())
        self.steps_run += 1
        emitted, accepted, _ = self.outputs
        return decoder._to_host(emitted, accepted)
