"""Ling-3.0-flash configuration and the presets the tool ships (ARCHITECTURE §3).

Values follow the model's `config.json` as restated in `shared/notes/ling3_flash.md` §1. Layer
kinds derive from the config: layer i is MLA iff (i + 1) % layer_group_size == 0, else KDA; layers
below `first_k_dense_replace` use a dense SwiGLU FFN, the rest MoE.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bubblescope.errors import ConfigError


@dataclass(frozen=True)
class LingConfig:
    """Shape and numerics of one Ling-3.0 model. Field names follow the HF config where one exists."""

    name: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    layer_group_size: int
    # KDA and MLA both use this many heads; KDA head dim K = V = head_dim.
    num_attention_heads: int
    head_dim: int
    intermediate_size: int
    first_k_dense_replace: int
    num_experts: int
    num_experts_per_tok: int
    num_shared_experts: int
    moe_intermediate_size: int
    moe_shared_expert_intermediate_size: int
    n_group: int
    topk_group: int
    routed_scaling_factor: float
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    rope_theta: float
    short_conv_kernel_size: int
    kda_lower_bound: float
    rms_norm_eps: float
    num_nextn_predict_layers: int
    # One entry per main layer; 0 means no clamp. Layers past the list (the MTP layer) are unclamped.
    expert_swiglu_limit_list: tuple[float, ...]
    share_expert_swiglu_limit_list: tuple[float, ...]
    # "bfloat16" for the real model; the debug preset runs in "float32" (tests upcast to float64).
    dtype: str = "bfloat16"
    max_position_embeddings: int = 262144
    eos_token_id: int = 156895
    description: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.num_experts % self.n_group:
            raise ConfigError(
                f"{self.name}: {self.num_experts} experts do not split into {self.n_group} groups"
            )
        if not 0 < self.topk_group <= self.n_group:
            raise ConfigError(f"{self.name}: topk_group must be in 1..n_group")
        per_group = self.num_experts // self.n_group
        if self.num_experts_per_tok > self.topk_group * per_group:
            raise ConfigError(
                f"{self.name}: top-{self.num_experts_per_tok} exceeds the experts in kept groups"
            )
        for name in ("expert_swiglu_limit_list", "share_expert_swiglu_limit_list"):
            if len(getattr(self, name)) != self.num_hidden_layers:
                raise ConfigError(f"{self.name}: {name} needs {self.num_hidden_layers} entries")

    # Derived quantities ---------------------------------------------------------------------------
    @property
    def kda_width(self) -> int:
        """Width of the KDA q/k/v/f/g projections: heads x head_dim (4096 for Flash)."""
        return self.num_attention_heads * self.head_dim

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def mla_cache_width(self) -> int:
        """Values cached per token per MLA layer: latent + rope key (576 for Flash)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def experts_per_group(self) -> int:
        return self.num_experts // self.n_group

    def is_mla_layer(self, index: int) -> bool:
        """MLA iff (index + 1) % layer_group_size == 0; the MTP layer (index == num_hidden_layers) is MLA."""
        if index >= self.num_hidden_layers:
            return True
        return (index + 1) % self.layer_group_size == 0

    def is_moe_layer(self, index: int) -> bool:
        """Dense SwiGLU below first_k_dense_replace, MoE from there on (the MTP layer is MoE)."""
        return index >= self.first_k_dense_replace

    def expert_swiglu_limit(self, index: int) -> float:
        lst = self.expert_swiglu_limit_list
        return lst[index] if index < len(lst) else 0.0

    def shared_expert_swiglu_limit(self, index: int) -> float:
        lst = self.share_expert_swiglu_limit_list
        return lst[index] if index < len(lst) else 0.0

    @property
    def mla_layers(self) -> list[int]:
        return [i for i in range(self.num_hidden_layers) if self.is_mla_layer(i)]

    @property
    def kda_layers(self) -> list[int]:
        return [i for i in range(self.num_hidden_layers) if not self.is_mla_layer(i)]

    def with_(self, **changes: object) -> LingConfig:
        """A copy with some fields changed (used by tests to build variants)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _flash_limits(layers: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    # notes §1.1: routed experts clamp at 4.0 on layers 35-41; the shared expert at 5.0 on 34-39
    # and 7.0 on 40-41.
    routed = tuple(4.0 if i >= 35 else 0.0 for i in range(layers))
    shared = tuple(7.0 if i >= 40 else 5.0 if i >= 34 else 0.0 for i in range(layers))
    return routed, shared


_FLASH_ROUTED, _FLASH_SHARED = _flash_limits(42)

LING3_FLASH = LingConfig(
    name="ling3-flash",
    vocab_size=157184,
    hidden_size=2560,
    num_hidden_layers=42,
    layer_group_size=6,
    num_attention_heads=32,
    head_dim=128,
    intermediate_size=6144,
    first_k_dense_replace=2,
    num_experts=512,
    num_experts_per_tok=8,
    num_shared_experts=1,
    moe_intermediate_size=768,
    moe_shared_expert_intermediate_size=768,
    n_group=8,
    topk_group=4,
    routed_scaling_factor=2.5,
    q_lora_rank=None,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    rope_theta=6_000_000.0,
    short_conv_kernel_size=4,
    kda_lower_bound=-5.0,
    rms_norm_eps=1e-6,
    num_nextn_predict_layers=1,
    expert_swiglu_limit_list=_FLASH_ROUTED,
    share_expert_swiglu_limit_list=_FLASH_SHARED,
    description="exact Ling-3.0-flash: 124.4 B params, 10.2 GB bf16 weights read per token; TP >= 2 on H200",
)

# Same bytes per token as Flash (8 routed experts of the same size), half the expert memory: fits one H200.
LING3_FLASH_E256 = LING3_FLASH.with_(
    name="ling3-flash-e256",
    num_experts=256,
    description="Flash with 256 routed experts: same bytes per token, ~128 GB; fits one H200",
)

LING3_TINY = LingConfig(
    name="ling3-tiny",
    vocab_size=157184,
    hidden_size=1536,
    num_hidden_layers=24,
    layer_group_size=4,
    num_attention_heads=16,
    head_dim=128,
    intermediate_size=4608,
    first_k_dense_replace=1,
    num_experts=128,
    num_experts_per_tok=8,
    num_shared_experts=1,
    moe_intermediate_size=512,
    moe_shared_expert_intermediate_size=512,
    n_group=8,
    topk_group=4,
    routed_scaling_factor=2.5,
    q_lora_rank=256,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    rope_theta=6_000_000.0,
    short_conv_kernel_size=4,
    kda_lower_bound=-5.0,
    rms_norm_eps=1e-6,
    num_nextn_predict_layers=0,
    expert_swiglu_limit_list=tuple(0.0 for _ in range(24)),
    share_expert_swiglu_limit_list=tuple(0.0 for _ in range(24)),
    max_position_embeddings=131072,
    description="public Ling-3.0-tiny shape: 24 layers, hidden 1536, 128 experts; any GPU",
)

# Tiny and fp32, but every path: dense layer 0, KDA, MLA (layers 2 and 5), MoE with 4 groups of 4 and
# group-limited routing (top-2 groups, top-4 experts), clamps on the last layers, an MTP layer.
DEBUG = LingConfig(
    name="debug",
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=6,
    layer_group_size=3,
    num_attention_heads=4,
    head_dim=16,
    intermediate_size=128,
    first_k_dense_replace=1,
    num_experts=16,
    num_experts_per_tok=4,
    num_shared_experts=1,
    moe_intermediate_size=32,
    moe_shared_expert_intermediate_size=32,
    n_group=4,
    topk_group=2,
    routed_scaling_factor=2.5,
    q_lora_rank=None,
    kv_lora_rank=32,
    qk_nope_head_dim=16,
    qk_rope_head_dim=8,
    v_head_dim=16,
    rope_theta=6_000_000.0,
    short_conv_kernel_size=4,
    kda_lower_bound=-5.0,
    rms_norm_eps=1e-6,
    num_nextn_predict_layers=1,
    expert_swiglu_limit_list=(0.0, 0.0, 0.0, 0.0, 4.0, 4.0),
    share_expert_swiglu_limit_list=(0.0, 0.0, 0.0, 5.0, 5.0, 7.0),
    dtype="float32",
    max_position_embeddings=4096,
    eos_token_id=511,
    description="tiny fp32 model exercising every code path; CPU tests and the CPU fallback",
)

PRESETS: dict[str, LingConfig] = {cfg.name: cfg for cfg in (LING3_FLASH, LING3_FLASH_E256, LING3_TINY, DEBUG)}


def get_preset(name: str) -> LingConfig:
    """Look a preset up by name, with an error that lists the valid ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}") from None
