"""A speculative run's verify window: its expert union and what it costs in bytes, as (label, value) items.

From a RunRecord's `experts` block (reference_model/spec/routing.py and union_bytes.py): the distinct
routed experts per MoE layer per verify (mean, range over every verify and layer, the upper bound, one
token's top-k), the realised routing overlap beside the knob, and the bytes the union streams per
verify with its share of the verify step's bytes. Rendering only; nothing for non-speculative runs.
"""

from __future__ import annotations

from typing import Any

from bubblescope.report.cells import NOT_MEASURED, fmt_bytes, num, plain

UNION_LABEL = "expert union / MoE layer / verify"
UNION_BYTES_LABEL = "expert union bytes / verify"


def expert_union_items(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) items of a speculative record; [] for other records."""
    if not isinstance(record.get("spec"), dict):
        return []
    experts = record.get("experts") if isinstance(record.get("experts"), dict) else {}
    if not experts.get("verifies"):
        return [(UNION_LABEL, NOT_MEASURED), (UNION_BYTES_LABEL, NOT_MEASURED)]
    return [(UNION_LABEL, _union_text(experts)), (UNION_BYTES_LABEL, _bytes_text(experts))]


def _union_text(experts: dict[str, Any]) -> str:
    text = f"{num(experts.get('distinct_experts_mean')) or 0:.1f} distinct routed experts"
    low, high = num(experts.get("distinct_experts_min")), num(experts.get("distinct_experts_max"))
    where = f"{plain(experts.get('verifies'))} verifies"
    if experts.get("moe_layers"):
        where += f" × {plain(experts.get('moe_layers'))} layers"
    if low is not None and high is not None:
        text += f" (range {low:g}–{high:g} over {where})"
    text += f", of ≤ {plain(experts.get('upper_bound'))}"
    tokens = num(experts.get("tokens_per_verify"))
    text += f" for {tokens:g} tokens" if tokens is not None else ""
    realised = num(experts.get("overlap_realised"))
    knob = num(experts.get("overlap_knob"))
    if realised is not None:
        text += f"; consecutive tokens share {realised:.0%} of their experts"
        text += f" (--routing-overlap {knob:g})" if knob is not None else ""
    return text


def _bytes_text(experts: dict[str, Any]) -> str:
    union = experts.get("union_bytes_per_verify")
    share = num(experts.get("union_share_of_verify_bytes"))
    if not isinstance(union, dict) or share is None:
        return NOT_MEASURED
    spread = f"{fmt_bytes(union.get('min'))}–{fmt_bytes(union.get('max'))}"
    return (
        f"{fmt_bytes(union.get('mean'))} (range {spread}): "
        f"{share:.0%} of the verify step's {fmt_bytes(experts.get('verify_bytes'))}; "
        f"{fmt_bytes(experts.get('beyond_one_token_bytes'))} more than one token's "
        f"{fmt_bytes(experts.get('one_token_routed_bytes'))} of routed experts"
    )


UNION_HEADER = "expert union / layer / verify"


def union_cells(records: list[dict[str, Any]]) -> list[list[str]] | None:
    """Per RunRecord (in order), one cell for a configuration table: distinct experts per MoE layer per
    verify (range), and the union's bytes with its share of the verify; None without speculative records."""
    if not any(isinstance(record.get("spec"), dict) for record in records):
        return None
    return [[_union_cell(record.get("experts"))] for record in records]


def _union_cell(experts: Any) -> str:
    if not isinstance(experts, dict) or not experts.get("verifies"):
        return NOT_MEASURED
    text = f"{num(experts.get('distinct_experts_mean')) or 0:.1f}"
    low, high = num(experts.get("distinct_experts_min")), num(experts.get("distinct_experts_max"))
    if low is not None and high is not None:
        text += f" ({low:g}–{high:g})"
    union, share = experts.get("union_bytes_per_verify"), num(experts.get("union_share_of_verify_bytes"))
    if isinstance(union, dict) and share is not None:
        text += f"; {fmt_bytes(union.get('mean'))} = {share:.0%} of the verify"
    return text
