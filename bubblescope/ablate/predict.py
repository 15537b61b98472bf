"""What each switch should save, predicted from the all-off (baseline) run's analysis alone.

The reference workload is where the true saving of a fix is measured (the ablation); here the tool
predicts it first, from what its analysis of the baseline says the switch's target costs, so the
ablation report can check the analysis against the measurement. One rule per switch (RULES), each
"switch: what it removes -> predicted saving per step, from the baseline":

  * no_readback: the host's blocking reads of decode metadata -> the reads' bounded cost, their
    `bubble_ns` (the `sync` idle that follows them, at most their lost lead).
  * pdl: each kernel waiting for the previous one to drain -> `launch` idle (inside a graph the launches
    are queued, so launch idle is the inter-kernel gap that PDL overlaps).
  * graph_metadata: eager metadata ops between graph replays -> the launch gaps of those eager launches
    (PyTorch-native kernels launched at most twice a step) at the mean launch idle per kernel.
  * fused_moe: separate router and expert launches -> the launches merged away (router, gate/up and
    down, once per MoE layer, become 2 per layer) at the mean launch idle per kernel.
  * fused_mla_glue: PyTorch ops around MLA attention -> the glue launches merged away (cuBLAS bmm and
    elementwise kernels once per MLA layer become 2 per layer) at the mean launch idle, plus the
    elementwise kernels' own time (their work joins kernels that stream weights anyway).
  * norm_epilogue: an add_rmsnorm launch after every block -> those launches but one (the first
    layer's input norm) at the mean launch idle per kernel; their work moves into the producers' last
    program, so their kernel time is not predicted to vanish.
  * bf16_gate, bf16_lm_head: fp32 weights read every step -> the bytes per token they stop reading
    (the two configurations' floor bytes) / the bandwidth measured on the device.

Every other switch has no rule and says why (`fast_topk`, `early_shared`, `deep_experts`,
`routing_in_experts` act inside the fused MoE kernel: no launch or gap of theirs is in a trace; the verify
and tensor-parallel switches act on steps a one-token decode baseline does not run).

Intervals: an idle prediction's interval is the two-level bootstrap of the baseline's per-step idle
samples (`RunRecord.analysis.idle_steps`, the same bootstrap as TPOT; one profiled window is one repeat).
A launch prediction scales the per-step launch idle samples by the share of launches removed, so its
interval carries that variation; kernel times come from the kernel table (no per-step split) and add no
width. A bytes prediction has no interval: bytes are arithmetic, the bandwidth one measurement.
Predictions describe the baseline's profiled steps (`profiled_step_over_timed` says how much longer they
ran than the timed ones) and are per token (÷ tokens per step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from bubblescope.records.run_record import RunRecord, mean_tokens_per_step
from bubblescope.stats import DEFAULT_BOOTSTRAP, bootstrap_medians, estimate, stable_seed


@dataclass(frozen=True)
class Rule:
    """How one switch's saving is predicted from the baseline (module docstring's table)."""

    switch: str
    removes: str
    # "idle": an idle class; "launches": kernels merged into fewer launches; "bytes": weights not read.
    kind: str
    idle_class: str | None = None
    # kind "launches": regexes of the merged kernels' names, and optionally a cap on their launches a step.
    kernels: tuple[str, ...] = ()
    max_per_step: float | None = None
    # Merged kernels (each run once per launch of `group_kernel`, e.g. once per layer) become
    # `launches_per_group` launches per group.
    group_kernel: str | None = None
    launches_per_group: int = 0
    # Of the merged kernels, those whose own time disappears too (their work joins another kernel).
    vanishing: tuple[str, ...] = ()
    # Launches of the merged kernels a step that stay (kernel "launches" without a group).
    kept_per_step: float = 0.0


_ELEMENTWISE = r"at::native::.*elementwise_kernel"
RULES: dict[str, Rule] = {
    rule.switch: rule
    for rule in (
        Rule("no_readback", "the blocking reads' bounded cost (sync idle after them)", "idle", "sync"),
        Rule("pdl", "launch idle between kernels", "idle", "launch"),
        Rule(
            "graph_metadata",
            "launch gaps of the eager metadata launches between graph replays",
            "launches",
            kernels=(r"at::native::",),
            max_per_step=2.0,
        ),
        Rule(
            "fused_moe",
            "launch gaps of the router and expert launches it merges",
            "launches",
            kernels=(r"^routing_kernel$", r"^gate_up_kernel$", r"^down_kernel$"),
            group_kernel=r"^down_kernel$",
            launches_per_group=2,
        ),
        Rule(
            "fused_mla_glue",
            "the MLA glue launches (bmm, casts, sigmoid, multiply) and the elementwise kernels' time",
            "launches",
            kernels=(r"^nvjet", r"gemm", _ELEMENTWISE),
            group_kernel=r"^mla_split_kernel$",
            launches_per_group=2,
            vanishing=(_ELEMENTWISE,),
        ),
        Rule(
            "norm_epilogue",
            "launch gaps of the add_rmsnorm launches done in the producing launch's epilogue instead",
            "launches",
            kernels=(r"^add_rmsnorm_kernel$",),
            kept_per_step=1.0,
        ),
        Rule("bf16_gate", "fp32 router weights read every step (half their bytes)", "bytes"),
        Rule("bf16_lm_head", "fp32 lm_head weights read every step (half their bytes)", "bytes"),
    )
}
_IN_FUSED_MOE = "acts inside the fused MoE kernel: no launch or gap of its own in a trace"
_VERIFY_ONLY = "acts on the speculative verify window, which a one-token decode baseline does not run"
NO_RULE = {
    "fast_topk": _IN_FUSED_MOE,
    "early_shared": _IN_FUSED_MOE,
    "deep_experts": _IN_FUSED_MOE,
    "tma_experts": _IN_FUSED_MOE,
    "routing_in_experts": _IN_FUSED_MOE,
    "kda_norm_in_oproj": "moves KDA's head norm into o_proj's prologue: no launch or gap removed",
    "expert_union": _VERIFY_ONLY,
    "staged_kda": _VERIFY_ONLY,
    "fused_kda_verify": _VERIFY_ONLY,
    "verify_norm_kernel": _VERIFY_ONLY,
    "verify_gated_norm": _VERIFY_ONLY,
    "verify_fused_in_proj": _VERIFY_ONLY,
    "fast_allreduce": "acts on tensor-parallel all-reduces; no rule predicts a collective's time yet",
}


def _idle_samples_ns(record: RunRecord, cls: str) -> np.ndarray | None:
    block = (record.get("analysis") or {}).get("idle_steps") or {}
    values = (block.get("by_class_ns") or {}).get(cls)
    return np.asarray(values, dtype=np.float64) if isinstance(values, list) and values else None


def _per_token_ms(samples_ns: np.ndarray, scale: float, extra_ns: float, tokens: float, seed: int) -> dict:
    """Median of `samples_ns × scale + extra_ns` per token (ms), with its bootstrap interval."""
    values = samples_ns * scale + extra_ns
    reps = bootstrap_medians([values], n_boot=DEFAULT_BOOTSTRAP, seed=seed, hierarchical=True)
    return estimate(float(np.median(values)) / tokens / 1e6, reps / tokens / 1e6)


def _matching(kernels: list[dict[str, Any]], patterns: tuple[str, ...], cap: float | None) -> list[dict]:
    compiled = [re.compile(p) for p in patterns]
    return [
        k
        for k in kernels
        if isinstance(k, dict)
        and any(c.search(str(k.get("name", ""))) for c in compiled)
        and (cap is None or float(k.get("count_per_step") or 0.0) <= cap)
    ]


def _launch_prediction(rule: Rule, base: RunRecord, analysis: dict[str, Any] | None, seed: int) -> dict:
    kernels = (analysis or {}).get("kernels")
    if not isinstance(kernels, list) or not kernels:
        return {"why_none": "the baseline's kernel table (its analysis file) is not available"}
    merged = _matching(kernels, rule.kernels, rule.max_per_step)
    groups = 0.0
    if rule.group_kernel:
        anchors = _matching(kernels, (rule.group_kernel,), None)
        groups = sum(float(k.get("count_per_step") or 0.0) for k in anchors)
        # A merged kernel runs once per group (per layer): same-named kernels elsewhere are not merged.
        merged = [k for k in merged if float(k.get("count_per_step") or 0.0) == groups]
    if not merged:
        return {
            "predicted_ms": estimate(0.0, np.zeros(1)),
            "basis": "none of its kernels ran in the baseline",
        }
    launches = sum(float(k.get("count_per_step") or 0.0) for k in merged)
    removed = max(launches - rule.launches_per_group * groups - rule.kept_per_step, 0.0)
    vanishing_ns = sum(float(k.get("ns_per_step") or 0.0) for k in _matching(merged, rule.vanishing, None))
    kernels_per_step = float((base.get("analysis") or {}).get("kernels_per_step") or 0.0)
    launch_idle = _idle_samples_ns(base, "launch")
    if launch_idle is None or kernels_per_step <= 0:
        return {"why_none": "the baseline has no per-step launch idle (re-analyse: `ablate --reanalyze`)"}
    share = removed / kernels_per_step
    basis = (
        f"{removed:g} of {kernels_per_step:g} launches a step removed ({len(merged)} kernel names matched)"
        + (f", plus {vanishing_ns / 1e3:.1f} µs of kernel time" if vanishing_ns else "")
    )
    return {
        "predicted_ms": _per_token_ms(launch_idle, share, vanishing_ns, mean_tokens_per_step(base), seed),
        "basis": basis,
    }


def _bytes_prediction(base: RunRecord, switched: RunRecord | None) -> dict:
    floor = base.get("floor") or {}
    other = (switched or {}).get("floor") or {}
    if floor.get("bandwidth_source") != "measured" or not floor.get("bandwidth_gbps"):
        return {"why_none": "no bandwidth measured on the device that ran (a CPU run, or an assumed one)"}
    before, after = floor.get("bytes_per_token"), other.get("bytes_per_token")
    if not isinstance(before, int | float) or not isinstance(after, int | float):
        return {"why_none": "the configurations' floors do not give their bytes per token"}
    saved_ms = (float(before) - float(after)) / float(floor["bandwidth_gbps"]) / 1e6
    return {
        "predicted_ms": {"est": saved_ms, "lo": None, "hi": None},
        "no_interval": "bytes are arithmetic and the bandwidth one measurement: no per-step variation",
        "basis": f"{(before - after) / 1e6:.1f} MB per token fewer at {floor['bandwidth_gbps']:g} GB/s",
    }


def predict_switch(
    name: str, base: RunRecord, analysis: dict[str, Any] | None, switched: RunRecord | None = None
) -> dict[str, Any]:
    """One switch's predicted saving (ms per token, positive = faster) from the baseline.

    Args:
        name: the switch.
        base: the baseline (all-off) RunRecord; `analysis.idle_steps` gives per-step samples.
        analysis: the baseline's full analysis/1 (its `kernels[]` table), or None.
        switched: the record of the switch alone (bytes rules read its floor's bytes per token).
    Returns:
        {"switch", "removes", "predicted_ms": {est, lo, hi} | None, "basis", "no_interval", "why_none"}.
    """
    rule = RULES.get(name)
    out: dict[str, Any] = {"switch": name, "removes": rule.removes if rule else None, "predicted_ms": None}
    out.update(basis=None, no_interval=None, why_none=None)
    if rule is None:
        out["why_none"] = NO_RULE.get(name, "no prediction rule for this switch")
        return out
    if (base.get("analysis") or {}).get("gpu_measured") is not True and rule.kind != "bytes":
        out["why_none"] = "not measured (no GPU in the baseline run)"
        return out
    seed = stable_seed("predict", name)
    if rule.kind == "idle":
        samples = _idle_samples_ns(base, rule.idle_class or "")
        if samples is None:
            out["why_none"] = "the baseline has no per-step idle (re-analyse: `ablate --reanalyze`)"
        else:
            out["predicted_ms"] = _per_token_ms(samples, 1.0, 0.0, mean_tokens_per_step(base), seed)
            out["basis"] = f"median {rule.idle_class} idle of {len(samples)} profiled steps"
    elif rule.kind == "launches":
        out.update(_launch_prediction(rule, base, analysis, seed))
    else:
        out.update(_bytes_prediction(base, switched))
    return out
