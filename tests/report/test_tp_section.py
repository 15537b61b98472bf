"""The "Tensor-parallel ranks" report sections: per-rank table of a run, per-configuration rank spread of an
ablation, console lines, escaping of everything a record carries, and malformed `tp` blocks."""

from __future__ import annotations

import copy
import json

from rich.console import Console

from bubblescope.report.html import render_ablation_html, render_run_html
from bubblescope.report.markdown import ablation_markdown, run_markdown
from bubblescope.report.run_console import print_ablation_summary, print_run_summary
from bubblescope.report.tp_rows import ablation_tp_rows, rank_rows, slowest_rank_text, tp_of
from tests.report.helpers import HOSTILE_NAME, MINIMAL_RUN_FILE


def _rank(rank: int, busy_ns: int, device: str = "cuda:0") -> dict:
    return {
        "rank": rank,
        "record": f"rank{rank}.json",
        "trace": f"trace.rank{rank}.json.gz",
        "device": device,
        "tpot_ms": 2.0 + rank / 10,
        "gpu_busy_ns_per_step": busy_ns,
        "idle_ns_per_step": 300_000 - busy_ns // 10,
        "blocking_reads_per_step": float(rank),
    }


def _tp_record(devices: tuple[str, ...] = ("cuda:0", "cuda:1"), busy=(1_500_000, 1_800_000)) -> dict:
    record = json.loads(MINIMAL_RUN_FILE.read_text())
    ranks = [_rank(i, b, d) for i, (b, d) in enumerate(zip(busy, devices, strict=True))]
    record["tp"] = {
        "world_size": len(ranks),
        "backend": "nccl",
        "allreduce": "symm_one_shot",
        "timing_rank": 0,
        "ranks": ranks,
        "slowest_rank": max(ranks, key=lambda r: r["gpu_busy_ns_per_step"])["rank"],
    }
    return record


def _ablation(records: dict) -> dict:
    return {
        "schema": "bubblescope.ablation/1",
        "toggles": ["bf16_gate"],
        "order": ["bf16_gate"],
        "configs": [
            {"key": key, "enabled": [] if key == "base" else [key], "roles": [], "status": "done"}
            for key in records
        ],
        "attribution": None,
    }


def test_run_markdown_has_rank_table_and_says_which_rank_is_slowest_and_why() -> None:
    text = run_markdown(_tp_record(), None)
    assert "### Tensor-parallel ranks" in text
    table = [line for line in text.splitlines() if line.startswith("| 1 | cuda:1 |")]
    assert len(table) == 1 and "1.80\u00a0ms" in table[0] and "slowest" in table[0]
    assert "rank 1 is the slowest: it has the most GPU work per step" in text
    assert "1.80\u00a0ms vs 1.50\u00a0ms" in text
    assert "| world size | 2 (nccl) |" in text


def test_run_html_has_rank_table_and_escapes_a_hostile_device() -> None:
    page = render_run_html(_tp_record(devices=("cuda:0", HOSTILE_NAME)), None)
    assert "Tensor-parallel ranks" in page
    assert HOSTILE_NAME not in page
    assert "&lt;/script&gt;&lt;script&gt;document.title=" in page
    markdown = run_markdown(_tp_record(devices=(HOSTILE_NAME, "cuda:1")), None)
    assert "</script>" not in markdown and "&lt;/script&gt;" in markdown


def test_cpu_ranks_say_gpu_time_is_not_measured_and_fall_back_to_tpot() -> None:
    record = _tp_record(devices=("cpu", "cpu"), busy=(0, 0))
    record["tp"]["slowest_rank"] = 1
    tp = tp_of(record)
    _, rows = rank_rows(tp)
    assert rows[0][3] == "not measured" and rows[1][4] == "not measured"
    assert "slowest by TPOT on its own timeline" in slowest_rank_text(tp)


def test_ablation_reports_show_slowest_rank_and_busy_spread_per_configuration() -> None:
    records = {
        "base": _tp_record(busy=(1_000_000, 1_250_000)),
        "bf16_gate": _tp_record(busy=(900_000, 800_000)),
    }
    ablation = _ablation(records)
    _, rows = ablation_tp_rows(ablation, records)
    assert [row[0] for row in rows] == ["base", "bf16_gate"]
    assert [row[2] for row in rows] == ["1", "0"]
    assert "20.0% spread" in rows[0][4] and "11.1% spread" in rows[1][4]
    markdown, page = ablation_markdown(ablation, records), render_ablation_html(ablation, records)
    assert "### Tensor-parallel ranks per configuration" in markdown
    assert "Tensor-parallel ranks per configuration" in page
    # why one rank sets the pace, said once for the first configuration (the baseline)
    assert "base: rank 1 is the slowest" in markdown and "base: rank 1 is the slowest" in page
    assert "the other ranks wait for it in each all-reduce" in page


def test_records_without_tp_show_no_tp_section() -> None:
    record = json.loads(MINIMAL_RUN_FILE.read_text())
    assert "Tensor-parallel" not in run_markdown(record, None)
    assert "Tensor-parallel" not in ablation_markdown(_ablation({"base": record}), {"base": record})


def test_malformed_tp_blocks_degrade_instead_of_crashing() -> None:
    base = _tp_record()
    for tp in (
        "nonsense",
        {"ranks": "x"},
        {"ranks": [1, None, {"rank": "0"}]},
        {"ranks": [{}], "slowest_rank": None},
    ):
        record = copy.deepcopy(base)
        record["tp"] = tp
        run_markdown(record, None)
        render_run_html(record, None)
        ablation_markdown(_ablation({"base": record}), {"base": record})


def test_console_summaries_mention_world_size_and_slowest_rank() -> None:
    console = Console(record=True, width=160)
    record = _tp_record(devices=("cuda:0", "[bold]x[/]"))
    print_run_summary(console, record, "out", [])
    records = {"base": record}
    print_ablation_summary(console, {}, [], manifest=_ablation(records), records=records)
    text = console.export_text()
    assert "tensor parallel: 2 ranks (nccl) · slowest rank 1" in text
    assert "[bold]x[/]" in text, "rich markup in a record is shown, not interpreted"
    assert "tensor parallel: 2 ranks" in text and "Slowest rank per configuration" in text
    assert "no attribution yet" in text
