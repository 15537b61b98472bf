"""A profiled script that ends its process abruptly still leaves its files and its exit status, and two
processes never write one --out (issue 28). The hooks are checked in-process here (fast); the real
processes (os._exit, SIGTERM, fork, threads, segfault, two writers) run under `slow`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bubblescope.files.out_lock import FolderBusyError, out_lock
from bubblescope.profiling import faults
from bubblescope.profiling.session import ProfileSession
from tests.hostile.cli_runner import run_in_process
from tests.profile.helpers import SCRIPTS, load_outputs

SCRIPT = SCRIPTS / "fault_loop.py"
REPO = Path(__file__).resolve().parents[2]


class _Exited(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


class _Session:
    """Records what the hooks do to a session."""

    def __init__(self) -> None:
        self.exit_code: int | None = None
        self.closed = 0

    def __exit__(self, *exc: object) -> None:
        self.closed += 1


def _fake_exit(status: int) -> None:
    raise _Exited(status)


def test_os_exit_closes_the_session_then_exits_with_the_scripts_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "_exit", _fake_exit)
    session = _Session()
    with pytest.raises(_Exited) as exited, faults.script_faults(session):
        os._exit(7)
    assert exited.value.status == 7 and session.closed == 1 and session.exit_code == 7
    assert os._exit is _fake_exit


def test_sigterm_becomes_exit_143_while_profiling_only() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exited, faults.script_faults(_Session()):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert exited.value.code == faults.SIGTERM_STATUS == 143
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_script_handler_for_sigterm_is_left_alone() -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with faults.script_faults(_Session()):
            assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_forked_child_leaves_at_once_and_its_session_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(os, "_exit", _fake_exit)
    with pytest.raises(_Exited) as exited:
        faults.leave_if_forked_child(os.getpid() + 1, 5)
    assert exited.value.status == 5
    faults.leave_if_forked_child(os.getpid(), 5)
    session = ProfileSession(tmp_path / "out", active=1, warmup=0)
    session._owner_pid = os.getpid() + 1
    session.__exit__(None, None, None)
    assert session.outputs == {} and not (tmp_path / "out").exists()


def test_a_second_writer_of_one_folder_is_refused(tmp_path: Path) -> None:
    with out_lock(tmp_path / "out", "profile"):
        with (
            pytest.raises(FolderBusyError, match="another bubblescope process"),
            out_lock(tmp_path / "out", "run"),
        ):
            pass
        outcome = run_in_process(
            ["profile", "--out", str(tmp_path / "out"), "--", "python", str(SCRIPT), "3", "ok"]
        )
        assert outcome.exit_code == 2 and not outcome.problems(), (outcome.problems(), outcome.stderr)
        assert "another bubblescope process" in outcome.stderr
    with out_lock(tmp_path / "out", "run"):
        pass


def _profile(out: Path, mode: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bubblescope",
            "profile",
            "--out",
            str(out),
            "--step-frame",
            "decode_one_token",
            "--warmup",
            "1",
            "--active",
            "3",
            "--",
            "python",
            str(SCRIPT),
            "8",
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "status", "written"),
    [
        ("os_exit", 7, True),
        ("sigterm", 143, True),
        ("fork", 0, True),
        ("thread", 0, True),
        ("segv", -11, False),
    ],
)
def test_real_faults_keep_files_and_status(tmp_path: Path, mode: str, status: int, written: bool) -> None:
    proc = _profile(tmp_path / "out", mode)
    stdout, stderr = proc.communicate(timeout=300)
    # A segfault ends the process with the signal, as python's own would.
    assert proc.returncode == status, (proc.returncode, stderr[-2000:])
    if not written:
        assert "Segmentation fault" in stderr
        return
    analysis, profile = load_outputs(tmp_path / "out")
    assert profile["exit"]["code"] == status and analysis["summary"]["steps"] == 3, profile
    if mode == "fork":
        assert "child exited 5" in stdout
    if mode == "thread":
        assert "thread done" in stdout


@pytest.mark.slow
def test_two_profiles_of_one_folder_one_refused(tmp_path: Path) -> None:
    first = _profile(tmp_path / "out", "hold", HOLD_S="20")
    deadline = time.monotonic() + 120
    # The first holds the lock once its folder exists; the script then sleeps 20 s inside a step.
    while not (tmp_path / "out").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    second = _profile(tmp_path / "out", "ok")
    _, err = second.communicate(timeout=300)
    first.communicate(timeout=300)
    assert second.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "another bubblescope process" in err
    assert first.returncode == 0 and load_outputs(tmp_path / "out")[1]["exit"]["code"] == 0


def test_the_python_api_holds_its_folder_too(tmp_path: Path) -> None:
    with ProfileSession(tmp_path / "out", active=1, warmup=0, progress=False):
        with pytest.raises(FolderBusyError), ProfileSession(tmp_path / "out", active=1, warmup=0):
            pass
    with out_lock(tmp_path / "out", "profile"):
        pass
