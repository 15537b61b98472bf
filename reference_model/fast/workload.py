"""`FastLingWorkload`: the ling3 workload on the fast decode path (make_workload(path="fast")).

Same model, prompt and accounting as the eager `LingWorkload` (same seed -> same weights and prompt),
but every decode step goes through `FastDecoder`. `prepare(enabled)` rebuilds the step (options,
workspaces, CUDA graph) and re-prefills; the weights are packed once and never reloaded.
"""

from __future__ import annotations

import torch

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo

from ..config import LingConfig
from ..generate import prefill
from ..kernel_bytes import rules_for
from ..switches import SWITCH_INFO, LingSwitches, require_implemented
from ..workload import FAST_SWITCHES, LingWorkload
from .decoder import FastDecoder


class FastDecoderSteps:
    """The workload methods every fast-path workload routes to its `decoder` (eager or TP prefill).

    Mixed in before the workload base: `describe` adds the fast-path keys to the base's.
    """

    decoder: FastDecoder | None = None
    max_steps: int
    _tokens: list[int]

    @torch.no_grad()
    def step(self) -> int:
        """One fast decode step with its host work; returns the tokens emitted (1).

        Raises:
            ConfigError: max_steps steps since the last reset().
        """
        assert self.decoder is not None
        if self.decoder.steps_taken >= self.max_steps:
            raise ConfigError(f"ling3 workload ran {self.max_steps} steps; call reset() or raise max_steps")
        return self.decoder.step()

    def tokens(self) -> list[int]:
        """Generated ids since the last reset (the prefill's token first); waits for tokens in flight."""
        assert self.decoder is not None
        return self._tokens[:1] + self.decoder.tokens()

    def context_length(self) -> int:
        assert self.decoder is not None
        return self.decoder.length_host

    def describe(self) -> dict[str, object]:
        assert self.decoder is not None
        # The workload base that follows this mixin in the MRO supplies describe().
        base = super().describe()  # type: ignore[misc]
        return {**base, "path": "fast", "cuda_graphs": self.decoder.use_graphs}


class FastLingWorkload(FastDecoderSteps, LingWorkload):
    """Greedy batch-1 decode of a randomly initialised Ling-3.0 preset on the fast path.

    Args: as LingWorkload (config, device, seed, prompt_len, max_steps).

    Raises:
        ConfigError: CPU device without TRITON_INTERPRET=1; a config the fast step cannot run.
    """

    def __init__(
        self, config: LingConfig, device: str, *, seed: int, prompt_len: int, max_steps: int
    ) -> None:
        super().__init__(config, device, seed=seed, prompt_len=prompt_len, max_steps=max_steps)
        self.decoder = FastDecoder(self.model, self.cache)
        self.prepare(frozenset())

    def switches(self) -> list[SwitchInfo]:
        """Every switch the fast path implements (GPU-only ones keep needs_gpu for CPU runs)."""
        return [info for info in SWITCH_INFO if info.name in FAST_SWITCHES]

    def prepare(self, enabled: frozenset[str]) -> None:
        """Rebuild the decode step for `enabled` (recapture the graph), then re-prefill.

        Raises:
            ConfigError: an unknown switch, or one the fast path does not implement.
        """
        switches = LingSwitches.from_names(enabled)
        require_implemented(enabled, FAST_SWITCHES, "ling3's fast path")
        assert self.decoder is not None
        self.decoder.configure(switches)
        self.enabled = switches.enabled()
        self.reset()

    def kernel_bytes(self, enabled: frozenset[str]) -> list[dict[str, object]] | None:
        """HBM bytes per step of each kernel family of this path's decode step (kernel_bytes.rules_for),
        at the context length the profiled window starts from."""
        context_len = max(self.context_length(), int(self.prompt_ids.shape[1]))
        return rules_for(self.config, LingSwitches.from_names(enabled), context_len=context_len)

    @torch.no_grad()
    def reset(self) -> None:
        """Empty the cache, prefill eagerly (one read of the first token), and seed the decoder."""
        if self.decoder is None:
            # Called by LingWorkload.__init__ before the decoder exists: the plain eager prefill.
            return super().reset()
        self.cache.reset()
        logits = prefill(self.model, self.prompt_ids, self.cache)
        first = int(logits[0].argmax().item())
        self._tokens = [first]
        self.decoder.start(first, self.cache.length)
