"""What a profiled script may do to the process it shares with bubblescope, and what is kept when it does.

`bubblescope profile` runs the script in its own process (`script.py`), so a script can end that
process in ways a `try`/`finally` never sees. Around the script run:

* `os._exit(n)` in the profiling process: the session is closed first (profiler stopped, trace,
  analysis and report written), then the process exits with `n`, as the script asked. In a forked child
  it exits at once, as always (a child never writes the parent's folder).
* SIGTERM, when the script has not set a handler of its own: raised as `SystemExit(143)` (128 + 15,
  the status a shell reports for a SIGTERM death), so the session writes its files and the command
  exits 143. SIGINT is Python's KeyboardInterrupt already: files written, exit 130.
* A fork: the child's copy of the session writes nothing (`ProfileSession` checks its pid), and the
  child's copy of the `--out` lock is closed (`out_lock`).
* A segfault (or SIGKILL) ends the process before any Python runs: nothing can be written then;
  `faulthandler` prints the Python stack of the crash on stderr, and the exit status is the signal's
  (139 for SIGSEGV in a shell), as python's own would be.
* Threads left running: the session is written when the script's main code returns; the process then
  waits for non-daemon threads, as python does, and exits with the script's status.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, NoReturn

# The status a shell reports for a process ended by SIGTERM.
SIGTERM_STATUS = 128 + signal.SIGTERM


def _raise_terminated(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def script_faults(session: Any) -> Iterator[None]:
    """Within the block, `os._exit` and SIGTERM close `session` (write its files) before the process ends.

    Args:
        session: the entered ProfileSession (closed with `__exit__` on `os._exit`).
    """
    owner = os.getpid()
    real_exit = os._exit

    def exit_after_writing(status: int) -> NoReturn:
        if os.getpid() == owner:
            session.exit_code = status
            # Whatever fails while writing, the script's status is what the process ends with.
            with contextlib.suppress(BaseException):
                session.__exit__(None, None, None)
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
        real_exit(status)

    os._exit = exit_after_writing
    in_main = threading.current_thread() is threading.main_thread()
    ours = in_main and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if ours:
        signal.signal(signal.SIGTERM, _raise_terminated)
    tracing = faulthandler.is_enabled()
    if not tracing:
        with contextlib.suppress(Exception):
            faulthandler.enable()
    try:
        yield
    finally:
        os._exit = real_exit
        if ours and signal.getsignal(signal.SIGTERM) is _raise_terminated:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if not tracing:
            faulthandler.disable()


def leave_if_forked_child(owner_pid: int, status: int) -> None:
    """In a forked child whose copy of the script has returned, end the process with `status` now, as
    python would: the rest of `bubblescope profile` (writing, printing the summary) is the parent's."""
    if os.getpid() != owner_pid:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)
