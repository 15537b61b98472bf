"""`bubblescope run --tp N` on CPU: N gloo ranks in lockstep, one trace per rank, a merged RunRecord."""

from __future__ import annotations

import gzip
import json

import pytest
from typer.testing import CliRunner

from bubblescope.capture import launch_tp, tp_processes
from bubblescope.cli import app
from bubblescope.errors import BubblescopeError
from bubblescope.files.out_lock import FolderBusyError, out_lock
from bubblescope.records.run_record import load_record

FAST = ["--preset", "debug", "--steps", "3", "--warmup", "1", "--repeats", "1", "--profile-steps", "2"]


def test_tp2_run_writes_one_trace_per_rank_and_a_merged_record(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--tp", "2", *FAST, "--out", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    record = load_record(out / "record.json")
    tp = record["tp"]
    assert tp["world_size"] == 2 and tp["backend"] == "gloo"
    assert [r["rank"] for r in tp["ranks"]] == [0, 1]
    assert record["traces"] == ["trace.rank0.json.gz", "trace.rank1.json.gz"]
    assert record["trace"] == "trace.rank0.json.gz"
    for rank in (0, 1):
        trace = json.loads(gzip.decompress((out / f"trace.rank{rank}.json.gz").read_bytes()))
        assert trace["distributedInfo"]["rank"] == rank
        assert trace["distributedInfo"]["world_size"] == 2
        rank_record = load_record(out / f"rank{rank}.json")
        assert rank_record["trace"] == f"trace.rank{rank}.json.gz"
        assert rank_record["workload"]["describe"]["tp"]["rank"] == rank
        # lockstep: every rank decoded the same tokens
        assert rank_record["tokens"] == record["tokens"]
    analysis = json.loads((out / record["analysis_file"]).read_text())
    assert [entry["rank"] for entry in analysis["inputs"]] == [0, 1]
    assert record["summary"]["steps"] == 3
    assert tp["slowest_rank"] in (0, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tp", "3"], "does not split over 3 ranks: attention heads 4"),
        (["--tp", "2", "--workload", "bubblescope.examples.toy_workload:make_workload"], "--workload cannot"),
        (["--tp", "2", "--toggle", "warp_drive"], "unknown switch warp_drive"),
        (["--tp", "0"], "--tp must be >= 1"),
        (["--tp", "2", "--toggle", "fast_allreduce"], "needs a CUDA device"),
        (["--tp", "2", "--spec", "dspark", "--path", "fast"], "own verify path at --tp"),
        (["--tp", "2", "--spec", "nextn", "--path", "eager"], "drop --path eager"),
        (["--tp", "2", "--accept-len", "4"], "need --spec"),
        (["--tp", "2", "--spec", "dspark", "--routing-overlap", "2"], "must be in [0, 1]"),
    ],
)
def test_bad_tp_options_are_one_line_errors(args, message, tmp_path):
    result = CliRunner().invoke(app, ["run", *FAST, *args, "--out", str(tmp_path / "x")])
    # cli.main turns a BubblescopeError into one line on stderr and exit code 2
    assert isinstance(result.exception, BubblescopeError), result.output
    assert result.exception.exit_code == 2
    assert message in str(result.exception)
    assert "\n" not in str(result.exception)
    assert not (tmp_path / "x").exists(), "refused before any rank started"


def test_failing_rank_becomes_one_line_error(tmp_path):
    from dataclasses import asdict

    from bubblescope.capture.measure import RunSettings

    # Skips the parent's checks, so the refusal happens inside each rank after the group formed.
    request = launch_tp.TPRunRequest(
        world_size=2,
        preset="debug",
        toggle="fast_allreduce",
        all_on=False,
        settings=asdict(RunSettings(steps=1, warmup=0, repeats=1, profile_steps=0)),
        seed=0,
        out_dir=str(tmp_path),
    )
    with pytest.raises(BubblescopeError, match="rank 0: switch fast_allreduce needs a CUDA device"):
        launch_tp.spawn_ranks(request)


def test_torchrun_rank_needs_an_explicit_out_folder(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    result = CliRunner().invoke(app, ["run", "--tp", "2", *FAST])
    assert isinstance(result.exception, BubblescopeError), result.output
    assert "under torchrun pass --out" in str(result.exception)


def test_spec_at_tp_offers_fast_allreduce_and_refuses_it_on_cpu(tmp_path):
    """The speculative workload at TP has the fast_allreduce switch (its verify and draft all-reduce
    through the target's hooks); on gloo ranks it is refused inside every rank with one line."""
    args = ["run", "--tp", "2", *FAST, "--spec", "dspark", "--block", "4", "--accept-len", "3"]
    result = CliRunner().invoke(app, [*args, "--toggle", "fast_allreduce", "--out", str(tmp_path / "r")])
    assert isinstance(result.exception, BubblescopeError), result.output
    assert "switch fast_allreduce needs a CUDA device" in str(result.exception)
    assert "\n" not in str(result.exception)


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (("killed", 1, 4242, -9, "SIGKILL"), "rank 1 was killed by SIGKILL without writing its status"),
        (("exited", 0, 4242, 3, None), "rank 0 exited with code 3 without writing its status"),
    ],
)
def test_a_rank_ending_silently_is_named_with_its_signal_or_exit_code(tmp_path, failure, expected):
    import torch.multiprocessing as mp

    from bubblescope.capture import tp_processes

    message = tp_processes._rank_error(tmp_path, 2, mp.ProcessExitedException(*failure))
    assert message.startswith(expected), message
    raised = mp.ProcessRaisedException("Traceback ...\n  File x\nValueError: bad shard\n", 1, 4242)
    assert tp_processes._rank_error(tmp_path, 2, raised).startswith("rank 1 raised ValueError: bad shard")
    # A status file with the rank's own error wins over what the launcher saw.
    (tmp_path / tp_processes.STATUS_NAME.format(rank=0)).write_text('{"ok": false, "error": "no GPU"}')
    assert tp_processes._rank_error(tmp_path, 2, mp.ProcessExitedException(*failure)) == "rank 0: no GPU"


@pytest.mark.parametrize(
    "command", [["run", "--tp", "2", *FAST], ["ablate", "--tp", "2", *FAST, "--toggles", "bf16_gate"]]
)
def test_tp_launcher_holds_the_out_lock(command, tmp_path):
    """A TP run or ablation into a folder another process is writing stops at once with one line (the
    launcher takes the lock before spawning; its ranks run under it, as the end-to-end TP run shows)."""
    out = tmp_path / "out"
    with out_lock(out, "profile"):
        result = CliRunner().invoke(app, [*command, "--out", str(out)])
    assert isinstance(result.exception, FolderBusyError), (result.output, result.exception)
    assert "another bubblescope process is writing this folder" in str(result.exception)
    assert not list(out.iterdir()), "nothing was written"


def test_only_rank0_of_a_torchrun_launch_takes_the_out_lock(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with out_lock(tmp_path, "run"):
        monkeypatch.setenv("RANK", "1")
        with tp_processes.launcher_lock(tmp_path, "run"):
            pass
        monkeypatch.setenv("RANK", "0")
        with pytest.raises(FolderBusyError), tp_processes.launcher_lock(tmp_path, "run"):
            pass
