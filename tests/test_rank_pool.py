"""Ranks analysed by a process pool (or Dask) give the same analysis JSON, byte for byte, as the serial
run; the cross-rank summary (stragglers, slowest rank per step) is reduced from the steps.

The default suite runs a small subset of the real-trace corpus; `slow` runs all of it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from bubblescope.analysis.traces import analysis_dict, analyze_ranks
from bubblescope.errors import ConfigError, TraceError
from bubblescope.ranks.pool import rank_analyses, rank_results
from bubblescope.ranks.reduce import STRAGGLER_FACTOR, rank_summary, reduce_results
from tests.real.conftest import manifest, trace_path

# The three smallest real traces (92-2,058 events; HTA and TraceLens): about a second in all.
SMALL = ("tl_sglang_qwen3_decode_mi300x", "tl_vllm_graph_decode_mi300x", "hta_a100_event_sync")


def _folder_of(names: tuple[str, ...], tmp_path: Path) -> Path:
    """A folder with the named real traces as rank files; skips when one is absent."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for index, name in enumerate(names):
        path = trace_path(name)
        if path is None:
            pytest.skip(f"real trace {name} absent: run tools/fetch_real_traces.py")
        shutil.copy(path, folder / f"rank{index:03d}.trace.json.gz")
    return folder


def _text(result: dict) -> str:
    return json.dumps(result, sort_keys=True, allow_nan=False)


def _assert_pool_matches_serial(folder: Path) -> None:
    serial = analysis_dict(analyze_ranks([folder]), timeline=False)
    pooled = reduce_results(rank_results([folder], jobs=2))
    assert _text(pooled) == _text(serial)
    # With the drawing timeline, from whole ranks made by the workers.
    serial_drawn = analysis_dict(analyze_ranks([folder]))
    pooled_drawn = analysis_dict(rank_analyses([folder], jobs=2))
    assert serial_drawn["timeline"] is not None
    assert _text(pooled_drawn) == _text(serial_drawn)


def test_pool_matches_serial_on_real_ranks(tmp_path: Path) -> None:
    _assert_pool_matches_serial(_folder_of(SMALL, tmp_path))


@pytest.mark.slow
def test_pool_matches_serial_on_the_whole_corpus(tmp_path: Path) -> None:
    _assert_pool_matches_serial(_folder_of(tuple(sorted(manifest())), tmp_path))


def test_one_worker_and_many_agree(tmp_path: Path) -> None:
    folder = _folder_of(SMALL[:2], tmp_path)
    assert _text(reduce_results(rank_results([folder], jobs=1))) == _text(
        reduce_results(rank_results([folder], jobs=2))
    )


def test_a_bad_rank_in_a_worker_is_one_trace_error(tmp_path: Path) -> None:
    folder = _folder_of(SMALL[:1], tmp_path)
    (folder / "rank999.trace.json").write_text('{"traceEvents": [{"ph": "X", "ts": ')
    with pytest.raises(TraceError, match="rank999.trace.json"):
        rank_results([folder], jobs=2)


def test_bad_pool_options_are_config_errors(tmp_path: Path) -> None:
    folder = _folder_of(SMALL[:1], tmp_path)
    with pytest.raises(ConfigError, match="--executor"):
        rank_results([folder], executor="ray")
    with pytest.raises(ConfigError, match="--scheduler needs"):
        rank_results([folder], scheduler="tcp://127.0.0.1:1")


def _steps(rank: int, gpu_dur_ns: list[int]) -> list[dict]:
    return [{"rank": rank, "index": i, "gpu_dur_ns": ns} for i, ns in enumerate(gpu_dur_ns)]


def test_rank_summary_names_stragglers_and_the_slowest_rank_of_each_step() -> None:
    steps = _steps(0, [100, 100, 100]) + _steps(1, [100, 130, 100]) + _steps(2, [120, 120, 120, 500])
    summary = rank_summary(steps)
    assert summary["ranks"] == 3
    # Per-rank medians 100, 100, 120: the median over ranks is 100; only rank 2 is above 1.05x.
    assert summary["gpu_step_ns_median"] == 100 and STRAGGLER_FACTOR < 1.2
    assert summary["stragglers"] == [{"rank": 2, "gpu_step_ns_median": 120, "ratio": 1.2}]
    # Step 3 exists on one rank only: no comparison there.
    assert summary["slowest_per_step"] == [
        {"index": 0, "rank": 2, "gpu_dur_ns": 120, "median_gpu_dur_ns": 100},
        {"index": 1, "rank": 1, "gpu_dur_ns": 130, "median_gpu_dur_ns": 120},
        {"index": 2, "rank": 2, "gpu_dur_ns": 120, "median_gpu_dur_ns": 100},
    ]
    assert rank_summary(_steps(0, [1, 2])) is None


def test_dask_local_cluster_matches_serial(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    folder = _folder_of(SMALL[:2], tmp_path)
    serial = analysis_dict(analyze_ranks([folder]), timeline=False)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        pooled = reduce_results(rank_results([folder], executor="dask", scheduler=cluster.scheduler_address))
    assert _text(pooled) == _text(serial)


def test_cli_jobs_give_the_serial_json(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from bubblescope.cli import app

    folder = _folder_of(SMALL[:2], tmp_path)
    runner = CliRunner()
    outputs = [
        runner.invoke(app, ["analyze", str(folder), "--format", "json", "--jobs", jobs])
        for jobs in ("1", "2")
    ]
    assert all(out.exit_code == 0 for out in outputs), [out.output for out in outputs]
    assert outputs[0].stdout == outputs[1].stdout
    assert len(json.loads(outputs[0].stdout)["inputs"]) == 2


def test_dask_missing_is_a_config_error_naming_the_extra(tmp_path: Path, monkeypatch) -> None:
    folder = _folder_of(SMALL[:1], tmp_path)
    # A None entry in sys.modules makes `import distributed` raise ImportError.
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ConfigError, match=r"bubblescope\[dask\]"):
        rank_results([folder], executor="dask")
