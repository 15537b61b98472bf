"""The reference workload: greedy batch-1 decode of a Ling-3.0 preset (bubblescope Workload), two paths.

- `path="eager"` (`LingWorkload`, "stock eager"): each step runs the plain PyTorch model on the last
  token, reads the new token back with `.item()` and builds the next input from that host int.
  `bf16_gate` and `bf16_lm_head` swap the router / lm_head weights for bf16 copies of the fp32 masters.
- `path="fast"` (`FastLingWorkload`): the decode step is one CUDA graph of Triton kernels over static
  buffers (reference_model/fast/); every switch of ARCHITECTURE §3 except the speculative ones.
  Prefill stays eager. On the CPU it runs under TRITON_INTERPRET=1 without graphs (tests).
`make_workload(path="auto")` takes the fast path on CUDA and the eager one on the CPU. Weights are
never reloaded by prepare().
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.profiler import record_function

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo

from .cache import ModelCache
from .config import LingConfig, get_preset
from .generate import new_cache, prefill
from .init import build_model
from .moe import MoERouter
from .switches import SWITCH_INFO, LingSwitches

# Switches the eager path implements.
IMPLEMENTED_SWITCHES = ("bf16_gate", "bf16_lm_head")
# Switches the fast path implements (SWITCH_INFO order); the speculative ones belong to --spec.
FAST_SWITCHES = (
    "no_readback",
    "pdl",
    "fused_moe",
    "fast_topk",
    "early_shared",
    "deep_experts",
    "tma_experts",
    "fused_mla_glue",
    "norm_epilogue",
    "routing_in_experts",
    "kda_norm_in_oproj",
    "bf16_gate",
    "bf16_lm_head",
    "graph_metadata",
)
# Fast-path switches a tensor-parallel step cannot take: its all-reduce of each block's partial output
# sits between the launch that produces it and the norm (norm_epilogue norms inside that launch).
SINGLE_DEVICE_SWITCHES = ("norm_epilogue",)
PATHS = ("auto", "fast", "eager")


def apply_weight_dtypes(
    switches: LingSwitches,
    routers: Sequence[MoERouter],
    router_masters: Sequence[torch.Tensor],
    lm_head: nn.Module,
    lm_head_master: torch.Tensor,
) -> None:
    """Set the router and lm_head weights for bf16_gate / bf16_lm_head from their fp32 masters.

    Args:
        switches: only bf16_gate and bf16_lm_head are read.
        routers: the MoE routers whose weights are replaced, in the order of `router_masters`.
        router_masters: their original weights (a bf16 copy when bf16_gate, else the master itself).
        lm_head: the module whose `weight` is replaced.
        lm_head_master: its original weight (a bf16 copy when bf16_lm_head, else the master itself).
    """
    # A model's routers share one dtype (LingForCausalLM's router_dtype), so "off" is each master as is.
    for router, master in zip(routers, router_masters, strict=True):
        weight = master.to(torch.bfloat16) if switches.bf16_gate else master
        router.weight = nn.Parameter(weight, requires_grad=False)
    lm_head_weight = lm_head_master.to(torch.bfloat16) if switches.bf16_lm_head else lm_head_master
    lm_head.weight = nn.Parameter(lm_head_weight, requires_grad=False)


class LingWorkload:
    """Greedy batch-1 decode of a randomly initialised Ling-3.0 preset.

    Args:
        config: model shape.
        device: "cpu", "cuda", "cuda:N".
        seed: weights and prompt seed.
        prompt_len: random prompt tokens prefilled by reset().
        max_steps: decode steps the cache holds before reset() is needed.
    """

    name = "ling3"

    def __init__(
        self, config: LingConfig, device: str, *, seed: int, prompt_len: int, max_steps: int
    ) -> None:
        if prompt_len < 1 or max_steps < 1:
            raise ConfigError(f"prompt_len and max_steps must be >= 1, got {prompt_len} and {max_steps}")
        self.config = config
        self.seed = seed
        # step() never runs the MTP layer: leaving it out saves ~3 GB on the Flash presets.
        self.model = build_model(config, device, seed=seed, include_mtp=False)
        self.device = str(self.model.lm_head.weight.device)
        self._routers = [module for module in self.model.modules() if isinstance(module, MoERouter)]
        # fp32 masters: the switches cast copies of these, so toggling off restores the exact baseline.
        self._router_masters = [router.weight for router in self._routers]
        self._lm_head_master = self.model.lm_head.weight
        generator = torch.Generator().manual_seed(seed)
        # [1, prompt_len]
        self.prompt_ids = torch.randint(0, config.vocab_size, (1, prompt_len), generator=generator).to(device)
        self.max_steps = max_steps
        self.cache: ModelCache = new_cache(self.model, prompt_len + max_steps)
        self.enabled: frozenset[str] = frozenset()
        self._tokens: list[int] = []
        self.reset()

    def switches(self) -> list[SwitchInfo]:
        """The eager path's switches; on the CPU also the fast path's GPU-only ones (needs_gpu), so a
        run on the CPU says they need a CUDA device instead of calling them unknown."""
        offered = set(IMPLEMENTED_SWITCHES)
        if not str(self.device).startswith("cuda"):
            offered |= {info.name for info in SWITCH_INFO if info.needs_gpu and info.name in FAST_SWITCHES}
        return [info for info in SWITCH_INFO if info.name in offered]

    def prepare(self, enabled: frozenset[str]) -> None:
        """Apply the switches (router / lm_head dtype), then re-prefill so the run starts consistent.

        Raises:
            ConfigError: a switch this workload does not implement.
        """
        missing = sorted(set(enabled) - set(IMPLEMENTED_SWITCHES))
        if missing:
            valid = ", ".join(IMPLEMENTED_SWITCHES)
            raise ConfigError(
                f"switch {', '.join(missing)} is not implemented by ling3's eager path (the fast path on a "
                f"CUDA device has it); available here: {valid}"
            )
        switches = LingSwitches.from_names(enabled)
        apply_weight_dtypes(
            switches, self._routers, self._router_masters, self.model.lm_head, self._lm_head_master
        )
        self.enabled = switches.enabled()
        self.reset()

    @torch.no_grad()
    def reset(self) -> None:
        """Empty the cache and prefill the prompt again; the first generated token is read back here."""
        self.cache.reset()
        logits = prefill(self.model, self.prompt_ids, self.cache)
        self._tokens = [int(logits[0].argmax().item())]

    @torch.no_grad()
    def step(self) -> int:
        """One greedy decode step with its host work; returns the tokens emitted (1).

        Raises:
            ConfigError: the cache is full (max_steps steps since the last reset()).
        """
        if len(self._tokens) > self.max_steps:
            raise ConfigError(f"ling3 workload ran {self.max_steps} steps; call reset() or raise max_steps")
        with record_function("ling3.input"):
            token_ids = torch.tensor([[self._tokens[-1]]], device=self.device)
        logits = self.model(token_ids, self.cache)
        with record_function("ling3.readback"):
            token = int(logits[0, -1].argmax().item())
        self._tokens.append(token)
        return 1

    def tokens(self) -> list[int]:
        """Generated ids since the last reset (the prefill's token first)."""
        return list(self._tokens)

    def describe(self) -> dict[str, object]:
        params = sum(p.numel() for p in self.model.parameters())
        return {
            "preset": self.config.name,
            "device": self.device,
            "dtype": self.config.dtype,
            "params": params,
            "prompt_len": int(self.prompt_ids.shape[1]),
            "max_steps": self.max_steps,
            "seed": self.seed,
            "switches": sorted(self.enabled),
            "path": "eager",
        }

    def context_length(self) -> int:
        """Tokens in the sequence now (prompt + decoded)."""
        return self.cache.length

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        """HBM bytes per decoded token at the current context length (accounting.py when present)."""
        switches = LingSwitches.from_names(enabled)
        context_len = max(self.context_length(), int(self.prompt_ids.shape[1]))
        try:
            from .accounting import bytes_per_token
        except ImportError:
            return self._bytes_from_tensors(switches, context_len)
        breakdown = bytes_per_token(
            self.config,
            context_len=context_len,
            router_bf16=switches.bf16_gate,
            lm_head_bf16=switches.bf16_lm_head,
        )
        return int(breakdown.total)

    def _bytes_from_tensors(self, switches: LingSwitches, context_len: int) -> int:
        """Estimate from the live tensors when accounting.py is absent.

        Every weight is read once per token except routed experts (top-k of E per MoE layer) and the
        embedding table (one row); the MTP layer is not run by step(). KDA states are read and written,
        MLA latent caches read over the context.
        """
        from .moe import StackedExperts

        config = self.config
        main = self.model.model.layers[: config.num_hidden_layers]
        total = 0
        for module in main.modules():
            direct = list(module.parameters(recurse=False))
            share = (
                config.num_experts_per_tok / config.num_experts if isinstance(module, StackedExperts) else 1.0
            )
            total += int(share * sum(p.numel() * p.element_size() for p in direct))
        total += sum(p.numel() * p.element_size() for p in self.model.model.norm.parameters())
        if switches.bf16_gate:
            total -= sum(r.weight.numel() * (r.weight.element_size() - 2) for r in self._routers[: len(main)])
        lm_head = self._lm_head_master
        total += lm_head.numel() * (2 if switches.bf16_lm_head else lm_head.element_size())
        embed = self.model.model.word_embeddings.weight
        total += embed.shape[1] * embed.element_size()
        for state in self.cache.kda.values():
            total += 2 * (state.recurrent.numel() * state.recurrent.element_size())
            total += 2 * (state.conv.numel() * state.conv.element_size())
        for index in config.mla_layers:
            buffer = self.cache.mla[index].buffer
            total += context_len * buffer.shape[-1] * buffer.element_size()
        return total


def make_workload(
    preset: str = "debug",
    device: str | None = None,
    seed: int = 0,
    prompt_len: int = 32,
    max_steps: int = 4096,
    path: str = "auto",
) -> LingWorkload:
    """The `ling3` workload (bubblescope run's default factory).

    Args:
        preset: ling3-flash, ling3-flash-e256, ling3-tiny or debug.
        device: defaults to "cuda" when available, else "cpu".
        seed: weights and prompt.
        prompt_len: prompt tokens prefilled before decoding.
        max_steps: decode steps before reset() is needed (sizes the MLA caches).
        path: "fast" (Triton kernels + CUDA graph; on the CPU only under TRITON_INTERPRET=1), "eager"
            (plain PyTorch, the "stock eager" reference), or "auto": fast on CUDA, eager on the CPU.

    Raises:
        ConfigError: unknown preset or path, bad sizes, fast path on a CPU without the interpreter.
        InsufficientMemoryError: the preset does not fit.
    """
    if path not in PATHS:
        raise ConfigError(f"unknown path {path!r}; valid paths: {', '.join(PATHS)}")
    config = get_preset(preset)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if path == "auto":
        path = "fast" if str(device).startswith("cuda") else "eager"
    if path == "fast":
        from .fast.workload import FastLingWorkload

        return FastLingWorkload(config, device, seed=seed, prompt_len=prompt_len, max_steps=max_steps)
    return LingWorkload(config, device, seed=seed, prompt_len=prompt_len, max_steps=max_steps)
