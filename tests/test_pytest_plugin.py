"""The pytest plugin: `@pytest.mark.no_blocking_reads` and the `no_new_reads` fixture, run by pytest."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

LIBRARY = """
import torch


def clean_step(x):
    return torch.where(x > 0, x, 0).sum()


def step_with_item(x):
    total = x.sum()
    return total.item()
"""

TESTS = """
import pytest
import torch

import guarded_lib


@pytest.mark.no_blocking_reads
def test_clean():
    out = guarded_lib.clean_step(torch.ones(3))
    assert out.item() == 3  # the test's own check: not the code under test


@pytest.mark.no_blocking_reads
def test_adds_item():
    guarded_lib.step_with_item(torch.ones(3))


@pytest.mark.no_blocking_reads(max_per_step=1, steps=2)
def test_within_allowance():
    for _ in range(2):
        guarded_lib.step_with_item(torch.ones(3))


@pytest.mark.no_blocking_reads(include_test_file=True)
def test_own_check_counted():
    assert guarded_lib.clean_step(torch.ones(3)).tolist() == 3


@pytest.mark.no_blocking_reads(steps=0)
def test_bad_marker():
    pass


def test_fixture(no_new_reads):
    x = torch.ones(3)
    with no_new_reads(max_per_step=0):
        guarded_lib.clean_step(x)
    with no_new_reads(max_per_step=0):
        guarded_lib.step_with_item(x)
"""


def test_plugin_fails_the_test_that_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "guarded_lib.py").write_text(LIBRARY)
    (tmp_path / "test_guarded.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "guarded_lib", raising=False)
    # In-process (torch is already imported here), without other installed plugins (faster); `-p`
    # loads this one, as the entry point does where it is installed (same plugin name).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    code = pytest.main(
        ["-p", "bubblescope.pytest_plugin", "-p", "no:cacheprovider", "-rA", "-q", str(tmp_path)],
    )
    sys.modules.pop("guarded_lib", None)
    out = capsys.readouterr().out
    assert code == pytest.ExitCode.TESTS_FAILED, out
    outcomes = {
        line.split(" ")[1].split("::")[-1]: line.split(" ")[0]
        for line in out.splitlines()
        if line.startswith(("PASSED ", "FAILED "))
    }
    assert outcomes == {
        "test_clean": "PASSED",
        "test_adds_item": "FAILED",
        "test_within_allowance": "PASSED",
        "test_own_check_counted": "FAILED",
        "test_bad_marker": "FAILED",
        "test_fixture": "FAILED",
    }, out
    item_line = _line_of(LIBRARY, "total.item()")
    # Paths are shown relative to the working directory when under it; tmp_path is not: absolute.
    site = f"{tmp_path / 'guarded_lib.py'}:{item_line} in step_with_item: .item() x1"
    assert f"1 blocking read, none allowed; {site}" in out
    tolist_line = _line_of(TESTS, ".tolist() == 3")
    assert f"{tmp_path / 'test_guarded.py'}:{tolist_line} in test_own_check_counted: .tolist() x1" in out
    assert "@pytest.mark.no_blocking_reads: steps must be a whole number >= 1, got 0" in out
    # The fixture form fails at the `with` whose block read (pytest hides the guard's own frame).
    assert f"test_guarded.py:{_line_of(TESTS, 'with no_new_reads', last=True)}: BlockingReadError" in out


def _line_of(source: str, text: str, last: bool = False) -> int:
    numbers = [n for n, line in enumerate(source.splitlines(), start=1) if text in line]
    return numbers[-1] if last else numbers[0]


def test_entry_point_is_declared() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"bubblescope.pytest_plugin": "bubblescope.pytest_plugin"}
