"""`no_new_reads`: fail the code under test when it makes a blocking read, naming the line and the op.

    with bubblescope.no_new_reads(max_per_step=0):
        decode_step(model, tokens)

The guard installs bubblescope's read tap (`capture/user_reads.py`) while it is entered: the tap sees
each Python call that reads a device value back to the host (`.item()`, `.tolist()`, `.cpu()`,
`.numpy()`, D2H `.to()`/`copy_`, `bool()`/`int()`/`float()` of a tensor, `nonzero`, `masked_select`,
`unique`, one-argument `where`, `repeat_interleave` without `output_size`, `equal`, `allclose`,
`torch.cuda.synchronize`/`empty_cache`, stream/event `synchronize`) and, for the guard only,
boolean-mask indexing `x[mask]`. By default every tensor counts, CPU tensors included: a CPU test then
fails on the same `.item()` that would stall a GPU, so CI without a GPU catches it. Reads made inside
C++ ops without passing through those entry points (`torch.bincount`) and inside torch.compile'd graphs
are not seen (README compares this with `torch.cuda.set_sync_debug_mode`).

Nesting: one tap is shared by every guard entered (in any thread); each guard counts the calls made
between its own enter and exit, so an outer guard also counts an inner guard's reads. torch is imported
only when a guard is entered.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterable
from contextlib import ContextDecorator
from dataclasses import dataclass
from typing import Any

from bubblescope.errors import ConfigError

# Most distinct (site, op) lines a failure message lists; the count says how many more there were.
MAX_LISTED = 20
_DUNDER_CALLS = {
    "Tensor.__bool__": "bool(tensor)",
    "Tensor.__int__": "int(tensor)",
    "Tensor.__float__": "float(tensor)",
    "Tensor.__index__": "operator.index(tensor)",
    "Tensor.__format__": "format(tensor) / f-string",
    "Tensor.__getitem__": "x[bool_mask]",
}


class BlockingReadError(AssertionError):
    """More blocking reads than a `no_new_reads` guard allows (an AssertionError: a test failure)."""


@dataclass(frozen=True)
class BlockingRead:
    """One read the guard saw.

    `site` is the innermost frame in the user's code (`path:line in function`, the path relative to the
    working directory when under it), `read_at` the innermost frame outside torch and bubblescope (a
    library line, its path from site-packages, when a library made the read; else `site`),
    `op` the call (`.item()`, `torch.nonzero()`, …), `kind` the analysis' read kind (item, copy,
    nonzero, synchronize, event).
    """

    op: str
    kind: str
    site: str
    read_at: str
    thread_id: int
    # Absolute path of the `read_at` frame's file ("" when there is none).
    read_at_file: str = ""


class _SharedTap:
    """The one read tap all entered guards share, installed by the first and removed by the last."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tap: Any = None
        self.users = 0
        self.cuda_only = False

    def acquire(self, cuda_only: bool) -> Any:
        from bubblescope.capture import user_reads

        with self.lock:
            if self.tap is None:
                if user_reads._STATE is not None:
                    raise ConfigError(
                        "no_new_reads cannot be entered while a bubblescope profile or run records "
                        "(its read tap is installed)"
                    )
                tap = user_reads.ReadTap(cuda_run=cuda_only, index_reads=True).install()
                # No profiler is recording the guard's reads: skip the per-read record_function.
                tap.state.marker = None
                tap.state.recording = True
                self.tap, self.cuda_only = tap, cuda_only
            elif cuda_only != self.cuda_only:
                raise ConfigError(
                    f"no_new_reads(cuda_only={cuda_only}) inside a guard with cuda_only={self.cuda_only}: "
                    "nested guards must count the same reads"
                )
            self.users += 1
            return self.tap.state

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self.tap.uninstall()
                self.tap = None


_SHARED = _SharedTap()


class no_new_reads(ContextDecorator):  # noqa: N801 (reads as a statement: `with no_new_reads():`)
    """Fail when the code inside makes more blocking reads than allowed; usable as a decorator.

    Args:
        max_per_step: reads allowed per step (default 0: none); None only records (see `reads`).
        steps: how many steps the guarded code runs (default 1); the limit is
            `max_per_step * steps` in total, so a loop of 8 steps may read 8 times at 1 per step.
        cuda_only: count only reads of CUDA tensors (and synchronize calls), for tests whose CPU
            tensors are host data by design. Default False: every tensor counts, the same on every
            machine, as the reads the code makes when its tensors are on a GPU.
        all_threads: count reads made by any thread while the guard is entered (default True: the
            code under test may use worker threads); False counts the entering thread's only.
        ignore_files: reads made directly by these files (the innermost frame outside torch is in
            one of them) are not counted; the pytest marker passes the test's own file, so its
            `assert torch.equal(...)` checks are not the code under test. Default: none.
    Raises:
        BlockingReadError: on exit, when the count is over the limit, listing each read's line and op.
        ConfigError: a negative limit, `steps` < 1, or entered while bubblescope profiles.

    After exit, `reads` lists every `BlockingRead` counted and `count` their number.
    """

    def __init__(
        self,
        max_per_step: float | None = 0,
        *,
        steps: int = 1,
        cuda_only: bool = False,
        all_threads: bool = True,
        ignore_files: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        if max_per_step is not None and not max_per_step >= 0:
            raise ConfigError(f"max_per_step must be >= 0 or None, got {max_per_step!r}")
        if not (isinstance(steps, int) and steps >= 1):
            raise ConfigError(f"steps must be a whole number >= 1, got {steps!r}")
        self.max_per_step = max_per_step
        self.steps = steps
        self.cuda_only = cuda_only
        self.all_threads = all_threads
        self.ignore_files = frozenset(os.path.realpath(f) for f in ignore_files)
        self.reads: list[BlockingRead] = []
        self._state: Any = None
        self._start = 0
        self._thread_id = 0

    @property
    def count(self) -> int:
        """Reads counted (after exit)."""
        return len(self.reads)

    def _recreate_cm(self) -> no_new_reads:
        # As a decorator each call gets its own guard, so recursion and threads do not share counts.
        return no_new_reads(
            self.max_per_step,
            steps=self.steps,
            cuda_only=self.cuda_only,
            all_threads=self.all_threads,
            ignore_files=self.ignore_files,
        )

    def __enter__(self) -> no_new_reads:
        self._state = _SHARED.acquire(self.cuda_only)
        self._thread_id = threading.get_ident()
        self._start = len(self._state.calls)
        return self

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        __tracebackhide__ = True  # pytest shows the test's line, not this frame
        try:
            calls = self._state.calls[self._start :]
        finally:
            _SHARED.release()
        if not self.all_threads:
            calls = [c for c in calls if c.thread_id == self._thread_id]
        self.reads = [_describe(call) for call in calls]
        if self.ignore_files:
            self.reads = [r for r in self.reads if os.path.realpath(r.read_at_file) not in self.ignore_files]
        # The code's own exception is the better message; the reads would only hide it.
        if exc_type is None and self.max_per_step is not None:
            allowed = self.max_per_step * self.steps
            if len(self.reads) > allowed:
                raise BlockingReadError(self.message(allowed))

    def message(self, allowed: float | None = None) -> str:
        """The failure text: the count against the limit, then one line per (site, op), most first."""
        allowed = (self.max_per_step or 0) * self.steps if allowed is None else allowed
        steps = f" in {self.steps} steps ({self.count / self.steps:g} per step)" if self.steps > 1 else ""
        if not allowed:
            limit = "none allowed"
        elif self.steps > 1:
            limit = f"at most {self.max_per_step:g} per step ({allowed:g} in all)"
        else:
            limit = f"at most {allowed:g}"
        grouped = Counter((r.site, r.read_at, r.op, r.thread_id) for r in self.reads)
        listed = []
        for (site, read_at, op, thread_id), n in grouped.most_common(MAX_LISTED):
            where = site if read_at == site else f"{site} -> {read_at}"
            other_thread = " (another thread)" if thread_id != self._thread_id else ""
            listed.append(f"{where}: {op} x{n}{other_thread}")
        # The first line is what `pytest -ra` summaries show: it names the most frequent read too.
        first = f"; {listed[0]}" if listed else ""
        lines = [f"{self.count} blocking read{'s' * (self.count != 1)}{steps}, {limit}{first}"]
        lines += [f"  {line}" for line in listed]
        if len(grouped) > MAX_LISTED:
            lines.append(f"  … and {len(grouped) - MAX_LISTED} more lines")
        return "\n".join(lines)


def _describe(call: Any) -> BlockingRead:
    """A tap `ReadCall` -> `BlockingRead` with the user's line and the line that read."""
    from bubblescope.capture.user_frames import frame_class

    frames = [(code, line, frame_class(code.co_filename)) for code, line in call.frames]
    user = next((f for f in frames if f[2] == "user"), None)
    outside = next((f for f in frames if f[2] not in ("torch", "compiler", "bubblescope")), None)
    site = _frame_text(user) if user else "(no frame in your code)"
    read_at = _frame_text(outside) if outside else site
    read_at_file = outside[0].co_filename if outside else ""
    return BlockingRead(_op_text(call.op), call.kind, site, read_at, call.thread_id, read_at_file)


def _frame_text(frame: tuple[Any, int, str]) -> str:
    from bubblescope.capture.user_frames import short_path

    code, line, kind = frame
    path = short_path(code.co_filename) if kind == "library" else _display_path(code.co_filename)
    return f"{path}:{line} in {code.co_name}"


def _display_path(filename: str) -> str:
    """Relative to the working directory when under it (what pytest and editors show), else absolute."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith("..") else relative


def _op_text(op: str) -> str:
    """`Tensor.item` -> `.item()`, `torch.nonzero` -> `torch.nonzero()`, dunders as the Python spelling."""
    if op in _DUNDER_CALLS:
        return _DUNDER_CALLS[op]
    if op.startswith("Tensor."):
        return f".{op[len('Tensor.') :]}()"
    return f"{op}()"
