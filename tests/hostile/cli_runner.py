"""Run `bubblescope ...` as a user would and judge the outcome: exit code, stderr lines, time, peak RSS.

Two ways: in this process (`bubblescope.cli.main` with argv, stdout and stderr swapped; fast, used by
the default profile) and as a subprocess (`python -m bubblescope`; its own peak RSS from wait4, used
by the long profile). Either way BUBBLESCOPE_DEBUG=1 is set, so an unexpected exception surfaces as a
traceback (a crash to report) instead of the top level's one-line "please report" message.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

# The stated bounds: no input may take longer or more memory than this (issue 18: <= 2 GB for any input
# <= 100 MB compressed; the fuzzer's inputs are < 2 MB, so 60 s means a hang, not a slow machine).
MAX_SECONDS = 60.0
MAX_PEAK_RSS_MB = 2048.0
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    args: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    peak_rss_mb: float | None
    crash: str | None = None
    timed_out: bool = False

    def problems(self) -> list[str]:
        """What is wrong with this outcome under the fuzzer's contract (empty: fine)."""
        found = []
        if self.crash:
            found.append(f"crash: {self.crash}")
        if self.timed_out:
            found.append(f"hang: still running after {MAX_SECONDS:.0f} s")
        if self.exit_code not in (0, 2) and not self.crash and not self.timed_out:
            found.append(f"exit code {self.exit_code}")
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        if self.exit_code == 2 and len(lines) != 1:
            found.append(f"exit 2 with {len(lines)} stderr lines: {self.stderr[:300]!r}")
        if "Traceback (most recent call last)" in self.stderr:
            found.append("traceback on stderr")
        warned = re.search(r"\w+Warning: .*", self.stderr)
        if warned and not self.crash:
            found.append(f"python warning on stderr: {warned.group(0)[:160]}")
        if self.peak_rss_mb is not None and self.peak_rss_mb > MAX_PEAK_RSS_MB:
            found.append(f"peak RSS {self.peak_rss_mb:.0f} MB > {MAX_PEAK_RSS_MB:.0f} MB")
        if self.seconds > MAX_SECONDS:
            found.append(f"took {self.seconds:.1f} s > {MAX_SECONDS:.0f} s")
        return found


def _innermost_bubblescope_frame(exc: BaseException) -> str:
    """`bubblescope/<file>:<line>:<function>` of the deepest frame in bubblescope (where to route it)."""
    where = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        marker = frame.filename.rfind("/bubblescope/")
        if marker >= 0:
            where = f"{frame.filename[marker + 1 :]}:{frame.lineno}:{frame.name}"
    return where


def _reset_peak_rss() -> bool:
    """Reset this process' VmHWM (Linux >= 4.0) so the next reading is the peak of one command."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _peak_rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _print_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


class _Timeout(BaseException):
    """Raised by SIGALRM; a BaseException so no `except Exception` in the code under test eats it."""


def _on_alarm(_signum: int, _frame: object) -> None:
    raise _Timeout


def run_in_process(args: list[str], timeout_s: float = MAX_SECONDS) -> Outcome:
    """`bubblescope <args>` through `bubblescope.cli.main` in this process."""
    from bubblescope.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_argv, old_env = sys.argv, os.environ.get("BUBBLESCOPE_DEBUG")
    sys.argv = ["bubblescope", *args]
    os.environ["BUBBLESCOPE_DEBUG"] = "1"
    measured = _reset_peak_rss()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    exit_code: int | None = None
    crash, timed_out = None, False
    start = time.perf_counter()
    try:
        with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings():
            # pytest records warnings; a user's terminal shows them, so show them on this stderr too
            # (a replaced showwarning is what the warnings module calls instead of pytest's recorder).
            warnings.resetwarnings()
            warnings.simplefilter("default")
            warnings.showwarning = _print_warning
            main()
        exit_code = 0
    except SystemExit as exc:
        exit_code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except _Timeout:
        timed_out = True
    except Exception as exc:  # noqa: BLE001 - any exception here is a finding
        crash = f"{type(exc).__name__}: {str(exc)[:160]} at {_innermost_bubblescope_frame(exc)}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        seconds = time.perf_counter() - start
        sys.argv = old_argv
        if old_env is None:
            os.environ.pop("BUBBLESCOPE_DEBUG", None)
        else:
            os.environ["BUBBLESCOPE_DEBUG"] = old_env
    return Outcome(
        args,
        exit_code,
        out.getvalue(),
        err.getvalue(),
        seconds,
        _peak_rss_mb() if measured else None,
        crash,
        timed_out,
    )


def run_subprocess(args: list[str], timeout_s: float = MAX_SECONDS) -> Outcome:
    """`python -m bubblescope <args>` in a child; its own peak RSS from wait4's rusage."""
    env = {**os.environ, "BUBBLESCOPE_DEBUG": "1", "PYTHONPATH": str(REPO_ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bubblescope", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO_ROOT,
    )
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        proc.kill()

    timer = threading.Timer(timeout_s, kill)
    timer.start()
    with ThreadPoolExecutor(2) as pool:
        stdout_future = pool.submit(proc.stdout.read)  # type: ignore[union-attr]
        stderr_future = pool.submit(proc.stderr.read)  # type: ignore[union-attr]
        # wait4 instead of Popen.wait: it returns this child's own rusage (peak RSS in KiB on Linux).
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        stdout, stderr = stdout_future.result(), stderr_future.result()
    # Closed here, not by the garbage collector: an in-process run that collects them later, with
    # warnings shown, printed "ResourceWarning: unclosed file" on its own stderr (the long fuzz run
    # charged that to `gate`).
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    timer.cancel()
    seconds = time.perf_counter() - start
    text_err = stderr.decode("utf-8", "replace")
    crash = None
    if "Traceback (most recent call last)" in text_err:
        frames = re.findall(r'File "[^"]*/(bubblescope/[^"]+)", line (\d+), in (\S+)', text_err)
        where = ":".join(frames[-1]) if frames else "?"
        crash = f"{text_err.strip().splitlines()[-1][:200]} at {where}"
    timed_out = killed.is_set()
    return Outcome(
        args,
        None if timed_out else proc.returncode,
        stdout.decode("utf-8", "replace"),
        text_err,
        seconds,
        usage.ru_maxrss / 1024,
        crash,
        timed_out,
    )
