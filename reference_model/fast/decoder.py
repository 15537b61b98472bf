"""The fast batch-1 decoder: packed weights, static buffers, one CUDA graph per switch set, host loop.

`configure(switches)` rebuilds only the step (options, workspaces, CUDA graph); weights are packed
once in the constructor. `start()` seeds the metadata after an eager prefill; `step()` is one token
as a serving loop runs it, host work included:

    no_readback off:  [prepare*] replay  read token + length (2 blocking reads)  build raw on host  copy in
    no_readback on:   [prepare*] replay  [advance*]  async copy token -> pinned slot, record event
                      (* eager ops when graph_metadata is off, inside the graph when it is on)

With no_readback on the host learns a token one step (or more) late: `step()` collects every slot
whose event has completed (`query()`, never a blocking call), and `tokens()` waits for the rest.

On the CPU (Triton interpreter, tests) there are no CUDA graphs, pinned memory or events: the same
step function runs eagerly, the "pinned" slots are ordinary tensors and every copy is complete at
once. The token stream is the same; only the timing behaviour is GPU-only.
"""

from __future__ import annotations

import torch

from bubblescope.errors import ConfigError

from ..cache import ModelCache
from ..live_graphs import track
from ..model import LingForCausalLM
from ..switches import LingSwitches
from .blocks import StepOptions
from .metadata import LENGTH, TOKEN, DecodeMetadata
from .packing import MLAPack, pack_model
from .step import FastForward, step_options

# The KDA decode kernel runs one program per (batch, head) unless split: at batch 1 that is 16-32
# programs on a 132-SM H200, latency-bound on each head's 64 KB fp32 state. Splitting V gives at
# least this many programs (the interpreter pays per program, so it keeps 1). H200 2026-11-30, Flash
# shape (H=32), graph + PDL: 1 split 9.1 us, 2 splits 6.5, 4 splits 6.0, 8 splits 5.9 (4 warps).
# 2026-12-01, state prefetched under PDL: 1 split 6.7, 2: 4.5, 4: 4.3-4.4, 8: 4.6 us; what KDA adds to
# the in_proj -> KDA -> o_proj block: 1 split 7.0, 2: 5.5, 4: 5.4-5.5, 8: 5.4-5.7 us. So 4 for Flash;
# slices narrower than 16 columns (16 splits of V = 128) stay out until measured with the fixed kernel.
KDA_MIN_PROGRAMS = 128
KDA_MAX_V_SPLITS = 8

# Eager warm-up runs before capture: the first compiles every Triton kernel, the second settles
# the allocator (torch's own CUDA-graph recipe warms up on a side stream the same way).
WARMUP_RUNS = 2


def auto_kda_v_splits(heads: int, on_gpu: bool) -> int:
    """Smallest power-of-two split (<= KDA_MAX_V_SPLITS) giving KDA_MIN_PROGRAMS batch-1 programs."""
    splits = 1
    while on_gpu and heads * splits < KDA_MIN_PROGRAMS and splits < KDA_MAX_V_SPLITS:
        splits *= 2
    return splits


class FastDecoder:
    """Greedy batch-1 decode of `model` over `cache` with the fast kernels.

    Args:
        model: a LingForCausalLM (its weights are re-pointed into packed tensors, not copied).
        cache: the ModelCache prefill fills; the step reads and writes the same tensors.

        kda_v_splits: programs per KDA head; None = auto (enough for KDA_MIN_PROGRAMS on CUDA, 1 on
            the interpreter). A tuning choice, not a switch: same math, other work split.

    Raises:
        ConfigError: the device cannot run the Triton kernels (CPU without TRITON_INTERPRET=1).
    """

    # torch.cuda.graph's default; the TP decoder captures "thread_local" while NCCL's watchdog polls.
    capture_error_mode = "global"

    def __init__(self, model: LingForCausalLM, cache: ModelCache, kda_v_splits: int | None = None) -> None:
        from bubblescope.kernels._pdl import is_interpreting

        device = model.lm_head.weight.device
        if device.type != "cuda" and not is_interpreting():
            raise ConfigError("the fast decode path needs a CUDA device, or TRITON_INTERPRET=1 on the CPU")
        self.device = device
        self.use_graphs = device.type == "cuda"
        self.pack = pack_model(model, cache)
        mla = next(layer.attention for layer in self.pack.layers if isinstance(layer.attention, MLAPack))
        self.capacity = mla.cache.shape[1]
        rope = next(layer for layer in model.main_layers if layer.is_mla).attention.rope
        self.meta = DecodeMetadata(rope.inv_freq, self.capacity, device)
        self.kda_v_splits = kda_v_splits or auto_kda_v_splits(
            model.config.num_attention_heads, self.use_graphs
        )
        self._built_key: tuple | None = None
        self.switches = LingSwitches()
        self.forward: FastForward | None = None
        self.graph: torch.cuda.CUDAGraph | None = None
        self._staging = self._host_buffer(2)
        self._slots = self._host_buffer(self.capacity + 1)
        self._events: list[torch.cuda.Event | None] = []
        self._emitted: list[int] = []
        self._harvested = 0
        # Host-side counters (known without reading the device): tokens in the sequence, steps since start().
        self.length_host = 0
        self.steps_taken = 0

    def _host_buffer(self, size: int) -> torch.Tensor:
        """[size] int64 on the host: pinned on CUDA machines so device copies into it are async."""
        return torch.zeros(size, dtype=torch.int64, pin_memory=self.device.type == "cuda")

    @staticmethod
    def graph_key(switches: LingSwitches) -> tuple[bool, ...]:
        """What the captured step depends on: every kernel-level switch, and no_readback only when the
        on-device advance is captured too (graph_metadata); otherwise no_readback is host-loop only."""
        in_graph_advance = switches.no_readback and switches.graph_metadata
        return (
            switches.pdl,
            switches.fused_moe,
            switches.bf16_gate,
            switches.bf16_lm_head,
            switches.graph_metadata,
            in_graph_advance,
            switches.fast_topk,
            switches.early_shared,
            switches.deep_experts,
            switches.routing_in_experts,
            switches.tma_experts,
            switches.fused_mla_glue,
            switches.norm_epilogue,
            switches.kda_norm_in_oproj,
        )

    def step_key(self, switches: LingSwitches) -> tuple:
        """Everything the built step depends on: the captured switches and the KDA split (subclasses
        add theirs, e.g. the TP all-reduce). A change rebuilds the step and recaptures its graph."""
        return (self.graph_key(switches), self.kda_v_splits)

    def make_forward(self, opts: StepOptions) -> FastForward:
        """The step for these options (the TP decoder's adds its all-reduces and cross-rank argmax)."""
        return FastForward(self.pack, self.meta, opts)

    def configure(self, switches: LingSwitches) -> None:
        """Build the step for these switches: new options, workspaces and CUDA graph, but only when the
        captured step changes (a host-loop-only change keeps the graph); weights are never touched."""
        key = self.step_key(switches)
        unchanged = self.forward is not None and key == self._built_key
        self.switches = switches
        if unchanged:
            return
        opts = step_options(
            self.pack,
            pdl=switches.pdl,
            fused_moe=switches.fused_moe,
            bf16_gate=switches.bf16_gate,
            bf16_lm_head=switches.bf16_lm_head,
            kda_v_splits=self.kda_v_splits,
            fast_topk=switches.fast_topk,
            early_shared=switches.early_shared,
            deep_experts=switches.deep_experts,
            routing_in_experts=switches.routing_in_experts,
            tma_experts=switches.tma_experts,
            fused_mla_glue=switches.fused_mla_glue,
            norm_epilogue=switches.norm_epilogue,
            kda_norm_in_oproj=switches.kda_norm_in_oproj,
        )
        self._built_key = key
        self.graph = None
        self.forward = self.make_forward(opts)
        if self.use_graphs:
            self._capture()

    def _graph_body(self) -> None:
        """What one replay runs: the forward, with metadata prepare/advance when graph_metadata is on."""
        if self.switches.graph_metadata:
            self.meta.prepare()
        self.forward()
        if self.switches.graph_metadata and self.switches.no_readback:
            self.meta.advance()

    def _capture(self) -> None:
        """Warm up on a side stream (compiles kernels, state is reset by the next start()), then capture."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                self.meta.prepare()
                self._graph_body()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = track(torch.cuda.CUDAGraph())
        with torch.cuda.graph(graph, capture_error_mode=self.capture_error_mode):
            self._graph_body()
        self.graph = graph

    def start(self, first_token: int, length: int) -> None:
        """Seed the metadata after a prefill of `length` tokens whose greedy token is `first_token`."""
        if length >= self.capacity:
            raise ConfigError(
                f"fast decoder: prompt of {length} tokens leaves no room in {self.capacity} cache rows"
            )
        self._staging[TOKEN], self._staging[LENGTH] = first_token, length
        self.meta.raw.copy_(self._staging)
        self.length_host = length
        self.steps_taken = 0
        self._events = []
        self._emitted = []
        self._harvested = 0

    def step(self) -> int:
        """One decode step as the serving loop runs it; returns the tokens emitted (1).

        Raises:
            ConfigError: the latent caches are full.
        """
        if self.forward is None:
            raise ConfigError("fast decoder: call configure() before step()")
        if self.length_host >= self.capacity:
            raise ConfigError(f"fast decoder: the caches hold {self.capacity} positions; call reset()")
        eager_metadata = not self.switches.graph_metadata
        if eager_metadata:
            self.meta.prepare()
        self._replay()
        self.length_host += 1
        self.steps_taken += 1
        if self.switches.no_readback:
            if eager_metadata:
                self.meta.advance()
            self._copy_token_out()
        else:
            self._read_back_and_rebuild()
        return 1

    def _replay(self) -> None:
        """One replay of the step graph; without graphs (CPU) the same body runs op by op."""
        if self.graph is not None:
            self.graph.replay()
        else:
            self._graph_body()

    def _read_back_and_rebuild(self) -> None:
        """Stock loop: read the token and the sequence length back, build the next raw values, copy in."""
        token = int(self.meta.next_token.item())
        length = int(self.meta.seq_lens.item())
        self._emitted.append(token)
        self._harvested = len(self._emitted)
        self._staging[TOKEN], self._staging[LENGTH] = token, length
        # The staging buffer is free to reuse: the reads above waited for the previous copy.
        self.meta.raw.copy_(self._staging, non_blocking=True)

    def _copy_token_out(self) -> None:
        """no_readback: enqueue this step's token into its own pinned slot; collect finished ones."""
        slot = len(self._events)
        self._slots[slot : slot + 1].copy_(self.meta.next_token, non_blocking=True)
        event = None
        if self.device.type == "cuda":
            event = torch.cuda.Event()
            event.record()
        self._events.append(event)
        self._collect(wait=False)

    def _collect(self, *, wait: bool) -> None:
        """Move finished slots into the token list, in order; `wait` blocks for the rest (tokens())."""
        while self._harvested < len(self._events):
            event = self._events[self._harvested]
            if event is not None and not event.query():
                if not wait:
                    return
                event.synchronize()
            self._emitted.append(int(self._slots[self._harvested]))
            self._harvested += 1

    def tokens(self) -> list[int]:
        """Tokens generated since start(), waiting for any still in flight (no_readback)."""
        if self.switches.no_readback:
            self._collect(wait=True)
        return list(self._emitted)
