"""The HBM bytes each kernel of the fast decode step must read, as rules the analysis matches to a trace.

A rule names a kernel family, the Triton/cuBLAS kernel names it launches (by prefix), optionally the
launch grid's x (one `gemv_kernel` serves every projection; its grid tells the shapes apart, as the
GEMV launcher picks it from the output rows), and the bytes one decode step of one token reads through
all of that family's launches. The numbers are the same accounting as the speed-of-light floor
(`accounting.bytes_per_token`), split by the kernel that reads each tensor, so the rules add up to the
floor's bytes less what no kernel of the list reads (the embedding row, read by a PyTorch index op).

Valid for the fast path (`--path fast`, any switch set) at batch 1 without speculation and at TP=1;
`rules_for` returns None elsewhere and the report says bytes are unknown.
"""

from __future__ import annotations

from typing import Any

from .accounting import BF16_BYTES, FP32_BYTES, bytes_per_token, dtype_bytes
from .config import LingConfig
from .switches import LingSwitches

# cuBLAS batched GEMMs that run the absorbed MLA head products when `fused_mla_glue` is off; the names
# depend on the cuBLAS build (nvjet on Hopper with CUDA 12.8+, xmma/cutlass/gemv elsewhere).
CUBLAS_PREFIXES = ("nvjet", "sm90_xmma", "sm80_xmma", "cutlass", "gemv2T", "gemvx", "gemmk1", "gemmSN")


def _gemv_grid(out_features: int, in_features: int) -> int:
    """Programs the GEMV launcher uses for one row at this shape (kernels/gemv/ops.choose_config)."""
    import triton
    from bubblescope.kernels.gemv.ops import choose_config

    return triton.cdiv(out_features, choose_config(1, out_features, in_features).block_n)


# The GEMV ending with the next block's add + RMSNorm under `norm_epilogue` (kernels/gemv/norm_epilogue.py).
NORM_GEMV = "gemv_norm_epilogue_kernel"
# KDA's o_proj with the heads' gated RMSNorm in its prologue under `kda_norm_in_oproj`
# (kernels/gemv/head_norm_prologue.py); it reads o_norm instead of the KDA decode kernel.
HEAD_NORM_GEMV = "gemv_head_norm_kernel"


def _gemv_rules(config: LingConfig, switches: LingSwitches) -> list[dict[str, Any]]:
    """One rule per distinct (kernel, GEMV grid): families whose launches share both share a rule.

    Under `norm_epilogue` the block output projections are NORM_GEMV launches that also read the norm
    weight of the norm they end with (one `[D]` vector per launch, moved from the add_rmsnorm rule).
    Under `kda_norm_in_oproj` the KDA o_proj is a HEAD_NORM_GEMV launch that also reads o_norm (`[V]`,
    moved from the KDA decode rule) and, with `norm_epilogue`, ends with the next norm as well.
    """
    elem = dtype_bytes(config)
    hidden, heads = config.hidden_size, config.num_attention_heads
    kda, mla = len(config.kda_layers), len(config.mla_layers)
    dense = config.num_hidden_layers - _moe_layers(config)
    q_first = config.q_lora_rank or heads * config.qk_head_dim
    output = (NORM_GEMV, hidden * elem) if switches.norm_epilogue else ("gemv_kernel", 0)
    plain = ("gemv_kernel", 0)
    kda_output = output
    if switches.kda_norm_in_oproj:
        kda_output = (HEAD_NORM_GEMV, output[1] + config.head_dim * elem)
    # (label, out rows, in cols, launches per step, bytes per weight element, (kernel, norm bytes per launch))
    shapes = [
        ("KDA in_proj", 5 * heads * config.head_dim + heads, hidden, kda, elem, plain),
        ("KDA o_proj", hidden, heads * config.head_dim, kda, elem, kda_output),
        ("MLA in_proj", q_first + config.mla_cache_width + heads, hidden, mla, elem, plain),
        ("MLA dense", hidden, heads * config.v_head_dim, mla, elem, output),
        ("dense FFN gate/up", 2 * config.intermediate_size, hidden, dense, elem, plain),
        ("dense FFN down", hidden, config.intermediate_size, dense, elem, output),
    ]
    if config.q_lora_rank:
        shapes.append(("MLA q_b_proj", heads * config.qk_head_dim, config.q_lora_rank, mla, elem, plain))
    if not switches.fused_moe:
        gate_bytes = BF16_BYTES if switches.bf16_gate else FP32_BYTES
        shapes.append(("router gate", config.num_experts, hidden, _moe_layers(config), gate_bytes, plain))
    by_grid: dict[tuple[str, int], dict[str, Any]] = {}
    for label, rows, cols, launches, size, (kernel, norm_bytes) in shapes:
        if not launches:
            continue
        grid = _gemv_grid(rows, cols)
        rule = by_grid.setdefault(
            (kernel, grid),
            {"family": [], "kernels": [kernel], "grid_x": grid, "bytes_per_step": 0, "launches": 0},
        )
        rule["family"].append(label)
        rule["bytes_per_step"] += launches * (rows * cols * size + norm_bytes)
        rule["launches"] += launches
    rules = []
    for (kernel, _grid), rule in by_grid.items():
        suffix = " + head norm" if kernel == HEAD_NORM_GEMV else ""
        suffix += " + add/RMSNorm" if kernel == NORM_GEMV or (suffix and switches.norm_epilogue) else ""
        rule["family"] = "GEMV " + " / ".join(rule["family"]) + suffix
        rules.append(rule)
    return rules


def _moe_layers(config: LingConfig) -> int:
    return config.num_hidden_layers - config.first_k_dense_replace


def rules_for(
    config: LingConfig, switches: LingSwitches, *, context_len: int, path: str = "fast", tp: int = 1
) -> list[dict[str, Any]] | None:
    """Bytes per step of each kernel family of one decode step, or None where they are not modelled.

    Args:
        config: the preset's shapes.
        switches: the switch set the step runs with (picks fused vs unfused MoE kernels, the bf16 router
            and lm_head, the MLA glue kernels).
        context_len: cached tokens the MLA layers attend over.
        path: "fast" (Triton kernels, modelled) or "eager" (PyTorch ops: not modelled).
        tp: tensor-parallel degree (only 1 is modelled).
    Returns:
        [{family, kernels (name prefixes), grid_x (int or None), bytes_per_step, launches}] — `launches`
        is the expected launches per step (None where it is not fixed) — or None.
    """
    if path != "fast" or tp != 1:
        return None
    elem = dtype_bytes(config)
    parts = bytes_per_token(
        config, context_len=context_len, router_bf16=switches.bf16_gate, lm_head_bf16=switches.bf16_lm_head
    ).components
    moe = _moe_layers(config)
    kda, mla = len(config.kda_layers), len(config.mla_layers)
    hidden, heads = config.hidden_size, config.num_attention_heads
    gemvs = _gemv_rules(config, switches)
    experts = parts["routed_experts"] + parts["shared_experts"]
    # norm_epilogue: the MoE layer's output launch also reads the next norm's weight.
    moe_norm = moe * hidden * elem if switches.norm_epilogue else 0
    head_products = mla * heads * config.kv_lora_rank * (config.qk_nope_head_dim + config.v_head_dim) * elem
    # The KDA component less its two projections: conv weights, A_log/dt_bias, norms, read by the decode.
    kda_proj = kda * (5 * heads * config.head_dim + heads) * hidden * elem
    kda_proj += kda * hidden * heads * config.head_dim * elem
    rules = list(gemvs)
    if switches.fused_moe:
        # routing_in_experts: the experts programs route, so they read the fp32 selection bias.
        bias = moe * config.num_experts * FP32_BYTES if switches.routing_in_experts else 0
        router_family = "MoE router" if switches.routing_in_experts else "MoE router + top-k"
        rules.append(_rule(router_family, ["router_route_kernel"], parts["router"] - bias, moe))
        rules.append(
            _rule(
                "MoE experts (routed + shared)",
                ["fused_experts_kernel", "deep_experts_kernel"],
                experts + bias + moe_norm,
                moe,
            )
        )
    else:
        # The router's weight is read by the gate GEMV (a gemv rule above); routing reads its logits.
        routing = moe * config.num_experts * FP32_BYTES
        rules.append(_rule("MoE routing (top-k)", ["routing_kernel"], routing, moe))
        gate_up = experts * 2 // 3
        rules.append(_rule("MoE experts gate/up", ["gate_up_kernel"], gate_up, moe))
        rules.append(_rule("MoE experts down", ["down_kernel"], experts - gate_up + moe_norm, moe))
    kda_bytes = parts["kda_state"] + parts["conv_state"] + parts["kda"] - kda_proj
    if switches.kda_norm_in_oproj:
        kda_bytes -= kda * config.head_dim * elem
    rules.append(_rule("KDA decode (state + conv)", ["kda_decode"], kda_bytes, kda))
    rules.append(
        _rule(
            "MLA attention (latent cache)",
            ["mla_split_kernel", "mla_combine_kernel"],
            parts["mla_cache"],
            None,
        )
    )
    if switches.fused_mla_glue:
        rules.append(
            _rule("MLA head products", ["mla_q_absorb_kernel", "mla_out_gate_kernel"], head_products, 2 * mla)
        )
    else:
        rules.append(_rule("MLA head products (cuBLAS bmm)", list(CUBLAS_PREFIXES), head_products, 2 * mla))
    rules.append(
        # The weights are lm_head_partial's; argmax_combine reads only the per-program partials (KB, not
        # in the floor), so it stays with the kernels whose bytes are not modelled.
        _rule("lm_head", ["lm_head_partial_kernel"], parts["lm_head"], None)
    )
    rules.append(
        _rule(
            "add + RMSNorm",
            ["add_rmsnorm_kernel"],
            parts["norms"] - _epilogue_norm_bytes(config, switches),
            None,
        )
    )
    return rules


def _epilogue_norm_bytes(config: LingConfig, switches: LingSwitches) -> int:
    """Norm-weight bytes per step read in producers' epilogues (`norm_epilogue`) instead of add_rmsnorm:
    every norm but the first layer's input norm (the post-attention norms and the norms after every MLP,
    the final norm included; the GEMV and MoE output rules carry them)."""
    if not switches.norm_epilogue:
        return 0
    return 2 * config.num_hidden_layers * config.hidden_size * dtype_bytes(config)


def _rule(family: str, kernels: list[str], size: int, launches: int | None) -> dict[str, Any]:
    return {
        "family": family,
        "kernels": kernels,
        "grid_x": None,
        "bytes_per_step": int(size),
        "launches": launches,
    }
