"""The speculative reference workload (`bubblescope run --spec dspark|nextn`): a bubblescope Workload.

step() runs one draft + verify + commit and returns the tokens it emitted (accepted drafts + bonus;
with no_readback, those of the previous verify, read one step late). Switches: staged_kda,
fused_kda_verify, no_readback, pdl (verify kernels), bf16_gate and bf16_lm_head (as in the
non-speculative workloads: bf16 copies of the fp32 router / lm_head masters), and fast_topk /
early_shared: the same switches as on the fast decode path, applied to the verify window's (and
NEXTN's draft's) MoE kernels, expert_union (the window's experts launch streams each distinct
expert once, kernels/moe/union_kernel.py) and deep_experts (more weight tiles in flight per experts
program: the one-row launch in pairs, the union launch through Triton's pipeliner); without the MoE
kernels (the eager MoE, the CPU default) these four change nothing; verify_norm_kernel (the window's
residual adds + RMSNorms as one add_rmsnorm launch each, where Triton runs) and verify_gated_norm (each
KDA layer's gated output norm as one launch, where Triton runs) and verify_fused_in_proj (each KDA
layer's six input projections as one GEMM over the fast path's packed weight).
"""

from __future__ import annotations

import torch
from bubblescope.kernels.moe.params import FusedMoEConfig

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo

from ..config import LingConfig, get_preset
from ..generate import new_cache
from ..init import build_model
from ..model import LingForCausalLM
from ..moe import MoERouter
from ..switches import SWITCH_INFO, LingSwitches, require_implemented
from ..workload import apply_weight_dtypes
from .acceptance import OracleAcceptance
from .decoder import SpecDecoder
from .dspark_draft import DSparkDraft, load_dspark_weights
from .kda_verify_layer import VerifyOptions, kda_in_proj
from .nextn import NextNDraft
from .routing import RoutingProbe
from .self_draft import SelfDraft
from .union_bytes import union_bytes
from .verify_moe import KernelMoE

SPEC_KINDS = ("dspark", "nextn", "self")
SPEC_SWITCHES = (
    "staged_kda",
    "fused_kda_verify",
    "no_readback",
    "pdl",
    "bf16_gate",
    "bf16_lm_head",
    "fast_topk",
    "early_shared",
    "expert_union",
    "deep_experts",
    "verify_norm_kernel",
    "verify_gated_norm",
    "verify_fused_in_proj",
)


class SpecWorkload:
    """Greedy speculative decoding of a randomly initialised Ling-3.0 preset.

    Args:
        config: target shape; device: "cpu" / "cuda[:N]".
        spec: "dspark", "nextn" or "self" (the target drafts for itself; tests).
        block: drafted tokens per verify (verify window block + 1).
        accept_len: oracle mean tokens emitted per verify (1..block+1); None = real acceptance.
        seed, prompt_len, max_steps: weights/prompt seed, prompt length, verifies the cache holds.
        routing_overlap: expert-routing correlation knob during verify (routing.py); 0 = off.
        draft_weights: safetensors file of real DSpark weights (loaded by name), or None.
        dtype: override the preset's dtype (tests use float64).
        model: reuse an already built target of this config (benchmarks share weights with the
            non-speculative fast workload); None builds one from `seed`.
        kernel_moe: run verify/draft MoE blocks on the Triton MoE kernels (verify_moe.py); None:
            on CUDA yes, on the CPU no (the eager module).
        graphs: capture the step as CUDA graphs (graphs.py); None: whenever the MoE runs on kernels
            on CUDA.
    """

    # torch.cuda.graph's capture mode for the step graphs (TP: thread_local, see SpecDecoder).
    capture_error_mode = "global"

    def __init__(
        self,
        config: LingConfig,
        device: str,
        *,
        spec: str = "dspark",
        block: int = 8,
        accept_len: float | None = None,
        seed: int = 0,
        prompt_len: int = 16,
        max_steps: int = 256,
        routing_overlap: float = 0.0,
        draft_weights: str | None = None,
        dtype: torch.dtype | None = None,
        model: LingForCausalLM | None = None,
        kernel_moe: bool | None = None,
        graphs: bool | None = None,
    ) -> None:
        if spec not in SPEC_KINDS:
            raise ConfigError(f"--spec must be one of {', '.join(SPEC_KINDS)}; got {spec!r}")
        if prompt_len < 1 or max_steps < 1:
            raise ConfigError(f"prompt_len and max_steps must be >= 1, got {prompt_len} and {max_steps}")
        if accept_len is not None:
            OracleAcceptance(accept_len, block, "cpu")  # validates before any weight is built
        self.config, self.device, self.spec, self.block = config, device, spec, block
        self.accept_len_target = accept_len
        self.name = f"ling3-spec-{spec}"
        wide = {"router_dtype": dtype, "lm_head_dtype": dtype} if dtype is not None else {}
        self.seed = seed
        self.model = (
            model if model is not None else build_model(config, device, seed=seed, dtype=dtype, **wide)
        )
        capacity = prompt_len + (max_steps + 3) * (block + 1) + block
        self.cache = new_cache(self.model, capacity)
        generator = torch.Generator().manual_seed(seed)
        # [1, prompt_len]
        self.prompt_ids = torch.randint(0, config.vocab_size, (1, prompt_len), generator=generator).to(device)
        self.probe = RoutingProbe(self.model, routing_overlap)
        if kernel_moe is None:
            kernel_moe = str(device).startswith("cuda")
        self.moe_runner = self._make_moe_runner() if kernel_moe else None
        if self.moe_runner is not None:
            self.moe_runner.pack_all(self.model)
        # fp32 masters: bf16_gate / bf16_lm_head swap in bf16 copies; off restores the exact baseline.
        self._routers = [module for module in self.model.modules() if isinstance(module, MoERouter)]
        self._router_masters = [router.weight for router in self._routers]
        self._lm_head_master = self.model.lm_head.weight
        if graphs is None:
            graphs = self.moe_runner is not None and str(device).startswith("cuda")
        self.use_graphs = graphs
        self.draft = self._make_draft(capacity, seed, draft_weights)
        self.enabled: frozenset[str] = frozenset()
        self.decoder: SpecDecoder | None = None
        # FusedMoEConfig fields set on top of the switches' at every prepare (benchmarks time a tile
        # variant of the verify's MoE launches in the step this way); empty: the defaults.
        self.moe_overrides: dict[str, object] = {}
        self.prepare(frozenset())

    def _make_draft(self, capacity: int, seed: int, draft_weights: str | None):
        if draft_weights is not None and self.spec != "dspark":
            raise ConfigError("--draft-weights applies to --spec dspark only")
        if self.spec == "nextn":
            return NextNDraft(self.model, self.cache, self.block, self.moe_runner)
        if self.spec == "self":
            return SelfDraft(self.model, self.cache, self.block)
        draft = DSparkDraft(self.model, self.block, capacity, seed=seed)
        if draft_weights is not None:
            load_dspark_weights(draft, draft_weights)
        return draft

    def _make_moe_runner(self) -> KernelMoE:
        """The verify/draft MoE on kernels (TP adds the all-reduce the module's hook would do)."""
        return KernelMoE(self.model, probe=self.probe)

    def switches(self) -> list[SwitchInfo]:
        return [info for info in SWITCH_INFO if info.name in SPEC_SWITCHES]

    def prepare(self, enabled: frozenset[str]) -> None:
        """Rebuild the decode loop for the switches (weights untouched) and prefill again.

        Raises:
            ConfigError: a switch this workload does not implement.
        """
        require_implemented(enabled, SPEC_SWITCHES, self.name)
        switches = LingSwitches.from_names(enabled)
        options = VerifyOptions(
            staged_kda=switches.staged_kda,
            fused_kda_verify=switches.fused_kda_verify,
            use_pdl=switches.pdl,
            kernel_norm=switches.verify_norm_kernel,
            kernel_gated_norm=switches.verify_gated_norm,
            fused_in_proj=switches.verify_fused_in_proj,
        )
        oracle = None
        if self.accept_len_target is not None:
            # Seeded and restarted at every reset: each switch setting sees the same accepted lengths.
            oracle = OracleAcceptance(self.accept_len_target, self.block, self.device, seed=self.seed)
        self.probe.records.clear()
        if self.probe.overlap > 0.0:
            # The overlap draws use the default generator (graph-capturable without registration):
            # seeding it here gives every switch setting, and every TP rank, the same draws, so ranks
            # route the same experts and reduce matching partials.
            torch.manual_seed(self.seed)
        apply_weight_dtypes(
            switches, self._routers, self._router_masters, self.model.lm_head, self._lm_head_master
        )
        if self.moe_runner is not None:
            self.moe_runner.use_pdl = switches.pdl
            self.moe_runner.bf16_gate = switches.bf16_gate
            self.moe_runner.config = FusedMoEConfig(
                fast_topk=switches.fast_topk,
                early_shared=switches.early_shared,
                expert_union=switches.expert_union,
                deep_experts=switches.deep_experts,
                **self.moe_overrides,
            )
        if switches.verify_fused_in_proj:
            # Packed before any graph capture (fuse_rows allocates); a no-op where the fast path has.
            for layer in self.model.main_layers:
                if not layer.is_mla:
                    kda_in_proj(layer.attention)
        self.decoder = SpecDecoder(
            self.model,
            self.cache,
            self.draft,
            options,
            oracle=oracle,
            no_readback=switches.no_readback,
            draft_timing=True,
            routing_probe=self.probe,
            moe_runner=self.moe_runner,
            use_graphs=self.use_graphs,
            capture_error_mode=self.capture_error_mode,
        )
        self.enabled = switches.enabled()
        self.decoder.reset(self.prompt_ids)

    def reset(self) -> None:
        """Prefill the prompt again (between timed repeats)."""
        self.decoder.reset(self.prompt_ids)

    def step(self) -> int:
        """One draft + verify + commit; returns the tokens emitted (see module docstring)."""
        return self.decoder.step()

    def tokens(self) -> list[int]:
        return list(self.decoder.tokens)

    def describe(self) -> dict[str, object]:
        """Workload facts for a RunRecord, the speculative summary included."""
        return {
            "preset": self.config.name,
            "device": self.device,
            "dtype": self.config.dtype,
            "switches": sorted(self.enabled),
            "graphs": self.use_graphs,
            "kernel_moe": self.moe_runner is not None,
            **self.spec_summary(),
        }

    def spec_summary(self) -> dict[str, object]:
        """What a RunRecord of this run carries as `spec` and `accept_len` (issue 6 §2)."""
        lengths = self.decoder.accept_lengths
        return {
            "spec": {
                "kind": self.spec,
                "block": self.block,
                "acceptance": "oracle" if self.accept_len_target is not None else "real",
                "accept_len_target": self.accept_len_target,
            },
            "accept_len": sum(lengths) / len(lengths) if lengths else None,
            "verifies": len(lengths),
            "experts": self.expert_union(self.enabled),
        }

    def expert_union(self, enabled: frozenset[str]) -> dict[str, object]:
        """The verifies' distinct routed experts (routing.RoutingProbe.summary) and the bytes that union
        streams per verify against the verify step's bytes (union_bytes.py)."""
        experts = self.probe.summary()
        return {**experts, **union_bytes(experts, self.config, **self._step_bytes(enabled))}

    def _step_bytes(self, enabled: frozenset[str]) -> dict[str, int]:
        """Bytes of one non-speculative decode step at the current length, and the draft's weights."""
        from ..accounting import bytes_per_token

        target = bytes_per_token(
            self.config,
            context_len=max(self.cache.length, 1),
            router_bf16="bf16_gate" in enabled,
            lm_head_bf16="bf16_lm_head" in enabled,
        ).total
        draft_module = getattr(self.draft, "module", None)
        draft_bytes = 0
        if draft_module is not None:
            draft_bytes = sum(p.numel() * p.element_size() for p in draft_module.parameters())
        return {"decode_step_bytes": int(target), "draft_bytes": int(draft_bytes)}

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        """Weights + states read per emitted token: the verify step's bytes / accept_len.

        The verify step reads one target pass with the union of its tokens' routed experts (as the
        verifies recorded it, union_bytes.py) and the draft's weights; before any verify is recorded
        the union is one token's top-k (a lower bound).
        """
        step = self._step_bytes(enabled)
        verify = self.expert_union(enabled).get("verify_bytes")
        if verify is None:
            verify = step["decode_step_bytes"] + step["draft_bytes"]
        lengths = self.decoder.accept_lengths if self.decoder else []
        mean = self.accept_len_target or (sum(lengths) / len(lengths) if lengths else 1.0)
        return int(int(verify) / max(mean, 1.0))


def make_spec_workload(
    preset: str = "debug",
    device: str | None = None,
    *,
    spec: str = "dspark",
    block: int = 8,
    accept_len: float | None = None,
    seed: int = 0,
    prompt_len: int = 16,
    max_steps: int = 256,
    routing_overlap: float = 0.0,
    draft_weights: str | None = None,
) -> SpecWorkload:
    """Factory for `bubblescope run --spec KIND --block B --accept-len L` (see the class for arguments).

    `device` defaults to "cuda" when a GPU is visible, else "cpu".
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return SpecWorkload(
        get_preset(preset),
        device,
        spec=spec,
        block=block,
        accept_len=accept_len,
        seed=seed,
        prompt_len=prompt_len,
        max_steps=max_steps,
        routing_overlap=routing_overlap,
        draft_weights=draft_weights,
    )
