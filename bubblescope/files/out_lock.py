"""One writer per output folder: `profile`, `run` and `ablate` hold a lock on their `--out` while they
write it, and a second process given the same folder stops at once with one line. With `--tp` the
launcher holds it for its ranks (`capture.tp_processes.launcher_lock`).

Each file is already written atomically (`atomic.py`), but two runs into one folder would still mix
their record, trace, analysis and report. The lock is `fcntl.flock` on the folder itself (a descriptor
of the directory), so nothing is added to the folder, and the kernel drops it when the holder exits
however it exits (kill -9 included): a stale lock never blocks the next run. Where `fcntl` does not
exist (Windows) nothing is locked.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from bubblescope.errors import BubblescopeError

# Descriptors of the locks this process holds. A forked child (a profiled script's fork) closes its
# copies, so the lock ends with the writer, not with the last child; closing, never unlocking: the
# copies share one lock with the parent.
_HELD: set[int] = set()


def _close_in_child() -> None:
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


class FolderBusyError(BubblescopeError):
    """Another bubblescope process is writing the folder."""


@contextlib.contextmanager
def out_lock(folder: str | os.PathLike[str], command: str) -> Iterator[None]:
    """Hold the folder's writer lock for the block (the folder is created if missing).

    Args:
        folder: the output folder (`--out`).
        command: the command holding it, for the message (`profile`, `run`, `ablate`).

    Raises:
        FolderBusyError: another process holds the lock (one line naming the folder).
        BubblescopeError: the folder cannot be created or the lock file opened.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise BubblescopeError(f"{path}: cannot write here ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise FolderBusyError(
            f"{path}: another bubblescope process is writing this folder; wait for it or give {command} "
            "another --out"
        ) from None
    _HELD.add(fd)
    try:
        yield
    finally:
        # Closing the descriptor releases the lock; a forked child has closed its copy already.
        if fd in _HELD:
            _HELD.discard(fd)
            os.close(fd)
