"""The speculative decode loop: draft -> verify -> accept -> commit -> next draft, batch 1.

One `step()` = one verify of [anchor, d_1..d_B] plus the draft of the next block. What the host
does between steps is the `no_readback` switch:
- off (stock): the host reads the accepted count and the emitted tokens right after the verify
  (a blocking read), advances its position counter and builds the next step's positions from it.
- on: positions advance on the device (pos += a + 1) and the next verify is enqueued before the
  host knows this one's result; emitted tokens and the count go to pinned host memory with an
  event and are read one step late, after the following step has been enqueued. The MLA attention
  window then uses a host upper bound on the length (known length + T per step in flight).
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass

import torch
from torch.profiler import record_function

from bubblescope.errors import ConfigError

from ..cache import ModelCache
from ..model import LingForCausalLM
from .acceptance import OracleAcceptance, emitted_tokens, greedy_accepted
from .draft_context import Draft, DraftContext
from .graphs import SpecGraphs
from .kda_verify_layer import VerifyOptions
from .routing import RoutingProbe
from .target_verify import (
    MoERunner,
    allocate_checkpoint,
    checkpoint_kda,
    commit_verify,
    gathered_moe,
    target_forward_at,
)


@dataclass
class _Pending:
    """A verify whose results are on their way to the host (no_readback)."""

    emitted: torch.Tensor
    accepted: torch.Tensor
    event: torch.cuda.Event | None


class SpecDecoder:
    """Greedy speculative decoding of one sequence with a draft and a verify/commit on device.

    Args:
        model: the target; cache: its ModelCache (capacity covers prompt + generated + 2 blocks).
        draft: proposes `draft.block` tokens per verify.
        options: staged_kda / fused_kda_verify / PDL for the KDA verify.
        oracle: draws the accepted count (None: real greedy-match acceptance).
        no_readback: see the module docstring.
        draft_timing: record CUDA events around the draft (for the draft's share of the step).
        routing_probe: records (and optionally correlates) the verify's expert routing.
        moe_runner: runs the verify's MoE blocks (KernelMoE on the GPU); None: the eager modules.
        use_graphs: capture verify+commit and the draft as two CUDA graphs (graphs.py); needs CUDA
            and a moe_runner (the eager MoE reads the host).
        capture_error_mode: torch.cuda.graph's mode; "thread_local" at TP, so NCCL's watchdog thread
            may keep polling while this thread captures the collectives.
    """

    def __init__(
        self,
        model: LingForCausalLM,
        cache: ModelCache,
        draft: Draft,
        options: VerifyOptions,
        *,
        oracle: OracleAcceptance | None = None,
        no_readback: bool = False,
        draft_timing: bool = False,
        routing_probe: RoutingProbe | None = None,
        moe_runner: MoERunner | None = None,
        use_graphs: bool = False,
        capture_error_mode: str = "global",
    ) -> None:
        self.model, self.cache, self.draft, self.options = model, cache, draft, options
        self.capture_error_mode = capture_error_mode
        self.oracle = oracle
        self.routing_probe = routing_probe
        self.moe_runner = moe_runner
        self.no_readback = no_readback
        self.block = draft.block
        self.device = model.model.word_embeddings.weight.device
        self.checkpoint = None if options.staged_kda else allocate_checkpoint(cache)
        self.draft_timing = draft_timing and self.device.type == "cuda"
        self.draft_events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self.tokens: list[int] = []
        self.accept_lengths: list[int] = []
        self._pending: deque[_Pending] = deque()
        self._position = torch.zeros(1, dtype=torch.long, device=self.device)
        self._anchor = torch.zeros(1, dtype=torch.long, device=self.device)
        self._drafted = torch.zeros(1, self.block, dtype=torch.long, device=self.device)
        self.graphs = SpecGraphs(self) if use_graphs else None

    @property
    def capacity(self) -> int:
        return next(iter(self.cache.mla.values())).capacity

    @torch.no_grad()
    def reset(self, prompt_ids: torch.Tensor) -> None:
        """Prefill `prompt_ids` [1, P], emit its greedy token, draft the first block (and, with
        no_readback, enqueue the first verify so every step() finds one in flight)."""
        self.cache.reset()
        if self.oracle is not None:
            self.oracle.restart()
        self.tokens, self.accept_lengths, self.draft_events = [], [], []
        self._pending.clear()
        prompt_len = prompt_ids.shape[1]
        hidden = self.model.forward_hidden(prompt_ids, self.cache, capture_layers=self.draft.capture_layers)
        anchor = self.model.compute_logits(hidden.final[:, -1:]).argmax(-1).view(1)
        self.tokens.append(int(anchor.item()))
        self._length_known = prompt_len
        # Static device buffers (CUDA graphs capture their addresses): updated in place, never replaced.
        self._position.fill_(prompt_len)
        context = DraftContext(
            final_hidden=hidden.final,
            positions=torch.arange(prompt_len, device=self.device).view(1, -1),
            next_tokens=torch.cat([prompt_ids[0, 1:], anchor]),
            last=torch.tensor(prompt_len - 1, device=self.device),
            key_len=prompt_len,
            captured=hidden.captured,
        )
        self._anchor.copy_(anchor)
        self._drafted.copy_(self.draft.propose(context))
        if self.no_readback:
            self._pending.append(self._enqueue_verify(self._key_len()))

    def _key_len(self) -> int:
        """Host bound on the verify window's last position + 1 (exact without no_readback)."""
        window = self.block + 1
        bound = self._length_known + window * (len(self._pending) + 1)
        if bound + self.draft.key_slack() > self.capacity:
            raise ConfigError(
                f"speculative cache full ({self.capacity} positions); reset() or raise max_steps"
            )
        return bound

    def _enqueue_verify(self, key_len: int) -> _Pending:
        """Verify the drafted block, accept, commit, draft the next block; all on the device."""
        if self.graphs is not None:
            return self.graphs.step(self, key_len)
        window = self.block + 1
        if self.no_readback:
            positions = (self._position + torch.arange(window, device=self.device)).view(1, window)
        else:
            positions = self._host_positions(window)
        emitted, accepted, context = self.verify_body(positions, key_len)
        self._drafted.copy_(self._timed_draft(context))
        return self._to_host(emitted, accepted)

    def _host_positions(self, window: int) -> torch.Tensor:
        """Stock metadata path: positions built on the host from its counter and copied over."""
        host = torch.arange(self._length_known, self._length_known + window).view(1, window)
        return host.to(self.device)

    def verify_body(
        self, positions: torch.Tensor, key_len: int
    ) -> tuple[torch.Tensor, torch.Tensor, DraftContext]:
        """Checkpoint (staged off), verify, accept, commit, advance the device position, set the
        next anchor. No host read; graph-capturable when the MoE runs on kernels.

        Returns:
            emitted [B + 1] (-1 padded), accepted (0-d), and the context the draft reads.
        """
        window = self.block + 1
        token_ids = torch.cat([self._anchor, self._drafted[0]]).view(1, window)
        if self.checkpoint is not None:
            checkpoint_kda(self.cache, self.checkpoint)
        rows = window * self.model.config.num_experts_per_tok
        probe = self.routing_probe.recording() if self.routing_probe else contextlib.nullcontext()
        gather = rows if self.no_readback and self.moe_runner is None else 0
        with gathered_moe(self.model, gather), probe, record_function("spec.verify"):
            verify = target_forward_at(
                self.model,
                self.cache,
                token_ids,
                positions,
                key_len,
                self.options,
                self.draft.capture_layers,
                self.moe_runner,
            )
            targets = self.model.compute_logits(verify.final_hidden).argmax(-1)
        with record_function("spec.accept"):
            judge = self.oracle if self.oracle is not None else greedy_accepted
            accepted = judge(self._drafted, targets)
            emitted = emitted_tokens(self._drafted, targets, accepted)
        commit_verify(self.model, self.cache, verify, accepted, self.options, self.checkpoint)
        self._position += accepted + 1
        context = DraftContext(verify.final_hidden, positions, emitted, accepted, key_len, verify.captured)
        self._anchor.copy_(context.anchor())
        return emitted, accepted, context

    def _timed_draft(self, context: DraftContext) -> torch.Tensor:
        if not self.draft_timing:
            return self.draft.propose(context)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        drafted = self.draft.propose(context)
        end.record()
        self.draft_events.append((start, end))
        return drafted

    def draft_gpu_ms(self) -> float:
        """Total GPU time between the draft's start and end events so far (synchronizes; call after a run)."""
        if not self.draft_events:
            return 0.0
        torch.cuda.synchronize(self.device)
        return sum(start.elapsed_time(end) for start, end in self.draft_events)

    def _to_host(self, emitted: torch.Tensor, accepted: torch.Tensor) -> _Pending:
        if not self.no_readback or self.device.type != "cuda":
            return _Pending(emitted, accepted, None)
        pinned_tokens = torch.empty(emitted.shape, dtype=emitted.dtype, pin_memory=True)
        pinned_accepted = torch.empty((), dtype=accepted.dtype, pin_memory=True)
        pinned_tokens.copy_(emitted, non_blocking=True)
        pinned_accepted.copy_(accepted, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return _Pending(pinned_tokens, pinned_accepted, event)

    def _absorb(self, pending: _Pending) -> int:
        """Read one verify's results on the host; returns the tokens it emitted."""
        if pending.event is not None:
            pending.event.synchronize()
        with record_function("spec.readback"):
            count = int(pending.accepted.item()) + 1
            self.tokens.extend(pending.emitted[:count].tolist())
        self.accept_lengths.append(count)
        self._length_known += count
        self._sync_host_lengths()
        return count

    def _sync_host_lengths(self) -> None:
        """Keep the eager cache's host counters equal to the committed length (for eager reuse/tests)."""
        self.cache.length = self._length_known
        for latent in self.cache.mla.values():
            latent.length = self._length_known

    @torch.no_grad()
    def step(self) -> int:
        """One speculative step; returns tokens emitted (read one step late with no_readback)."""
        if self.no_readback:
            self._pending.append(self._enqueue_verify(self._key_len()))
            return self._absorb(self._pending.popleft())
        return self._absorb(self._enqueue_verify(self._key_len()))

    @torch.no_grad()
    def drain(self) -> int:
        """Read every verify still in flight (end of a run); returns the tokens they emitted."""
        total = 0
        while self._pending:
            total += self._absorb(self._pending.popleft())
        return total
