"""`bubblescope floor` and `bubblescope presets` through the real typer app: exit codes and key numbers."""

from __future__ import annotations

import json
import re

import pytest
import torch
from bubblescope.reference_model.config import PRESETS
from typer.testing import CliRunner

from bubblescope.cli import app
from bubblescope.floor.bandwidth import ASSUMED_BANDWIDTH_GBPS, ASSUMED_SOURCE, MEASURED_SOURCE, Bandwidth

runner = CliRunner()
GB = 1e9


def _json(args: list[str]) -> dict:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _flat(text: str) -> str:
    """Output with rich box characters and line breaks removed, so wrapped messages can be matched."""
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", text))


def test_issue_check_default_floor_json() -> None:
    summary = _json(["floor", "--preset", "ling3-flash", "--format", "json"])
    assert summary["schema"] == "bubblescope.floor/1"
    assert summary["params_total"] == 124_414_211_552
    assert round(summary["params_active"] / GB, 3) == 5.103
    assert round(summary["weight_bytes_per_token"] / GB, 3) == 10.207
    assert (summary["preset"], summary["tp"], summary["context"]) == ("ling3-flash", 1, 8192)
    assert summary["bytes_per_token"] == summary["weight_bytes_per_token"] + sum(
        summary["components"][name] for name in ("kda_state", "conv_state", "mla_cache")
    )
    assert sum(summary["components"].values()) == summary["bytes_per_token"]
    if torch.cuda.is_available():
        assert summary["bandwidth_source"] == MEASURED_SOURCE
    else:
        assert summary["bandwidth_source"] == ASSUMED_SOURCE
        assert summary["bandwidth_gbps"] == ASSUMED_BANDWIDTH_GBPS
    expected_ms = summary["bytes_per_token"] / (summary["bandwidth_gbps"] * 1e9) * 1e3
    assert summary["floor_ms"] == pytest.approx(expected_ms)


@pytest.mark.parametrize(
    ("router", "lm_head", "weights_gb"), [("fp32", "bf16", "10.31"), ("fp32", "fp32", "11.12")]
)
def test_fp32_router_and_lm_head(router: str, lm_head: str, weights_gb: str) -> None:
    args = ["floor", "--router", router, "--lm-head", lm_head, "--bandwidth", "4000", "--format", "json"]
    summary = _json(args)
    assert f"{summary['weight_bytes_per_token'] / GB:.4g}" == weights_gb
    assert (summary["router"], summary["lm_head"]) == (router, lm_head)


def test_given_bandwidth_context_and_tp() -> None:
    base = _json(["floor", "--bandwidth", "2000", "--context", "0", "--format", "json"])
    assert base["bandwidth_source"] == "given" and base["bandwidth_gbps"] == 2000.0
    assert base["floor_ms"] == pytest.approx(base["bytes_per_token"] / 2e12 * 1e3)
    assert base["components"]["mla_cache"] == 0
    long = _json(["floor", "--bandwidth", "2000", "--context", "131072", "--format", "json"])
    assert long["bytes_per_token"] - base["bytes_per_token"] == 7 * 1152 * 131072
    split = _json(["floor", "--bandwidth", "2000", "--context", "0", "--tp", "4", "--format", "json"])
    assert split["tp"] == 4
    assert split["components"]["routed_experts"] * 4 == base["components"]["routed_experts"]
    assert split["components"]["router"] == base["components"]["router"]
    assert split["floor_ms"] < base["floor_ms"] / 3


def test_table_output_names_components_and_floor() -> None:
    result = runner.invoke(app, ["floor", "--preset", "ling3-tiny", "--bandwidth", "4140"])
    assert result.exit_code == 0, result.output
    for text in (
        "routed_experts",
        "lm_head",
        "kda_state",
        "floor:",
        "4140\u00a0GB/s (given)",
        "7.89\u00a0B total",
    ):
        assert text in result.output, text


def test_unknown_preset_exits_2_with_the_valid_list() -> None:
    result = runner.invoke(app, ["floor", "--preset", "nope", "--format", "json"])
    assert result.exit_code == 2
    message = _flat(result.output)
    assert "unknown preset 'nope'" in message
    for name in PRESETS:
        assert name in message


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--tp", "3"], "tp=3 does not divide num_attention_heads=32"),
        (["--tp", "0"], "--tp must be >= 1"),
        (["--context", "-5"], "context length must be >= 0"),
        (["--bandwidth", "0"], "--bandwidth must be > 0"),
        (["--router", "fp16"], "fp16"),
    ],
)
def test_bad_options_exit_2(args: list[str], fragment: str) -> None:
    result = runner.invoke(app, ["floor", *args])
    assert result.exit_code == 2, result.output
    assert fragment in _flat(result.output)


def test_presets_json_lists_every_preset_with_numbers() -> None:
    listing = _json(["presets", "--format", "json"])
    assert listing["schema"] == "bubblescope.presets/1"
    rows = {row["preset"]: row for row in listing["presets"]}
    assert list(rows) == list(PRESETS)
    flash = rows["ling3-flash"]
    assert flash["params_total"] == 124_414_211_552
    assert (flash["layers"], flash["kda_layers"], flash["mla_layers"], flash["experts"]) == (42, 35, 7, 512)
    assert round(flash["weight_bytes_per_token"] / GB, 3) == 10.207
    assert round(flash["bf16_weight_bytes"] / GB) == 255
    assert rows["ling3-flash-e256"]["experts"] == 256
    assert rows["debug"]["fits"] is True and rows["debug"]["min_devices"] == 1
    if listing["machine"]["kind"] == "cpu":
        assert flash["fits"] is False and flash["min_devices"] is None


def test_presets_table() -> None:
    result = runner.invoke(app, ["presets"])
    assert result.exit_code == 0, result.output
    for name in PRESETS:
        assert name[:7] in result.output


def test_bandwidth_resolution_order() -> None:
    from bubblescope.errors import ConfigError
    from bubblescope.floor.bandwidth import resolve_bandwidth

    assert resolve_bandwidth(1234.5) == Bandwidth(1234.5, "given")
    assert resolve_bandwidth(None, measure=False) == Bandwidth(ASSUMED_BANDWIDTH_GBPS, ASSUMED_SOURCE)
    with pytest.raises(ConfigError, match="must be > 0"):
        resolve_bandwidth(-1.0)
    if not torch.cuda.is_available():
        assert resolve_bandwidth(None).source == ASSUMED_SOURCE


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
def test_measure_without_cuda_is_a_clear_error() -> None:
    from bubblescope.errors import BubblescopeError
    from bubblescope.floor.bandwidth import measure_copy_bandwidth_gbps

    with pytest.raises(BubblescopeError, match="no CUDA device"):
        measure_copy_bandwidth_gbps()


@pytest.mark.gpu
def test_measured_copy_bandwidth_is_plausible() -> None:
    from bubblescope.floor.bandwidth import measure_copy_bandwidth_gbps

    # Plausibility, not speed: catches a miscount of bytes (x2) or of time units (x1000) on any GPU.
    bandwidth_gbps = measure_copy_bandwidth_gbps(size_bytes=256 << 20, repeats=5)
    assert 100.0 < bandwidth_gbps < 20_000.0, bandwidth_gbps
    summary = _json(["floor", "--format", "json"])
    assert summary["bandwidth_source"] == MEASURED_SOURCE


def test_mtp_is_counted_only_with_the_flag() -> None:
    plain = _json(["floor", "--bandwidth", "4140", "--format", "json"])
    drafted = _json(["floor", "--bandwidth", "4140", "--mtp", "--format", "json"])
    assert plain["mtp"] is False and plain["components"]["mtp"] == 0
    assert drafted["mtp"] is True
    assert drafted["weight_bytes_per_token"] - plain["weight_bytes_per_token"] == drafted["components"]["mtp"]
    assert drafted["components"]["mla_cache"] - plain["components"]["mla_cache"] == 1152 * 8192


@pytest.mark.cpu_only
def test_presets_on_cpu_say_the_step_time_not_fits(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import bubblescope.floor.host_bandwidth as host_bandwidth

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(host_bandwidth, "measure_host_copy_gbps", lambda repeats=3: 10.0)
    listing = _json(["presets", "--format", "json"])
    tiny = next(row for row in listing["presets"] if row["preset"] == "ling3-tiny")
    # 10 GB/s host copy: the step cannot beat bytes per token / 10 GB/s.
    assert tiny["expected_step_s_min"] == pytest.approx(tiny["bytes_per_token"] / 10e9)
    table = _flat(runner.invoke(app, ["presets"], env={"COLUMNS": "200"}).output)
    shown = re.search(r"ling3-tiny .*? ([0-9.,]+) ms", table)
    assert shown is not None, table
    assert abs(float(shown.group(1).replace(",", "")) - tiny["bytes_per_token"] / 10e9 * 1e3) < 1.0
    assert " yes" not in table
