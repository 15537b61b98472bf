"""Step boundaries from calls of a named Python function (`bubblescope profile --step-frame REGEX`).

Each call of a function whose qualified name (`LlamaForCausalLM.forward`) or plain name
(`decode_one_token`) fully matches the regex starts a new step; the step lasts until the next such
call, like a `prof.step()` at the top of the loop body. A call made while a matching call is still
running (recursion, a nested forward) does not start a step.

Python >= 3.12 uses `sys.monitoring` (PY_START/PY_RETURN; a code object that does not match is switched
off after its first call, so the hook costs nothing afterwards). Older Pythons use `sys.settrace`
with a call-only trace function: torch's profiler owns `sys.setprofile` for its stack capture, so the
trace slot is the one left free; it is slower (every Python call passes through it).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from bubblescope.errors import ConfigError

_TOOL_IDS = (4, 3, 5, 2)


def compile_step_frame(regex: str) -> re.Pattern[str]:
    """Compile a --step-frame regex, or raise a one-line ConfigError."""
    try:
        return re.compile(regex)
    except re.error as exc:
        raise ConfigError(f"--step-frame {regex!r} is not a valid regex ({exc})") from None


class StepFrameHook:
    """Call `on_step()` at the start of each outermost call of a function matching `pattern`.

    Args:
        pattern: matched (fullmatch) against `co_qualname` and `co_name`.
        on_step: called with no arguments in the thread that made the call.
    """

    def __init__(self, pattern: re.Pattern[str], on_step: Callable[[], None]) -> None:
        self.pattern = pattern
        self.on_step = on_step
        self.matches: dict[CodeType, bool] = {}
        self.calls = 0
        self._depth = threading.local()
        self._tool_id: int | None = None
        self._previous_trace: tuple[Any, Any] | None = None

    def _matches(self, code: CodeType) -> bool:
        hit = self.matches.get(code)
        if hit is None:
            names = (getattr(code, "co_qualname", code.co_name), code.co_name)
            hit = any(self.pattern.fullmatch(name) for name in names)
            self.matches[code] = hit
        return hit

    def _enter(self) -> None:
        depth = getattr(self._depth, "n", 0)
        self._depth.n = depth + 1
        if depth == 0:
            self.calls += 1
            self.on_step()

    def _leave(self) -> None:
        self._depth.n = max(getattr(self._depth, "n", 0) - 1, 0)

    def install(self) -> StepFrameHook:
        if sys.version_info >= (3, 12):
            self._install_monitoring()
        else:
            # A coverage tool or debugger already tracing loses its hook while the script runs.
            self._previous_trace = (sys.gettrace(), threading.gettrace())
            sys.settrace(self._trace)
            threading.settrace(self._trace)
        return self

    def uninstall(self) -> None:
        if self._tool_id is not None:
            mon = sys.monitoring  # type: ignore[attr-defined]
            mon.set_events(self._tool_id, 0)
            mon.register_callback(self._tool_id, mon.events.PY_START, None)
            mon.register_callback(self._tool_id, mon.events.PY_RETURN, None)
            mon.register_callback(self._tool_id, mon.events.PY_UNWIND, None)
            mon.free_tool_id(self._tool_id)
            self._tool_id = None
        elif self._previous_trace is not None:
            previous, previous_threads = self._previous_trace
            self._previous_trace = None
            sys.settrace(previous)
            threading.settrace(previous_threads)  # type: ignore[arg-type]

    def _install_monitoring(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined]
        for tool_id in _TOOL_IDS:
            if mon.get_tool(tool_id) is None:
                mon.use_tool_id(tool_id, "bubblescope")
                self._tool_id = tool_id
                break
        else:
            raise ConfigError("--step-frame: every sys.monitoring tool id is taken by other tools")
        disable = mon.DISABLE

        def on_start(code: CodeType, offset: int) -> Any:
            if not self._matches(code):
                return disable
            self._enter()
            return None

        def on_return(code: CodeType, offset: int, value: Any) -> Any:
            if not self._matches(code):
                return disable
            self._leave()
            return None

        def on_unwind(code: CodeType, offset: int, exc: BaseException) -> Any:
            # PY_UNWIND cannot be disabled per code object; it only fires when an exception leaves a frame.
            if self._matches(code):
                self._leave()
            return None

        mon.register_callback(self._tool_id, mon.events.PY_START, on_start)
        mon.register_callback(self._tool_id, mon.events.PY_RETURN, on_return)
        mon.register_callback(self._tool_id, mon.events.PY_UNWIND, on_unwind)
        mon.set_events(self._tool_id, mon.events.PY_START | mon.events.PY_RETURN | mon.events.PY_UNWIND)
        mon.restart_events()

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call" or not self._matches(frame.f_code):
            return None
        self._enter()
        return self._trace_return

    def _trace_return(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            # Also sent when an exception leaves the frame.
            self._leave()
        return self._trace_return
