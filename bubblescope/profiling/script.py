"""Run somebody's script in-process under a `bubblescope.profile` session (`bubblescope profile -- ...`).

The command after `--` runs as `python` would run it, through `runpy`: `script.py ARGS` (its folder,
symlinks resolved, first on `sys.path`), `-m pkg.mod ARGS` (the current folder first on `sys.path`,
`sys.argv[0]` the module's file) or `-c CODE ARGS` (`sys.argv[0] == "-c"`, `""` first on `sys.path`),
always with `__name__ == "__main__"`. Steps come from the script's own `bubblescope.step()` calls when
it makes them, else from calls of a function matching `--step-frame` (`capture/user_steps.py`), else
the whole run is recorded and the analysis cuts steps by `--step-marker` (or finds none). Whatever the
script does — returns, calls `sys.exit(n)`, raises — the session still writes its files, and the
script's exit status is the command's; a script that raises prints its own traceback, as python does.
"""

from __future__ import annotations

import builtins
import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bubblescope.errors import ConfigError


@dataclass
class ScriptCommand:
    """What to run: a script path, a module (`-m pkg.mod`) or code (`-c CODE`), and its arguments."""

    target: str
    args: list[str]
    is_module: bool = False
    is_code: bool = False


def parse_command(command: list[str]) -> ScriptCommand:
    """`python script.py a b` / `script.py a b` / `python -m pkg.mod a` / `python -c CODE a` → ScriptCommand.

    Raises:
        ConfigError: no command, a missing script, or a Python option other than -m / -c.
    """
    words = list(command)
    if words and _is_python(words[0]):
        words = words[1:]
    if not words:
        raise ConfigError("no script to profile: put it after --, e.g. `-- python my_loop.py`")
    if words[0] in ("-m", "-c"):
        if len(words) < 2:
            raise ConfigError(
                f"{words[0]} needs {'a module name' if words[0] == '-m' else 'the code to run'}"
            )
        return ScriptCommand(words[1], words[2:], is_module=words[0] == "-m", is_code=words[0] == "-c")
    if words[0].startswith("-"):
        raise ConfigError(f"unsupported python option {words[0]!r}: profile a script, -m module or -c code")
    if not Path(words[0]).is_file():
        raise ConfigError(f"script not found: {words[0]}")
    return ScriptCommand(words[0], words[1:])


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return name.startswith("python") and not name.endswith(".py") or word == sys.executable


def run_in_process(script: ScriptCommand) -> tuple[int, BaseException | None]:
    """Run the script as `__main__`; returns (exit status, the exception it raised or None).

    An exception's traceback is printed on stderr from the script's first frame on, as python prints it.
    """
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        if script.is_module:
            sys.argv = [script.target, *script.args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(script.target, run_name="__main__", alter_sys=True)
        elif script.is_code:
            sys.argv = ["-c", *script.args]
            # python -c puts "" (the current folder, wherever it is when importing) first.
            sys.path.insert(0, "")
            _run_code(script.target)
        else:
            sys.argv = [script.target, *script.args]
            sys.path.insert(0, os.path.dirname(os.path.realpath(script.target)))
            runpy.run_path(script.target, run_name="__main__")
        return 0, None
    except SystemExit as exc:
        return _exit_status(exc.code), None
    except KeyboardInterrupt as exc:
        _print_traceback(exc)
        return 130, exc
    except Exception as exc:  # noqa: BLE001 - the script's failure is reported, the trace kept
        _print_traceback(exc)
        return 1, exc
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


def _run_code(code: str) -> None:
    """`python -c CODE`: the code runs in a fresh `__main__` namespace (restored afterwards)."""
    import types

    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(compile(code, "<string>", "exec"), module.__dict__)  # noqa: S102 - running the user's -c code is the job
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main


def _print_traceback(exc: BaseException) -> None:
    """The traceback python would print: bubblescope's and runpy's frames above the script left out."""
    from bubblescope.capture.user_frames import frame_class

    tb = exc.__traceback__
    while (
        tb is not None
        and tb.tb_next is not None
        and _is_plumbing(tb.tb_frame.f_code.co_filename, frame_class)
    ):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
    sys.stderr.flush()


def _is_plumbing(filename: str, frame_class: Any) -> bool:
    return filename != "<string>" and frame_class(filename) in ("bubblescope", "stdlib")


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
    timed: int = 0,
    step_frame: str | None = None,
    step_marker: str | None = None,
    read_sites: bool = True,
) -> tuple[int, Any]:
    """Profile one script run. Returns (the script's exit status, the finished ProfileSession)."""
    from bubblescope.capture.user_steps import StepFrameHook, compile_step_frame
    from bubblescope.profiling.session import ProfileSession

    if step_frame and step_marker:
        raise ConfigError("use either --step-frame or --step-marker, not both")
    if timed and step_marker:
        raise ConfigError(
            "--timed needs step boundaries while the loop runs (--step-frame, or bubblescope.step() in the "
            "script); --step-marker cuts steps only after recording"
        )
    script = parse_command(command)
    pattern = compile_step_frame(step_frame) if step_frame else None
    session = ProfileSession(
        out,
        active=active,
        warmup=warmup,
        timed=timed,
        read_sites=read_sites,
        # Without --step-frame, steps come from the script's bubblescope.step() calls or a marker regex;
        # timing needs them live, so with --timed only the script's own calls can cut steps.
        record_all=pattern is None and not timed,
        step_marker=step_marker,
        command=list(command),
    )

    def on_frame_step() -> None:
        # The script's own bubblescope.step() calls win over --step-frame.
        if not session.explicit_steps:
            session.step()

    from bubblescope.profiling.faults import leave_if_forked_child, script_faults

    owner_pid = os.getpid()
    with session, script_faults(session):
        hook = StepFrameHook(pattern, on_frame_step).install() if pattern is not None else None
        try:
            status, raised = run_in_process(script)
        finally:
            if hook is not None:
                hook.uninstall()
        leave_if_forked_child(owner_pid, status)
        session.exit_code = status
        if raised is not None:
            from bubblescope.profiling.session import one_line_error

            session.error = one_line_error(raised, raised.__traceback__)
    return status, session


def empty_selection(session: Any, step_frame: str | None, step_marker: str | None) -> str | None:
    """Why a run whose step selector matched nothing recorded no step (one line), or None.

    A selector that matches nothing would otherwise pass as a green run with 0 steps (or one whole-run
    step), which CI would take for a clean profile.
    """
    if step_frame is not None and session.steps_recorded == 0 and not session.explicit_steps:
        if session.steps_started == 0:
            return f"--step-frame {step_frame!r} matched no call: no step was recorded"
        return (
            f"--step-frame {step_frame!r} matched {session.steps_started} call(s), all warm-up "
            f"(--warmup {session.warmup}): no step was recorded"
        )
    source = (session.outputs.get("analysis") or {}).get("step_source")
    if step_marker is not None and not session.explicit_steps and source == "whole-trace":
        return f"--step-marker {step_marker!r} matched no annotation in the trace: no step was recorded"
    return None
