"""The verify window's expert union, reported: distinct routed experts per MoE layer per verify, the bytes
that union streams and its share of the verify step's bytes (reference_model/spec/routing.py,
union_bytes.py; report/spec_rows.py).

The expected counts come from the routing ids themselves, caught by a hook of this test on every MoE
router (after the workload's own, so with the overlap knob's substitutions) while a verify is recorded,
and counted with Python sets.
"""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.accounting import bytes_per_token
from bubblescope.reference_model.config import get_preset
from bubblescope.reference_model.moe import MoERouter
from bubblescope.reference_model.spec.workload import SpecWorkload
from rich.console import Console

from bubblescope.report.ablation_rows import config_rows
from bubblescope.report.markdown import run_markdown
from bubblescope.report.run_console import print_run_summary
from bubblescope.report.spec_rows import expert_union_items

ACCEPT_LEN = 2.5


@pytest.fixture(scope="module")
def caught() -> tuple[SpecWorkload, list[list[set[int]]]]:
    # Two verifies of 3 tokens: the KDA verify runs in the Triton interpreter on the CPU (~1 s each).
    return run_and_catch_ids(steps=2, overlap=0.5)


def run_and_catch_ids(steps: int, overlap: float) -> tuple[SpecWorkload, list[list[set[int]]]]:
    """DSpark on the debug preset (CPU, eager MoE): per verify, per MoE layer, the set of routed ids."""
    workload = SpecWorkload(
        get_preset("debug"),
        "cpu",
        spec="dspark",
        block=2,
        accept_len=ACCEPT_LEN,
        max_steps=16,
        routing_overlap=overlap,
    )
    workload.prepare(frozenset({"bf16_gate", "bf16_lm_head"}))
    verifies: list[list[set[int]]] = []
    gates = [getattr(layer.mlp, "gate", None) for layer in workload.model.main_layers]
    routers = [gate for gate in gates if isinstance(gate, MoERouter)]

    def catch(module, inputs, output) -> None:
        if not workload.probe.active:
            return
        if not verifies or len(verifies[-1]) == len(routers):
            verifies.append([])
        verifies[-1].append({int(i) for i in output[0].flatten().tolist()})

    handles = [router.register_forward_hook(catch) for router in routers]
    try:
        for _ in range(steps):
            workload.step()
    finally:
        for handle in handles:
            handle.remove()
    return workload, verifies


def test_union_counts_and_bytes_match_the_routing_ids(caught) -> None:
    workload, verifies = caught
    config = workload.config
    experts = workload.spec_summary()["experts"]
    counts = [[len(layer) for layer in verify] for verify in verifies]
    flat = [c for verify in counts for c in verify]
    assert experts["verifies"] == len(counts) == 2
    assert experts["moe_layers"] == len(counts[0]) == config.num_hidden_layers - config.first_k_dense_replace
    assert experts["distinct_experts_min"] == min(flat)
    assert experts["distinct_experts_max"] == max(flat)
    assert abs(experts["distinct_experts_mean"] - sum(flat) / len(flat)) < 0.01
    sums = [sum(verify) for verify in counts]
    assert experts["distinct_experts_sum_by_verify"]["min"] == min(sums)
    assert experts["distinct_experts_sum_by_verify"]["max"] == max(sums)
    # One routed expert: gate and up [I, D] and down [D, I] in the preset's dtype.
    element = torch.empty(0, dtype=getattr(torch, config.dtype)).element_size()
    expert = 3 * config.hidden_size * config.moe_intermediate_size * element
    assert experts["expert_bytes"] == expert
    union = sum(sums) / len(sums) * expert
    assert abs(experts["union_bytes_per_verify"]["mean"] - union) <= 0.01 * expert
    assert experts["union_bytes_per_verify"]["max"] == max(sums) * expert
    one_token = experts["moe_layers"] * config.num_experts_per_tok * expert
    assert experts["one_token_routed_bytes"] == one_token
    decode = bytes_per_token(
        config, context_len=workload.cache.length, router_bf16=True, lm_head_bf16=True
    ).total
    draft = sum(p.numel() * p.element_size() for p in workload.draft.module.parameters())
    verify = decode - one_token + experts["union_bytes_per_verify"]["mean"] + draft
    assert experts["verify_bytes"] == verify
    assert (
        abs(experts["union_share_of_verify_bytes"] - experts["union_bytes_per_verify"]["mean"] / verify)
        < 1e-4
    )
    # The floor per token is the verify's bytes over the accept length (the oracle's target).
    assert workload.bytes_per_token(workload.enabled) == int(verify / ACCEPT_LEN)


def test_report_surfaces_show_the_union(caught) -> None:
    workload, _ = caught
    summary = workload.spec_summary()
    record = {
        "schema": "bubblescope.run/1",
        "workload": {"name": workload.name},
        "preset": "debug",
        "switches": {"enabled": sorted(workload.enabled)},
        "summary": {"tpot_ms": 1.0, "tokens_per_s": 1000.0, "tokens": 6, "repeats": 1},
        "analysis": None,
        **summary,
    }
    items = dict(expert_union_items(record))
    share = summary["experts"]["union_share_of_verify_bytes"]
    assert f"{share:.0%} of the verify step's" in items["expert union bytes / verify"]
    low, high = summary["experts"]["distinct_experts_min"], summary["experts"]["distinct_experts_max"]
    assert f"(range {low}–{high} over 2 verifies" in items["expert union / MoE layer / verify"]
    assert "expert union bytes / verify" in run_markdown(record, None)
    console = Console(width=200, record=True, color_system=None)
    print_run_summary(console, record, "out", [])
    assert f"{share:.0%} of the verify step's" in console.export_text()
    # A speculative ablation's configuration table carries the union per configuration.
    headers, rows = config_rows({"configs": [{"key": "a"}]}, {"a": record})
    assert headers[-1] == "expert union / layer / verify"
    mean = summary["experts"]["distinct_experts_mean"]
    assert rows[0][-1].startswith(f"{mean:.1f} ({low}–{high}); ")
    assert rows[0][-1].endswith(f"= {share:.0%} of the verify")
    # A non-speculative record has no such items; a speculative one before any verify says so.
    assert expert_union_items({"summary": {}}) == []
    assert dict(expert_union_items({"spec": {"kind": "dspark"}, "experts": {"verifies": 0}})) == {
        "expert union / MoE layer / verify": "not measured",
        "expert union bytes / verify": "not measured",
    }
