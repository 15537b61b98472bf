"""`run`/`ablate` options of the reference workload: --spec, --block, --accept-len, --routing-overlap,
--path."""

import pytest
from typer.testing import CliRunner

from bubblescope.capture.setup import REFERENCE_FACTORY, SPEC_FACTORY, ReferenceOptions
from bubblescope.cli import app
from bubblescope.errors import ConfigError


def test_plain_options_pick_the_reference_factory():
    factory, options = ReferenceOptions().factory_and_options()
    assert (factory, options) == (REFERENCE_FACTORY, {})
    factory, options = ReferenceOptions(path="eager").factory_and_options()
    assert (factory, options) == (REFERENCE_FACTORY, {"path": "eager"})


def test_spec_options_pick_the_spec_factory():
    factory, options = ReferenceOptions(spec="dspark", block=9, accept_len=9.95).factory_and_options()
    assert factory == SPEC_FACTORY
    assert options == {"spec": "dspark", "block": 9, "accept_len": 9.95}
    _, options = ReferenceOptions(spec="nextn", routing_overlap=0.5).factory_and_options()
    assert options["routing_overlap"] == 0.5


@pytest.mark.parametrize(
    ("options", "user_workload", "message"),
    [
        (ReferenceOptions(spec="medusa"), None, "unknown --spec"),
        (ReferenceOptions(path="turbo"), None, "unknown --path"),
        (ReferenceOptions(accept_len=4.0), None, "need --spec"),
        (ReferenceOptions(routing_overlap=0.5), None, "need --spec"),
        (ReferenceOptions(spec="dspark", routing_overlap=1.5), None, r"in \[0, 1\]"),
        (ReferenceOptions(spec="nextn", path="eager"), None, "drop --path eager"),
        (ReferenceOptions(spec="nextn"), "pkg.mod:make", "not to --workload"),
    ],
)
def test_bad_combinations_are_one_line_errors(options, user_workload, message):
    with pytest.raises(ConfigError, match=message):
        options.check(user_workload)


@pytest.mark.parametrize("command", ["run", "ablate"])
def test_cli_refuses_accept_len_without_spec(command):
    result = CliRunner().invoke(app, [command, "--accept-len", "4", "--steps", "1"])
    assert result.exit_code != 0
    assert "need --spec" in str(result.exception) or "need --spec" in result.output


def test_run_records_the_routing_overlap_knob_and_what_it_realised(tmp_path, monkeypatch):
    """`run --spec --routing-overlap`: the record's experts block has the knob and the realised overlap."""
    import json

    # The verify's KDA on PyTorch, as a CPU user runs it: the profiled window of Triton-interpreter
    # kernels records every interpreted op and takes gigabytes.
    monkeypatch.setenv("TRITON_INTERPRET", "0")

    out = tmp_path / "run"
    args = ["run", "--spec", "dspark", "--accept-len", "4", "--routing-overlap", "0.5", "--steps", "3"]
    fast = ["--warmup", "1", "--repeats", "1", "--profile-steps", "1"]
    result = CliRunner().invoke(app, [*args, *fast, "--out", str(out)])
    assert result.exit_code == 0, result.output
    experts = json.loads((out / "record.json").read_text())["experts"]
    assert experts["overlap_knob"] == 0.5
    assert 0.0 < experts["overlap_realised"] <= 1.0
    assert experts["distinct_experts_mean"] <= experts["upper_bound"]
