"""The read tap: the exact Python line of every call that reads a device value back to the host.

Kineto's Python frames carry a function's `def` line, not the line that blocked. While bubblescope
captures, the tap replaces the few torch entry points that read device values (`Tensor.item`,
`tolist`, `cpu`, `numpy`, D2H `to`/`copy_`, `__bool__`/`__int__`/`__float__`/`__index__`/`__format__`,
`nonzero`, `masked_select`, `unique`, single-argument `where`, `repeat_interleave` without
`output_size`, `equal`, `allclose`, `torch.cuda.synchronize`/`empty_cache`, `Stream.synchronize`,
`Event.synchronize`) with a wrapper that takes the caller's stack (code objects and exact line
numbers) and, while the profiler records, wraps the call in `record_function("bubblescope.read#<id>")`
so the trace's blocking runtime call can be tied to its stack by nesting (`bubblescope.profiling.read_sites`).

Why wrappers and not a TorchDispatchMode/TorchFunctionMode: a dispatch mode makes torch.compile fall
back to eager, a function mode puts a Python call on every torch call and joins Dynamo's guards; the
wrappers cost nothing on calls that cannot read and Dynamo never traces into them (`is_compiling`).
Covered: eager Python calls to the entry points above, including those a library makes (the user's
calling line is found further up the stack). Not covered: reads made inside C++ without passing through
these entry points (an ATen op that syncs internally), reads inside a torch.compile'd graph (Dynamo
graph-breaks on them, so the eager remainder is covered) — those keep the trace's def-line site.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from bubblescope.capture.user_frames import frame_class
from bubblescope.errors import ConfigError
from bubblescope.trace.markers import READ_MARKER_PREFIX

MAX_FRAMES = 64
_MISSING = object()
_MASK_DTYPES = ("torch.bool", "torch.uint8")

# name -> (kind, predicate name). Kinds are the analysis' sync kinds (detect/host_syncs.HINTS).
TENSOR_METHODS: dict[str, tuple[str, str]] = {
    "item": ("item", "on_device"),
    "tolist": ("copy", "on_device"),
    "cpu": ("copy", "on_device"),
    "numpy": ("copy", "on_device"),
    "to": ("copy", "to_host"),
    "copy_": ("copy", "copy_to_host"),
    "__bool__": ("item", "on_device"),
    "__int__": ("item", "on_device"),
    "__float__": ("item", "on_device"),
    "__index__": ("item", "on_device"),
    "__format__": ("copy", "on_device"),
    "nonzero": ("nonzero", "on_device"),
    "masked_select": ("nonzero", "on_device"),
    "unique": ("nonzero", "on_device"),
    "unique_consecutive": ("nonzero", "on_device"),
    "argwhere": ("nonzero", "on_device"),
    "repeat_interleave": ("nonzero", "repeats_tensor"),
    "equal": ("item", "on_device"),
    "allclose": ("item", "on_device"),
}
# Boolean-mask indexing (`x[mask]`) reads the mask's true count (a nonzero). Tapped only for the test
# guard (`ReadTap(index_reads=True)`, `bubblescope.profiling.read_guard`): every indexing call would go
# through a Python wrapper, host time that would show up as GPU idle in a profiled window.
INDEX_METHODS: dict[str, tuple[str, str]] = {
    "__getitem__": ("nonzero", "bool_mask_index"),
}
TORCH_FUNCTIONS: dict[str, tuple[str, str]] = {
    "nonzero": ("nonzero", "on_device"),
    "masked_select": ("nonzero", "on_device"),
    "unique": ("nonzero", "on_device"),
    "unique_consecutive": ("nonzero", "on_device"),
    "argwhere": ("nonzero", "on_device"),
    "where": ("nonzero", "where_one_arg"),
    "repeat_interleave": ("nonzero", "repeats_tensor"),
    "equal": ("item", "on_device"),
    "allclose": ("item", "on_device"),
}
CUDA_FUNCTIONS: dict[str, tuple[str, str]] = {
    "synchronize": ("synchronize", "always"),
    "empty_cache": ("synchronize", "always"),
}
CUDA_CLASS_METHODS: dict[str, tuple[str, str]] = {
    "Stream.synchronize": ("synchronize", "always"),
    "Event.synchronize": ("event", "always"),
}


@dataclass
class ReadCall:
    """One intercepted call: which entry point, in which step, from where (innermost frame first)."""

    read_id: int
    op: str
    kind: str
    step: int
    frames: list[tuple[CodeType, int]]
    # `threading.get_ident()` of the calling thread (`bubblescope.profiling.read_guard` can keep to one
    # thread).
    thread_id: int = 0


@dataclass
class TapState:
    """What the installed tap records. `recording` is flipped by the profile session."""

    cuda_run: bool
    recording: bool = False
    step: int = -1
    calls: list[ReadCall] = field(default_factory=list)
    dropped_in_compiler: int = 0
    marker: Callable[[str], Any] | None = None


_STATE: TapState | None = None
_CODE_CLASSES: dict[CodeType, str] = {}
_LOCAL = threading.local()


def _is_device_tensor(value: Any, state: TapState) -> bool:
    if not hasattr(value, "is_cuda"):
        return False
    if state.cuda_run:
        return bool(value.is_cuda)
    # A CPU run counts what would read the GPU if the same code ran there; meta tensors read nothing.
    return not value.is_meta


def _names_host(value: Any) -> bool:
    """True for a `to(...)` argument that moves to the CPU: "cpu", torch.device("cpu"), a CPU tensor."""
    if isinstance(value, str):
        return value.split(":")[0] == "cpu"
    kind = getattr(value, "type", None)
    if isinstance(kind, str) and not hasattr(value, "is_cuda"):
        return kind == "cpu"
    if hasattr(value, "is_cuda"):
        return value.device.type == "cpu"
    return False


def _is_read(predicate: str, args: tuple, kwargs: dict, state: TapState) -> bool:
    if predicate == "always":
        return True
    if predicate == "on_device":
        return bool(args) and _is_device_tensor(args[0], state)
    if predicate == "to_host":
        if not args or kwargs.get("non_blocking") or not _is_device_tensor(args[0], state):
            return False
        targets = [t for t in list(args[1:]) + [kwargs.get("device", None)] if t is not None]
        if not state.cuda_run:
            # On a CPU run `x.to(other.device)` names the CPU too, yet on a GPU it stays on the GPU:
            # only a literal "cpu" says the code moves to the host wherever it runs.
            return any(isinstance(t, str) and t.split(":")[0] == "cpu" for t in targets)
        return any(_names_host(t) for t in targets)
    if predicate == "copy_to_host":
        # dst.copy_(src): a read when a CUDA source lands in host memory without non_blocking.
        if not state.cuda_run or len(args) < 2 or kwargs.get("non_blocking") or bool(args[2:3] and args[2]):
            return False
        return not args[0].is_cuda and bool(getattr(args[1], "is_cuda", False))
    if predicate == "repeats_tensor":
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        if len(args) == 1 and hasattr(args[0], "is_cuda") and repeats is None:
            repeats = args[0]  # torch.repeat_interleave(repeats): the one-tensor form
        return kwargs.get("output_size") is None and _is_device_tensor(repeats, state)
    if predicate == "bool_mask_index":
        index = args[1] if len(args) > 1 else None
        items = index if isinstance(index, (tuple, list)) else (index,)
        return any(_is_device_tensor(i, state) and str(i.dtype) in _MASK_DTYPES for i in items)
    if predicate == "where_one_arg":
        return len(args) == 1 and not kwargs and _is_device_tensor(args[0], state)
    return False


def _caller_frames() -> list[tuple[CodeType, int]] | None:
    """(code, exact line) of the tapped call's caller and outwards, innermost first; None when a frame
    belongs to torch.compile's machinery (Dynamo, Inductor, FX poking tensors while compiling).

    The walk ends at the first standard-library or bubblescope frame past the user's code (runpy, the
    CLI, `run`'s measurement loop): nothing beyond names the read, and `profiling.read_sites` ends the caller
    chain there too. Under the profiler's Python tracer every step costs (it also records each call of
    a C function such as `dict.get`, `list.append`, `len`), so the loop uses operators only and a
    per-code-object cache of the frame's class.
    """
    frame = sys._getframe(2)
    frames: list[tuple[CodeType, int]] = []
    depth = 0
    seen_user = False
    classes = _CODE_CLASSES
    while frame is not None and depth < MAX_FRAMES:
        code = frame.f_code
        if code in classes:
            kind = classes[code]
        else:
            kind = classes[code] = frame_class(code.co_filename)
        if kind == "compiler":
            return None
        if seen_user and (kind == "stdlib" or kind == "bubblescope"):
            break
        frames += ((code, frame.f_lineno),)
        seen_user = seen_user or kind == "user"
        depth += 1
        frame = frame.f_back
    return frames


def _wrap(
    original: Callable, op: str, kind: str, predicate: str, is_compiling: Callable[[], bool]
) -> Callable:
    def tapped(*args: Any, **kwargs: Any) -> Any:
        # Dynamo inlines this wrapper with is_compiling() folded to True: the graph sees the original.
        if is_compiling():
            return original(*args, **kwargs)
        state = _STATE
        if state is None or not state.recording or getattr(_LOCAL, "depth", 0):
            return original(*args, **kwargs)
        if not _is_read(predicate, args, kwargs, state):
            return original(*args, **kwargs)
        frames = _caller_frames()
        if frames is None:
            state.dropped_in_compiler += 1
            return original(*args, **kwargs)
        call = ReadCall(len(state.calls), op, kind, state.step, frames, threading.get_ident())
        state.calls.append(call)
        _LOCAL.depth = 1
        try:
            if state.marker is None:
                return original(*args, **kwargs)
            with state.marker(f"{READ_MARKER_PREFIX}{call.read_id}"):
                return original(*args, **kwargs)
        finally:
            _LOCAL.depth = 0

    tapped.__wrapped__ = original  # type: ignore[attr-defined]
    tapped.__name__ = getattr(original, "__name__", op)
    tapped.__doc__ = getattr(original, "__doc__", None)
    return tapped


def _marker_factory(torch: Any) -> Callable[[str], Any]:
    """`_RecordFunctionFast` (under 1 us) where torch has it; `record_function` costs ~20x more."""
    fast = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None)
    if fast is not None:
        return fast
    from torch.autograd.profiler import record_function

    return record_function


class ReadTap:
    """Install/uninstall the wrappers; the calls land in `state.calls`.

    Args:
        cuda_run: True when the workload runs on CUDA (then only CUDA tensors count as reads);
            False counts every tensor, as the reads the same code would make on a GPU.
        index_reads: also tap boolean-mask indexing (`INDEX_METHODS`). Default False.
    """

    def __init__(self, cuda_run: bool, *, index_reads: bool = False) -> None:
        self.state = TapState(cuda_run=cuda_run)
        self.index_reads = index_reads
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> ReadTap:
        global _STATE
        import torch

        if _STATE is not None:
            raise ConfigError(
                "a bubblescope read tap is already installed (a profile or run recording, or a "
                "no_new_reads guard): they cannot be nested"
            )
        is_compiling = torch.compiler.is_compiling
        self.state.marker = _marker_factory(torch)
        methods = {**TENSOR_METHODS, **(INDEX_METHODS if self.index_reads else {})}
        targets: list[tuple[Any, str, str, tuple[str, str]]] = [
            (torch.Tensor, name, f"Tensor.{name}", spec) for name, spec in methods.items()
        ]
        targets += [(torch, name, f"torch.{name}", spec) for name, spec in TORCH_FUNCTIONS.items()]
        targets += [(torch.cuda, name, f"torch.cuda.{name}", spec) for name, spec in CUDA_FUNCTIONS.items()]
        for dotted, spec in CUDA_CLASS_METHODS.items():
            cls_name, name = dotted.split(".")
            targets.append((getattr(torch.cuda, cls_name), name, f"torch.cuda.{dotted}", spec))
        for owner, name, op, (kind, predicate) in targets:
            original = getattr(owner, name, None)
            if original is None:
                continue
            self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
            setattr(owner, name, _wrap(original, op, kind, predicate, is_compiling))
        _STATE = self.state
        return self

    def uninstall(self) -> None:
        global _STATE
        for owner, name, saved in reversed(self._saved):
            if saved is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, saved)
        self._saved.clear()
        if _STATE is self.state:
            _STATE = None

    def __enter__(self) -> ReadTap:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()
