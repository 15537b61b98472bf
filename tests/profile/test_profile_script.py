"""Parsing the command after `--`, and the --step-frame hook on its own (no profiler)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bubblescope.capture.user_steps import StepFrameHook, compile_step_frame
from bubblescope.errors import ConfigError
from bubblescope.profiling.script import parse_command, run_in_process

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "cli_loop.py")


@pytest.mark.parametrize(
    ("command", "target", "args", "is_module"),
    [
        (["python", SCRIPT, "3", "ok"], SCRIPT, ["3", "ok"], False),
        (["python3.12", SCRIPT], SCRIPT, [], False),
        ([sys.executable, SCRIPT, "--flag"], SCRIPT, ["--flag"], False),
        ([SCRIPT, "1"], SCRIPT, ["1"], False),
        (["python", "-m", "pkg.mod", "a"], "pkg.mod", ["a"], True),
        (["python", "-c", "print(1)", "a"], "print(1)", ["a"], False),
    ],
)
def test_parse_command(command: list[str], target: str, args: list[str], is_module: bool) -> None:
    parsed = parse_command(command)
    assert (parsed.target, parsed.args, parsed.is_module) == (target, args, is_module)
    assert parsed.is_code == (command[1] == "-c")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([], "no script"),
        (["python"], "no script"),
        (["python", "-X", "dev", "x.py"], "unsupported"),
        (["python", "-c"], "-c needs"),
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


SHOW = (
    "import json, sys; print(json.dumps([sys.argv, sys.path[0], __name__, sys.modules['__main__'].__name__]))"
)


def test_module_and_code_see_what_python_gives_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-m pkg.mod` and `-c CODE`: sys.argv, sys.path[0] and __name__ as a real python sets them."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(SHOW + "\n")
    monkeypatch.chdir(tmp_path)
    for command in (["-m", "pkg.mod", "a"], ["-c", SHOW, "a"]):
        python = subprocess.run([sys.executable, *command], capture_output=True, text=True, check=True)
        assert run_in_process(parse_command(["python", *command])) == (0, None)
        assert capsys.readouterr().out == python.stdout
        sys.modules.pop("pkg.mod", None)
        sys.modules.pop("pkg", None)


def test_a_raising_script_prints_its_own_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "fails.py"
    script.write_text("def main():\n    raise ValueError('bad token')\n\nmain()\n")
    python = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    status, raised = run_in_process(parse_command(["python", str(script)]))
    assert (status, type(raised)) == (python.returncode, ValueError)
    assert capsys.readouterr().err == python.stderr
