"""`bubblescope ablate --tp N` on CPU: gloo ranks in lockstep on the debug preset, rank 0's records are the
ablation (with `tp` blocks), rank r's records live in rank<r>/runs/, and resuming measures on every rank
exactly the configurations rank 0 lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.errors import BubblescopeError
from bubblescope.records.run_record import load_record, save_record

FAST = ["--preset", "debug", "--steps", "3", "--warmup", "1", "--repeats", "1", "--profile-steps", "2"]
TWO = ["--toggles", "bf16_gate,bf16_lm_head"]
KEYS = ["base", "bf16_gate", "bf16_lm_head", "bf16_gate+bf16_lm_head"]


def _ablate(out: Path, *args: str) -> object:
    result = CliRunner().invoke(app, ["ablate", *FAST, *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result


def _record_path(out: Path, rank: int, key: str) -> Path:
    return (out if rank == 0 else out / f"rank{rank}") / "runs" / f"{key}.json"


def _mark_old(out: Path, rank: int, key: str) -> None:
    """Tag a record on disk; a configuration measured again is written without the tag."""
    record = load_record(_record_path(out, rank, key))
    record["test_marker"] = "before resume"
    save_record(record, _record_path(out, rank, key))


def _check_rank0_record(out: Path, key: str, world_size: int, backend: str = "gloo") -> dict:
    record = load_record(out / "runs" / f"{key}.json")
    tp = record["tp"]
    assert tp["world_size"] == world_size and tp["backend"] == backend and tp["timing_rank"] == 0
    assert [r["rank"] for r in tp["ranks"]] == list(range(world_size))
    assert tp["slowest_rank"] in range(world_size)
    assert record["traces"] == [r["trace"] for r in tp["ranks"]]
    for entry in tp["ranks"]:
        assert (out / "runs" / entry["trace"]).is_file()
        rank_record = load_record(out / "runs" / entry["record"])
        assert rank_record["workload"]["describe"]["tp"]["rank"] == entry["rank"]
        assert rank_record["switches"]["enabled"] == record["switches"]["enabled"]
        assert rank_record["tokens"] == record["tokens"], "lockstep: every rank decoded the same tokens"
        assert entry["tpot_ms"] == rank_record["summary"]["tpot_ms"]
    analysis = json.loads((out / "runs" / record["analysis_file"]).read_text())
    assert [item["rank"] for item in analysis["inputs"]] == list(range(world_size))
    return record


# The whole TP=2 ablation end to end (21 s on the 2-core CI box): `slow`, so the default suite stays
# within its 5 minutes; the rank-0 refusal test below keeps the TP ablate path in the default suite.
@pytest.mark.slow
def test_tp2_ablate_writes_tp_records_report_and_resumes_only_what_rank0_lacks(tmp_path: Path) -> None:
    out = tmp_path / "abl"
    _ablate(out, "--tp", "2", *TWO)
    manifest = json.loads((out / "ablation.json").read_text())
    assert [c["key"] for c in manifest["configs"]] == KEYS
    assert all(c["status"] == "done" for c in manifest["configs"])
    assert {row["name"] for row in manifest["attribution"]["switches"]} == {"bf16_gate", "bf16_lm_head"}
    for key in KEYS:
        _check_rank0_record(out, key, 2)
        assert (out / "rank1" / "runs" / f"{key}.json").is_file()
    page = (out / "report.html").read_text()
    assert "Tensor-parallel ranks per configuration" in page

    # Interrupted twice over: one record never written, one written but never merged (no tp block).
    for rank in (0, 1):
        for key in KEYS:
            _mark_old(out, rank, key)
    (out / "runs" / "bf16_gate.json").unlink()
    unmerged = load_record(out / "runs" / "base.json")
    del unmerged["tp"]
    save_record(unmerged, out / "runs" / "base.json")
    again = _ablate(out, "--tp", "2", *TWO)
    assert "2 configurations on disk, 2 measured" in " ".join(again.stderr.split())
    for rank in (0, 1):
        for key in KEYS:
            remeasured = key in ("base", "bf16_gate")
            kept = load_record(_record_path(out, rank, key)).get("test_marker") == "before resume"
            assert kept != remeasured, (rank, key)
    for key in KEYS:
        _check_rank0_record(out, key, 2)
    manifest = json.loads((out / "ablation.json").read_text())
    assert manifest["attribution"] is not None and all(c["status"] == "done" for c in manifest["configs"])

    # Re-analysis (no ranks started) re-analyses every rank's trace and rebuilds the tp blocks.
    stale = load_record(out / "rank1" / "runs" / "base.json")
    stale["analysis"]["blocking_reads_per_step"] = 99.0
    save_record(stale, out / "rank1" / "runs" / "base.json")
    rebuilt = CliRunner().invoke(app, ["ablate", "--reanalyze", "--out", str(out)])
    assert rebuilt.exit_code == 0, rebuilt.output
    rank1 = load_record(out / "runs" / "base.json")["tp"]["ranks"][1]
    assert rank1["blocking_reads_per_step"] != 99.0
    assert (
        rank1["blocking_reads_per_step"]
        == load_record(out / "rank1" / "runs" / "base.json")["analysis"]["blocking_reads_per_step"]
    )


# Four spawned torch ranks on a 2-core box: minutes. TP re-analysis is also checked at TP=2 by the test above.
@pytest.mark.slow
def test_tp4_ablate_one_toggle(tmp_path: Path) -> None:
    out = tmp_path / "abl4"
    result = _ablate(out, "--tp", "4", "--toggles", "bf16_gate")
    for key in ("base", "bf16_gate"):
        _check_rank0_record(out, key, 4)
    for rank in (1, 2, 3):
        assert sorted(
            p.name for p in (out / f"rank{rank}" / "runs").glob("*.json") if ".analysis" not in p.name
        ) == [
            "base.json",
            "bf16_gate.json",
        ]
    assert "tensor parallel: 4 ranks" in result.stdout
    # Re-analysis (no ranks started) re-analyses every rank's trace and rebuilds the tp blocks.
    (out / "runs" / "base.tp.analysis.json").unlink()
    stale = load_record(out / "rank3" / "runs" / "base.json")
    stale["analysis"]["blocking_reads_per_step"] = 99.0
    save_record(stale, out / "rank3" / "runs" / "base.json")
    again = CliRunner().invoke(app, ["ablate", "--reanalyze", "--out", str(out)])
    assert again.exit_code == 0, again.output
    for key in ("base", "bf16_gate"):
        _check_rank0_record(out, key, 4)
    rank3 = load_record(out / "runs" / "base.json")["tp"]["ranks"][3]
    assert rank3["blocking_reads_per_step"] != 99.0
    assert (
        rank3["blocking_reads_per_step"]
        == load_record(out / "rank3" / "runs" / "base.json")["analysis"]["blocking_reads_per_step"]
    )


def test_rank0_refusing_its_store_ends_every_rank_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "abl"
    _ablate(out, "--tp", "2", "--toggles", "bf16_gate")
    foreign = load_record(out / "runs" / "base.json")
    foreign["workload"]["factory"] = "somebody.else:factory"
    save_record(foreign, out / "runs" / "base.json")
    result = CliRunner().invoke(
        app, ["ablate", *FAST, "--tp", "2", "--toggles", "bf16_gate", "--out", str(out)]
    )
    assert isinstance(result.exception, BubblescopeError), result.output
    message = str(result.exception)
    assert message.startswith("rank 0: ") and "use a new --out folder" in message and "\n" not in message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tp", "3", *TWO], "does not split over 3 ranks"),
        (
            ["--tp", "2", *TWO, "--workload", "bubblescope.examples.toy_workload:make_workload"],
            "--workload cannot",
        ),
        (["--tp", "0", *TWO], "--tp must be >= 1"),
        (["--tp", "2", "--toggles", "warp_drive"], "unknown switch warp_drive"),
        (["--tp", "2", "--toggles", "fast_allreduce"], "needs a CUDA device"),
        (["--tp", "2", *TWO, "--order", "bf16_gate"], "--order must list exactly"),
        (["--tp", "2", "--toggles", "bf16_gate,bf16_gate"], "lists a switch twice"),
        (["--tp", "2", *TWO, "--spec", "dspark", "--path", "fast"], "own verify path at --tp"),
        (["--tp", "2", "--reanalyze"], "leave out --tp"),
    ],
)
def test_bad_tp_ablate_options_are_one_line_errors(args: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ablate", *FAST, *args, "--out", str(tmp_path / "x")])
    assert isinstance(result.exception, BubblescopeError), result.output
    assert result.exception.exit_code == 2
    assert message in str(result.exception) and "\n" not in str(result.exception)
    assert not (tmp_path / "x").exists(), "refused before any rank started"


@pytest.mark.gpu
def test_tp2_ablate_on_gpus_names_the_rank_with_most_gpu_work(tmp_path: Path) -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    out = tmp_path / "gpu"
    gpu_fast = [
        "--preset",
        "debug",
        "--steps",
        "16",
        "--warmup",
        "4",
        "--repeats",
        "2",
        "--profile-steps",
        "4",
    ]
    args = ["ablate", *gpu_fast, "--tp", "2", "--toggles", "fast_allreduce,bf16_gate", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    for key in ("base", "fast_allreduce", "bf16_gate", "bf16_gate+fast_allreduce"):
        tp = _check_rank0_record(out, key, 2, backend="nccl")["tp"]
        busy = [r["gpu_busy_ns_per_step"] for r in tp["ranks"]]
        assert all(isinstance(b, int) and b > 0 for b in busy), busy
        assert tp["slowest_rank"] == busy.index(max(busy))
        assert all(str(r["device"]).startswith("cuda") for r in tp["ranks"]), tp["ranks"]
    assert "the other ranks wait for it in each all-reduce" in (out / "report.html").read_text()
