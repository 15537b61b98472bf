"""Parsing the command after `--`, and the --step-frame hook on its own (no profiler)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bubblescope.capture.user_steps import StepFrameHook, compile_step_frame
from bubblescope.errors import ConfigError
from bubblescope.profiling.script import parse_command

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "cli_loop.py")


@pytest.mark.parametrize(
    ("command", "target", "args", "is_module"),
    [
        (["python", SCRIPT, "3", "ok"], SCRIPT, ["3", "ok"], False),
        (["python3.12", SCRIPT], SCRIPT, [], False),
        ([sys.executable, SCRIPT, "--flag"], SCRIPT, ["--flag"], False),
        ([SCRIPT, "1"], SCRIPT, ["1"], False),
        (["python", "-m", "pkg.mod", "a"], "pkg.mod", ["a"], True),
    ],
)
def test_parse_command(command: list[str], target: str, args: list[str], is_module: bool) -> None:
    parsed = parse_command(command)
    assert (parsed.target, parsed.args, parsed.is_module) == (target, args, is_module)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([], "no script"),
        (["python"], "no script"),
        (["python", "-c", "x"], "unsupported"),
        (["-m"], "-m needs"),
    ],
)
def test_parse_command_refuses(command: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_command(command)


def _leaf(depth: int) -> int:
    return depth


def decode_one(depth: int) -> int:
    # A nested call of the step function (recursion) does not start a step of its own.
    return decode_one(depth - 1) if depth else _leaf(depth)


def test_step_frame_hook_counts_outermost_calls_and_restores_tracing() -> None:
    steps: list[int] = []
    previous = sys.gettrace()
    hook = StepFrameHook(compile_step_frame(r"decode_one"), lambda: steps.append(1)).install()
    try:
        for _ in range(4):
            decode_one(2)
        _leaf(0)
    finally:
        hook.uninstall()
    assert len(steps) == 4 and hook.calls == 4
    assert sys.gettrace() is previous
    decode_one(1)
    assert len(steps) == 4


def test_step_frame_matches_qualified_names() -> None:
    class Model:
        def forward(self) -> None:
            return None

    steps: list[int] = []
    hook = StepFrameHook(compile_step_frame(r".*Model\.forward"), lambda: steps.append(1)).install()
    try:
        Model().forward()
        Model().forward()
    finally:
        hook.uninstall()
    assert len(steps) == 2
