"""`bubblescope.profile`: a real signature, and `prof.result` is the analysis as DataFrames."""

from __future__ import annotations

import inspect
from pathlib import Path

import pandas as pd
import pytest

import bubblescope
from bubblescope.errors import ConfigError

torch = pytest.importorskip("torch")


def _read(x: torch.Tensor) -> float:
    return x.sum().item()


READ_LINE = _read.__code__.co_firstlineno + 1


def test_profile_has_the_session_signature() -> None:
    parameters = inspect.signature(bubblescope.profile).parameters
    assert {"out", "active", "warmup", "read_sites", "step_marker"} <= set(parameters)
    assert "prof.result" in (bubblescope.profile.__doc__ or "")


@pytest.mark.cpu_only
def test_result_holds_the_profiled_reads(tmp_path: Path) -> None:
    with bubblescope.profile(out=tmp_path, active=2, warmup=0, progress=False) as prof:
        with pytest.raises(ConfigError, match="has exited"):
            _ = prof.result
        for _ in range(3):
            with prof.step():
                _read(torch.ones(2))
    result = prof.result
    assert result is prof.result
    read = result.reads.set_index("site").loc[f"{Path(__file__).name}({READ_LINE}): _read"]
    assert (read["op"], read["count"], read["per_step"]) == ("Tensor.item", 2, 1.0)
    assert result.steps["blocking_reads"].tolist() == [1, 1]
    # A CPU run: nothing blocked, no GPU timeline; the JSON keeps 0, the tables say not measured.
    assert result.gpu_measured is False
    assert result.reads[["blocked_ns", "bubble_ns"]].isna().all().all()
    assert result.steps["gpu_dur_ns"].isna().all()
    assert result.findings["saving_ns_per_token"].isna().all()
    pd.testing.assert_frame_equal(result.reads, bubblescope.load_analysis(tmp_path).reads)
