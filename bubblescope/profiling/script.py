"""Run somebody's script in-process under a `bubblescope.profile` session (`bubblescope profile -- ...`).

The script runs through `runpy` with `__name__ == "__main__"`, `sys.argv` as it would see it from the
shell and its folder first on `sys.path`. Steps come from the script's own `bubblescope.step()` calls
when it makes them, else from calls of a function matching `--step-frame` (`capture/user_steps.py`),
else the whole run is recorded and the analysis cuts steps by `--step-marker` (or finds none). Whatever
the script does — returns, calls `sys.exit(n)`, raises — the session still writes its files, and the
script's exit status is the command's.
"""

from __future__ import annotations

import os
import runpy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bubblescope.errors import ConfigError


@dataclass
class ScriptCommand:
    """What to run: a script path or a module (`-m pkg.mod`), and the arguments it gets."""

    target: str
    args: list[str]
    is_module: bool = False


def parse_command(command: list[str]) -> ScriptCommand:
    """`python script.py a b` / `script.py a b` / `python -m pkg.mod a` → ScriptCommand.

    Raises:
        ConfigError: no command, a missing script, or a Python option other than -m.
    """
    words = list(command)
    if words and _is_python(words[0]):
        words = words[1:]
    if not words:
        raise ConfigError("no script to profile: put it after --, e.g. `-- python my_loop.py`")
    if words[0] == "-m":
        if len(words) < 2:
            raise ConfigError("-m needs a module name")
        return ScriptCommand(words[1], words[2:], is_module=True)
    if words[0].startswith("-"):
        raise ConfigError(f"unsupported python option {words[0]!r}: profile a script or -m module")
    if not Path(words[0]).is_file():
        raise ConfigError(f"script not found: {words[0]}")
    return ScriptCommand(words[0], words[1:])


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return name.startswith("python") and not name.endswith(".py") or word == sys.executable


def run_in_process(script: ScriptCommand) -> tuple[int, BaseException | None]:
    """Run the script as `__main__`; returns (exit status, the exception it raised or None)."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        if script.is_module:
            sys.argv = [script.target, *script.args]
            runpy.run_module(script.target, run_name="__main__", alter_sys=True)
        else:
            path = str(Path(script.target).resolve())
            sys.argv = [script.target, *script.args]
            sys.path.insert(0, os.path.dirname(path))
            runpy.run_path(path, run_name="__main__")
        return 0, None
    except SystemExit as exc:
        return _exit_status(exc.code), None
    except KeyboardInterrupt as exc:
        return 130, exc
    except Exception as exc:  # noqa: BLE001 - the script's failure is reported, the trace kept
        return 1, exc
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


def _exit_status(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def profile_script(
    command: list[str],
    *,
    out: str | os.PathLike[str],
    active: int,
    warmup: int,
    step_frame: str | None = None,
    step_marker: str | None = None,
    read_sites: bool = True,
) -> tuple[int, Any]:
    """Profile one script run. Returns (the script's exit status, the finished ProfileSession)."""
    from bubblescope.capture.user_steps import StepFrameHook, compile_step_frame
    from bubblescope.profiling.session import ProfileSession

    if step_frame and step_marker:
        raise ConfigError("use either --step-frame or --step-marker, not both")
    script = parse_command(command)
    pattern = compile_step_frame(step_frame) if step_frame else None
    session = ProfileSession(
        out,
        active=active,
        warmup=warmup,
        read_sites=read_sites,
        record_all=pattern is None,
        step_marker=step_marker,
        command=list(command),
    )

    def on_frame_step() -> None:
        # The script's own bubblescope.step() calls win over --step-frame.
        if not session.explicit_steps:
            session.step()

    with session:
        hook = StepFrameHook(pattern, on_frame_step).install() if pattern is not None else None
        try:
            status, raised = run_in_process(script)
        finally:
            if hook is not None:
                hook.uninstall()
        session.exit_code = status
        if raised is not None:
            from bubblescope.profiling.session import one_line_error

            session.error = one_line_error(raised, raised.__traceback__)
    return status, session
