"""`bubblescope.analyze` / `load_analysis`: the analysis as DataFrames, built once, same as the JSON."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import bubblescope
from bubblescope.cli import app
from bubblescope.errors import RecordError
from bubblescope.records import result_frames
from bubblescope.records.analysis_result import AnalysisResult, TracesNotKeptError
from tests.trace import scenarios

US = 1000
REAL_RANKS = ("hta_a100_sampled_rank0.json.gz", "hta_a100_sampled_rank1.json.gz")


@pytest.fixture
def item_trace(tmp_path: Path) -> Path:
    return scenarios.item_sync().write(tmp_path / "trace.json.gz")


def test_frames_hold_the_scenario_numbers(item_trace: Path) -> None:
    # Expected values from the scenario's construction (tests/trace/scenarios.py item_sync docstring).
    result = bubblescope.analyze(item_trace)
    read = result.reads.iloc[0]
    assert (read["site"], read["op"], read["count"]) == ("app.py(12): step", "aten::item", 1)
    assert (read["blocked_ns"], read["bubble_ns"], read["lost_lead_ns"]) == (21 * US, 21 * US, 21 * US)
    step = result.steps.iloc[0]
    assert (step["gpu_dur_ns"], step["gpu_busy_ns"], step["idle_sync_ns"]) == (80 * US, 42 * US, 21 * US)
    assert (step["idle_host_ns"], step["idle_launch_ns"], step["blocking_reads"]) == (13 * US, 4 * US, 1)
    gaps = result.gaps
    assert gaps.groupby("class")["dur_ns"].sum().to_dict() == {
        "sync": 21 * US,
        "host": 13 * US,
        "launch": 4 * US,
        "outside": 20 * US,
    }
    sync_gap = gaps[gaps["class"] == "sync"].iloc[0]
    assert (sync_gap["start_ns"], sync_gap["read_id"], sync_gap["blame"]) == (41 * US, 0, "app.py(12): step")
    assert gaps.loc[gaps["class"] != "sync", "read_id"].isna().all()
    event = result.read_events.iloc[0]
    assert (event["step"], event["blocked_ns"], event["drained"]) == (0, 21 * US, True)
    assert result.findings.iloc[0]["kind"] == "blocking read"
    assert result.findings.iloc[0]["saving_ns_per_token"] == 21 * US
    assert set(result.kernels["name"]) == {"kA", "kC"}
    assert result.kernel_categories["total_ns"].sum() == 41 * US
    host_ops = result.host_ops.set_index("name")
    assert (host_ops.loc["cudaStreamSynchronize", "self_ns"], host_ops.loc["cudaLaunchKernel", "calls"]) == (
        21 * US,
        2,
    )
    assert result.devices.iloc[0]["idle_outside_ns"] == 20 * US
    assert result.streams.iloc[0]["busy_ns"] == 42 * US
    assert (result.summary["steps"], result.step_source, result.gpu_measured) == (1, "bubblescope.step", True)
    assert result.warnings == result.to_dict()["warnings"]
    assert "1 step, 1.0 blocking reads/step, 1 read site>" in repr(result)
    one_rank = result.ranks.iloc[0]
    assert (one_rank["steps"], one_rank["gpu_step_ns_median"]) == (1, 80 * US)
    assert pd.isna(one_rank["straggler"]) and pd.isna(one_rank["vs_median_rank"])


def test_to_dict_is_what_the_cli_prints(item_trace: Path) -> None:
    printed = CliRunner().invoke(app, ["analyze", str(item_trace), "--format", "json", "--timeline"])
    assert printed.exit_code == 0, printed.output
    assert bubblescope.analyze(item_trace).to_dict() == json.loads(printed.stdout)


def test_to_dict_returns_a_copy(item_trace: Path) -> None:
    result = bubblescope.analyze(item_trace)
    result.to_dict()["syncs"].clear()
    assert len(result.to_dict()["syncs"]) == 1
    assert len(result.reads) == 1


def test_each_table_is_built_once(item_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = bubblescope.analyze(item_trace)
    calls = []
    real = result_frames.gaps_frame
    monkeypatch.setattr(result_frames, "gaps_frame", lambda ranks: calls.append(1) or real(ranks))
    first = result.gaps
    assert result.gaps is first
    assert result.steps is result.steps
    assert len(calls) == 1


def test_load_analysis_round_trip(item_trace: Path, tmp_path: Path) -> None:
    fresh = bubblescope.analyze(item_trace)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "analysis.json").write_text(json.dumps(fresh.to_dict()))
    for where in (folder, folder / "analysis.json"):
        loaded = bubblescope.load_analysis(where)
        assert loaded.to_dict() == fresh.to_dict()
        for table in (
            "steps",
            "reads",
            "findings",
            "kernels",
            "kernel_categories",
            "host_ops",
            "top_gaps",
            "ranks",
            "devices",
            "streams",
        ):
            pd.testing.assert_frame_equal(getattr(loaded, table), getattr(fresh, table))
    gz = tmp_path / "analysis.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(fresh.to_dict()).encode()))
    assert bubblescope.load_analysis(gz).summary == fresh.summary


def test_loaded_result_says_which_tables_need_traces(item_trace: Path, tmp_path: Path) -> None:
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(bubblescope.analyze(item_trace).to_dict()))
    loaded = bubblescope.load_analysis(path)
    with pytest.raises(TracesNotKeptError, match="top_gaps"):
        _ = loaded.gaps
    with pytest.raises(TracesNotKeptError, match="`reads`"):
        _ = loaded.read_events


def test_load_analysis_refuses_other_documents(tmp_path: Path) -> None:
    (tmp_path / "record.json").write_text(json.dumps({"schema": "bubblescope.run/1"}))
    with pytest.raises(RecordError, match="expected 'bubblescope.analysis/1'"):
        bubblescope.load_analysis(tmp_path / "record.json")
    with pytest.raises(RecordError, match="no analysis.json"):
        bubblescope.load_analysis(tmp_path)
    with pytest.raises(RecordError, match="not found"):
        bubblescope.load_analysis(tmp_path / "missing.json")


def test_empty_tables_keep_their_columns() -> None:
    result = AnalysisResult({"schema": "bubblescope.analysis/1", "gpu_measured": False})
    assert list(result.reads.columns) == result_frames.READ_SITE_COLUMNS
    assert list(result.steps.columns) == result_frames.STEP_COLUMNS
    assert list(result.findings.columns) == result_frames.FINDING_COLUMNS
    assert result.reads.empty and result.findings.empty


def test_not_measured_is_na_and_profile_columns_are_kept() -> None:
    # A CPU `profile` analysis: savings not measured, read sites carry the tap's exact-line columns.
    analysis = {
        "schema": "bubblescope.analysis/1",
        "gpu_measured": False,
        "syncs": [
            {
                "site": "loop.py(7): step",
                "op": "Tensor.item",
                "count": 2,
                "per_step": 1.0,
                "blocked_ns": None,
                "bubble_ns": None,
                "line_exact": "loop.py(7): step",
                "stack": ["loop.py(7): step"],
            }
        ],
    }
    result = AnalysisResult(analysis)
    assert result.reads["blocked_ns"].isna().all()
    assert result.reads.loc[0, "per_step"] == 1.0 and str(result.reads["per_step"].dtype) == "Float64"
    assert result.reads.loc[0, "line_exact"] == "loop.py(7): step"
    assert result.findings["saving_ns_per_token"].isna().all()
    assert result.gpu_measured is False


def test_tokens_per_step_divides_savings(item_trace: Path) -> None:
    one = bubblescope.analyze(item_trace).findings
    two = bubblescope.analyze(item_trace, tokens_per_step=2.0).findings
    assert two.iloc[0]["saving_ns_per_token"] == one.iloc[0]["saving_ns_per_token"] / 2


def test_floor_block_from_arguments(item_trace: Path) -> None:
    # 80 µs GPU step; 1e6 bytes at 100 GB/s is a 10 µs floor.
    floor = bubblescope.analyze(item_trace, bytes_per_token=1e6, bandwidth_gbps=100).to_dict()["floor"]
    assert floor["floor_ms"] == pytest.approx(0.01)


def test_two_real_ranks(shared_dir: Path) -> None:
    paths = [shared_dir / "data" / "real_traces" / name for name in REAL_RANKS]
    result = bubblescope.analyze(paths)
    # Kernel events per file, counted from the raw JSON (HTA's sampled_rank-0/1 traces).
    raw_kernels = []
    for path in paths:
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        raw_kernels.append(sum(1 for e in events if e.get("cat") == "kernel"))
    assert result.devices["kernel_count"].tolist() == raw_kernels
    assert sorted(result.steps["rank"].unique().tolist()) == [0, 1]
    per_site = result.read_events.groupby("site").size()
    assert {r.site: r.count for r in result.reads.itertuples()} == per_site.to_dict()
    ranks = result.ranks.set_index("rank")
    assert ranks["steps"].tolist() == [2, 2] and not ranks["straggler"].any()
    for rank in (0, 1):
        own = result.steps[result.steps["rank"] == rank]
        assert ranks.loc[rank, "gpu_step_ns_median"] == own["gpu_dur_ns"].median()
        assert ranks.loc[rank, "idle_sync_ns_per_step"] == own.loc[own["typical"], "idle_sync_ns"].mean()
    in_steps = result.gaps[result.gaps["step"] >= 0]
    sync_by_step = in_steps[in_steps["class"] == "sync"].groupby(["rank", "step"])["dur_ns"].sum()
    for step in result.steps.itertuples():
        assert sync_by_step.get((step.rank, step.index), 0) == step.idle_sync_ns


def test_public_names_and_no_torch() -> None:
    # The analysis, the guard and the pytest plugin load without torch (the guard imports it when entered).
    code = (
        "import sys, bubblescope, bubblescope.pytest_plugin\n"
        "assert 'pandas' not in sys.modules\n"
        "assert bubblescope.no_new_reads.__name__ == 'no_new_reads'\n"
        "assert bubblescope.profile.__name__ == 'ProfileSession' and callable(bubblescope.step)\n"
        "from tests.trace import scenarios\n"
        "import tempfile, pathlib\n"
        "path = scenarios.item_sync().write(pathlib.Path(tempfile.mkdtemp()) / 't.json')\n"
        "r = bubblescope.analyze(path)\n"
        "r.steps, r.reads, r.findings, r.gaps\n"
        "plain = r.to_dict(); plain.pop('floor'); plain.pop('findings'); plain.pop('idle_bound')\n"
        "assert bubblescope.analyze_traces(path) == plain\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert bubblescope.AnalysisResult is AnalysisResult
    assert {"analyze", "load_analysis", "analyze_traces", "no_new_reads"} <= set(dir(bubblescope))


def test_ranks_flag_the_straggler_the_analysis_names() -> None:
    from bubblescope.ranks.reduce import rank_summary

    def step(rank: int, index: int, gpu_dur_ns: int) -> dict:
        idle = {"sync": 0, "host": 0, "launch": 0, "dependency": 0}
        return {
            **{"rank": rank, "index": index, "name": "s", "start_ns": 0, "dur_ns": gpu_dur_ns},
            **{"gpu_start_ns": 0, "gpu_dur_ns": gpu_dur_ns, "gpu_busy_ns": gpu_dur_ns, "idle_ns": 0},
            **{"idle_by_class_ns": idle, "blocking_reads": rank, "kernels": 1},
        }

    # Rank 2's median GPU step is 2x the median rank's (rank 1: 100 µs).
    steps = [step(r, i, ns) for r, ns in ((0, 90_000), (1, 100_000), (2, 200_000)) for i in range(3)]
    analysis = {"schema": "bubblescope.analysis/1", "steps": steps, "rank_summary": rank_summary(steps)}
    ranks = AnalysisResult(analysis).ranks.set_index("rank")
    assert ranks["straggler"].tolist() == [False, False, True]
    assert ranks.loc[2, "vs_median_rank"] == 2.0
    assert ranks["blocking_reads_per_step"].tolist() == [0.0, 1.0, 2.0]
